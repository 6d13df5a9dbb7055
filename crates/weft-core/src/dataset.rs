//! Row-major vector sets: borrowed ([`DatasetView`]) and owned ([`Dataset`]).

use std::ops::Range;

use ndarray::{ArrayView2, ShapeBuilder};
use rayon::prelude::*;

use crate::buffer::SharedSlice;
use crate::{DType, Element, Error, Result};

/// Bytes of data that [`DatasetView::check_finite`] tests as one parallel task (whole rows; at
/// least one row).
const FINITE_BLOCK_BYTES: usize = 64 << 10;

/// The largest Euclidean norm an `f32` vector may have: 9.2e18, just under `sqrt(f32::MAX / 4)`
/// (about 9.22e18).
///
/// Below it every distance of two such vectors stays finite in `f32`, whatever the metric and
/// the order of summation: `|x.y| <= |x| |y| <= f32::MAX / 4`, `|x - y|^2 <= 4 max(|x|, |y|)^2
/// <= f32::MAX`, and every partial sum is bounded by the same terms. Larger finite values (3e38
/// is a finite `f32`) would overflow to infinity, or to NaN where an inner product adds
/// `+inf` and `-inf`. The rule, one for every builder and search: [`DatasetView::check_finite`]
/// refuses such rows with [`Error::TooLarge`]. Integer and `f16` data can never reach it.
pub const MAX_NORM: f64 = 9.2e18;

/// Why [`DatasetView::check_finite`] refuses a row.
enum Unusable {
    /// (row, column) of a NaN or infinity.
    NonFinite(usize, usize),
    /// (row, norm) of an `f32` row longer than [`MAX_NORM`].
    TooLarge(usize, f64),
}

/// A borrowed, row-major set of `rows` vectors of dimension `dim`; row `i` starts at element
/// `i * stride` (`stride >= dim`).
pub struct DatasetView<'a, T> {
    data: &'a [T],
    rows: usize,
    dim: usize,
    stride: usize,
}

impl<T> Clone for DatasetView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DatasetView<'_, T> {}

impl<T: Element> std::fmt::Debug for DatasetView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetView")
            .field("dtype", &T::DTYPE)
            .field("rows", &self.rows)
            .field("dim", &self.dim)
            .field("stride", &self.stride)
            .finish()
    }
}

impl<'a, T: Element> DatasetView<'a, T> {
    /// A view of `data` as `rows` contiguous rows of `dim` elements.
    pub fn new(data: &'a [T], rows: usize, dim: usize) -> Result<Self> {
        Self::with_stride(data, rows, dim, dim)
    }

