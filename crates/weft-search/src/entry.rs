//! Search entry points.

use rayon::prelude::*;
use weft_core::rng::SplitMix64;
use weft_core::{DatasetView, Element, Error, Metric, NodeId, Result};

/// An approximate medoid of `data`: the point closest (in squared L2, whatever the search metric)
/// to the mean of a seeded sample of `sample` rows (all rows when `sample >= rows` or
/// `sample == 0`).
///
/// Deterministic for a given `seed`, whatever the thread count: the mean is summed in row order in
/// `f64` and ties between equally close points go to the lowest id. Costs `sample * dim` additions
/// and `rows` distance evaluations. Fails with [`Error::InvalidInput`] on an empty set.
pub fn medoid<T: Element>(data: DatasetView<'_, T>, sample: usize, seed: u64) -> Result<NodeId> {
    let n = data.rows();
    if n == 0 {
        return Err(Error::InvalidInput(
            "cannot pick a medoid of an empty set".into(),
        ));
    }
    let dim = data.dim();
    let mut mean = vec![0f64; dim];
    let mut add = |row: &[T]| {
        for (m, x) in mean.iter_mut().zip(row) {
            *m += x.to_f32() as f64;
        }
    };
    let m = if sample == 0 || sample >= n {
        for i in 0..n {
            add(data.row(i));
        }
        n
    } else {
        let mut rng = SplitMix64::new(weft_core::rng::hash3(seed, 0x6d65_646f, 0));
        for _ in 0..sample {
            add(data.row(rng.below(n as u64) as usize));
        }
        sample
    };
    let center: Vec<T> = mean
        .iter()
        .map(|&s| T::from_f32((s / m as f64) as f32))
        .collect();
    let dist = Metric::L2Squared.distance_fn::<T>();
    let best = (0..n)
        .into_par_iter()
        .map(|i| (dist.eval(data.row(i), &center), i))
        .reduce(
            || (f32::INFINITY, usize::MAX),
            |a, b| {
                // NaN-free: the data is finite; order by (distance, id) so the result does not
                // depend on how rayon splits the range.
                if b.0 < a.0 || (b.0 == a.0 && b.1 < a.1) {
                    b
                } else {
                    a
                }
            },
        );
    Ok(if best.1 == usize::MAX {
        0
    } else {
        best.1 as NodeId
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medoid_of_a_line_is_the_middle() {
        let data: Vec<f32> = (0..101).map(|i| i as f32).collect();
        let view = DatasetView::new(&data, 101, 1).unwrap();
        assert_eq!(medoid(view, 0, 1).unwrap(), 50);
        let approx = medoid(view, 40, 3).unwrap();
        assert!((30..=70).contains(&approx));
        assert_eq!(approx, medoid(view, 40, 3).unwrap());
    }

    #[test]
    fn medoid_rejects_empty_data() {
        let data: Vec<u8> = Vec::new();
        let view = DatasetView::new(&data, 0, 4).unwrap();
        assert!(matches!(medoid(view, 10, 0), Err(Error::InvalidInput(_))));
    }
}
