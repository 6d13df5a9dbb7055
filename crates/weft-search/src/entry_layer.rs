//! The entry layer: a small navigable graph over a search's entry points, searched per query in
//! place of scoring every entry point.
//!
//! Search graphs store many entry points spread over the data (256 by default, so that every
//! cluster of strongly clustered data holds one). Scoring all of them costs each query 256
//! distance evaluations, as much as the rest of a short search. The entry layer is the upper
//! layer of HNSW written for that list: a graph over the entry points alone (each keeps its
//! nearest other entry points, chosen with HNSW's diversity heuristic, plus the reverse edges,
//! plus bridges that make it connected from its first entry point), built once for a list of
//! entry points, and searched per query with a small beam from the first entry point. Every entry
//! point the layer search scores joins the query's candidate list, so the main search starts from
//! the best entry points the layer found.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::{DatasetView, Element, Error, Metric, NodeId, Result};

/// The most entry points an [`EntryLayer`] is built over: its construction computes all
/// pairwise distances (`E * (E - 1)` evaluations and `E * E` floats of memory). Searches with
/// more entry points score them all.
pub const MAX_LAYER_ENTRIES: usize = 2048;

/// Parameters of the entry layer of [`BeamSearch`](crate::BeamSearch) (see the
/// [module docs](self)), part of [`BeamSearchTuning`](crate::BeamSearchTuning): the CLI
/// flattens them (feature `clap`: `--no-entry-layer`, `--entry-layer-min-entries`,
/// `--entry-layer-degree`, `--entry-layer-beam-width`) and the Python package takes the same
/// names as keywords (`entry_layer=False`, `entry_layer_min_entries`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct EntryLayerParams {
    /// Whether a search with many entry points uses the layer at all (`false`: every query
    /// scores every entry point). Default true.
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "entry_layer",
            long = "no-entry-layer",
            action = clap::ArgAction::SetFalse,
            help = "CPU beam search: score every entry point instead of searching the entry layer over them"
        )
    )]
    pub enabled: bool,
    /// Use the layer only for at least this many distinct entry points (fewer are all scored;
    /// so are more than [`MAX_LAYER_ENTRIES`]). At least 2. Default 64.
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "entry_layer_min_entries",
            long = "entry-layer-min-entries",
            value_name = "ENTRIES",
            default_value_t = 64,
            help = "CPU beam search: use the entry layer for at least this many entry points (>= 2)"
        )
    )]
    pub min_entries: usize,
    /// Nearest other entry points each keeps (chosen with HNSW's diversity heuristic, topped
    /// up with the nearest skipped ones), before reverse edges and bridges are added. At least
    /// 1. Default 8.
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "entry_layer_degree",
            long = "entry-layer-degree",
            value_name = "DEGREE",
            default_value_t = 8,
            help = "CPU beam search: nearest other entry points each entry point keeps in the layer (>= 1)"
        )
    )]
    pub degree: usize,
    /// Beam width (candidate-list size) of the per-query layer search: larger scores more entry points and
    /// misses the query's region less often. At least 1. Default 8.
    #[serde(alias = "beam")]
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "entry_layer_beam_width",
            long = "entry-layer-beam-width",
            value_name = "WIDTH",
            default_value_t = 8,
            help = "CPU beam search: candidate-list size of the per-query entry-layer search (>= 1)"
        )
    )]
    pub beam_width: usize,
}

impl Default for EntryLayerParams {
    fn default() -> Self {
        EntryLayerParams {
            enabled: true,
            min_entries: 64,
            degree: 8,
            beam_width: 8,
        }
    }
}

impl EntryLayerParams {
    /// Checks the parameters (the name of a bad field is prefixed with `prefix`).
    pub fn validate(&self, prefix: &str) -> Result<()> {
        if self.min_entries < 2 {
            return Err(Error::invalid_param(
                format!("{prefix}min_entries"),
                "the entry layer needs at least 2 entry points",
            ));
        }
        if self.degree == 0 {
            return Err(Error::invalid_param(
                format!("{prefix}degree"),
                "the entry layer's degree must be at least 1",
            ));
        }
        if self.beam_width == 0 {
            return Err(Error::invalid_param(
                format!("{prefix}beam_width"),
                "the entry layer's beam width must be at least 1",
            ));
        }
        Ok(())
    }

    /// The parameters with the layer switched off: every query scores every entry point.
    pub fn disabled() -> Self {
        EntryLayerParams {
            enabled: false,
            ..Self::default()
        }
    }

    /// Whether a search from `entries` distinct entry points uses the layer.
    pub fn applies_to(&self, entries: usize) -> bool {
        self.enabled && entries >= self.min_entries && entries <= MAX_LAYER_ENTRIES
    }
}

/// A small graph over a list of entry points, searched per query to pick where a beam search
/// starts (see the [module docs](self)).
///
/// Built by [`EntryLayer::build`]; deterministic (it depends only on the data, the entry
/// points, the metric and the parameters, never on the thread count). Pass one to
/// [`BeamSearch::search_with_entry_layer`](crate::BeamSearch::search_with_entry_layer) to build
/// it once for many searches.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryLayer {
    /// The distinct entry points, in the order first given.
    ids: Vec<NodeId>,
    /// Row `i` of the layer is `adj[offsets[i]..offsets[i + 1]]` (local indices into `ids`).
    offsets: Vec<u32>,
    adj: Vec<u32>,
    params: EntryLayerParams,
    metric: Metric,
}

