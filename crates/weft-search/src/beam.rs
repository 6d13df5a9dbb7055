//! Greedy best-first beam search on the CPU.

use std::sync::Mutex;

use crate::check::check_search_inputs;
use crate::entry_layer::{EntryLayer, EntryLayerParams, distinct};
use crate::inputs::SearchInputs;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::Filter;
use weft_core::prefetch::prefetch_bytes;
use weft_core::rng::{SplitMix64, hash3};
use weft_core::{
    DatasetView, Element, Error, GraphView, INVALID, Metric, NeighborsMut, NodeId, Params, Result,
    SearchStats, Searcher,
};
use weft_exact::filtered::{exact_search_filtered, insert_bounded, write_row};

/// Where each query's search starts.
///
/// Every search graph weft builds (cagra, rnndescent, grnnd, ggnn) stores entry points spread
/// over the data and is connected from them, so [`EntryPoints::Graph`] is right for it. A k-NN
/// graph (nndescent, exact) stores none and is not connectivity-repaired: on clustered data it
/// falls apart into one component per cluster, and a query entered in the wrong cluster never
/// reaches its own. Search one with the search graphs' mechanism: [`EntryPoints::Fixed`] with
/// [`weft_graph::connect::spread_entry_points`] computed once for the data (what `weft::Index`
/// and the `weft` command line do), or [`EntryPoints::Spread`] (computed on every call).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryPoints {
    /// The graph's own entry points ([`GraphView::entry_points`]: a search graph's spread entry
    /// points, a medoid, ...). When the graph has none (a k-NN graph), one seeded random vertex
    /// per query (as [`EntryPoints::Random`] with count 1): cheap, but on clustered data most
    /// queries can be stranded in another cluster; see the [type docs](EntryPoints).
    #[default]
    Graph,
    /// `count` seeded random vertices per query, drawn from stream `(seed, query index)`, so the
    /// result does not depend on the thread count (it does on the query's position in the
    /// batch).
    Random {
        /// Vertices drawn per query (at least 1; duplicates are drawn only once).
        count: usize,
    },
    /// `count` entry points spread over the data
    /// ([`weft_graph::connect::spread_entry_points`] with the search's metric and seed; fewer
    /// on small data), the same for every query: the entry mechanism of the search graphs, for
    /// a graph that stores none. They are computed at the start of every
    /// [`BeamSearch::search`] call, about `count * min(n, max(4096, 32 * count))` distance
    /// evaluations (2M for the default 256 on 8192 or more vectors), which dwarfs a small
    /// batch: when searching repeatedly, compute them once and pass [`EntryPoints::Fixed`]. A
    /// query's result depends on the data, the metric and the seed, not on its batch.
    Spread {
        /// Entry points wanted (at least 1;
        /// [`DEFAULT_ENTRY_POINTS`](weft_graph::connect::DEFAULT_ENTRY_POINTS) is what the
        /// search-graph builders store).
        count: usize,
    },
    /// The same fixed list of vertices for every query.
    Fixed {
        /// The entry vertices (non-empty, all below the number of vertices).
        ids: Vec<NodeId>,
    },
}

/// The CPU beam search's own knobs, one struct read by every surface: [`BeamSearchParams`] and
/// the facade's search parameters hold it, the CLI flattens it into `weft search` / `weft eval`
/// (feature `clap`: `--max-hops`, `--max-distance-computations` and the entry layer's flags, see
/// [`EntryLayerParams`]) and the Python package takes the same names as keyword arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct BeamSearchTuning {
    /// Stop a query after expanding this many vertices (`None`: run to convergence).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            help = "CPU beam search: stop a query after expanding this many vertices (>= 1; default: run to convergence)"
        )
    )]
    pub max_hops: Option<usize>,
    /// Stop a query after this many distance evaluations (`None`: no budget).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            help = "CPU beam search: stop a query after this many distance evaluations (>= 1; default: no budget)"
        )
    )]
    pub max_distance_computations: Option<usize>,
    /// How a query with many entry points (the graph's, spread or fixed ones; never random
    /// ones) picks where to start: when the layer is enabled and there are enough of them
    /// ([`EntryLayerParams::applies_to`]), by a small beam search over an [`EntryLayer`] built
    /// over them (once per [`BeamSearch::search`] call, or once for many with
    /// [`BeamSearch::search_with_entry_layer`]), scoring a fraction of them; else every query
    /// scores every entry point ([`EntryLayerParams::disabled`]). Default: enabled, with the
    /// default parameters. Read from JSON also as `null` (disabled), its former form.
    #[serde(deserialize_with = "entry_layer_or_null")]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub entry_layer: EntryLayerParams,
}

