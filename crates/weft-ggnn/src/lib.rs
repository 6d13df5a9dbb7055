//! # weft-ggnn
//!
//! GGNN hierarchical graph construction (Groh et al., "GGNN: Graph-based GPU Nearest Neighbor
//! Search", IEEE Trans. Big Data 2023): a hierarchy of layers with segment sizes from the sizing
//! rule ([`Sizing`]), weighted upward sampling, per-segment brute force at the top, a top-down
//! merge by hierarchical search, symmetric linking with slack `tau_b`, and refinement passes. It
//! produces a [`weft_graph::hier::HierGraph`].
//!
//! **Status:** the CPU reference [`GgnnCpu`] (name `ggnn`) and, behind the `cuda` feature, the
//! GPU builder `GgnnGpu` (same name, GPU back end; kernels in `kernels/ggnn/`, device side in
//! `gpu::GgnnBuild`). The CPU
//! reference is written for the GPU port to reproduce: bounded structures, a fixed phase order,
//! randomness only from `weft_core::rng::hash3`. `docs/ggnn.md` records the
//! choices and how the digest's ambiguities were resolved. Defaults follow
//! `shared/algorithms/ggnn.md` §4.1 (SIFT1M: k = 24, s = 32, L = 4, tau_b = 0.5, r = 2).
//!
//! **Connectivity** (both back ends, on by default): the hierarchy's entry points are spread
//! over the data (`weft_graph::connect::spread_entry_points`, [`GgnnParams::entry_points`] of
//! them) instead of the paper's top-layer points, and every layer leaves the builder with
//! every vertex reachable from the points a search enters it at ([`layer_entry_points`]):
//! layer 0 from the hierarchy's entry points, an upper layer below the top from the points of
//! the layer above it (where a descent enters it), the top layer from all its points. So on
//! clustered data, where the nearest-neighbour rows never leave a cluster, no query and no
//! point is stranded. [`GgnnParams::repair`] turns the repair off.

mod build;
mod cache;
mod connect;
#[cfg(feature = "cuda")]
pub mod gpu;
mod sizing;

pub use build::{GgnnStats, MERGE_CACHE, MERGE_MAX_POPS, MIDPOINT, SYM_CACHE, SYM_MAX_POPS};
pub use connect::{connect_hierarchy, layer_entry_points, nearest_entries};
#[cfg(feature = "cuda")]
pub use gpu::GgnnGpu;
pub use sizing::Sizing;

use serde::{Deserialize, Serialize};
use weft_core::{BuildCtx, DatasetView, Element, GraphBuilder, Metric};
use weft_core::{Error, Params, Result};
use weft_graph::connect::DEFAULT_ENTRY_POINTS;
use weft_graph::hier::HierGraph;

/// The largest [`GgnnParams::k_build`] (of both back ends: the GPU kernels' shared memory
/// holds the caches of rows this long).
pub const MAX_K_BUILD: usize = 512;

/// Parameters of the GGNN construction (shared by its GPU back end and CPU reference).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GgnnParams {
    /// Out-degree `k_build` of every layer (the paper uses 20–96).
    pub k_build: usize,
    /// Segment size `s` (a multiple of 32, above `k_build / 2`; also the number of top-layer
    /// points, the paper's entry points).
    pub segment_size: usize,
    /// Layers `L` of the hierarchy (4 is "ideal for most datasets").
    pub layers: usize,
    /// Slack `tau_b` of the symmetric linking during the build.
    pub tau_build: f32,
    /// Refinement passes `r` (default 1; the paper's configurations use 2). With the
    /// entry-seeded merges a second pass changes recall@10 by at most 0.005 and costs about a
    /// fifth of the build (`docs/ggnn.md`, "Refinement passes").
    pub refinement_iterations: usize,
    /// Connectivity repair (default on): every layer leaves the builder with every vertex
    /// reachable from [`layer_entry_points`] (`weft_graph::connect::repair_rows`). Off: the
    /// layers are the GGNN construction's as they are (on clustered data whole clusters are
    /// then unreachable).
    pub repair: bool,
    /// Entry points of the hierarchy, spread over the data by farthest-first traversal
    /// (`weft_graph::connect::spread_entry_points`, seeded by the build's seed; default
    /// [`DEFAULT_ENTRY_POINTS`] = 256, at most the number of vectors are picked). A search of
    /// layer 0 scores them all and starts from the best. 0: the top layer's points, as in the
    /// paper (only with `repair` off, since the repair makes layer 0 reachable from them).
    pub entry_points: usize,
    /// Entry-seeded merges (default on; not in the paper): every merge into layer 0 also
    /// starts from the point's nearest entry point (of [`GgnnParams::entry_points`]), beside
    /// the point itself and what the descent through the upper layers found. On clustered
    /// data a cluster with no point in the upper layers is otherwise searched only from inside
    /// the segment subtree of each point, and its rows never leave that subtree (recall@10
    /// 0.90 instead of 0.99 on 1M clustered points, `docs/ggnn.md`). Off: the paper's merge.
    /// No effect with `entry_points` 0 (the top layer's points are the merges' entries then).
    pub entry_seeded_merges: bool,
}

