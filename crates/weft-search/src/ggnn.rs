//! The GGNN query (Groh et al., Algorithms 1 and 2; `shared/algorithms/ggnn.md` §3) on the CPU.

use std::sync::Mutex;

use crate::check::check_search_inputs;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::rng::{below, hash3};
use weft_core::{
    DatasetView, Element, Error, GraphView, Metric, NeighborsMut, NodeId, Params, Result,
    SearchStats, Searcher,
};
use weft_graph::connect::{DEFAULT_ENTRY_POINTS, spread_entry_points};

use crate::FILTER_EXACT_PER_L;
use weft_core::Filter;
use weft_exact::filtered::{exact_search_filtered, write_row};

/// Parameters of [`GgnnSearch`] and of the GPU GGNN search: what every graph search has (the
/// beam width, the seed, the filter), where a graph without entry points is entered, and the
/// GGNN query's own knobs, [`GgnnSearchTuning`] (flattened in JSON). Defaults: the paper's SIFT1M
/// k = 10 configuration (Table 6: prioq 54, here `beam_width`; visited 384, 400 iterations)
/// with `tau = 0.5`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GgnnSearchParams {
    /// Beam width: the size of the bounded priority queue (the paper's `prioq`; at least 1).
    /// Read from JSON also under its former name `prioq`.
    #[serde(alias = "prioq")]
    pub beam_width: usize,
    /// `d+nn1`, the largest 1-NN distance of the data (real, not squared), capping the slack
    /// (`None`: no cap; `weft_ggnn::GgnnCpu::build_with_stats` reports it).
    pub max_nn1: Option<f32>,
    /// Entry points used when the graph has none: this many points spread over the data by
    /// farthest-first traversal (`weft_graph::connect::spread_entry_points` seeded by `seed`,
    /// picked once per call, the same for every query; default
    /// [`DEFAULT_ENTRY_POINTS`] = 256), so that every well-separated cluster holds one. 0: 32
    /// random points per query, drawn with `hash3(seed, query index, j)` (on clustered data
    /// most queries then start outside their cluster and cannot reach it). A graph's own entry
    /// points always take precedence.
    pub entry_points: usize,
    /// Seed of the entry points used when the graph has none.
    pub seed: u64,
    /// Only the ids this [`Filter`] allows are returned (`None`, the default: every id).
    /// The traversal is the unfiltered one (filtered-out vertices enter the best list and the
    /// queue and are expanded), except that an allowed vertex is also offered, when scored,
    /// to a separate list of the `k` best allowed ones: the answer, padded with [`INVALID`](weft_core::INVALID) /
    /// `+inf` when fewer than `k` were reached. A vertex in that list counts as remembered
    /// (never scored twice), on the CPU as on the GPU. A filter that allows at most
    /// [`FILTER_EXACT_PER_L`]` * beam_width` ids is answered by scoring those ids directly
    /// (exact, and no dearer than the traversal), on the CPU as on the GPU, as the beam search
    /// does. Its length must be the data's row count. Not serialised.
    #[serde(skip)]
    pub filter: Option<Filter>,
    /// The GGNN query's own knobs (slack, best list, visited ring, expansion cap).
    #[serde(flatten)]
    pub tuning: GgnnSearchTuning,
}

/// The GGNN query's own knobs, on the CPU and the GPU, one struct read by every surface: the
/// facade's search parameters hold it, the CLI flattens it into `weft search` / `weft eval`
/// (feature `clap`: `--tau`, `--ggnn-best`, `--ggnn-visited`, `--ggnn-max-iterations`) and the
/// Python package takes `tau`, `ggnn_best`, `ggnn_visited` and `ggnn_max_iterations`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct GgnnSearchTuning {
    /// GGNN search (hierarchical graphs): the slack tau (finite, >= 0; larger is slower and
    /// more accurate). Default 0.5.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.5))]
    pub tau: f32,
    /// GGNN search: the sorted best list's size; max(best, k) is used (the paper keeps at
    /// least 10). Default 10.
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "ggnn_best",
            long = "ggnn-best",
            value_name = "N",
            default_value_t = 10
        )
    )]
    pub best: usize,
    /// GGNN search: the FIFO visited ring's size (0 allowed: then only the best list and the
    /// queue deduplicate). Default 384.
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "ggnn_visited",
            long = "ggnn-visited",
            value_name = "N",
            default_value_t = 384
        )
    )]
    pub visited: usize,
    /// GGNN search: the most vertices expanded per query (at least 1). Default 400.
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "ggnn_max_iterations",
            long = "ggnn-max-iterations",
            value_name = "N",
            default_value_t = 400
        )
    )]
    pub max_iterations: usize,
}

