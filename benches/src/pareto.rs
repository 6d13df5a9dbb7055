//! The QPS-recall Pareto frontier: the points no other point beats on both axes.

/// Indices of the Pareto-optimal points of `(recall, qps)` pairs (higher is better on both),
/// ordered by ascending recall. A point is dropped when another has recall >= and QPS >= with
/// one of them strictly greater; of exact duplicates the first is kept. Non-finite points are
/// ignored.
pub fn frontier(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    // Recall descending, then QPS descending, then index (stable first-kept duplicates).
    order.sort_by(|&a, &b| {
        points[b]
            .0
            .total_cmp(&points[a].0)
            .then(points[b].1.total_cmp(&points[a].1))
            .then(a.cmp(&b))
    });
    let mut kept = Vec::new();
    let mut best_qps = f64::NEG_INFINITY;
    for i in order {
        if points[i].1 > best_qps {
            best_qps = points[i].1;
            kept.push(i);
        }
    }
    kept.reverse();
    kept
}

/// The highest QPS among points whose recall reaches `target`, if any.
pub fn qps_at_recall(points: &[(f64, f64)], target: f64) -> Option<f64> {
    points
        .iter()
        .filter(|p| p.0 >= target && p.1.is_finite())
        .map(|p| p.1)
        .max_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominated_points_are_dropped() {
        let pts = [
            (0.5, 1000.0),
            (0.7, 800.0),
            (0.6, 700.0), // dominated by (0.7, 800)
            (0.9, 300.0),
            (0.9, 200.0), // dominated by (0.9, 300)
            (0.95, 100.0),
            (0.4, 900.0), // dominated by (0.5, 1000)
        ];
        assert_eq!(frontier(&pts), vec![0, 1, 3, 5]);
    }

    #[test]
    fn frontier_is_monotone_and_handles_edge_cases() {
        assert!(frontier(&[]).is_empty());
        assert_eq!(frontier(&[(f64::NAN, 1.0), (0.5, 2.0)]), vec![1]);
        assert_eq!(frontier(&[(0.5, 2.0), (0.5, 2.0)]), vec![0]);
        // Random clouds: every kept point is undominated and the kept ones are sorted.
        let mut s = 12345u64;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..50 {
            let pts: Vec<(f64, f64)> = (0..40).map(|_| (next(), next() * 1e4)).collect();
            let f = frontier(&pts);
            for w in f.windows(2) {
                assert!(pts[w[0]].0 <= pts[w[1]].0 && pts[w[0]].1 > pts[w[1]].1);
            }
            for (i, p) in pts.iter().enumerate() {
                let dominated = pts
                    .iter()
                    .any(|q| q.0 >= p.0 && q.1 >= p.1 && (q.0 > p.0 || q.1 > p.1));
                assert_eq!(f.contains(&i), !dominated, "point {i} {p:?}");
            }
        }
    }

    #[test]
    fn qps_at_recall_picks_the_fastest_good_enough_point() {
        let pts = [(0.8, 900.0), (0.95, 400.0), (0.97, 300.0)];
        assert_eq!(qps_at_recall(&pts, 0.95), Some(400.0));
        assert_eq!(qps_at_recall(&pts, 0.99), None);
    }
}