impl Default for GgnnParams {
    fn default() -> Self {
        GgnnParams {
            k_build: 24,
            segment_size: 32,
            layers: 4,
            tau_build: 0.5,
            refinement_iterations: 1,
            repair: true,
            entry_points: DEFAULT_ENTRY_POINTS,
            entry_seeded_merges: true,
        }
    }
}

impl Params for GgnnParams {
    fn validate(&self, rows: usize, _dim: usize) -> Result<()> {
        if !(2..=MAX_K_BUILD).contains(&self.k_build) {
            return Err(Error::invalid_param(
                "k_build",
                format!("{} is outside 2..={MAX_K_BUILD}", self.k_build),
            ));
        }
        if rows > 0 && self.k_build >= rows {
            return Err(Error::invalid_param(
                "k_build",
                format!(
                    "{} must be below the number of vectors ({rows})",
                    self.k_build
                ),
            ));
        }
        if self.segment_size == 0
            || !self.segment_size.is_multiple_of(32)
            || self.segment_size <= self.k_build / 2
        {
            return Err(Error::invalid_param(
                "segment_size",
                format!(
                    "{} must be a positive multiple of 32 above k_build / 2 = {}",
                    self.segment_size,
                    self.k_build / 2
                ),
            ));
        }
        if self.layers == 0 {
            return Err(Error::invalid_param(
                "layers",
                "the hierarchy needs at least one layer",
            ));
        }
        if !(self.tau_build.is_finite() && self.tau_build >= 0.0) {
            return Err(Error::invalid_param(
                "tau_build",
                format!("{} is not a finite slack >= 0", self.tau_build),
            ));
        }
        if self.repair && self.entry_points == 0 {
            return Err(Error::invalid_param(
                "entry_points",
                "the connectivity repair needs at least 1 entry point (or set repair = false)",
            ));
        }
        Ok(())
    }
}

/// The GGNN CPU reference builder (name `ggnn`): see the crate documentation.
///
/// Deterministic: the same seed and parameters give the same graph for any thread count.
///
/// Memory: besides the hierarchy, for data of 16 MiB or more on Linux while that takes at most
/// half of the available memory, a copy of the data in transparent huge pages for the merges'
/// scattered row reads (`weft_core::huge_pages`; the same values, the same graph).
#[derive(Clone, Copy, Debug, Default)]
pub struct GgnnCpu;

impl GgnnCpu {
    /// Builds the hierarchy and also returns the 1-NN statistics (`d+nn1` is the guard of the
    /// GGNN query slack) and the count of dropped inverse links.
    pub fn build_with_stats<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
    ) -> Result<(HierGraph, GgnnStats)> {
        build::build(data, metric, params, ctx)
    }
}

impl GraphBuilder for GgnnCpu {
    type Params = GgnnParams;
    type Output = HierGraph;

    fn name(&self) -> &'static str {
        "ggnn"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
    ) -> Result<HierGraph> {
        build::build(data, metric, params, ctx).map(|(g, _)| g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_impossible_values_do_not() {
        GgnnParams::default().validate(1_000_000, 128).unwrap();
        let bad = [
            GgnnParams {
                k_build: 1,
                ..Default::default()
            },
            GgnnParams {
                segment_size: 48,
                ..Default::default()
            },
            GgnnParams {
                segment_size: 0,
                ..Default::default()
            },
            GgnnParams {
                layers: 0,
                ..Default::default()
            },
            GgnnParams {
                tau_build: f32::NAN,
                ..Default::default()
            },
            GgnnParams {
                tau_build: -1.0,
                ..Default::default()
            },
            GgnnParams {
                entry_points: 0,
                ..Default::default()
            },
        ];
        for p in bad {
            assert!(
                matches!(p.validate(1_000_000, 128), Err(Error::InvalidParams { .. })),
                "{p:?}"
            );
        }
        // Without the repair the paper's top-layer entry points are allowed.
        GgnnParams {
            repair: false,
            entry_points: 0,
            ..Default::default()
        }
        .validate(1_000_000, 128)
        .unwrap();
    }
}
