//! Fixtures the search tests share: the GGNN ones (`tests/ggnn.rs`, and `tests/ggnn_gpu.rs`
//! with the `cuda` feature) and the CPU beam search of `tests/conformance.rs` and
//! `tests/entry_layer.rs`. Each test file uses a subset.
#![allow(dead_code)]

use weft_core::{
    Dataset, FixedDegreeGraph, INVALID, Metric, Neighbors, NodeId, SearchStats, Searcher,
};
use weft_graph::hier::{HierGraph, HierLayer};
use weft_search::{BeamSearch, BeamSearchParams, GgnnSearchParams, GgnnSearchTuning};
use weft_testkit::graph::gaussian_mixture;
use weft_testkit::search::known_good_graph;

/// Parameters every GGNN search must reject with `InvalidParams`: negative or NaN `tau`, no
/// best list, no queue, no iterations, an infinite `max_nn1`.
pub fn ggnn_invalid_params() -> Vec<GgnnSearchParams> {
    vec![
        GgnnSearchParams {
            tuning: GgnnSearchTuning {
                tau: -1.0,
                ..Default::default()
            },
            ..Default::default()
        },
        GgnnSearchParams {
            tuning: GgnnSearchTuning {
                tau: f32::NAN,
                ..Default::default()
            },
            ..Default::default()
        },
        GgnnSearchParams {
            tuning: GgnnSearchTuning {
                best: 0,
                ..Default::default()
            },
            ..Default::default()
        },
        GgnnSearchParams {
            beam_width: 0,
            ..Default::default()
        },
        GgnnSearchParams {
            tuning: GgnnSearchTuning {
                max_iterations: 0,
                ..Default::default()
            },
            ..Default::default()
        },
        GgnnSearchParams {
            max_nn1: Some(f32::INFINITY),
            ..Default::default()
        },
    ]
}

/// A two-layer hierarchy and the set it indexes (see [`two_layer_hierarchy`]).
pub struct TwoLayers {
    /// 2000 points of 16 dimensions in 8 clusters (seed 21).
    pub base: Dataset<f32>,
    /// 100 queries from the same mixture.
    pub queries: Dataset<f32>,
    /// Every 10th point: the top layer (no edges) and the entry points.
    pub top_ids: Vec<NodeId>,
    /// The known-good graph of `base` (L2, seed 5) as layer 0, under the top layer, entered
    /// from `top_ids`.
    pub hier: HierGraph,
}

/// The hierarchy fixture of the GGNN search tests: a known-good base layer over 2000 points and
/// every 10th point on top, entered there.
pub fn two_layer_hierarchy() -> TwoLayers {
    let (base, queries) = gaussian_mixture::<f32>(2000, 100, 16, 8, 21);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 5);
    let top_ids: Vec<NodeId> = (0..200).map(|i| i * 10).collect();
    let top = HierLayer::new(
        FixedDegreeGraph::new(200, 1, vec![INVALID; 200]).unwrap(),
        top_ids.clone(),
    )
    .unwrap();
    let hier = HierGraph::new(graph, vec![top], top_ids.clone()).unwrap();
    TwoLayers {
        base,
        queries,
        top_ids,
        hier,
    }
}

/// The CPU beam search of `queries` over `graph` (squared L2): `k` neighbours each, and the
/// work counters.
pub fn search(
    graph: &FixedDegreeGraph,
    base: &Dataset<f32>,
    queries: &Dataset<f32>,
    params: &BeamSearchParams,
    k: usize,
) -> (Neighbors, SearchStats) {
    let mut out = Neighbors::new(queries.rows(), k);
    let stats = BeamSearch
        .search(
            graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            params,
            out.as_mut(),
        )
        .unwrap();
    (out, stats)
}

/// Checks a filtered search's results: rows as `check_result_rows` wants them (ids in range,
/// no duplicates, ascending, padding only at the end), every returned id allowed by `filter`,
/// and padding that is `INVALID` with an infinite distance. Returns the number of ids returned.
pub fn check_filtered(what: &str, res: &Neighbors, filter: &weft_core::Filter) -> usize {
    weft_testkit::search::check_result_rows(what, res, filter.n());
    let mut returned = 0;
    for q in 0..res.rows() {
        for (&id, &d) in res.row_ids(q).iter().zip(res.row_dists(q)) {
            if id == INVALID {
                assert!(
                    d == f32::INFINITY,
                    "{what}: query {q}: padding with distance {d}"
                );
            } else {
                assert!(
                    filter.contains(id),
                    "{what}: query {q}: id {id} is filtered out"
                );
                returned += 1;
            }
        }
    }
    returned
}