impl Default for GgnnSearchTuning {
    fn default() -> Self {
        GgnnSearchTuning {
            tau: 0.5,
            best: 10,
            visited: 384,
            max_iterations: 400,
        }
    }
}

impl GgnnSearchTuning {
    /// Checks the knobs (`InvalidParams` named after the field).
    pub fn validate(&self) -> Result<()> {
        if !(self.tau.is_finite() && self.tau >= 0.0) {
            return Err(Error::invalid_param(
                "tau",
                format!("{} is not a finite slack >= 0", self.tau),
            ));
        }
        if self.best == 0 {
            return Err(Error::invalid_param("best", "must be at least 1"));
        }
        if self.max_iterations == 0 {
            return Err(Error::invalid_param("max_iterations", "must be at least 1"));
        }
        Ok(())
    }
}

/// The GPU's own knobs of the GGNN query; everything else is [`GgnnSearchParams`]. Read by
/// every surface as [`GgnnSearchTuning`] is (CLI, feature `clap`: `--ggnn-block-threads`,
/// `--ggnn-team-size`, `--ggnn-prefetch-rows`; Python: the same names with underscores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct GgnnGpuOptions {
    /// GPU GGNN search: threads per query block (32, 64 or 128; 0 = automatic).
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "ggnn_block_threads",
            long = "ggnn-block-threads",
            value_name = "N",
            default_value_t = 0
        )
    )]
    pub block_threads: usize,
    /// GPU GGNN search: lanes per distance (2, 4, 8, 16 or 32, at most the block size; 0 =
    /// automatic).
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "ggnn_team_size",
            long = "ggnn-team-size",
            value_name = "N",
            default_value_t = 0
        )
    )]
    pub team_size: usize,
    /// GPU GGNN search: prefetch the rows of a row's candidates beyond the first round of
    /// teams into L2 before the distances (results are the same either way). Default true.
    #[cfg_attr(
        feature = "clap",
        arg(
            id = "ggnn_prefetch_rows",
            long = "ggnn-prefetch-rows",
            default_value_t = true,
            action = clap::ArgAction::Set,
            value_name = "BOOL"
        )
    )]
    pub prefetch_rows: bool,
}

impl Default for GgnnGpuOptions {
    fn default() -> Self {
        GgnnGpuOptions {
            block_threads: 0,
            team_size: 0,
            prefetch_rows: true,
        }
    }
}

/// Random entry points per query when the graph has none and
/// [`GgnnSearchParams::entry_points`] is 0 (the GPU kernel draws the same).
pub(crate) const RANDOM_ENTRIES: u64 = 32;

/// The entry points every query of a call starts from when the graph has none (see
/// [`GgnnSearchParams::entry_points`]): `None` for the per-query random ones.
pub(crate) fn fallback_entry_points<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &GgnnSearchParams,
) -> Result<Option<Vec<NodeId>>> {
    if params.entry_points == 0 {
        return Ok(None);
    }
    spread_entry_points(data, metric, params.entry_points, params.seed).map(Some)
}

impl Default for GgnnSearchParams {
    fn default() -> Self {
        GgnnSearchParams {
            beam_width: 54,
            max_nn1: None,
            entry_points: DEFAULT_ENTRY_POINTS,
            seed: 0,
            filter: None,
            tuning: GgnnSearchTuning::default(),
        }
    }
}

impl GgnnSearchParams {
    /// The filter when it allows few enough ids to be answered exactly, by scoring them
    /// (at most [`FILTER_EXACT_PER_L`]` * beam_width`; see [`GgnnSearchParams::filter`]).
    pub fn small_filter(&self) -> Option<&Filter> {
        self.filter
            .as_ref()
            .filter(|f| f.count() <= FILTER_EXACT_PER_L.saturating_mul(self.beam_width))
    }
}

impl Params for GgnnSearchParams {
    fn validate(&self, rows: usize, _dim: usize) -> Result<()> {
        if let Some(filter) = &self.filter {
            filter.check_len(rows)?;
        }
        self.tuning.validate()?;
        if self.beam_width == 0 {
            return Err(Error::invalid_param("beam_width", "must be at least 1"));
        }
        if let Some(m) = self.max_nn1
            && !(m.is_finite() && m >= 0.0)
        {
            return Err(Error::invalid_param(
                "max_nn1",
                format!("{m} is not a finite distance >= 0"),
            ));
        }
        Ok(())
    }
}

