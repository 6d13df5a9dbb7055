//! Distances on the CPU: [`DistanceFn`], one metric over the kernels of [`crate::simd`]
//! ([`Element::kernels`] gives the best set for the running CPU), resolved once; hot loops fetch
//! one and call it many times. [`crate::Metric::distance_fn`] and [`crate::Metric::distance`]
//! are its shortcuts.
//!
//! Conventions (smaller is closer, for every metric):
//! - L2Squared: `sum (a_i - b_i)^2`;
//! - InnerProduct: `-sum a_i b_i`;
//! - Cosine: `1 - a.b / (|a| |b|)`, and `1` when either vector is zero.

use crate::{Element, Metric};

pub use crate::simd::{
    DotNormsFn, Isa, KernelSet, detect_isa, f16_kernels, f32_kernels, i8_kernels, u8_kernels,
};

impl Metric {
    /// The distance function for element type `T`, resolved for this CPU. Fetch it once outside
    /// hot loops.
    pub fn distance_fn<T: Element>(self) -> DistanceFn<T> {
        DistanceFn::new(self)
    }

    /// One distance (resolves the kernel on every call: prefer [`Metric::distance_fn`] in loops).
    pub fn distance<T: Element>(self, a: &[T], b: &[T]) -> f32 {
        self.distance_fn::<T>().eval(a, b)
    }
}

/// A distance function for one metric and element type, resolved once and then cheap to call.
pub struct DistanceFn<T> {
    metric: Metric,
    kernels: KernelSet<T>,
}

impl<T> Clone for DistanceFn<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DistanceFn<T> {}

impl<T> std::fmt::Debug for DistanceFn<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistanceFn")
            .field("metric", &self.metric)
            .field("isa", &self.kernels.isa)
            .finish()
    }
}

impl<T: Element> DistanceFn<T> {
    /// The distance function for `metric` on this CPU.
    pub fn new(metric: Metric) -> Self {
        DistanceFn {
            metric,
            kernels: T::kernels(),
        }
    }

    /// The metric.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The instruction set in use.
    pub fn isa(&self) -> Isa {
        self.kernels.isa
    }

    /// The distance between `a` and `b` (equal lengths; smaller is closer).
    #[inline]
    pub fn eval(&self, a: &[T], b: &[T]) -> f32 {
        debug_assert_eq!(a.len(), b.len());
        match self.metric {
            Metric::L2Squared => (self.kernels.l2)(a, b),
            Metric::InnerProduct => -(self.kernels.dot)(a, b),
            Metric::Cosine => {
                let (dot, na, nb) = (self.kernels.dot_norms)(a, b);
                cosine_from_parts(dot, na, nb)
            }
        }
    }
}

impl<T: Element> DistanceFn<T> {
    /// Distances from `query` to the rows `ids` of `data`, written to `out[..ids.len()]`.
    /// Faster than calling [`DistanceFn::eval`] per id: rows go four at a time through kernels
    /// that load each query chunk once.
    pub fn eval_many(
        &self,
        query: &[T],
        data: crate::DatasetView<'_, T>,
        ids: &[crate::NodeId],
        out: &mut [f32],
    ) {
        let out = &mut out[..ids.len()];
        let mut quads = ids.chunks_exact(4);
        let mut outs = out.chunks_exact_mut(4);
        for (q4, o4) in (&mut quads).zip(&mut outs) {
            let rows = [
                data.row(q4[0] as usize),
                data.row(q4[1] as usize),
                data.row(q4[2] as usize),
                data.row(q4[3] as usize),
            ];
            o4.copy_from_slice(&self.eval_x4(query, rows));
        }
        for (&id, o) in quads.remainder().iter().zip(outs.into_remainder()) {
            *o = self.eval(query, data.row(id as usize));
        }
    }

    /// Distances from `query` to every row of `rows`, written to `out[..rows.rows()]`.
    pub fn eval_rows(&self, query: &[T], rows: crate::DatasetView<'_, T>, out: &mut [f32]) {
        let n = rows.rows();
        let out = &mut out[..n];
        let mut i = 0;
        while i + 4 <= n {
            let r = [
                rows.row(i),
                rows.row(i + 1),
                rows.row(i + 2),
                rows.row(i + 3),
            ];
            out[i..i + 4].copy_from_slice(&self.eval_x4(query, r));
            i += 4;
        }
        while i < n {
            out[i] = self.eval(query, rows.row(i));
            i += 1;
        }
    }

    /// Distances from `query` to four rows.
    #[inline]
    pub fn eval_x4(&self, query: &[T], rows: [&[T]; 4]) -> [f32; 4] {
        match self.metric {
            Metric::L2Squared => (self.kernels.l2_x4)(query, rows),
            Metric::InnerProduct => (self.kernels.dot_x4)(query, rows).map(|d| -d),
            Metric::Cosine => rows.map(|r| self.eval(query, r)),
        }
    }
}

/// Cosine distance from a dot product and two squared norms. The product of two squared norms
/// of vectors as long as [`MAX_NORM`](crate::dataset::MAX_NORM) overflows `f32`; such
/// denominators are taken in `f64` (ordinary ones give the same result as before).
#[inline]
pub fn cosine_from_parts(dot: f32, na: f32, nb: f32) -> f32 {
    let denom = (na * nb).sqrt();
    if denom > 0.0 && denom.is_finite() {
        1.0 - dot / denom
    } else if denom > 0.0 {
        let wide = (f64::from(na) * f64::from(nb)).sqrt();
        (1.0 - f64::from(dot) / wide) as f32
    } else {
        1.0
    }
}

/// Reference distance in f64, element by element: the oracle the kernels are tested against.
pub fn reference_distance<T: Element>(metric: Metric, a: &[T], b: &[T]) -> f64 {
    let (mut d2, mut dot, mut na, mut nb) = (0f64, 0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x.to_f32() as f64, y.to_f32() as f64);
        d2 += (x - y) * (x - y);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    match metric {
        Metric::L2Squared => d2,
        Metric::InnerProduct => -dot,
        Metric::Cosine => {
            let denom = (na * nb).sqrt();
            if denom > 0.0 { 1.0 - dot / denom } else { 1.0 }
        }
    }
}
