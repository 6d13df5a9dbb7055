//! # weft-cagra
//!
//! CAGRA graph optimisation (Ootomo et al., ICDE 2024): it turns a k-NN graph of intermediate
//! degree `k` (`d_init`, 2-3 x the output degree) into a search graph of fixed out-degree `d`,
//! using only the ranks of the k-NN rows (no distance is computed). [`CagraCpu`] runs it on the
//! CPU (rayon); `gpu::CagraGpu` (behind this crate's `cuda` feature; kernels in
//! `kernels/cagra/`, driven by `gpu::CagraOptimizer`) reproduces the CPU output bit for bit.
//! Parameter choices follow `shared/algorithms/cagra.md` §3.
//!
//! The whole construction, a k-NN graph of degree `d_init` and its optimisation, is one
//! [`GraphBuilder`](weft_core::GraphBuilder) over any k-NN graph builder: [`CagraPipeline`] on
//! the CPU and, with `cuda`, `gpu::CagraPipelineGpu`, which also takes a k-NN graph left on the
//! device (GNND's) without a host round trip.
//!
//! ## The algorithm, with its exact tie rules
//!
//! Input: a valid [`weft_core::KnnGraph`] (rows ascending by distance; the position of a
//! neighbour in its row is its *rank*; short rows padded at the end).
//!
//! 1. **Detour counting.** For every edge `A -> B` of rank `r` in row `A`, count the neighbours
//!    `D` of `A` of rank `j < r` whose own row contains `B` (at any position): each is a
//!    detourable route `A -> D -> B` whose two hops are both "shorter" in rank than the direct
//!    edge. This is the rule RAFT/cuVS implement (the paper's Eq. 3 with ranks for weights, the
//!    second condition `rank_D(B) < r` left out). Counts are exact (not saturated).
//! 2. **Pruning.** Row `A` of the pruned graph is the `min(m, d)` valid entries of its k-NN row
//!    with the fewest detours, ordered by `(detour count, rank)` ascending (ties by rank, so
//!    the order is unique).
//! 3. **Reverse graph.** For each edge `s -> v` of the pruned graph at position `c` in row `s`,
//!    `s` is a reverse neighbour of `v`. Row `v` of the reverse graph lists them by `(c, s)`
//!    ascending and keeps the first `d` (the in-degree cap).
//! 4. **Merge.** With `h = d / 2`: the output row is the first `min(h, m)` pruned edges
//!    (protected), then the reverse edges not among them in reverse-graph order, then the other
//!    pruned edges that are not reverse edges in pruned order; truncated to `d` and padded only
//!    where the input has fewer than `d` neighbours. This is RAFT's merge (protected half,
//!    reverse edges, remaining forward edges) written as a concatenation; unlike RAFT's in-place
//!    shifting it leaves no padding holes when a row is short.
//!
//! With full k-NN rows every output row has exactly `d` distinct neighbours and no self-loop.
//! Every step depends only on the input, never on the thread count or on the order of parallel
//! work.
//!
//! ## Faster detour counting
//!
//! The naive count (RAFT's `kern_prune`) searches, for every entry `B'` of the row of every
//! neighbour `D` of `A`, the entries of `A`'s row ranked after `D`: `O(k^3)` comparisons per
//! node. Here each node first puts its own row into a small open-addressing hash table
//! (id -> rank, at least `2k` slots, a few hundred bytes, so it stays in L1 on the CPU and in
//! shared memory on the GPU); then every entry of every neighbour's row costs one probe, and a
//! hit at rank `r > j` increments `count[r]`. That is `O(k^2)` expected work per node with no
//! sorting, and it is the same on the GPU (one thread block per node, the table and the
//! counters in shared memory, atomics only on the counters, so the counts do not depend on the
//! order of the threads). Pruning is fused into the same pass per node, so the `n x k` counts
//! are never stored (the [`Stages`] reference keeps them for tests).
//!
//! ## Search
//!
//! Every search over the graph scores its [`CagraParams::entry_points`] vertices, spread over the
//! data by farthest-first traversal of a seeded sample (the same on the CPU and the GPU), and
//! starts from the best of them (the GPU search adds CAGRA's per-query random starts). Neither
//! the k-NN graph nor its pruned form is connected on clustered data (nor is CAGRA's), so the
//! graph leaves the optimiser only after [`weft_graph::connect::repair_connectivity`] has made
//! every vertex reachable from those entry points ([`connect`]).
//!
//! Measured (`tests/cpu.rs`, 4000 SIFT-like points, exact 64-NN graph optimised to degree 32,
//! `weft_search::BeamSearch` from 4 random entries per query, 200 queries): recall@10 0.988,
//! 0.998 and 1.000 at beams 10, 20 and 40, against 0.696, 0.739 and 0.801 for the same k-NN
//! graph cut to its first 32 neighbours.

mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
mod pipeline;

pub use cpu::{CagraCpu, Stages, connect, connect_with_entries, optimize_stages, reverse_graph};
#[cfg(feature = "cuda")]
pub use gpu::{CagraGpu, CagraPipelineGpu};
pub use pipeline::CagraPipeline;

use serde::{Deserialize, Serialize};
use weft_core::{Error, Params, Result};

/// How the intermediate k-NN graph is built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KnnSource {
    /// The pipeline's k-NN graph builder ([`CagraPipeline`]'s `K`, `gpu::CagraPipelineGpu`'s
    /// source): NN-Descent (GNND on the GPU) in the `weft` facade, the paper's choice.
    #[default]
    NnDescent,
    /// Exact brute force (small sets, tests), on the CPU or the GPU with the pipeline.
    Exact,
}

/// Parameters of the CAGRA graph optimisation (shared by its CPU and GPU back ends).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CagraParams {
    /// Output out-degree `d` of the search graph (paper: 32–80; a multiple of 16 suits the GPU
    /// search).
    pub graph_degree: usize,
    /// Degree `d_init` of the k-NN graph that is optimised (2–3 x `graph_degree`).
    pub intermediate_degree: usize,
    /// How the k-NN graph is built ([`CagraPipeline`], `gpu::CagraPipelineGpu`).
    pub knn: KnnSource,
    /// Entry points stored with the graph, spread over the data by farthest-first traversal of
    /// a seeded sample ([`weft_graph::connect::spread_entry_points`]; all vertices when the set
    /// has fewer). Every search scores them all and starts from the best, so a query starts in
    /// its own region of the data, its own cluster on clustered data, as long as there are at
    /// most this many well-separated clusters. Default 256; 0 only with `repair` off (a search
    /// then draws its own random starts).
    pub entry_points: usize,
    /// Make every vertex reachable from the entry points before the graph leaves the builder
    /// ([`weft_graph::connect::repair_connectivity`]). A k-NN graph of clustered data falls
    /// apart into one component per cluster, and CAGRA's pruning keeps it so. Default on.
    pub repair: bool,
}

impl Default for CagraParams {
    fn default() -> Self {
        CagraParams {
            graph_degree: 64,
            intermediate_degree: 128,
            knn: KnnSource::NnDescent,
            entry_points: weft_graph::connect::DEFAULT_ENTRY_POINTS,
            repair: true,
        }
    }
}

impl Params for CagraParams {
    fn validate(&self, rows: usize, _dim: usize) -> Result<()> {
        if self.graph_degree == 0 {
            return Err(Error::invalid_param("graph_degree", "must be at least 1"));
        }
        if self.repair && self.entry_points == 0 {
            return Err(Error::invalid_param(
                "entry_points",
                "the connectivity repair makes every vertex reachable from the entry points, so \
                 it needs at least one (or turn `repair` off)",
            ));
        }
        if self.intermediate_degree < self.graph_degree {
            return Err(Error::invalid_param(
                "intermediate_degree",
                format!(
                    "{} is below graph_degree {}: the optimiser prunes an intermediate graph down to the output degree",
                    self.intermediate_degree, self.graph_degree
                ),
            ));
        }
        if rows > 0 && self.intermediate_degree >= rows {
            return Err(Error::invalid_param(
                "intermediate_degree",
                format!(
                    "{} must be below the number of vectors ({rows})",
                    self.intermediate_degree
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_impossible_values_do_not() {
        CagraParams::default().validate(10_000, 128).unwrap();
        let bad = [
            CagraParams {
                graph_degree: 0,
                ..Default::default()
            },
            CagraParams {
                intermediate_degree: 32,
                ..Default::default()
            },
        ];
        for p in bad {
            assert!(matches!(
                p.validate(10_000, 128),
                Err(Error::InvalidParams { .. })
            ));
        }
        assert!(CagraParams::default().validate(100, 8).is_err());
    }
}