impl BeamSearchTuning {
    /// Checks the knobs (a zero budget is refused: leave it unset for none).
    pub fn validate(&self) -> Result<()> {
        if self.max_hops == Some(0) {
            return Err(Error::invalid_param(
                "max_hops",
                "must be at least 1 (leave it unset for no limit)",
            ));
        }
        if self.max_distance_computations == Some(0) {
            return Err(Error::invalid_param(
                "max_distance_computations",
                "must be at least 1 (leave it unset for no limit)",
            ));
        }
        self.entry_layer.validate("entry_layer.")
    }
}

/// Reads [`BeamSearchTuning::entry_layer`]: an object, or `null` for a disabled layer (how
/// JSON written before the `enabled` field said so).
fn entry_layer_or_null<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<EntryLayerParams, D::Error> {
    Ok(Option::<EntryLayerParams>::deserialize(deserializer)?
        .unwrap_or_else(EntryLayerParams::disabled))
}

/// Parameters of [`BeamSearch`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BeamSearchParams {
    /// Beam width: the candidate list size (the papers' `L`); must be at least the `k` of the
    /// search. Larger is slower and more accurate. Default 64. Read from JSON also under its
    /// former name `l`.
    #[serde(alias = "l")]
    pub beam_width: usize,
    /// Where searches start. Default: the graph's entry points.
    pub entry_points: EntryPoints,
    /// Seed of the random and the spread entry points. Default 0.
    pub seed: u64,
    /// The search's budgets and entry layer (in JSON, their fields sit beside the others).
    #[serde(flatten)]
    pub tuning: BeamSearchTuning,
    /// Only the ids this [`Filter`] allows are returned (`None`, the default: every id).
    /// Filtered-out vertices are still expanded, so that the search reaches the allowed ones
    /// behind them; every allowed vertex the search scores is offered to a separate list of
    /// the `k` best, which is the answer (padded with [`INVALID`] / `+inf` when fewer than `k`
    /// allowed vertices were reached). A filter that allows at most
    /// [`FILTER_EXACT_PER_L`]` * beam_width` ids is answered by scoring those ids directly
    /// (exact, and no dearer than the graph search). A selective filter needs a larger
    /// `beam_width` for the same
    /// recall. Its length must be the data's row count. Not serialised.
    #[serde(skip)]
    pub filter: Option<Filter>,
}

/// A filtered [`BeamSearch`] whose filter allows at most this many ids per unit of the beam
/// width scores the allowed ids exactly instead of searching the graph (a graph search of
/// beam width `L` scores about that many vertices anyway).
pub const FILTER_EXACT_PER_L: usize = 16;

impl Default for BeamSearchParams {
    fn default() -> Self {
        BeamSearchParams {
            beam_width: 64,
            entry_points: EntryPoints::Graph,
            seed: 0,
            tuning: BeamSearchTuning::default(),
            filter: None,
        }
    }
}

impl BeamSearchParams {
    /// Default parameters with beam width `beam_width`.
    pub fn with_beam_width(beam_width: usize) -> Self {
        BeamSearchParams {
            beam_width,
            ..Default::default()
        }
    }
}