/// The GGNN query on the CPU (name `ggnn`), over any [`GraphView`]; for a
/// `weft_graph::hier::HierGraph` that is its layer 0 entered from the hierarchy's entry points
/// (the paper's query does not descend through the layers, §3.4; `weft_ggnn` spreads the entry
/// points over the data, so that on clustered data every cluster holds one). A graph without
/// entry points is entered from [`GgnnSearchParams::entry_points`] points spread over the
/// data, picked once per call (so a query's result does not depend on its batch).
///
/// Per query: a sorted best list, a sorted bounded priority queue that drops its worst entry,
/// and a FIFO visited ring; a candidate is skipped while its id is in any of the three. The
/// entry points are scored first, then the queue's head is expanded while its distance passes
/// the stopping rule `d < d_best_k + xi` with `xi = tau * min(d_best1, d+nn1)` (real
/// distances). For squared L2 the rule is applied in **squared** form, `d^2 < d_k^2 + xi^2`,
/// as the authors' code does (the published tau values refer to it); for inner product and
/// cosine it is linear, with `d_best1` taken by magnitude. `d_best_k` is infinite until the best
/// list is full.
///
/// Each worker thread owns one membership-count array over the vertices, allocated once per
/// call and reused across its queries (nothing is allocated per query). Results depend only on
/// the query and the parameters, never on the thread count.
#[derive(Clone, Copy, Debug, Default)]
pub struct GgnnSearch;

/// The bounded cache of one worker thread.
struct Cache {
    best: Vec<(f32, NodeId)>,
    prioq: Vec<(f32, NodeId)>,
    /// With a filter: the best allowed vertices, ascending by `(distance, id)`.
    res: Vec<(f32, NodeId)>,
    visited: Vec<NodeId>,
    head: usize,
    present: Vec<u16>,
    fresh: Vec<NodeId>,
    stats: SearchStats,
}

impl Cache {
    fn clear(&mut self) {
        for &(_, id) in self.best.iter().chain(&self.prioq).chain(&self.res) {
            self.present[id as usize] -= 1;
        }
        for &id in &self.visited {
            self.present[id as usize] -= 1;
        }
        self.best.clear();
        self.prioq.clear();
        self.res.clear();
        self.visited.clear();
        self.head = 0;
    }

    fn insert(list: &mut Vec<(f32, NodeId)>, cap: usize, present: &mut [u16], d: f32, id: NodeId) {
        let pos = list.partition_point(|e| e.0 < d);
        if pos >= cap {
            return;
        }
        list.insert(pos, (d, id));
        present[id as usize] += 1;
        if list.len() > cap
            && let Some((_, out)) = list.pop()
        {
            present[out as usize] -= 1;
        }
    }
}

impl Cache {
    /// Inserts an allowed vertex into the result list of capacity `cap`, ordered by
    /// `(distance, id)` (never a duplicate: a listed vertex is never scored again).
    fn insert_res(&mut self, cap: usize, d: f32, id: NodeId) {
        let pos = self
            .res
            .partition_point(|&(bd, bi)| bd < d || (bd == d && bi < id));
        if pos >= cap {
            return;
        }
        self.res.insert(pos, (d, id));
        self.present[id as usize] += 1;
        if self.res.len() > cap
            && let Some((_, out)) = self.res.pop()
        {
            self.present[out as usize] -= 1;
        }
    }
}

/// The stopping bound of the current state.
#[inline]
fn criterion(c: &Cache, best_cap: usize, tau: f32, guard: f32, squared: bool) -> f32 {
    if c.best.len() < best_cap {
        return f32::INFINITY;
    }
    let dk = c.best[best_cap - 1].0;
    let d1 = c.best[0].0;
    if squared {
        let xi = tau * d1.max(0.0).sqrt().min(guard);
        dk + xi * xi
    } else {
        dk + tau * d1.abs().min(guard)
    }
}

impl<G: GraphView + ?Sized> Searcher<G> for GgnnSearch {
    type Params = GgnnSearchParams;

