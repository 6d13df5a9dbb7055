//! Helpers shared by the GGNN integration tests.
#![allow(dead_code)]

use weft_core::{GraphView, NodeId};

/// How many of vertex `v`'s 10 true nearest neighbours (`truth_row`, itself excluded) are among
/// the first 10 stored neighbours of `v` in `g`.
pub fn hits_at_10<G: GraphView + ?Sized>(g: &G, v: usize, truth_row: &[NodeId]) -> usize {
    let t: Vec<NodeId> = truth_row
        .iter()
        .copied()
        .filter(|&u| u as usize != v)
        .take(10)
        .collect();
    let nb = g.neighbors(v as NodeId);
    let nb = &nb[..nb.len().min(10)];
    t.iter().filter(|x| nb.contains(x)).count()
}