impl Params for BeamSearchParams {
    fn validate(&self, rows: usize, _dim: usize) -> Result<()> {
        if self.beam_width == 0 {
            return Err(Error::invalid_param(
                "beam_width",
                "the beam width must be at least 1",
            ));
        }
        match &self.entry_points {
            EntryPoints::Graph => {}
            EntryPoints::Random { count } => {
                if *count == 0 {
                    return Err(Error::invalid_param(
                        "entry_points.count",
                        "at least one random entry point is needed",
                    ));
                }
            }
            EntryPoints::Spread { count } => {
                if *count == 0 {
                    return Err(Error::invalid_param(
                        "entry_points.count",
                        "at least one spread entry point is needed",
                    ));
                }
            }
            EntryPoints::Fixed { ids } => {
                if ids.is_empty() {
                    return Err(Error::invalid_param(
                        "entry_points.ids",
                        "the fixed entry-point list is empty",
                    ));
                }
                if let Some(&e) = ids.iter().find(|&&e| e as usize >= rows) {
                    return Err(Error::invalid_param(
                        "entry_points.ids",
                        format!("entry point {e} is out of range (n = {rows})"),
                    ));
                }
            }
        }
        self.tuning.validate()?;
        if let Some(filter) = &self.filter {
            filter.check_len(rows)?;
        }
        Ok(())
    }
}

/// Greedy best-first beam search (name `beam`), the search of HNSW's bottom layer, NSG, and
/// RNN-Descent's reference code.
///
/// Per query it scores the entry points (many of them, such as a search graph's 256 spread
/// ones, through a small navigable [`EntryLayer`] over them: see
/// [`BeamSearchTuning::entry_layer`]), keeps a sorted candidate list of at most `L` vertices
/// seeded with the best, repeatedly expands the
/// closest unexpanded one (computing distances to its unvisited out-neighbours and inserting
/// those that beat the current worst) and stops when every candidate is expanded or a budget
/// runs out; the first `k` candidates are the answer, ascending by distance, without duplicates,
/// padded with [`INVALID`] / infinity when fewer than `k` vertices were reached. With a
/// [`BeamSearchParams::filter`], the answer is the `k` best allowed vertices it scored (see
/// there).
///
/// Queries run in parallel on the current rayon pool (call it inside
/// [`BuildCtx::install`](weft_core::BuildCtx::install) to choose the thread count). Each worker
/// thread owns a visited bitset and candidate buffers, created for this call
/// and reused across its queries. Results are deterministic: each query depends only on its own
/// inputs and the seed.
#[derive(Clone, Copy, Debug, Default)]
pub struct BeamSearch;

/// One entry of the candidate list.
#[derive(Clone, Copy, Debug)]
struct Cand {
    dist: f32,
    id: NodeId,
    expanded: bool,
}

/// A set of vertex ids as a bitset, cleared in time proportional to what was inserted (the
/// words touched since the last clear), so that it costs `n / 8` bytes, stays in cache, and
/// needs no per-query pass over all `n`.
struct VisitedSet {
    bits: Vec<u64>,
    /// The words of `bits` made non-zero since the last clear.
    touched: Vec<u32>,
}

impl VisitedSet {
    fn new(n: usize) -> Self {
        VisitedSet {
            bits: vec![0; n.div_ceil(64)],
            touched: Vec::new(),
        }
    }

    /// Inserts `v`; returns whether it was absent.
    #[inline(always)]
    fn insert(&mut self, v: usize) -> bool {
        let (w, bit) = (v >> 6, 1u64 << (v & 63));
        let word = &mut self.bits[w];
        if *word & bit != 0 {
            return false;
        }
        if *word == 0 {
            self.touched.push(w as u32);
        }
        *word |= bit;
        true
    }

    /// Empties the set.
    fn clear(&mut self) {
        for &w in &self.touched {
            self.bits[w as usize] = 0;
        }
        self.touched.clear();
    }
}