impl EntryLayer {
    /// Builds the layer over `ids` (duplicates are kept once, in first-seen order) of `data`.
    ///
    /// Each entry point keeps up to `params.degree` others, picked from the nearest by HNSW's
    /// heuristic (a candidate is skipped when it is closer to one already kept than to the
    /// entry point) and topped up with the nearest skipped ones; every edge gets its reverse;
    /// then, while some entry point is unreachable from the first, the closest pair of a
    /// reached and an unreached one is linked both ways. Distances between entry points are in
    /// `metric` (squared L2 for inner product, which is no distance between points). Costs
    /// `E * (E - 1)` distance evaluations for `E` entry points, in parallel.
    ///
    /// Fails on an empty list, an id out of range, more than [`MAX_LAYER_ENTRIES`] distinct
    /// entry points, or invalid parameters.
    pub fn build<T: Element>(
        data: DatasetView<'_, T>,
        metric: Metric,
        ids: &[NodeId],
        params: &EntryLayerParams,
    ) -> Result<Self> {
        params.validate("entry_layer.")?;
        if let Some(&e) = ids.iter().find(|&&e| e as usize >= data.rows()) {
            return Err(Error::InvalidInput(format!(
                "entry point {e} is out of range (n = {})",
                data.rows()
            )));
        }
        let ids = distinct(ids);
        let e = ids.len();
        if e == 0 {
            return Err(Error::InvalidInput(
                "an entry layer needs at least one entry point".into(),
            ));
        }
        if e > MAX_LAYER_ENTRIES {
            return Err(Error::InvalidInput(format!(
                "{e} entry points exceed the entry layer's limit of {MAX_LAYER_ENTRIES}"
            )));
        }
        let link_metric = match metric {
            Metric::InnerProduct => Metric::L2Squared,
            m => m,
        };
        let dist = link_metric.distance_fn::<T>();
        // All pairwise distances, row by row (the matrix is symmetric up to rounding; each row
        // is computed on its own so the result does not depend on the thread count).
        let mut mat = vec![0f32; e * e];
        mat.par_chunks_mut(e).enumerate().for_each(|(i, row)| {
            let q = data.row(ids[i] as usize);
            for (j, out) in row.iter_mut().enumerate() {
                *out = if i == j {
                    0.0
                } else {
                    dist.eval(q, data.row(ids[j] as usize))
                };
            }
        });
        let d = |i: usize, j: usize| mat[i * e + j];

        // Forward edges: the heuristic over each row's candidates by ascending distance.
        let want = params.degree.min(e - 1);
        let mut rows: Vec<Vec<u32>> = (0..e)
            .into_par_iter()
            .map(|i| {
                let mut cand: Vec<u32> = (0..e as u32).filter(|&j| j as usize != i).collect();
                cand.sort_by(|&a, &b| {
                    d(i, a as usize)
                        .total_cmp(&d(i, b as usize))
                        .then(a.cmp(&b))
                });
                let mut kept: Vec<u32> = Vec::with_capacity(want);
                let mut skipped: Vec<u32> = Vec::new();
                for &c in &cand {
                    if kept.len() == want {
                        break;
                    }
                    let dc = d(i, c as usize);
                    if kept.iter().all(|&k| d(c as usize, k as usize) >= dc) {
                        kept.push(c);
                    } else {
                        skipped.push(c);
                    }
                }
                for &c in &skipped {
                    if kept.len() == want {
                        break;
                    }
                    kept.push(c);
                }
                kept
            })
            .collect();
        // Reverse edges, in vertex order.
        let forward = rows.clone();
        for (i, row) in forward.iter().enumerate() {
            for &j in row {
                let back = &mut rows[j as usize];
                if !back.contains(&(i as u32)) {
                    back.push(i as u32);
                }
            }
        }
        // Bridges until everything is reachable from vertex 0.
        let mut reached = vec![false; e];
        let mut stack = vec![0u32];
        reached[0] = true;
        loop {
            while let Some(v) = stack.pop() {
                for &u in &rows[v as usize] {
                    if !reached[u as usize] {
                        reached[u as usize] = true;
                        stack.push(u);
                    }
                }
            }
            let mut best: Option<(f32, usize, usize)> = None;
            for r in (0..e).filter(|&r| reached[r]) {
                for u in (0..e).filter(|&u| !reached[u]) {
                    let du = d(r, u);
                    if best.is_none_or(|(b, _, _)| du < b) {
                        best = Some((du, r, u));
                    }
                }
            }
            let Some((_, r, u)) = best else { break };
            rows[r].push(u as u32);
            if !rows[u].contains(&(r as u32)) {
                rows[u].push(r as u32);
            }
            reached[u] = true;
            stack.push(u as u32);
        }
        let mut offsets = Vec::with_capacity(e + 1);
        let mut adj = Vec::new();
        offsets.push(0u32);
        for row in &rows {
            adj.extend_from_slice(row);
            offsets.push(adj.len() as u32);
        }
        Ok(EntryLayer {
            ids,
            offsets,
            adj,
            params: *params,
            metric,
        })
    }

    /// The distinct entry points the layer is built over (local vertex `i` is `ids()[i]`);
    /// searches start from the first.
    pub fn ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &EntryLayerParams {
        &self.params
    }

    /// The metric it was built for.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The layer's out-neighbours of local vertex `i` (local indices).
    pub fn neighbors(&self, i: usize) -> &[u32] {
        &self.adj[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The number of edges of the layer.
    pub fn edges(&self) -> usize {
        self.adj.len()
    }
}

/// `ids` without repeats, in first-seen order.
pub(crate) fn distinct(ids: &[NodeId]) -> Vec<NodeId> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    ids.iter().copied().filter(|&v| seen.insert(v)).collect()
}
