//! Statistics and connectivity on hand-made and random graphs.

use proptest::prelude::*;
use weft_core::rng::SplitMix64;
use weft_core::{Error, FixedDegreeGraph, GraphView, INVALID, NodeId};
use weft_graph::stats::{
    Reachability, default_entry_points, graph_stats, reachable_from, scc_labels, scc_summary,
};

/// 0 -> 1 -> 2 -> 0 (a 3-cycle), 2 -> 3, 3 <-> 4, 5 isolated.
fn sample_graph() -> FixedDegreeGraph {
    let lists = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
    FixedDegreeGraph::from_lists(&lists, 2).unwrap()
}

#[test]
fn stats_of_a_hand_made_graph() {
    let g = sample_graph();
    let s = graph_stats(&g, None).unwrap();
    assert_eq!(s.num_nodes, 6);
    assert_eq!(s.max_degree, 2);
    assert_eq!(s.num_edges, 6);
    assert_eq!(s.out_degree_histogram, vec![1, 4, 1]);
    assert_eq!((s.out_degree.min, s.out_degree.max), (0, 2));
    assert!((s.out_degree.mean - 1.0).abs() < 1e-12);
    assert_eq!((s.in_degree.min, s.in_degree.max), (0, 2));
    assert_eq!(s.zero_in_degree, 1);
    assert_eq!(s.entry_points, vec![0]);
    assert_eq!(s.reachable, 5);
    assert!((s.reachable_fraction - 5.0 / 6.0).abs() < 1e-12);
    assert_eq!(s.scc_count, 3);
    assert_eq!(s.largest_scc, 3);

    // From vertex 3 only {3, 4} are reachable.
    let s = graph_stats(&g, Some(&[3])).unwrap();
    assert_eq!(s.reachable, 2);
    assert_eq!(s.entry_points, vec![3]);

    // Serialises, and prints.
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains("\"scc_count\":3"));
    let text = s.to_string();
    assert!(text.contains("reachable from [3]: 2 (33.33%)"), "{text}");
    assert!(
        text.contains("strongly connected components: 3 (largest 3)"),
        "{text}"
    );
}