/// Per-thread buffers, reused across the queries of one search call.
struct Scratch {
    /// The vertices seen by the current query.
    visited: VisitedSet,
    /// The same for the entry layer's local vertices.
    layer_visited: VisitedSet,
    pool: Vec<Cand>,
    /// The entry layer search's candidate list (ids are local to the layer).
    layer_pool: Vec<Cand>,
    fresh: Vec<NodeId>,
    /// With a filter: the best allowed vertices scored, ascending by `(distance, id)`.
    found: Vec<(f32, NodeId)>,
    stats: SearchStats,
}

impl Scratch {
    fn new(n: usize, l: usize, layer_len: usize) -> Self {
        Scratch {
            visited: VisitedSet::new(n),
            layer_visited: VisitedSet::new(layer_len),
            pool: Vec::with_capacity(l + 1),
            layer_pool: Vec::new(),
            fresh: Vec::new(),
            found: Vec::new(),
            stats: SearchStats::default(),
        }
    }

    /// Starts a new query: empty visited sets and candidate lists.
    fn next_query(&mut self) {
        self.visited.clear();
        self.layer_visited.clear();
        self.pool.clear();
        self.layer_pool.clear();
        self.found.clear();
    }
}

/// Inserts `(dist, id)` into the sorted list `pool` of capacity `l`; returns its position, or
/// `None` when the list is full and `dist` does not beat the worst entry.
#[inline]
fn insert(pool: &mut Vec<Cand>, l: usize, dist: f32, id: NodeId) -> Option<usize> {
    if pool.len() >= l {
        match pool.last() {
            Some(worst) if dist < worst.dist => {
                pool.pop();
            }
            _ => return None,
        }
    }
    let pos = pool.partition_point(|c| c.dist <= dist);
    pool.insert(
        pos,
        Cand {
            dist,
            id,
            expanded: false,
        },
    );
    Some(pos)
}

/// How many bytes of neighbour vectors the search keeps in flight ahead of its distance loop.
const PREFETCH_BYTES: usize = 16 * 1024;

impl BeamSearch {
    /// Checks shapes and parameters before any work.
    fn check<G: GraphView + ?Sized, T: Element>(
        graph: &G,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        params: &BeamSearchParams,
        out: &NeighborsMut<'_>,
    ) -> Result<()> {
        let k = check_search_inputs(graph, data, queries, out, |n, dim| params.validate(n, dim))?;
        crate::plan::check_beam_width(params.beam_width, k)
    }
}

/// One query's search state and inputs.
struct QueryCtx<'a, G: ?Sized, T> {
    graph: &'a G,
    data: DatasetView<'a, T>,
    dist: weft_core::distance::DistanceFn<T>,
    params: &'a BeamSearchParams,
    /// The entry points of [`EntryPoints::Spread`], computed once per call (else empty).
    spread: &'a [NodeId],
    /// The entry layer over the entry points, when the search uses one.
    layer: Option<&'a EntryLayer>,
    row_bytes: usize,
    /// How many vectors ahead of the distance loop to prefetch.
    ahead: usize,
    /// The search's filter, if any.
    filter: Option<&'a Filter>,
    /// Results wanted per query.
    k: usize,
}