    /// A view of `data` as rows of `dim` elements; the row count is `data.len() / dim`.
    pub fn from_flat(data: &'a [T], dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(Error::InvalidInput(
                "vector dimension must be at least 1".into(),
            ));
        }
        if !data.len().is_multiple_of(dim) {
            return Err(Error::InvalidInput(format!(
                "{} elements are not a whole number of rows of dimension {dim}",
                data.len()
            )));
        }
        Self::new(data, data.len() / dim, dim)
    }

    /// A view whose rows start `stride` elements apart.
    pub fn with_stride(data: &'a [T], rows: usize, dim: usize, stride: usize) -> Result<Self> {
        if dim == 0 {
            return Err(Error::InvalidInput(
                "vector dimension must be at least 1".into(),
            ));
        }
        if stride < dim {
            return Err(Error::InvalidInput(format!(
                "row stride {stride} is below the dimension {dim}"
            )));
        }
        let need = if rows == 0 {
            0
        } else {
            (rows - 1) * stride + dim
        };
        if data.len() < need {
            return Err(Error::InvalidInput(format!(
                "{rows} rows of dimension {dim} (stride {stride}) need {need} elements, got {}",
                data.len()
            )));
        }
        Ok(DatasetView {
            data,
            rows,
            dim,
            stride,
        })
    }

    /// Number of vectors.
    #[inline]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Whether there are no vectors.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Elements per vector.
    #[inline]
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Elements between the starts of consecutive rows.
    #[inline]
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Vector `i` (panics when `i >= rows`, like slice indexing).
    #[inline]
    pub fn row(&self, i: usize) -> &'a [T] {
        let start = i * self.stride;
        &self.data[start..start + self.dim]
    }

    /// The rows in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a [T]> + 'a {
        let this = *self;
        (0..self.rows).map(move |i| this.row(i))
    }

    /// The rows in `range` as a view.
    pub fn slice_rows(&self, range: Range<usize>) -> Result<Self> {
        if range.start > range.end || range.end > self.rows {
            return Err(Error::InvalidInput(format!(
                "row range {range:?} is outside 0..{}",
                self.rows
            )));
        }
        let start = range.start * self.stride;
        Ok(DatasetView {
            data: &self.data[start.min(self.data.len())..],
            rows: range.len(),
            dim: self.dim,
            stride: self.stride,
        })
    }

    /// The underlying elements when rows are contiguous (`stride == dim`).
    pub fn as_contiguous(&self) -> Option<&'a [T]> {
        (self.stride == self.dim).then(|| &self.data[..self.rows * self.dim])
    }

    /// Fails with [`Error::NonFinite`] naming the first NaN or infinite value (the lowest row,
    /// then the lowest column), or with [`Error::TooLarge`] naming the first `f32` row whose
    /// norm exceeds [`MAX_NORM`] (distances involving it could overflow), whichever row comes
    /// first. Integer views pass without a scan; float views are tested in blocks of whole rows
    /// of about 64 KiB on rayon's pool (or the installed one), and only the lowest failing block
    /// is searched for the exact position. The norm is only computed (in `f64`) for blocks whose
    /// largest magnitude could reach the limit, so ordinary data costs one pass of comparisons.
    pub fn check_finite(&self) -> Result<()> {
        self.check_rows(true)
    }

    /// Fails with [`Error::NonFinite`] naming the first NaN or infinite value, like
    /// [`DatasetView::check_finite`] but without its norm limit: for readers, which return any
    /// finite value as stored (the builders and searches refuse rows beyond [`MAX_NORM`]).
    pub fn check_no_nan_or_inf(&self) -> Result<()> {
        self.check_rows(false)
    }

    /// [`DatasetView::check_finite`], with the norm limit when `norms`.
    fn check_rows(&self, norms: bool) -> Result<()> {
        if matches!(T::DTYPE, DType::U8 | DType::I8) || self.rows == 0 {
            return Ok(());
        }
        let row_bytes = self.dim * std::mem::size_of::<T>();
        // Views have dim >= 1; `max(1)` keeps the division defined regardless.
        let block_rows = (FINITE_BLOCK_BYTES / row_bytes.max(1)).max(1);
        let blocks = self.rows.div_ceil(block_rows);
        let first_bad = |b: usize| {
            let rows = b * block_rows..((b + 1) * block_rows).min(self.rows);
            self.first_unusable(rows, norms)
        };
        let bad = if blocks == 1 {
            first_bad(0)
        } else {
            (0..blocks).into_par_iter().find_map_first(first_bad)
        };
        match bad {
            None => Ok(()),
            Some(Unusable::NonFinite(row, col)) => Err(Error::NonFinite {
                row,
                col,
                value: self.row(row)[col].to_f32(),
            }),
            Some(Unusable::TooLarge(row, norm)) => Err(Error::TooLarge {
                row,
                norm,
                limit: MAX_NORM,
            }),
        }
    }

    /// The first unusable row among `rows`: a branch-free test of the whole range first (any
    /// non-finite value, the largest magnitude), the exact position only when it fails.
    fn first_unusable(&self, rows: Range<usize>, norms: bool) -> Option<Unusable> {
        let scan = |s: &[T]| {
            s.iter().fold((false, 0f32), |(bad, big), v| {
                (bad | !v.is_finite(), big.max(v.to_f32().abs()))
            })
        };
        let (failed, largest) = match self.as_contiguous() {
            Some(all) => scan(&all[rows.start * self.dim..rows.end * self.dim]),
            None => rows.clone().fold((false, 0f32), |(bad, big), r| {
                let (b, m) = scan(self.row(r));
                (bad | b, big.max(m))
            }),
        };
        // A row's norm is at most sqrt(dim) times its largest magnitude.
        let may_be_large = norms
            && T::DTYPE == DType::F32
            && f64::from(largest) * (self.dim as f64).sqrt() > MAX_NORM;
        if !failed && !may_be_large {
            return None;
        }
        rows.into_iter().find_map(|r| {
            let row = self.row(r);
            if let Some(c) = row.iter().position(|v| !v.is_finite()) {
                return Some(Unusable::NonFinite(r, c));
            }
            if !norms || T::DTYPE != DType::F32 {
                return None;
            }
            let norm = row
                .iter()
                .map(|v| f64::from(v.to_f32()).powi(2))
                .sum::<f64>()
                .sqrt();
            (norm > MAX_NORM).then_some(Unusable::TooLarge(r, norm))
        })
    }

    /// Fails unless `other` has the same dimension (`what` names the pair in the error).
    pub fn check_same_dim<U: Element>(&self, other: &DatasetView<'_, U>, what: &str) -> Result<()> {
        if self.dim != other.dim {
            return Err(Error::dim_mismatch(what, self.dim, other.dim));
        }
        Ok(())
    }

    /// The view as an `ndarray` array view (rows x dim).
    pub fn to_array_view(&self) -> ArrayView2<'a, T> {
        let len = if self.rows == 0 {
            0
        } else {
            (self.rows - 1) * self.stride + self.dim
        };
        ArrayView2::from_shape(
            (self.rows, self.dim).strides((self.stride, 1)),
            &self.data[..len],
        )
        .expect("shape checked at construction")
    }

    /// An owned copy of contiguous rows in huge pages, for workloads that read rows in no useful
    /// order (see [`crate::huge_pages`]): `None` for views with gaps between rows and wherever
    /// [`HugePageBytes::copy_of`](crate::huge_pages::HugePageBytes::copy_of) makes no copy
    /// (small data, not Linux, not enough memory).
    pub fn copy_to_huge_pages(&self) -> Option<Dataset<T>> {
        self.copy_to_huge_pages_with_min(crate::huge_pages::HUGE_PAGE_COPY_MIN_BYTES)
    }

    /// [`DatasetView::copy_to_huge_pages`] with another size threshold (tests use 0).
    pub fn copy_to_huge_pages_with_min(&self, min_bytes: usize) -> Option<Dataset<T>> {
        if self.stride != self.dim && self.rows > 1 {
            return None;
        }
        let values = &self.data[..self.rows * self.dim];
        let bytes = crate::huge_pages::HugePageBytes::copy_with_min(
            bytemuck::cast_slice(values),
            min_bytes,
        )?;
        let shared = SharedSlice::from_source(std::sync::Arc::new(bytes), 0, values.len()).ok()?;
        Dataset::from_shared(shared, self.rows, self.dim).ok()
    }

    /// An owned copy with contiguous rows.
    pub fn to_dataset(&self) -> Dataset<T> {
        let mut v = Vec::with_capacity(self.rows * self.dim);
        for row in self.iter() {
            v.extend_from_slice(row);
        }
        Dataset::from_vec(v, self.rows, self.dim).expect("shape is consistent")
    }
}

