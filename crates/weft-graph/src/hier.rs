//! Hierarchical search graphs (GGNN style).
//!
//! A [`HierGraph`] has `L >= 1` layers:
//! - layer 0 holds every point: a [`FixedDegreeGraph`] on global ids `0..n`;
//! - each upper layer `l >= 1` ([`HierLayer`]) holds a subset of the points of layer `l - 1`: a
//!   [`FixedDegreeGraph`] on *local* ids `0..m_l`, plus the map from local to global ids (and the
//!   inverse lookup, for descending from layer `l` to layer `l - 1`);
//! - the entry points are global ids: where a search of layer 0 starts.
//!
//! A descending search starts at the top layer (all of its points), greedily descends layer by
//! layer (translating its current best points through [`HierGraph::local_id`]) and finishes on
//! layer 0. The GGNN query (and any search of the [`GraphView`]) searches layer 0 from the
//! entry points instead: as a [`GraphView`] a `HierGraph` is its layer 0 with the hierarchy's
//! entry points. The entry points may be the top layer's points (the paper's choice) or any
//! other points, e.g. points spread over the data (`weft_graph::connect::spread_entry_points`),
//! which clustered data needs: a top layer of a few dozen points cannot hold a point of every
//! cluster.
//!
//! The entry points of the layer graphs themselves are not part of the hierarchy: the
//! constructors drop them.

use weft_core::{Error, FixedDegreeGraph, GraphView, INVALID, NodeId, Result, SharedSlice};

/// One upper layer: a graph on local ids and the global id of each local vertex.
#[derive(Clone, Debug)]
pub struct HierLayer {
    graph: FixedDegreeGraph,
    global_ids: SharedSlice<NodeId>,
    /// Local ids sorted by their global id, for [`HierLayer::local_of`].
    by_global: Vec<NodeId>,
}

impl HierLayer {
    /// A layer whose local vertex `i` is the point `global_ids[i]`. Fails with
    /// [`Error::InvalidGraph`] when the lengths differ or a global id repeats or is [`INVALID`].
    /// The graph's own entry points are dropped.
    pub fn new(
        graph: FixedDegreeGraph,
        global_ids: impl Into<SharedSlice<NodeId>>,
    ) -> Result<Self> {
        let global_ids = global_ids.into();
        if global_ids.len() != graph.n() {
            return Err(Error::InvalidGraph(format!(
                "layer graph has {} vertices but {} global ids",
                graph.n(),
                global_ids.len()
            )));
        }
        if let Some(i) = global_ids.iter().position(|&g| g == INVALID) {
            return Err(Error::InvalidGraph(format!(
                "layer vertex {i} has the INVALID global id"
            )));
        }
        let mut by_global: Vec<NodeId> = (0..global_ids.len() as NodeId).collect();
        by_global.sort_unstable_by_key(|&l| global_ids[l as usize]);
        if let Some(w) = by_global
            .windows(2)
            .find(|w| global_ids[w[0] as usize] == global_ids[w[1] as usize])
        {
            return Err(Error::InvalidGraph(format!(
                "global id {} appears twice in a layer (local {} and {})",
                global_ids[w[0] as usize], w[0], w[1]
            )));
        }
        Ok(HierLayer {
            graph: graph.with_entry_points(Vec::new()),
            global_ids,
            by_global,
        })
    }

    /// Number of vertices in the layer.
    pub fn len(&self) -> usize {
        self.graph.n()
    }

    /// Whether the layer has no vertex.
    pub fn is_empty(&self) -> bool {
        self.graph.n() == 0
    }

    /// The layer's graph, on local ids.
    pub fn graph(&self) -> &FixedDegreeGraph {
        &self.graph
    }

    /// `global_ids()[local]` is the global id of local vertex `local`.
    pub fn global_ids(&self) -> &[NodeId] {
        &self.global_ids
    }

    /// The global id of local vertex `local`.
    pub fn global_of(&self, local: NodeId) -> Option<NodeId> {
        self.global_ids.get(local as usize).copied()
    }

    /// The local id of global point `global`, if the layer holds it (binary search).
    pub fn local_of(&self, global: NodeId) -> Option<NodeId> {
        self.by_global
            .binary_search_by_key(&global, |&l| self.global_ids[l as usize])
            .ok()
            .map(|i| self.by_global[i])
    }
}

/// A layered search graph: layer 0 on all points, smaller upper layers, top-layer entry points.
#[derive(Clone, Debug)]
pub struct HierGraph {
    base: FixedDegreeGraph,
    upper: Vec<HierLayer>,
    entry_points: Vec<NodeId>,
}

impl HierGraph {
    /// Assembles a hierarchy from layer 0 (`base`, global ids), the upper layers bottom to top
    /// and the entry points (global ids of any points; see the [module docs](self)).
    ///
    /// Checks the cheap invariants: upper layers non-empty and no larger than the layer below,
    /// their global ids in range, entry points in range. Call
    /// [`HierGraph::validate`] for the full check. The layer graphs' own entry points are dropped.
    pub fn new(
        base: FixedDegreeGraph,
        upper: Vec<HierLayer>,
        entry_points: Vec<NodeId>,
    ) -> Result<Self> {
        let n = base.n();
        let mut below = n;
        for (i, layer) in upper.iter().enumerate() {
            let l = i + 1;
            if layer.is_empty() {
                return Err(Error::InvalidGraph(format!("layer {l} is empty")));
            }
            if layer.len() > below {
                return Err(Error::InvalidGraph(format!(
                    "layer {l} has {} vertices, more than the {below} of layer {}",
                    layer.len(),
                    l - 1
                )));
            }
            if let Some(&g) = layer.global_ids().iter().find(|&&g| g as usize >= n) {
                return Err(Error::InvalidGraph(format!(
                    "layer {l} maps to global id {g}, out of range (n = {n})"
                )));
            }
            below = layer.len();
        }
        if let Some(&e) = entry_points.iter().find(|&&e| e as usize >= n) {
            return Err(Error::InvalidGraph(format!(
                "entry point {e} is out of range (n = {n})"
            )));
        }
        Ok(HierGraph {
            base: base.with_entry_points(Vec::new()),
            upper,
            entry_points,
        })
    }