impl<G: GraphView + ?Sized, T: Element> QueryCtx<'_, G, T> {
    /// Offers a scored vertex to the filtered result list (nothing without a filter).
    #[inline(always)]
    fn offer(&self, found: &mut Vec<(f32, NodeId)>, d: f32, id: NodeId) {
        if let Some(f) = self.filter
            && f.contains(id)
        {
            insert_bounded(found, self.k, d, id);
        }
    }

    /// Searches for `query` (number `qi`), leaving the candidate list in `s.pool`.
    fn run(&self, s: &mut Scratch, qi: usize, query: &[T]) {
        let n = self.data.rows();
        let l = self.params.beam_width;
        let max_hops = self.params.tuning.max_hops.unwrap_or(usize::MAX);
        let budget = self
            .params
            .tuning
            .max_distance_computations
            .unwrap_or(usize::MAX);
        s.next_query();
        let mut dc = 0usize;

        // Entry points: through the layer, or all scored.
        if let Some(layer) = self.layer {
            dc += self.enter_through_layer(layer, s, query, budget);
        } else {
            s.fresh.clear();
            let graph_entries = self.graph.entry_points();
            match &self.params.entry_points {
                EntryPoints::Graph if !graph_entries.is_empty() => {
                    s.fresh.extend_from_slice(graph_entries)
                }
                EntryPoints::Fixed { ids } => s.fresh.extend_from_slice(ids),
                EntryPoints::Spread { .. } => s.fresh.extend_from_slice(self.spread),
                EntryPoints::Graph | EntryPoints::Random { .. } => {
                    let count = match self.params.entry_points {
                        EntryPoints::Random { count } => count,
                        _ => 1,
                    };
                    let mut rng = SplitMix64::new(hash3(self.params.seed, qi as u64, 0xe7));
                    for _ in 0..count {
                        s.fresh.push(rng.below(n as u64) as NodeId);
                    }
                }
            }
            // The distinct ones, all scored (whatever the budget), four at a time.
            let mut m = 0;
            for i in 0..s.fresh.len() {
                let e = s.fresh[i];
                if s.visited.insert(e as usize) {
                    s.fresh[m] = e;
                    m += 1;
                }
            }
            let mut j = 0;
            while j < m {
                let ids = &s.fresh[j..(j + 4).min(m)];
                let d4 = if ids.len() == 1 {
                    [
                        self.dist.eval(query, self.data.row(ids[0] as usize)),
                        0.0,
                        0.0,
                        0.0,
                    ]
                } else {
                    let row = |i: usize| self.data.row(ids[i.min(ids.len() - 1)] as usize);
                    self.dist.eval_x4(query, [row(0), row(1), row(2), row(3)])
                };
                for (&e, &d) in ids.iter().zip(&d4) {
                    insert(&mut s.pool, l, d, e);
                    self.offer(&mut s.found, d, e);
                }
                j += ids.len();
            }
            dc += m;
        }

        let mut hops = 0usize;
        let mut cur = 0usize;
        while cur < s.pool.len() && hops < max_hops && dc < budget {
            if s.pool[cur].expanded {
                cur += 1;
                continue;
            }
            s.pool[cur].expanded = true;
            let v = s.pool[cur].id;
            hops += 1;

            // Unvisited out-neighbours, marked and prefetched before any distance.
            s.fresh.clear();
            for &u in self.graph.neighbors(v) {
                let ui = u as usize;
                if ui >= n {
                    continue; // padding or a corrupt id: never followed
                }
                if s.visited.insert(ui) {
                    s.fresh.push(u);
                }
            }
            // Respect the distance budget, then issue the loads of the next `ahead` vectors
            // before computing any distance, so that their cache misses overlap; distances go
            // four at a time through the one-query-to-many kernel.
            let cnt = s.fresh.len().min(budget - dc);
            let ahead = self.ahead.min(cnt);
            for &u in &s.fresh[..ahead] {
                prefetch_bytes(
                    self.data.row(u as usize).as_ptr() as *const u8,
                    self.row_bytes,
                );
            }
            let mut best = usize::MAX;
            let mut d4 = [0f32; 4];
            let mut j = 0;
            while j < cnt {
                let end = (j + 4).min(cnt);
                for &u in s
                    .fresh
                    .get(j + ahead..(end + ahead).min(cnt))
                    .unwrap_or(&[])
                {
                    prefetch_bytes(
                        self.data.row(u as usize).as_ptr() as *const u8,
                        self.row_bytes,
                    );
                }
                let ids = &s.fresh[j..end];
                if ids.len() == 1 {
                    d4[0] = self.dist.eval(query, self.data.row(ids[0] as usize));
                } else {
                    // Two or three left: one four-row kernel call (repeating the last row) is
                    // cheaper than separate calls.
                    let row = |i: usize| self.data.row(ids[i.min(ids.len() - 1)] as usize);
                    d4 = self.dist.eval_x4(query, [row(0), row(1), row(2), row(3)]);
                }
                for (&u, &d) in ids.iter().zip(&d4) {
                    if let Some(p) = insert(&mut s.pool, l, d, u) {
                        best = best.min(p);
                    }
                    self.offer(&mut s.found, d, u);
                }
                j = end;
            }
            dc += cnt;
            if best <= cur {
                cur = best;
            } else {
                cur += 1;
            }
        }
        s.stats.queries += 1;
        s.stats.hops += hops as u64;
        s.stats.distance_computations += dc as u64;
    }

    /// The entry phase through `layer`: a beam search of the layer's list size from its first
    /// vertex; every entry point it scores is marked visited and offered to `s.pool`. Returns
    /// the distance evaluations (at most `budget`, at least 1).
    fn enter_through_layer(
        &self,
        layer: &EntryLayer,
        s: &mut Scratch,
        query: &[T],
        budget: usize,
    ) -> usize {
        let l = self.params.beam_width;
        let beam = layer.params().beam_width;
        let ids = layer.ids();
        let row = |local: u32| self.data.row(ids[local as usize] as usize);
        let d0 = self.dist.eval(query, row(0));
        let mut dc = 1usize;
        s.layer_visited.insert(0);
        s.visited.insert(ids[0] as usize);
        insert(&mut s.layer_pool, beam, d0, 0);
        insert(&mut s.pool, l, d0, ids[0]);
        self.offer(&mut s.found, d0, ids[0]);
        let mut cur = 0usize;
        let mut fresh = [0u32; 4];
        while cur < s.layer_pool.len() && dc < budget {
            if s.layer_pool[cur].expanded {
                cur += 1;
                continue;
            }
            s.layer_pool[cur].expanded = true;
            let v = s.layer_pool[cur].id as usize;
            let mut best = usize::MAX;
            let mut nb = layer.neighbors(v).iter();
            loop {
                // Up to four unvisited neighbours, then their distances in one kernel call.
                let mut cnt = 0;
                while cnt < 4 && dc + cnt < budget {
                    let Some(&u) = nb.next() else { break };
                    if s.layer_visited.insert(u as usize) {
                        fresh[cnt] = u;
                        cnt += 1;
                    }
                }
                if cnt == 0 {
                    break;
                }
                let d4 = if cnt == 1 {
                    [self.dist.eval(query, row(fresh[0])), 0.0, 0.0, 0.0]
                } else {
                    let r = |i: usize| row(fresh[i.min(cnt - 1)]);
                    self.dist.eval_x4(query, [r(0), r(1), r(2), r(3)])
                };
                dc += cnt;
                for (&u, &d) in fresh[..cnt].iter().zip(&d4) {
                    let g = ids[u as usize];
                    s.visited.insert(g as usize);
                    insert(&mut s.pool, l, d, g);
                    self.offer(&mut s.found, d, g);
                    if let Some(p) = insert(&mut s.layer_pool, beam, d, u) {
                        best = best.min(p);
                    }
                }
            }
            if best <= cur {
                cur = best;
            } else {
                cur += 1;
            }
        }
        dc
    }
}