impl<'a, T: Element> TryFrom<ArrayView2<'a, T>> for DatasetView<'a, T> {
    type Error = Error;

    /// Borrows a 2-D array whose rows are contiguous (C order, or any layout with column
    /// stride 1 and a non-negative row stride). Other layouts must be copied first
    /// (`array.as_standard_layout()`).
    fn try_from(a: ArrayView2<'a, T>) -> Result<Self> {
        let (rows, dim) = a.dim();
        let strides = a.strides();
        if rows > 0 && dim > 1 && strides[1] != 1 {
            return Err(Error::InvalidInput(
                "the array's rows are not contiguous (column stride != 1); use as_standard_layout()".into(),
            ));
        }
        if strides[0] < 0 {
            return Err(Error::InvalidInput(
                "negative row strides are not supported".into(),
            ));
        }
        let stride = if rows <= 1 { dim } else { strides[0] as usize };
        let len = if rows == 0 {
            0
        } else {
            (rows - 1) * stride + dim
        };
        // SAFETY: the array view guarantees that every element reachable through its shape and
        // strides lies in one allocation starting at `as_ptr()`; with column stride 1 and a
        // non-negative row stride those elements are exactly `[ptr, ptr + len)` minus gaps,
        // and the lifetime `'a` is the array view's.
        let data = unsafe { std::slice::from_raw_parts(a.as_ptr(), len) };
        DatasetView::with_stride(data, rows, dim, stride.max(dim))
    }
}