    fn name(&self) -> &'static str {
        "ggnn"
    }

    fn search<T: Element>(
        &self,
        graph: &G,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnSearchParams,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let k = check_search_inputs(graph, data, queries, &out, |n, dim| params.validate(n, dim))?;
        if let Some(filter) = params.small_filter() {
            return exact_search_filtered(data, queries, metric, filter, out);
        }
        let n = data.rows();
        let best_cap = params.tuning.best.max(k);
        let squared = metric == Metric::L2Squared;
        let guard = params.max_nn1.unwrap_or(f32::INFINITY);
        let tau = params.tuning.tau;
        let filter = params.filter.as_ref();
        let dist = metric.distance_fn::<T>();
        let spread = if graph.entry_points().is_empty() {
            fallback_entry_points(data, metric, params)?
        } else {
            None
        };
        let slots: Vec<Mutex<Option<Cache>>> = (0..rayon::current_num_threads().max(1))
            .map(|_| Mutex::new(None))
            .collect();
        out.par_rows_mut()
            .with_min_len(4)
            .for_each(|(qi, (ids, dists))| {
                let t = rayon::current_thread_index().unwrap_or(0) % slots.len();
                let mut guard_lock = slots[t].lock().unwrap_or_else(|e| e.into_inner());
                let c = guard_lock.get_or_insert_with(|| Cache {
                    best: Vec::with_capacity(best_cap + 1),
                    prioq: Vec::with_capacity(params.beam_width + 1),
                    res: Vec::with_capacity(k + 1),
                    visited: Vec::with_capacity(params.tuning.visited),
                    head: 0,
                    present: vec![0; n],
                    fresh: Vec::new(),
                    stats: SearchStats::default(),
                });
                let q = queries.row(qi);
                let mut dc = 0u64;
                c.fresh.clear();
                if let Some(spread) = &spread {
                    c.fresh.extend_from_slice(spread);
                } else if graph.entry_points().is_empty() {
                    for j in 0..RANDOM_ENTRIES {
                        let v = below(hash3(params.seed, qi as u64, j), n as u64) as NodeId;
                        c.fresh.push(v);
                    }
                } else {
                    c.fresh.extend_from_slice(graph.entry_points());
                }
                let mut fresh = std::mem::take(&mut c.fresh);
                let consider = |c: &mut Cache, v: NodeId, dc: &mut u64| {
                    if c.present[v as usize] > 0 {
                        return;
                    }
                    let d = dist.eval(q, data.row(v as usize));
                    *dc += 1;
                    if d < criterion(c, best_cap, tau, guard, squared) {
                        Cache::insert(&mut c.best, best_cap, &mut c.present, d, v);
                        Cache::insert(&mut c.prioq, params.beam_width, &mut c.present, d, v);
                    }
                    if let Some(f) = filter
                        && f.contains(v)
                    {
                        c.insert_res(k, d, v);
                    }
                };
                for &e in &fresh {
                    consider(c, e, &mut dc);
                }
                let mut hops = 0u64;
                for _ in 0..params.tuning.max_iterations {
                    let Some(&(d, a)) = c.prioq.first() else {
                        break;
                    };
                    if d.partial_cmp(&criterion(c, best_cap, tau, guard, squared))
                        != Some(std::cmp::Ordering::Less)
                    {
                        break;
                    }
                    c.prioq.remove(0);
                    c.present[a as usize] -= 1;
                    if params.tuning.visited > 0 {
                        if c.visited.len() < params.tuning.visited {
                            c.visited.push(a);
                        } else {
                            let old = std::mem::replace(&mut c.visited[c.head], a);
                            c.present[old as usize] -= 1;
                            c.head = (c.head + 1) % params.tuning.visited;
                        }
                        c.present[a as usize] += 1;
                    }
                    hops += 1;
                    fresh.clear();
                    fresh.extend(
                        graph
                            .neighbors(a)
                            .iter()
                            .copied()
                            .filter(|&u| (u as usize) < n && u != a),
                    );
                    for &u in &fresh {
                        consider(c, u, &mut dc);
                    }
                }
                write_row(if filter.is_some() { &c.res } else { &c.best }, ids, dists);
                c.clear();
                c.fresh = fresh;
                c.stats.queries += 1;
                c.stats.hops += hops;
                c.stats.distance_computations += dc;
            });
        let mut stats = SearchStats::default();
        for slot in slots {
            if let Some(s) = slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
                stats.merge(&s.stats);
            }
        }
        Ok(stats)
    }
}