impl<G: GraphView + ?Sized> Searcher<G> for BeamSearch {
    type Params = BeamSearchParams;

    fn name(&self) -> &'static str {
        "beam"
    }

    fn search<T: Element>(
        &self,
        graph: &G,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &BeamSearchParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let inputs = SearchInputs {
            graph,
            data,
            queries,
        };
        self.search_with_entry_layer(inputs, metric, params, None, out)
    }
}

impl BeamSearch {
    /// The entry layer a [`BeamSearch::search`] with `params` would build over `entries`, the
    /// entry points it resolves to (the graph's, the fixed list or the spread points): `None`
    /// when it scores every entry point (the layer is disabled, or
    /// [`EntryLayerParams::applies_to`] is false for the number of distinct entry points).
    /// Build it once and pass it to [`BeamSearch::search_with_entry_layer`] to search
    /// repeatedly without building it each call.
    pub fn entry_layer_for<T: Element>(
        data: DatasetView<'_, T>,
        metric: Metric,
        entries: &[NodeId],
        params: &BeamSearchParams,
    ) -> Result<Option<EntryLayer>> {
        let p = &params.tuning.entry_layer;
        if p.applies_to(distinct(entries).len()) {
            EntryLayer::build(data, metric, entries, p).map(Some)
        } else {
            Ok(None)
        }
    }