/// An owned, contiguous, row-major set of vectors. The storage may be a memory-mapped file
/// (see [`SharedSlice`]).
#[derive(Clone)]
pub struct Dataset<T: Element> {
    data: SharedSlice<T>,
    rows: usize,
    dim: usize,
}

impl<T: Element> std::fmt::Debug for Dataset<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("dtype", &T::DTYPE)
            .field("rows", &self.rows)
            .field("dim", &self.dim)
            .field("mapped", &self.data.is_shared())
            .finish()
    }
}

impl<T: Element> Dataset<T> {
    /// Takes `rows * dim` elements in row-major order.
    pub fn from_vec(data: Vec<T>, rows: usize, dim: usize) -> Result<Self> {
        Self::from_shared(SharedSlice::from_vec(data), rows, dim)
    }

    /// Wraps shared storage of `rows * dim` elements.
    pub fn from_shared(data: SharedSlice<T>, rows: usize, dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(Error::InvalidInput(
                "vector dimension must be at least 1".into(),
            ));
        }
        let need = rows
            .checked_mul(dim)
            .ok_or_else(|| Error::InvalidInput("rows x dim overflows".into()))?;
        if data.len() != need {
            return Err(Error::InvalidInput(format!(
                "{rows} rows of dimension {dim} need {need} elements, got {}",
                data.len()
            )));
        }
        Ok(Dataset { data, rows, dim })
    }

    /// Builds `rows` vectors with `f(row, col)`.
    pub fn from_fn(rows: usize, dim: usize, mut f: impl FnMut(usize, usize) -> T) -> Result<Self> {
        let mut v = Vec::with_capacity(rows * dim);
        for r in 0..rows {
            for c in 0..dim {
                v.push(f(r, c));
            }
        }
        Self::from_vec(v, rows, dim)
    }

    /// The borrowed view.
    pub fn view(&self) -> DatasetView<'_, T> {
        DatasetView {
            data: &self.data,
            rows: self.rows,
            dim: self.dim,
            stride: self.dim,
        }
    }

    /// Number of vectors.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Elements per vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Vector `i`.
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// The elements, row-major.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// Mutable elements (copies memory-mapped storage first).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.data.to_mut()
    }

    /// Whether the storage is borrowed from a shared source (e.g. a memory-mapped file).
    pub fn is_mapped(&self) -> bool {
        self.data.is_shared()
    }

    /// The elements as an owned vector.
    pub fn into_vec(self) -> Vec<T> {
        self.data.into_vec()
    }

    /// Scales every row to unit L2 norm (zero rows stay zero); used for cosine as inner product.
    pub fn normalize_rows(&mut self)
    where
        T: Element,
    {
        let dim = self.dim;
        for row in self.as_mut_slice().chunks_exact_mut(dim) {
            let norm: f32 = row
                .iter()
                .map(|v| v.to_f32() * v.to_f32())
                .sum::<f32>()
                .sqrt();
            if norm > 0.0 {
                for v in row.iter_mut() {
                    *v = T::from_f32(v.to_f32() / norm);
                }
            }
        }
    }
}

