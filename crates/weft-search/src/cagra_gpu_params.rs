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
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum CagraSearchMode {
    /// Multi-CTA for batches smaller than twice the GPU's SM count or `beam_width > 512`, else
    /// single-CTA. Results of the two modes differ: fix the mode when results must not depend on
    /// the batch size.
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(help = "multi-CTA for small batches (below twice the SM count) or beam width > 512")
    )]
    Auto,
    /// One block per query: deterministic, independent of the batch.
    #[cfg_attr(
        feature = "clap",
        value(help = "one thread block per query (deterministic, independent of the batch)")
    )]
    SingleCta,
    /// Several blocks per query sharing a visited table (small batches, large `beam_width`).
    #[cfg_attr(
        feature = "clap",
        value(help = "several thread blocks per query (small batches, large beam width)")
    )]
    MultiCta,
}

impl CagraSearchMode {
    /// The name used in parameters, records and on the command line (`auto`, `single-cta`,
    /// `multi-cta`).
    pub fn name(self) -> &'static str {
        match self {
            CagraSearchMode::Auto => "auto",
            CagraSearchMode::SingleCta => "single-cta",
            CagraSearchMode::MultiCta => "multi-cta",
        }
    }
}

impl std::str::FromStr for CagraSearchMode {
    type Err = Error;

    /// `auto`, `single-cta` or `multi-cta` (also with underscores).
    fn from_str(s: &str) -> Result<Self> {
        match s.replace('_', "-").as_str() {
            "auto" => Ok(CagraSearchMode::Auto),
            "single-cta" => Ok(CagraSearchMode::SingleCta),
            "multi-cta" => Ok(CagraSearchMode::MultiCta),
            _ => Err(Error::invalid_param(
                "mode",
                format!("`{s}`: use auto, single-cta or multi-cta"),
            )),
        }
    }
}

/// The largest magnitude an f32 value may have for [`SearchPrecision::F16`]: values at least
/// this large (65520, halfway between f16's largest finite value 65504 and the next power of
/// two) round to infinity in f16, and the search refuses them.
pub const F16_OVERFLOW: f32 = 65520.0;

/// The element precision the GPU search traverses the graph in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum SearchPrecision {
    /// The data's own element type (the default).
    #[default]
    #[cfg_attr(feature = "clap", value(help = "traverse in the data's own precision"))]
    Exact,
    /// For `f32` data only: the graph is traversed on an `f16` copy of the data and queries
    /// (half the bytes per distance; made once per session, on first use), then each query's
    /// first [`CagraSearchTuning::rerank`] list entries are scored again with exact `f32`
    /// distances and the `k` best returned, so that the distances returned are exact and the
    /// ids in exact order. No scaling: a value with `|x| >=` [`F16_OVERFLOW`] in the data or
    /// the queries is an `InvalidParams` error on `traversal` (the search of such a batch
    /// returns nothing); values below f16's normal range (`|x| < 6.1e-5`) lose precision in the
    /// traversal only. Other element types are refused with `InvalidParams` on `traversal`.
    #[cfg_attr(
        feature = "clap",
        value(help = "f32 data: traverse an f16 copy, rerank the list with exact f32 distances")
    )]
    F16,
}

impl SearchPrecision {
    /// The name used in parameters, records and on the command line (`exact`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            SearchPrecision::Exact => "exact",
            SearchPrecision::F16 => "f16",
        }
    }
}

impl std::str::FromStr for SearchPrecision {
    type Err = Error;

    /// `exact` or `f16`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "exact" => Ok(SearchPrecision::Exact),
            "f16" => Ok(SearchPrecision::F16),
            other => Err(Error::invalid_param(
                "traversal",
                format!("`{other}`: use exact or f16"),
            )),
        }
    }
}

/// Parameters of the GPU CAGRA-style search (`CagraSearchGpu`, feature `cuda`): what every
/// graph search has (the beam width, the seed, the filter) and the CAGRA search's own knobs,
/// [`CagraSearchTuning`]. In JSON the knobs sit beside the other fields (flattened).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CagraSearchParams {
    /// Beam width: the search's candidate list size, at least the search's `k`, at most
    /// [`CAGRA_GPU_MAX_BEAM_WIDTH`]. The main recall knob, the same as the CPU beam search's
    /// `beam_width` (multi-CTA mode splits it over blocks of 32 entries). Default 64. Read
    /// from JSON also under its former name `itopk`.
    #[serde(alias = "itopk")]
    pub beam_width: usize,
    /// Seed of the random starting points. Default 0.
    pub seed: u64,
    /// Only these ids may be returned: a bitset, bit `i % 32` of word `i / 32` set when id `i`
    /// is allowed (at least `ceil(n / 32)` words). Filtered-out points are still traversed.
    /// [`CagraSearchParams::with_filter`] sets it from a typed [`weft_core::Filter`]. Default none.
    pub filter: Option<Vec<u32>>,
    /// The CAGRA search's own knobs (iterations, parents per iteration, team size, mode,
    /// traversal precision, rerank).
    #[serde(flatten)]
    pub tuning: CagraSearchTuning,
}