    /// [`BeamSearch::search`] with a prepared entry layer: `Some(layer)` (built by
    /// [`BeamSearch::entry_layer_for`] or [`EntryLayer::build`]) is used in place of scoring
    /// the entry points, whatever `params.tuning.entry_layer` says, and must be built over the entry
    /// points the search resolves to (the same distinct ids in the same order, else
    /// [`Error::InvalidInput`]) for `metric`; `None` builds one when `params` ask for it, as
    /// [`BeamSearch::search`] does. The results are those of [`BeamSearch::search`] with the
    /// layer's parameters. Random entry points ([`EntryPoints::Random`], or a graph without
    /// entry points under [`EntryPoints::Graph`]) take no layer.
    pub fn search_with_entry_layer<G: GraphView + ?Sized, T: Element>(
        &self,
        inputs: SearchInputs<'_, G, T>,
        metric: Metric,
        params: &BeamSearchParams,
        layer: Option<&EntryLayer>,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let SearchInputs {
            graph,
            data,
            queries,
        } = inputs;
        Self::check(graph, data, queries, params, &out)?;
        let n = data.rows();
        let k = out.k();
        if let Some(filter) = &params.filter
            && filter.count() <= FILTER_EXACT_PER_L.saturating_mul(params.beam_width)
        {
            return exact_search_filtered(data, queries, metric, filter, out);
        }
        let spread = match params.entry_points {
            EntryPoints::Spread { count } if queries.rows() > 0 => {
                weft_graph::connect::spread_entry_points(data, metric, count, params.seed)?
            }
            _ => Vec::new(),
        };
        let graph_entries = graph.entry_points();
        let entries: Option<&[NodeId]> = match &params.entry_points {
            EntryPoints::Graph if !graph_entries.is_empty() => Some(graph_entries),
            EntryPoints::Fixed { ids } => Some(ids),
            EntryPoints::Spread { .. } => Some(&spread),
            EntryPoints::Graph | EntryPoints::Random { .. } => None,
        };
        let built;
        let layer = match (layer, entries) {
            (Some(layer), Some(entries)) => {
                // (A list without repeats is its own distinct list: no hashing on the common
                // path, which matters to one-query calls.)
                let same = layer.ids() == entries || layer.ids() == distinct(entries);
                if layer.metric() != metric || !same {
                    return Err(Error::InvalidInput(
                        "the entry layer was not built over this search's entry points and metric"
                            .into(),
                    ));
                }
                Some(layer)
            }
            (Some(_), None) => {
                return Err(Error::InvalidInput(
                    "an entry layer was given to a search from random entry points".into(),
                ));
            }
            (None, Some(entries)) if queries.rows() > 0 => {
                built = Self::entry_layer_for(data, metric, entries, params)?;
                built.as_ref()
            }
            (None, _) => None,
        };
        let ctx = QueryCtx {
            graph,
            data,
            dist: metric.distance_fn::<T>(),
            params,
            spread: &spread,
            layer,
            row_bytes: data.dim() * std::mem::size_of::<T>(),
            ahead: (PREFETCH_BYTES / (data.dim() * std::mem::size_of::<T>()).max(1)).max(1),
            filter: params.filter.as_ref(),
            k,
        };
        let layer_len = layer.map_or(0, |l| l.ids().len());
        let slots: Vec<Mutex<Option<Scratch>>> = (0..rayon::current_num_threads().max(1))
            .map(|_| Mutex::new(None))
            .collect();
        out.par_rows_mut()
            .with_min_len(4)
            .for_each(|(qi, (ids, dists))| {
                let t = rayon::current_thread_index().unwrap_or(0) % slots.len();
                let mut guard = slots[t].lock().unwrap_or_else(|e| e.into_inner());
                let s = guard.get_or_insert_with(|| Scratch::new(n, params.beam_width, layer_len));
                ctx.run(s, qi, queries.row(qi));
                if params.filter.is_some() {
                    write_row(&s.found, ids, dists);
                    return;
                }
                for j in 0..k {
                    match s.pool.get(j) {
                        Some(c) => {
                            ids[j] = c.id;
                            dists[j] = c.dist;
                        }
                        None => {
                            ids[j] = INVALID;
                            dists[j] = f32::INFINITY;
                        }
                    }
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::{Dataset, FixedDegreeGraph, Neighbors};

    /// Two far-apart clusters whose graph rows stay inside their cluster: only spread (or
    /// fixed) entry points reach both.
    fn two_islands() -> (Dataset<f32>, Dataset<f32>, FixedDegreeGraph) {
        let (n, dim) = (200usize, 4usize);
        let mut rng = SplitMix64::new(3);
        let mut v = Vec::with_capacity(n * dim);
        for i in 0..n {
            let centre = if i < n / 2 { 0.0 } else { 100.0 };
            for _ in 0..dim {
                v.push(centre + rng.next_gaussian() as f32);
            }
        }
        let base = Dataset::from_vec(v, n, dim).unwrap();
        let queries =
            Dataset::from_vec([base.row(3), base.row(150)].concat().to_vec(), 2, dim).unwrap();
        let half = (n / 2) as NodeId;
        let lists: Vec<Vec<NodeId>> = (0..n as NodeId)
            .map(|i| {
                let lo = if i < half { 0 } else { half };
                (1..=4).map(|j| lo + (i - lo + j) % half).collect()
            })
            .collect();
        (
            base,
            queries,
            FixedDegreeGraph::from_lists(&lists, 4).unwrap(),
        )
    }

    fn run(
        graph: &FixedDegreeGraph,
        base: &Dataset<f32>,
        queries: &Dataset<f32>,
        entry_points: EntryPoints,
    ) -> Result<Neighbors> {
        let mut out = Neighbors::new(queries.rows(), 1);
        let params = BeamSearchParams {
            entry_points,
            seed: 5,
            ..BeamSearchParams::with_beam_width(128) // more than an island: exhaustive within it
        };
        BeamSearch.search(
            graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &params,
            out.as_mut(),
        )?;
        Ok(out)
    }

    #[test]
    fn spread_entry_points_equal_the_fixed_list_and_reach_every_island() {
        let (base, queries, graph) = two_islands();
        let spread = run(&graph, &base, &queries, EntryPoints::Spread { count: 8 }).unwrap();
        let ids =
            weft_graph::connect::spread_entry_points(base.view(), Metric::L2Squared, 8, 5).unwrap();
        let fixed = run(&graph, &base, &queries, EntryPoints::Fixed { ids }).unwrap();
        assert_eq!(spread, fixed);
        assert_eq!(spread.ids, [3, 150]);
        // One batch or two: the same answers.
        let one = Dataset::from_vec(queries.row(1).to_vec(), 1, queries.dim()).unwrap();
        let alone = run(&graph, &base, &one, EntryPoints::Spread { count: 8 }).unwrap();
        assert_eq!(alone.ids, [150]);
        assert!(matches!(
            run(&graph, &base, &queries, EntryPoints::Spread { count: 0 }),
            Err(Error::InvalidParams { .. })
        ));
    }
}