#[test]
fn unreachable_set_and_repair() {
    let g = sample_graph();
    assert_eq!(reachable_from(&g, &[0]).unwrap(), vec![5]);
    assert_eq!(reachable_from(&g, &[3]).unwrap(), vec![0, 1, 2, 5]);
    assert_eq!(reachable_from(&g, &[]).unwrap(), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(reachable_from(&g, &[5]).unwrap(), vec![0, 1, 2, 3, 4]);

    // Repair: add 4 -> 5 and extend the search from 5.
    let mut r = Reachability::new(&g, &[0]).unwrap();
    assert!(!r.is_reachable(5));
    let mut lists: Vec<Vec<NodeId>> = (0..6).map(|v| g.neighbors(v).to_vec()).collect();
    lists[4].push(5);
    let repaired = FixedDegreeGraph::from_lists(&lists, 2).unwrap();
    assert_eq!(r.extend(&repaired, &[5]).unwrap(), 1);
    assert_eq!(r.num_reachable(), 6);
    assert!(r.unreachable().is_empty());
    assert_eq!(r.extend(&repaired, &[5]).unwrap(), 0);
    assert!(!r.is_reachable(99));
    assert_eq!(r.mask(), &[true; 6]);
    assert_eq!(
        format!("{r:?}"),
        "Reachability { num_nodes: 6, num_reachable: 6 }"
    );

    // A graph of another size is refused.
    let other = FixedDegreeGraph::from_lists(&[vec![], vec![]], 1).unwrap();
    assert!(r.extend(&other, &[0]).is_err());
}

#[test]
fn own_entry_points_are_the_default() {
    let g = sample_graph().with_entry_points(vec![3]);
    assert_eq!(default_entry_points(&g), vec![3]);
    let s = graph_stats(&g, None).unwrap();
    assert_eq!(s.reachable, 2);
    // An empty explicit list also falls back to the graph's own.
    assert_eq!(graph_stats(&g, Some(&[])).unwrap().reachable, 2);
}

#[test]
fn bad_ids_are_errors_not_panics() {
    let g = FixedDegreeGraph::new(3, 2, vec![1, 9, 0, INVALID, 0, 1]).unwrap();
    assert!(matches!(graph_stats(&g, None), Err(Error::InvalidGraph(_))));
    assert!(matches!(scc_summary(&g), Err(Error::InvalidGraph(_))));
    assert!(matches!(
        reachable_from(&g, &[0]),
        Err(Error::InvalidGraph(_))
    ));
    let ok = sample_graph();
    assert!(matches!(
        graph_stats(&ok, Some(&[6])),
        Err(Error::InvalidGraph(_))
    ));
}

#[test]
fn empty_and_edgeless_graphs() {
    let empty = FixedDegreeGraph::new(0, 4, Vec::new()).unwrap();
    let s = graph_stats(&empty, None).unwrap();
    assert_eq!(
        (s.num_nodes, s.num_edges, s.reachable, s.scc_count),
        (0, 0, 0, 0)
    );
    assert_eq!(s.reachable_fraction, 1.0);

    let edgeless = FixedDegreeGraph::new(4, 0, Vec::new()).unwrap();
    let s = graph_stats(&edgeless, None).unwrap();
    assert_eq!(s.out_degree_histogram, vec![4]);
    assert_eq!((s.reachable, s.scc_count, s.largest_scc), (1, 4, 1));
    assert_eq!(s.zero_in_degree, 4);
}

#[test]
fn long_paths_do_not_overflow_the_stack() {
    // A 300k-vertex path and the same path closed into a cycle: depth-first recursion would
    // need 300k frames.
    let n = 300_000u32;
    let path: Vec<NodeId> = (0..n)
        .map(|v| if v + 1 < n { v + 1 } else { INVALID })
        .collect();
    let g = FixedDegreeGraph::new(n as usize, 1, path.clone()).unwrap();
    assert_eq!(scc_summary(&g).unwrap(), (n as usize, 1));
    assert_eq!(graph_stats(&g, None).unwrap().reachable, n as usize);

    let mut cycle = path;
    cycle[n as usize - 1] = 0;
    let g = FixedDegreeGraph::new(n as usize, 1, cycle).unwrap();
    assert_eq!(scc_summary(&g).unwrap(), (1, n as usize));
}

/// Reachability closure by brute force (Warshall).
#[allow(clippy::needless_range_loop)]
fn closure(lists: &[Vec<NodeId>]) -> Vec<Vec<bool>> {
    let n = lists.len();
    let mut r = vec![vec![false; n]; n];
    for (v, l) in lists.iter().enumerate() {
        r[v][v] = true;
        for &u in l {
            r[v][u as usize] = true;
        }
    }
    for m in 0..n {
        for a in 0..n {
            if r[a][m] {
                for b in 0..n {
                    if r[m][b] {
                        r[a][b] = true;
                    }
                }
            }
        }
    }
    r
}

fn random_lists(n: usize, degree: usize, seed: u64) -> Vec<Vec<NodeId>> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|v| {
            let d = rng.below(degree as u64 + 1) as usize;
            let mut l: Vec<NodeId> = Vec::new();
            while l.len() < d.min(n - 1) {
                let u = rng.below(n as u64) as NodeId;
                if u as usize != v && !l.contains(&u) {
                    l.push(u);
                }
            }
            l
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn scc_and_reachability_match_brute_force(n in 1usize..40, degree in 0usize..4, seed in any::<u64>()) {
        let lists = random_lists(n, degree, seed);
        let g = FixedDegreeGraph::from_lists(&lists, degree).unwrap();
        let r = closure(&lists);

        // Components: classes of mutual reachability.
        let (labels, count) = scc_labels(&g).unwrap();
        let mut sizes = vec![0usize; count];
        for a in 0..n {
            sizes[labels[a] as usize] += 1;
            for b in 0..n {
                prop_assert_eq!(labels[a] == labels[b], r[a][b] && r[b][a]);
            }
        }
        // Reverse topological numbering: an edge never goes to a later-numbered component.
        for (v, l) in lists.iter().enumerate() {
            for &u in l {
                prop_assert!(labels[u as usize] <= labels[v]);
            }
        }
        let (c, largest) = scc_summary(&g).unwrap();
        prop_assert_eq!(c, count);
        prop_assert_eq!(largest, sizes.iter().copied().max().unwrap_or(0));

        // Reachability from vertex 0 and from two sources.
        let expect: Vec<NodeId> = (0..n as NodeId).filter(|&b| !r[0][b as usize]).collect();
        prop_assert_eq!(reachable_from(&g, &[0]).unwrap(), expect);
        let s = (n - 1) as NodeId;
        let expect: Vec<NodeId> = (0..n as NodeId)
            .filter(|&b| !r[0][b as usize] && !r[s as usize][b as usize])
            .collect();
        prop_assert_eq!(reachable_from(&g, &[0, s]).unwrap(), expect);

        // Degrees, and the reachability graph_stats measures along its depth-first search.
        let st = graph_stats(&g, None).unwrap();
        prop_assert_eq!(st.reachable, (0..n).filter(|&b| r[0][b]).count());
        let two = graph_stats(&g, Some(&[s, 0])).unwrap();
        prop_assert_eq!(two.reachable, (0..n).filter(|&b| r[0][b] || r[s as usize][b]).count());
        prop_assert_eq!((two.scc_count, two.largest_scc), (c, largest));
        let edges: usize = lists.iter().map(Vec::len).sum();
        prop_assert_eq!(st.num_edges as usize, edges);
        prop_assert_eq!(st.out_degree_histogram.iter().sum::<u64>() as usize, n);
        let mut indeg = vec![0usize; n];
        for l in &lists {
            for &u in l {
                indeg[u as usize] += 1;
            }
        }
        prop_assert_eq!(st.in_degree.max, indeg.iter().copied().max().unwrap());
        prop_assert_eq!(st.in_degree.min, indeg.iter().copied().min().unwrap());
        prop_assert_eq!(st.zero_in_degree, indeg.iter().filter(|&&d| d == 0).count());
    }
}
