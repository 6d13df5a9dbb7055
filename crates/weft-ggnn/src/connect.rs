//! Connectivity of a GGNN hierarchy (both back ends): the hierarchy's entry points and the
//! repair that makes every layer reachable from the points a search enters it at.
//!
//! On clustered data (clusters farther apart than their own spread) GGNN's rows never leave a
//! cluster, and the paper's entry points, the `S` points of the top layer, cannot hold a point
//! of every cluster: most queries and points are then stranded. So:
//!
//! - the hierarchy's entry points (where the GGNN query searches layer 0 from, on the CPU and
//!   on the GPU) are spread over the data by farthest-first traversal
//!   ([`weft_graph::connect::spread_entry_points`]), one in every well-separated cluster;
//! - every layer `l` is repaired ([`weft_graph::connect::repair_rows`]) so that each of its
//!   vertices is reachable from [`layer_entry_points`]`(l)`: layer 0 from the hierarchy's entry
//!   points, an upper layer below the top from the points of the layer above it (a descent
//!   enters layer `l` only at points of layer `l + 1`, mapped down), the top layer from all of
//!   its points (a descent scores them all, so nothing needs repairing there).
//!
//! The repair runs on the host after the construction (for the GPU build too, on the
//! downloaded rows), the layers in parallel; it is deterministic for a seed and independent of
//! the thread count.

use rayon::prelude::*;
use weft_core::{BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, Metric, NodeId, Result};
use weft_graph::connect::{RepairReport, repair_rows, spread_entry_points};
use weft_graph::hier::{HierGraph, HierLayer};

use crate::GgnnParams;

/// The points at which a search enters layer `l` of `graph`, as local ids of layer `l` (global
/// ids on layer 0): the vertices the builder's repair makes every vertex of the layer
/// reachable from (see the [crate docs](crate)).
///
/// - layer 0: the hierarchy's entry points ([`HierGraph::entry_points`]);
/// - `1 <= l < top`: the points of layer `l + 1` (where a descent enters layer `l`);
/// - the top layer `l = top >= 1`: all of its points.
///
/// Empty for a layer the hierarchy does not have.
pub fn layer_entry_points(graph: &HierGraph, l: usize) -> Vec<NodeId> {
    let top = graph.num_layers() - 1;
    if l == 0 {
        graph.entry_points().to_vec()
    } else if l > top {
        Vec::new()
    } else if l == top {
        (0..graph.layer_len(l) as NodeId).collect()
    } else {
        let above = graph.layer(l + 1).map_or(&[][..], HierLayer::global_ids);
        above.iter().filter_map(|&g| graph.local_id(l, g)).collect()
    }
}

/// [`layer_entry_points`] of the layers under construction: `layers[l]` holds the global id of
/// each local vertex of layer `l >= 1` (layer 0 is the identity), `entries` are the hierarchy's.
fn entries_of_layers(layers: &[&[NodeId]], entries: &[NodeId]) -> Vec<Vec<NodeId>> {
    let top = layers.len() - 1;
    (0..=top)
        .map(|l| {
            if l == 0 {
                entries.to_vec()
            } else if l == top {
                (0..layers[l].len() as NodeId).collect()
            } else {
                // Local id in layer l of each global point of layer l + 1.
                let mut local: Vec<(NodeId, NodeId)> = layers[l]
                    .iter()
                    .enumerate()
                    .map(|(i, &g)| (g, i as NodeId))
                    .collect();
                local.sort_unstable();
                layers[l + 1]
                    .iter()
                    .filter_map(|&g| {
                        local
                            .binary_search_by_key(&g, |e| e.0)
                            .ok()
                            .map(|i| local[i].1)
                    })
                    .collect()
            }
        })
        .collect()
}