    /// A single-layer hierarchy (layer 0 only) whose entry points are `base`'s.
    pub fn flat(base: FixedDegreeGraph) -> Self {
        let entry_points = base.entry_points().to_vec();
        HierGraph {
            base: base.with_entry_points(Vec::new()),
            upper: Vec::new(),
            entry_points,
        }
    }

    /// A copy whose layer 0 is in huge pages, for searches that read rows in no useful order
    /// (see [`weft_core::huge_pages`]; the small upper layers are copied as they are). `None`
    /// where [`FixedDegreeGraph::copy_to_huge_pages`] makes no copy.
    pub fn copy_to_huge_pages(&self) -> Option<HierGraph> {
        Some(HierGraph {
            base: self.base.copy_to_huge_pages()?,
            upper: self.upper.clone(),
            entry_points: self.entry_points.clone(),
        })
    }

    /// Number of points (vertices of layer 0).
    pub fn n(&self) -> usize {
        self.base.n()
    }

    /// Number of layers, layer 0 included (at least 1).
    pub fn num_layers(&self) -> usize {
        self.upper.len() + 1
    }

    /// Layer 0: every point, global ids.
    pub fn base(&self) -> &FixedDegreeGraph {
        &self.base
    }

    /// The upper layers, bottom (layer 1) to top.
    pub fn upper_layers(&self) -> &[HierLayer] {
        &self.upper
    }

    /// Upper layer `l` (`1 <= l < num_layers`).
    pub fn layer(&self, l: usize) -> Option<&HierLayer> {
        l.checked_sub(1).and_then(|i| self.upper.get(i))
    }

    /// The graph of layer `l` (local ids; global ids for layer 0).
    pub fn layer_graph(&self, l: usize) -> Option<&FixedDegreeGraph> {
        if l == 0 {
            Some(&self.base)
        } else {
            self.layer(l).map(HierLayer::graph)
        }
    }

    /// Number of vertices of layer `l` (0 when there is no such layer).
    pub fn layer_len(&self, l: usize) -> usize {
        self.layer_graph(l).map_or(0, FixedDegreeGraph::n)
    }

    /// The global id of vertex `local` of layer `l` (identity on layer 0).
    pub fn global_id(&self, l: usize, local: NodeId) -> Option<NodeId> {
        if l == 0 {
            ((local as usize) < self.n()).then_some(local)
        } else {
            self.layer(l)?.global_of(local)
        }
    }

    /// The local id in layer `l` of global point `global`, if the layer holds it (identity on
    /// layer 0).
    pub fn local_id(&self, l: usize, global: NodeId) -> Option<NodeId> {
        if l == 0 {
            ((global as usize) < self.n()).then_some(global)
        } else {
            self.layer(l)?.local_of(global)
        }
    }

    /// The entry points: global ids of the points where a search of layer 0 starts.
    pub fn entry_points(&self) -> &[NodeId] {
        &self.entry_points
    }

    /// Full check: every layer graph valid, every upper layer a subset of the layer below (so
    /// descending always succeeds), entry points in range.
    pub fn validate(&self) -> Result<()> {
        self.base.validate().map_err(|e| in_layer(0, e))?;
        for (i, layer) in self.upper.iter().enumerate() {
            let l = i + 1;
            layer.graph.validate().map_err(|e| in_layer(l, e))?;
            if layer.len() > self.layer_len(l - 1) {
                return Err(Error::InvalidGraph(format!(
                    "layer {l} is larger than layer {}",
                    l - 1
                )));
            }
            for (local, &g) in layer.global_ids.iter().enumerate() {
                if self.local_id(l - 1, g).is_none() {
                    return Err(Error::InvalidGraph(format!(
                        "layer {l} vertex {local} (global {g}) is not in layer {}",
                        l - 1
                    )));
                }
            }
        }
        if let Some(&e) = self.entry_points.iter().find(|&&e| e as usize >= self.n()) {
            return Err(Error::InvalidGraph(format!(
                "entry point {e} is out of range (n = {})",
                self.n()
            )));
        }
        Ok(())
    }
}

fn in_layer(l: usize, e: Error) -> Error {
    match e {
        Error::InvalidGraph(msg) => Error::InvalidGraph(format!("layer {l}: {msg}")),
        other => other,
    }
}

impl GraphView for HierGraph {
    fn num_nodes(&self) -> usize {
        self.base.n()
    }
    fn max_degree(&self) -> usize {
        self.base.degree()
    }
    fn neighbors(&self, v: NodeId) -> &[NodeId] {
        self.base.neighbors(v)
    }
    fn entry_points(&self) -> &[NodeId] {
        &self.entry_points
    }
}
