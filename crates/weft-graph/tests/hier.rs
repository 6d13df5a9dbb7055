//! Hierarchical graphs: construction, lookups, validation.

use weft_core::{Error, FixedDegreeGraph, GraphView, INVALID, NodeId};
use weft_graph::hier::{HierGraph, HierLayer};
use weft_graph::stats::graph_stats;

/// Layer 0: a ring of 8 (v -> v+1, v -> v-1); layer 1: points {0, 2, 4, 6} in a ring; layer 2:
/// points {6, 2} (order matters: local 0 is global 6) linked both ways.
fn three_layers() -> HierGraph {
    let n = 8u32;
    let lists: Vec<Vec<NodeId>> = (0..n).map(|v| vec![(v + 1) % n, (v + n - 1) % n]).collect();
    let base = FixedDegreeGraph::from_lists(&lists, 2)
        .unwrap()
        .with_entry_points(vec![5]);
    let l1 = HierLayer::new(
        FixedDegreeGraph::from_lists(&[vec![1, 3], vec![2, 0], vec![3, 1], vec![0, 2]], 2).unwrap(),
        vec![0, 2, 4, 6],
    )
    .unwrap();
    let l2 = HierLayer::new(
        FixedDegreeGraph::new(2, 2, vec![1, INVALID, 0, INVALID]).unwrap(),
        vec![6, 2],
    )
    .unwrap();
    HierGraph::new(base, vec![l1, l2], vec![6]).unwrap()
}

#[test]
fn layers_and_lookups() {
    let h = three_layers();
    h.validate().unwrap();
    assert_eq!(h.n(), 8);
    assert_eq!(h.num_layers(), 3);
    assert_eq!(
        (
            h.layer_len(0),
            h.layer_len(1),
            h.layer_len(2),
            h.layer_len(3)
        ),
        (8, 4, 2, 0)
    );
    assert!(h.layer(0).is_none() && h.layer(3).is_none());
    assert_eq!(h.entry_points(), &[6]);
    // The base's own entry points were dropped.
    assert!(h.base().entry_points().is_empty());

    assert_eq!(h.global_id(2, 0), Some(6));
    assert_eq!(h.global_id(2, 1), Some(2));
    assert_eq!(h.global_id(2, 2), None);
    assert_eq!(h.local_id(2, 6), Some(0));
    assert_eq!(h.local_id(2, 4), None);
    assert_eq!(h.local_id(1, 6), Some(3));
    assert_eq!(h.local_id(0, 7), Some(7));
    assert_eq!(h.local_id(0, 8), None);
    assert_eq!(h.global_id(0, 3), Some(3));

    // Descend from the top entry point: layer 2 local 0 -> global 6 -> layer 1 local 3.
    let top_local = h.local_id(2, h.entry_points()[0]).unwrap();
    let g = h.global_id(2, top_local).unwrap();
    assert_eq!(h.local_id(1, g), Some(3));
    let l1_neighbours: Vec<NodeId> = h
        .layer_graph(1)
        .unwrap()
        .neighbors(3)
        .iter()
        .map(|&l| h.global_id(1, l).unwrap())
        .collect();
    assert_eq!(l1_neighbours, vec![0, 4]);
}

#[test]
fn graph_view_is_layer_zero() {
    let h = three_layers();
    assert_eq!(h.num_nodes(), 8);
    assert_eq!(h.max_degree(), 2);
    assert_eq!(h.neighbors(3), &[4, 2]);
    assert_eq!(GraphView::entry_points(&h), &[6]);
    let s = graph_stats(&h, None).unwrap();
    assert_eq!(s.entry_points, vec![6]);
    assert_eq!((s.reachable, s.scc_count), (8, 1));
}

#[test]
fn flat_hierarchy() {
    let base = FixedDegreeGraph::from_lists(&[vec![1], vec![0]], 1)
        .unwrap()
        .with_entry_points(vec![1]);
    let h = HierGraph::flat(base);
    assert_eq!(h.num_layers(), 1);
    assert_eq!(h.entry_points(), &[1]);
    h.validate().unwrap();
}

#[test]
fn construction_errors() {
    let g2 = || FixedDegreeGraph::new(2, 1, vec![1, 0]).unwrap();
    // Lengths differ, duplicate or INVALID global ids.
    assert!(matches!(
        HierLayer::new(g2(), vec![1]),
        Err(Error::InvalidGraph(_))
    ));
    assert!(matches!(
        HierLayer::new(g2(), vec![3, 3]),
        Err(Error::InvalidGraph(_))
    ));
    assert!(matches!(
        HierLayer::new(g2(), vec![INVALID, 3]),
        Err(Error::InvalidGraph(_))
    ));

    let base = || FixedDegreeGraph::new(4, 1, vec![1, 2, 3, 0]).unwrap();
    // Global id out of range.
    let far = HierLayer::new(g2(), vec![0, 9]).unwrap();
    assert!(HierGraph::new(base(), vec![far], vec![]).is_err());
    // Entry points may be any vertex (spread over the data, not only top-layer points), but
    // not out of range.
    let l = HierLayer::new(g2(), vec![0, 2]).unwrap();
    assert!(HierGraph::new(base(), vec![l.clone()], vec![1]).is_ok());
    assert!(HierGraph::new(base(), vec![l.clone()], vec![7]).is_err());
    assert!(HierGraph::new(base(), vec![l], vec![2]).is_ok());
    // Empty layer.
    let empty = HierLayer::new(FixedDegreeGraph::new(0, 1, vec![]).unwrap(), vec![]).unwrap();
    assert!(HierGraph::new(base(), vec![empty], vec![]).is_err());
    // A layer larger than the one below.
    let big = HierLayer::new(
        FixedDegreeGraph::new(3, 1, vec![1, 2, 0]).unwrap(),
        vec![0, 1, 2],
    )
    .unwrap();
    let small = HierLayer::new(g2(), vec![0, 1]).unwrap();
    assert!(HierGraph::new(base(), vec![small, big], vec![]).is_err());
}

#[test]
fn validate_checks_nesting_and_layer_graphs() {
    let base = || FixedDegreeGraph::new(4, 1, vec![1, 2, 3, 0]).unwrap();
    let l1 = HierLayer::new(
        FixedDegreeGraph::new(3, 1, vec![1, 2, 0]).unwrap(),
        vec![0, 1, 2],
    )
    .unwrap();
    // Layer 2 holds point 3, which layer 1 does not.
    let l2 = HierLayer::new(FixedDegreeGraph::new(2, 1, vec![1, 0]).unwrap(), vec![0, 3]).unwrap();
    let h = HierGraph::new(base(), vec![l1.clone(), l2], vec![]).unwrap();
    let err = h.validate().unwrap_err();
    assert!(err.to_string().contains("not in layer 1"), "{err}");

    // A self-loop inside an upper layer.
    let bad = HierLayer::new(FixedDegreeGraph::new(2, 1, vec![0, 0]).unwrap(), vec![0, 1]).unwrap();
    let h = HierGraph::new(base(), vec![l1, bad], vec![]).unwrap();
    let err = h.validate().unwrap_err();
    assert!(err.to_string().contains("layer 2"), "{err}");

    // A bad base.
    let h = HierGraph::new(
        FixedDegreeGraph::new(2, 1, vec![1, 5]).unwrap(),
        vec![],
        vec![],
    )
    .unwrap();
    assert!(matches!(h.validate(), Err(Error::InvalidGraph(_))));
}