/// The entry points of a hierarchy over `data`: [`GgnnParams::entry_points`] points spread
/// over the data (seeded by the build's seed), or, when that is 0, the top layer's points
/// (`top_global`; the first `min(n, s)` points of a one-layer hierarchy).
pub(crate) fn hierarchy_entry_points<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &GgnnParams,
    ctx: &BuildCtx,
    top_global: Option<&[NodeId]>,
) -> Result<Vec<NodeId>> {
    if params.entry_points > 0 {
        return spread_entry_points(data, metric, params.entry_points, ctx.seed());
    }
    Ok(match top_global {
        Some(top) => top.to_vec(),
        None => (0..data.rows().min(params.segment_size) as NodeId).collect(),
    })
}

/// The nearest of `entries` (global ids) to every point of `data` in `metric`, ties to the
/// earlier entry: the seeds of the entry-seeded merges ([`GgnnParams::entry_seeded_merges`]).
/// Costs `n * entries.len()` distance evaluations, in parallel.
pub fn nearest_entries<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    entries: &[NodeId],
    ctx: &BuildCtx,
) -> Result<Vec<NodeId>> {
    if entries.iter().any(|&e| e as usize >= data.rows()) {
        return Err(Error::InvalidInput(format!(
            "an entry point is not below the number of vectors ({})",
            data.rows()
        )));
    }
    if entries.is_empty() {
        return Ok(vec![weft_core::INVALID; data.rows()]);
    }
    let dist = metric.distance_fn::<T>();
    let mut out = vec![0 as NodeId; data.rows()];
    out.par_chunks_mut(1024)
        .enumerate()
        .try_for_each(|(c, chunk)| {
            ctx.check_cancelled()?;
            for (j, slot) in chunk.iter_mut().enumerate() {
                let q = data.row(c * 1024 + j);
                let mut best = (f32::INFINITY, entries[0]);
                for &e in entries {
                    let d = dist.eval(q, data.row(e as usize));
                    if d < best.0 {
                        best = (d, e);
                    }
                }
                *slot = best.1;
            }
            Ok::<(), Error>(())
        })?;
    Ok(out)
}

/// Repairs the compacted rows of every layer (`layers[l] = (ids, global ids)`, rows of `k`
/// slots, padding at the end; the global ids of layer 0 may be empty: the identity) so that
/// each layer is reachable from its [`layer_entry_points`]; `entries` are the hierarchy's.
/// Returns the layers' reports, layer 0 first.
pub(crate) fn repair_layers<T: Element>(
    layers: &mut [(Vec<NodeId>, Vec<NodeId>)],
    k: usize,
    entries: &[NodeId],
    data: DatasetView<'_, T>,
    metric: Metric,
    ctx: &BuildCtx,
) -> Result<Vec<RepairReport>> {
    if layers.is_empty() {
        return Ok(Vec::new());
    }
    let per_layer = {
        let globals: Vec<&[NodeId]> = layers.iter().map(|l| l.1.as_slice()).collect();
        entries_of_layers(&globals, entries)
    };
    let dist = metric.distance_fn::<T>();
    let cancel = ctx.cancel_token();
    // The layers in parallel (layer 0 dominates; `repair_rows` returns after its parallel
    // traversal when nothing is unreachable).
    layers
        .par_iter_mut()
        .zip(per_layer.par_iter())
        .enumerate()
        .map(|(l, ((ids, global), e))| {
            if l == 0 || global.is_empty() {
                repair_rows(
                    ids,
                    k,
                    e,
                    |a, b| dist.eval(data.row(a as usize), data.row(b as usize)),
                    cancel,
                )
            } else {
                let global: &[NodeId] = global;
                repair_rows(
                    ids,
                    k,
                    e,
                    |a, b| {
                        dist.eval(
                            data.row(global[a as usize] as usize),
                            data.row(global[b as usize] as usize),
                        )
                    },
                    cancel,
                )
            }
        })
        .collect()
}

/// The sum of the layers' reports (`passes`: the most any layer ran).
pub(crate) fn total(reports: &[RepairReport]) -> RepairReport {
    let mut t = RepairReport::default();
    for r in reports {
        t.unreachable_before += r.unreachable_before;
        t.local_links += r.local_links;
        t.bridges += r.bridges;
        t.replaced += r.replaced;
        t.passes = t.passes.max(r.passes);
        t.unreachable_after += r.unreachable_after;
    }
    t
}