impl<'a, T: Element> From<&'a Dataset<T>> for DatasetView<'a, T> {
    fn from(d: &'a Dataset<T>) -> Self {
        d.view()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use ndarray::Array2;

    #[test]
    fn ndarray_round_trip() {
        let a = Array2::from_shape_fn((5, 3), |(r, c)| (r * 10 + c) as f32);
        let v = DatasetView::try_from(a.view()).unwrap();
        assert_eq!(v.rows(), 5);
        assert_eq!(v.row(3), &[30.0, 31.0, 32.0]);
        assert_eq!(v.to_array_view(), a.view());
        // A column slice keeps a row stride larger than its width.
        let s = a.slice(ndarray::s![.., 0..2]);
        let v = DatasetView::try_from(s).unwrap();
        assert_eq!(v.stride(), 3);
        assert_eq!(v.row(4), &[40.0, 41.0]);
        // Fortran order is refused rather than misread.
        let f = a.t();
        assert!(DatasetView::try_from(f).is_err());
    }

    /// Issue 19's fault: finite 3e38 values gave NaN distances for inner products (and were
    /// accepted by some builders). One rule now: rows longer than `MAX_NORM` are refused by
    /// `check_finite`, and every distance between rows up to it is finite for every metric.
    #[test]
    fn rows_too_long_for_finite_distances_are_refused() {
        let d = [1.0f32, 2.0, 3e38, -3e38, 5.0, 6.0];
        let v = DatasetView::new(&d, 3, 2).unwrap();
        match v.check_finite() {
            Err(e @ Error::TooLarge { row: 1, .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("row 1") && msg.contains("scale the data down"),
                    "{msg}"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        // Readers check NaN and infinity only: the value is finite.
        v.check_no_nan_or_inf().unwrap();
        // A NaN in an earlier row is reported first.
        let d = [f32::NAN, 2.0, 3e38, -3e38];
        let v = DatasetView::new(&d, 2, 2).unwrap();
        assert!(matches!(
            v.check_finite(),
            Err(Error::NonFinite { row: 0, .. })
        ));
        // Many values each far below the limit, whose norm is not.
        let dim = 128;
        let big = vec![1e18f32; dim];
        let v = DatasetView::new(&big, 1, dim).unwrap();
        assert!(matches!(
            v.check_finite(),
            Err(Error::TooLarge { row: 0, .. })
        ));
        // In a later block too (the parallel path).
        let mut many = vec![0.5f32; 4096 * dim];
        many[3000 * dim + 7] = 3e38;
        let v = DatasetView::new(&many, 4096, dim).unwrap();
        assert!(matches!(
            v.check_finite(),
            Err(Error::TooLarge { row: 3000, .. })
        ));
    }

    #[test]
    fn rows_at_the_norm_limit_give_finite_distances() {
        let dim = 16;
        let x = (MAX_NORM / (dim as f64).sqrt()) as f32 * 0.999;
        let a: Vec<f32> = (0..dim).map(|i| if i % 2 == 0 { x } else { -x }).collect();
        let b: Vec<f32> = (0..dim).map(|i| if i < 8 { x } else { -x }).collect();
        let c: Vec<f32> = a.iter().map(|v| -v).collect();
        let rows = [a.clone(), b.clone(), c.clone()].concat();
        let v = DatasetView::new(&rows, 3, dim).unwrap();
        v.check_finite().unwrap();
        for metric in crate::Metric::ALL {
            for (p, q) in [(&a, &b), (&a, &c), (&b, &c), (&a, &a)] {
                let d = metric.distance(p, q);
                assert!(d.is_finite(), "{metric}: {d}");
            }
        }
        assert!((crate::Metric::Cosine.distance(&a, &c) - 2.0).abs() < 1e-5);
        assert!(crate::Metric::Cosine.distance(&a, &a).abs() < 1e-5);
        // Integer data never reaches the limit and is not scanned.
        let u = [255u8; 64];
        DatasetView::new(&u, 1, 64).unwrap().check_finite().unwrap();
    }

    #[test]
    fn non_finite_is_reported_with_position() {
        let d = [0.0f32, 1.0, 2.0, f32::NAN, 4.0, 5.0];
        let v = DatasetView::new(&d, 3, 2).unwrap();
        match v.check_finite() {
            Err(Error::NonFinite { row: 1, col: 1, .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    /// The (row, column, value) `check_finite` reports, or `None` when it passes.
    fn reported<T: Element>(v: &DatasetView<'_, T>) -> Option<(usize, usize, f32)> {
        match v.check_finite() {
            Ok(()) => None,
            Err(Error::NonFinite { row, col, value }) => Some((row, col, value)),
            Err(e) => panic!("unexpected error {e:?}"),
        }
    }

    /// The first non-finite position by a plain sequential scan: the reference.
    fn first_bad_reference<T: Element>(v: &DatasetView<'_, T>) -> Option<(usize, usize)> {
        v.iter().enumerate().find_map(|(r, row)| {
            let c = row.iter().position(|x| !x.is_finite())?;
            Some((r, c))
        })
    }

    #[test]
    fn non_finite_first_last_middle() {
        let (rows, dim) = (7, 5);
        let n = rows * dim;
        for (at, bad) in [
            (0, f32::NAN),
            (n - 1, f32::INFINITY),
            (17, f32::NEG_INFINITY),
        ] {
            let mut d: Vec<f32> = (0..n).map(|i| i as f32 - 3.5).collect();
            d[at] = bad;
            let v = DatasetView::new(&d, rows, dim).unwrap();
            let (r, c, value) = reported(&v).expect("non-finite value missed");
            assert_eq!((r, c), (at / dim, at % dim));
            assert!(value.is_nan() && bad.is_nan() || value == bad);
        }
    }

    #[test]
    fn several_non_finite_values_report_the_lowest() {
        let (rows, dim) = (50, 9);
        let mut d = vec![1.5f32; rows * dim];
        // Same row: the lower column wins; an earlier row wins over a lower column.
        d[30 * dim + 8] = f32::NAN;
        d[30 * dim + 2] = f32::INFINITY;
        d[31 * dim] = f32::NAN;
        d[12 * dim + 7] = f32::NEG_INFINITY;
        d[45 * dim + 1] = f32::NAN;
        let v = DatasetView::new(&d, rows, dim).unwrap();
        assert_eq!(reported(&v), Some((12, 7, f32::NEG_INFINITY)));
    }

    #[test]
    fn finite_views_pass_including_empty_and_strided() {
        let d = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(reported(&DatasetView::new(&d, 3, 2).unwrap()), None);
        assert_eq!(reported(&DatasetView::new(&d, 0, 2).unwrap()), None);
        assert_eq!(reported(&DatasetView::new(&d[..0], 0, 4).unwrap()), None);
        // Gaps between strided rows are not part of the view, even when non-finite.
        let s = [0.0f32, 1.0, f32::NAN, 3.0, 4.0, f32::INFINITY, 6.0, 7.0];
        let v = DatasetView::with_stride(&s, 3, 2, 3).unwrap();
        assert_eq!(reported(&v), None);
        let v = DatasetView::with_stride(&s, 2, 3, 3).unwrap();
        let (r, c, value) = reported(&v).unwrap();
        assert_eq!((r, c), (0, 2));
        assert!(value.is_nan());
        // A sliced view numbers rows from its own start.
        let t = [1.0f32, 2.0, 3.0, f32::INFINITY, 5.0, 6.0];
        let v = DatasetView::new(&t, 3, 2)
            .unwrap()
            .slice_rows(1..3)
            .unwrap();
        assert_eq!(reported(&v), Some((0, 1, f32::INFINITY)));
    }

    #[test]
    fn f16_infinity_and_integer_views() {
        let mut d = vec![f16::from_f32(0.25); 40];
        d[23] = f16::INFINITY;
        let v = DatasetView::new(&d, 8, 5).unwrap();
        assert_eq!(reported(&v), Some((4, 3, f32::INFINITY)));
        d[23] = f16::NAN;
        d[38] = f16::NEG_INFINITY;
        let v = DatasetView::new(&d, 8, 5).unwrap();
        let (r, c, value) = reported(&v).unwrap();
        assert_eq!((r, c), (4, 3));
        assert!(value.is_nan());
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(reported(&DatasetView::new(&bytes, 16, 16).unwrap()), None);
        let signed: Vec<i8> = (-128..=127).collect();
        assert_eq!(reported(&DatasetView::new(&signed, 32, 8).unwrap()), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(64))]
        /// Random shapes (one block to dozens), strides and bad positions: the block-parallel
        /// scan reports what a sequential scan finds first.
        #[test]
        fn check_finite_matches_a_sequential_scan(
            rows in 0usize..3000,
            dim in 1usize..40,
            pad in 0usize..5,
            bad in proptest::collection::vec((0.0f64..1.0, 0u8..3), 0..4),
        ) {
            let stride = dim + pad;
            let mut d: Vec<f32> = (0..rows * stride).map(|i| (i % 101) as f32 - 50.0).collect();
            for &(at, kind) in &bad {
                if !d.is_empty() {
                    let i = ((at * d.len() as f64) as usize).min(d.len() - 1);
                    d[i] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][kind as usize];
                }
            }
            let v = DatasetView::with_stride(&d, rows, dim, stride).unwrap();
            let got = reported(&v).map(|(r, c, _)| (r, c));
            proptest::prop_assert_eq!(got, first_bad_reference(&v));
        }
    }

    #[test]
    fn large_views_report_the_lowest_failing_block() {
        // 4 MiB of f32 in rows of 100 (about 64 blocks): bad values in late blocks only.
        let (rows, dim) = (10_486, 100);
        let mut d: Vec<f32> = (0..rows * dim).map(|i| (i % 1000) as f32).collect();
        let v = DatasetView::new(&d, rows, dim).unwrap();
        assert_eq!(reported(&v), None);
        d[(rows - 1) * dim + dim - 1] = f32::NAN;
        d[9_000 * dim + 55] = f32::INFINITY;
        d[9_000 * dim + 56] = f32::NAN;
        d[9_500 * dim] = f32::NAN;
        let v = DatasetView::new(&d, rows, dim).unwrap();
        assert_eq!(reported(&v), Some((9_000, 55, f32::INFINITY)));
        assert_eq!(first_bad_reference(&v), Some((9_000, 55)));
        // Through a strided view (every other row of the data, 50 wide) only the NaN at row
        // 9500, column 0 of the data is visible.
        let s = DatasetView::with_stride(&d, rows / 2, 50, 2 * dim).unwrap();
        let (r, c, value) = reported(&s).unwrap();
        assert_eq!((r, c), (4_750, 0));
        assert!(value.is_nan());
        assert_eq!(first_bad_reference(&s), Some((r, c)));
        // Rows larger than a block: one row per block.
        let wide = DatasetView::new(&d, rows * dim / 20_000, 20_000).unwrap();
        let (r, c, _) = reported(&wide).unwrap();
        assert_eq!(Some((r, c)), first_bad_reference(&wide));
    }

    #[test]
    fn bad_shapes_are_errors() {
        let d = [0.0f32; 5];
        assert!(DatasetView::new(&d, 2, 3).is_err());
        assert!(DatasetView::new(&d, 1, 0).is_err());
        assert!(DatasetView::from_flat(&d, 2).is_err());
        assert!(Dataset::from_vec(vec![0.0f32; 5], 2, 3).is_err());
    }
}