/// The GPU CAGRA search's own knobs, one struct read by every surface: the facade's search
/// parameters hold it, the CLI flattens it into `weft search` / `weft eval` (feature `clap`:
/// the flags `--search-width`, `--max-iterations`, `--min-iterations`, `--team-size`,
/// `--mode`, `--search-precision`, `--rerank`) and the Python package takes the same names as
/// keyword arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct CagraSearchTuning {
    /// GPU CAGRA search: parents expanded per iteration (1..=32). Default 1.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub search_width: usize,
    /// GPU CAGRA search: iteration cap; 0 = automatic (single-CTA
    /// `1 + min(ceil(1.1 L / w), L / w + 10)` for beam width L and search width w, multi-CTA 36,
    /// at least --min-iterations). The batches that score the entry points before the first
    /// expansion are not iterations. Default 0.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub max_iterations: usize,
    /// GPU CAGRA search: iterations before a search may stop (one that runs out of parents
    /// earlier restarts from random points). Default 0.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub min_iterations: usize,
    /// GPU CAGRA search: threads per distance (2, 4, 8, 16, 32; 0 = chosen from the
    /// dimension). Default 0.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub team_size: usize,
    /// GPU CAGRA search: one or several thread blocks per query. Default auto.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = CagraSearchMode::Auto))]
    pub mode: CagraSearchMode,
    /// GPU CAGRA search: the traversal's precision (f16: f32 data only; the returned
    /// distances stay exact f32). Default exact.
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "search-precision",
            value_name = "PRECISION",
            value_enum,
            default_value_t = SearchPrecision::Exact
        )
    )]
    pub traversal: SearchPrecision,
    /// GPU CAGRA search, f16 traversal: how many entries of each query's list are reranked
    /// with exact distances (k up to the beam width); 0 = the whole list. Must be 0 with the
    /// exact traversal. Default 0.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub rerank: usize,
}

impl Default for CagraSearchTuning {
    fn default() -> Self {
        CagraSearchTuning {
            search_width: 1,
            max_iterations: 0,
            min_iterations: 0,
            team_size: 0,
            mode: CagraSearchMode::Auto,
            traversal: SearchPrecision::Exact,
            rerank: 0,
        }
    }
}

impl Default for CagraSearchParams {
    fn default() -> Self {
        CagraSearchParams {
            beam_width: 64,
            seed: 0,
            filter: None,
            tuning: CagraSearchTuning::default(),
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
    pub fn with_filter(mut self, filter: &weft_core::Filter) -> Self {
        self.filter = Some(filter.words().to_vec());
        self
    }

    /// The number of list entries reranked per query for `k` results: `rerank`, or the whole
    /// list (`beam_width`) when it is 0; `InvalidParams` on `rerank` unless `k <= rerank <= beam_width`
    /// (checked for [`SearchPrecision::F16`] only; with `Exact` it must be 0).
    pub fn rerank_len(&self, k: usize) -> Result<usize> {
        let list = self.beam_width;
        let t = &self.tuning;
        match t.traversal {
            SearchPrecision::Exact if t.rerank != 0 => Err(Error::invalid_param(
                "rerank",
                format!(
                    "{} entries to rerank: only the f16 traversal reranks (use 0 with exact)",
                    t.rerank
                ),
            )),
            SearchPrecision::Exact => Ok(0),
            SearchPrecision::F16 => {
                let m = if t.rerank == 0 { list } else { t.rerank };
                if m < k || m > list {
                    return Err(Error::invalid_param(
                        "rerank",
                        format!(
                            "{m} entries to rerank: must be between k = {k} and the list size {list}"
                        ),
                    ));
                }
                Ok(m)
            }
        }
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

impl CagraSearchTuning {
    /// Checks the knobs on their own (`InvalidParams` named after the field): the search width
    /// (1..=[`CAGRA_GPU_MAX_SEARCH_WIDTH`]), the team size, `min_iterations <= max_iterations`
    /// (when capped), and `rerank` 0 with the exact traversal. What depends on the beam width
    /// or `k` is checked with them ([`CagraSearchParams`]).
    pub fn validate(&self) -> Result<()> {
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
        if self.traversal == SearchPrecision::Exact && self.rerank != 0 {
            return Err(Error::invalid_param(
                "rerank",
                format!(
                    "{} entries to rerank: only the f16 traversal reranks (use 0 with exact)",
                    self.rerank
                ),
            ));
        }
        Ok(())
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
        self.tuning.validate()?;
        if self.tuning.rerank > self.beam_width {
            return Err(Error::invalid_param(
                "rerank",
                format!(
                    "{} entries to rerank exceed the list size {}",
                    self.tuning.rerank, self.beam_width
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
