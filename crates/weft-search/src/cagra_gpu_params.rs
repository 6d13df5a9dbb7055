//! Parameters of the GPU CAGRA-style search (`CagraSearchGpu`, behind the `cuda` feature),
//! compiled in every build so that callers can carry them without GPU support.

use serde::{Deserialize, Serialize};
use weft_core::{Error, Params, Result};

/// The largest `beam_width` (and so `k`) of the GPU search.
pub const CAGRA_GPU_MAX_BEAM_WIDTH: usize = 1024;
/// The largest `search_width` (parents expanded per iteration) of the GPU search.
pub const CAGRA_GPU_MAX_SEARCH_WIDTH: usize = 32;

/// How the GPU search (`CagraSearchGpu`, feature `cuda`) spreads queries over thread blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CagraSearchMode {
    /// Multi-CTA for batches smaller than twice the GPU's SM count or `beam_width > 512`, else
    /// single-CTA. Results of the two modes differ: fix the mode when results must not depend on
    /// the batch size.
    #[default]
    Auto,
    /// One block per query: deterministic, independent of the batch.
    SingleCta,
    /// Several blocks per query sharing a visited table (small batches, large `beam_width`).
    MultiCta,
}

/// Parameters of the GPU CAGRA-style search (`CagraSearchGpu`, feature `cuda`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CagraSearchParams {
    /// Beam width: the search's candidate list size, at least the search's `k`, at most
    /// [`CAGRA_GPU_MAX_BEAM_WIDTH`]. The main recall knob, the same as the CPU beam search's
    /// `beam_width` (multi-CTA mode splits it over blocks of 32 entries). Default 64. Read
    /// from JSON also under its former name `itopk`.
    #[serde(alias = "itopk")]
    pub beam_width: usize,
    /// Parents expanded per iteration (1..=[`CAGRA_GPU_MAX_SEARCH_WIDTH`]). Default 1.
    pub search_width: usize,
    /// Iteration cap; 0 = automatic (single-CTA `1 + min(ceil(1.1 beam_width / w), beam_width / w + 10)`,
    /// multi-CTA 36, at least `min_iterations`). The batches that score the entry points before
    /// the first expansion are not iterations. Default 0.
    pub max_iterations: usize,
    /// Iterations before a search may stop (one that runs out of parents earlier restarts from
    /// random points). Default 0.
    pub min_iterations: usize,
    /// Threads per distance computation (2, 4, 8, 16, 32); 0 = chosen from the dimension.
    /// Default 0.
    pub team_size: usize,
    /// Single- or multi-CTA. Default automatic.
    pub mode: CagraSearchMode,
    /// Seed of the random starting points. Default 0.
    pub seed: u64,
    /// Only these ids may be returned: a bitset, bit `i % 32` of word `i / 32` set when id `i`
    /// is allowed (at least `ceil(n / 32)` words). Filtered-out points are still traversed.
    /// [`CagraSearchParams::with_filter`] sets it from a typed [`crate::Filter`]. Default none.
    pub filter: Option<Vec<u32>>,
}

impl Default for CagraSearchParams {
    fn default() -> Self {
        CagraSearchParams {
            beam_width: 64,
            search_width: 1,
            max_iterations: 0,
            min_iterations: 0,
            team_size: 0,
            mode: CagraSearchMode::Auto,
            seed: 0,
            filter: None,
        }
    }
}

impl CagraSearchParams {
    /// Default parameters with beam width (list size) `beam_width`.
    pub fn with_beam_width(beam_width: usize) -> Self {
        CagraSearchParams {
            beam_width,
            ..Default::default()
        }
    }

    /// These parameters with results restricted to the ids `filter` allows (its bitset words,
    /// the layout of [`CagraSearchParams::filter`]); the length is checked against the data
    /// at search time.
    pub fn with_filter(mut self, filter: &crate::Filter) -> Self {
        self.filter = Some(filter.words().to_vec());
        self
    }

    /// A filter bitset over `n` ids allowing those for which `allowed(id)` holds.
    pub fn filter_from(n: usize, allowed: impl Fn(usize) -> bool) -> Vec<u32> {
        let mut words = vec![0u32; n.div_ceil(32)];
        for i in (0..n).filter(|&i| allowed(i)) {
            words[i / 32] |= 1 << (i % 32);
        }
        words
    }
}

impl Params for CagraSearchParams {
    fn validate(&self, rows: usize, _dim: usize) -> Result<()> {
        if self.beam_width == 0 || self.beam_width > CAGRA_GPU_MAX_BEAM_WIDTH {
            return Err(Error::invalid_param(
                "beam_width",
                format!(
                    "the beam width {} must be between 1 and {CAGRA_GPU_MAX_BEAM_WIDTH}",
                    self.beam_width
                ),
            ));
        }
        if self.search_width == 0 || self.search_width > CAGRA_GPU_MAX_SEARCH_WIDTH {
            return Err(Error::invalid_param(
                "search_width",
                format!(
                    "{} must be between 1 and {CAGRA_GPU_MAX_SEARCH_WIDTH}",
                    self.search_width
                ),
            ));
        }
        if !matches!(self.team_size, 0 | 2 | 4 | 8 | 16 | 32) {
            return Err(Error::invalid_param(
                "team_size",
                format!("{}: use 0 (automatic), 2, 4, 8, 16 or 32", self.team_size),
            ));
        }
        if self.max_iterations != 0 && self.min_iterations > self.max_iterations {
            return Err(Error::invalid_param(
                "min_iterations",
                format!(
                    "{} exceeds max_iterations = {}",
                    self.min_iterations, self.max_iterations
                ),
            ));
        }
        check_filter_words(self.filter.as_deref(), rows)
    }
}

/// Checks a filter bitset (the layout of [`CagraSearchParams::filter`]: bit `i % 32` of word
/// `i / 32` set = id `i` allowed) against `rows` points: it needs at least `ceil(rows / 32)`
/// words.
pub(crate) fn check_filter_words(filter: Option<&[u32]>, rows: usize) -> Result<()> {
    if let Some(f) = filter
        && f.len() < rows.div_ceil(32)
    {
        return Err(Error::invalid_param(
            "filter",
            format!(
                "a bitset of {} words cannot cover {rows} points (needs {})",
                f.len(),
                rows.div_ceil(32)
            ),
        ));
    }
    Ok(())
}