/// Gives a hierarchy built without the repair (or stored by an older version, entered from its
/// top layer) the entry points and the connectivity the builder gives it now: the hierarchy's
/// entry points become [`GgnnParams::entry_points`] points spread over `data` (kept when that
/// is 0), and, when [`GgnnParams::repair`] is on, every layer is repaired to be reachable from
/// its [`layer_entry_points`]. Only `entry_points` and `repair` of `params` are used; `data`
/// and `metric` are those the hierarchy was built with (the seed of `ctx` seeds the spread).
///
/// Returns the new hierarchy and what the repair did, summed over the layers. Fails with
/// `Error::DimensionMismatch` when `data` has another number of rows, `Error::InvalidGraph` on
/// an out-of-range id and `Error::Cancelled` when `ctx` is cancelled.
pub fn connect_hierarchy<T: Element>(
    graph: &HierGraph,
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &GgnnParams,
    ctx: &BuildCtx,
) -> Result<(HierGraph, RepairReport)> {
    if data.rows() != graph.n() {
        return Err(Error::dim_mismatch(
            "rows of the hierarchy's data",
            graph.n(),
            data.rows(),
        ));
    }
    let entries = if params.entry_points > 0 {
        spread_entry_points(data, metric, params.entry_points, ctx.seed())?
    } else {
        graph.entry_points().to_vec()
    };
    let degree = graph.base().degree();
    let mut layers: Vec<(Vec<NodeId>, Vec<NodeId>)> = Vec::with_capacity(graph.num_layers());
    layers.push((graph.base().ids().to_vec(), Vec::new()));
    for layer in graph.upper_layers() {
        if layer.graph().degree() != degree {
            // Every layer of a GGNN hierarchy has the builder's degree.
            return Err(Error::InvalidGraph(format!(
                "an upper layer has degree {}, layer 0 {degree}",
                layer.graph().degree()
            )));
        }
        layers.push((layer.graph().ids().to_vec(), layer.global_ids().to_vec()));
    }
    let reports = if params.repair {
        repair_layers(&mut layers, degree, &entries, data, metric, ctx)?
    } else {
        Vec::new()
    };
    let mut it = layers.into_iter();
    let (base_ids, _) = it.next().expect("layer 0");
    let base = FixedDegreeGraph::new(graph.n(), degree, base_ids)?;
    let mut upper = Vec::new();
    for (ids, global) in it {
        let g = FixedDegreeGraph::new(global.len(), degree, ids)?;
        upper.push(HierLayer::new(g, global)?);
    }
    Ok((HierGraph::new(base, upper, entries)?, total(&reports)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_of_the_layers_under_construction() {
        // Layer 1 holds global points 7, 3, 5; layer 2 holds 5 and 7 (local 2 and 0 of layer 1).
        let layers: [&[NodeId]; 3] = [&[], &[7, 3, 5], &[5, 7]];
        let e = entries_of_layers(&layers, &[1, 2]);
        assert_eq!(e, vec![vec![1, 2], vec![2, 0], vec![0, 1]]);
    }

    #[test]
    fn nearest_entries_ties_go_to_the_earlier_entry() {
        // Points on a line at 0, 1, 2, 3, 4; entries 4, 0, 2 (in that order).
        let data: Vec<f32> = (0..5).map(|x| x as f32).collect();
        let view = DatasetView::new(&data, 5, 1).unwrap();
        let ctx = BuildCtx::new(0);
        let near = nearest_entries(view, Metric::L2Squared, &[4, 0, 2], &ctx).unwrap();
        // Point 1 is as near to 0 as to 2 (0 comes first in the list), 3 to 4 and 2 (4 first).
        assert_eq!(near, vec![0, 0, 2, 4, 4]);
        let none = nearest_entries(view, Metric::L2Squared, &[], &ctx).unwrap();
        assert_eq!(none, vec![weft_core::INVALID; 5]);
        assert!(matches!(
            nearest_entries(view, Metric::L2Squared, &[5], &ctx),
            Err(Error::InvalidInput(_))
        ));
    }
}
