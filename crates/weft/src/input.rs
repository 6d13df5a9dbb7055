//! What the facade takes as vectors, for builds and searches alike.
//!
//! - [`Vectors`]: vectors of one element type (`f32`, `f16`, `u8`, `i8`): a [`DatasetView`], a
//!   [`Dataset`] (owned or borrowed), a 2-D `ndarray` array (an [`ArrayView2`](ndarray::ArrayView2),
//!   an [`Array2`](ndarray::Array2) or a reference to one, any memory layout), or a flat
//!   row-major slice with its dimension, `(&[T], dim)`. [`Index::search`](crate::Index::search),
//!   [`Index::search_into`](crate::Index::search_into) and
//!   [`Index::search_into_buffers`](crate::Index::search_into_buffers) take any of them as the
//!   queries.
//! - [`IndexData`]: what a build takes: any [`Vectors`], or an [`AnyDataset`] (as
//!   [`weft_io::read_any`] returns).
//!
//! Borrowed vectors whose rows are contiguous in memory are read in place; other layouts are
//! copied once into a contiguous buffer. A build keeps its vectors, so it copies borrowed ones;
//! owned ones (a [`Dataset`], an [`AnyDataset`], an [`Array2`](ndarray::Array2) in row-major order)
//! move into the index without a copy.
//!
//! ```
//! use weft::ndarray::Array2;
//! use weft::{Dataset, Vectors};
//! # fn main() -> weft::Result<()> {
//! let flat = vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
//! let array = Array2::from_shape_vec((3, 2), flat.clone()).unwrap();
//! let dataset = Dataset::from_vec(flat.clone(), 3, 2)?;
//! // Three spellings of the same 3 x 2 vectors.
//! assert_eq!((&flat[..], 2).into_dataset()?.as_slice(), dataset.as_slice());
//! assert_eq!(array.view().into_dataset()?.as_slice(), dataset.as_slice());
//! assert_eq!(dataset.view().into_dataset()?.as_slice(), &flat[..]);
//! // A slice that is not whole rows of the dimension is a typed error.
//! assert!(matches!(
//!     (&flat[..5], 2).into_dataset(),
//!     Err(weft::Error::DimensionMismatch { .. })
//! ));
//! # Ok(()) }
//! ```

use ndarray::{ArrayBase, Data, Ix2};
use weft_core::{Dataset, DatasetView, Element, Error, Result};
use weft_io::AnyDataset;

/// Vectors of one element type, row-major: what a search takes as queries and a build as data.
/// Implemented for [`DatasetView`], [`Dataset`] and `&Dataset`, 2-D `ndarray` arrays (by value
/// and by reference: [`ArrayView2`](ndarray::ArrayView2), [`Array2`](ndarray::Array2),
/// [`CowArray`](ndarray::CowArray), ...), and `(&[T], dim)` / `(&Vec<T>, dim)` pairs (a flat
/// slice of whole rows of `dim` elements). See the [module documentation](self).
pub trait Vectors {
    /// The element type: `f32`, `half::f16`, `u8` or `i8`.
    type Elem: Element;

    /// Calls `f` with the vectors as a [`DatasetView`]: borrowed when the rows are contiguous in
    /// memory, else a contiguous copy. Malformed input (a zero dimension, a slice that is not
    /// whole rows) is an error before `f` runs.
    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, Self::Elem>) -> Result<R>) -> Result<R>;

    /// The vectors as an owned [`Dataset`]: moved when they are owned and row-major, shared when
    /// a `&Dataset` (its storage is reference-counted), else copied.
    fn into_dataset(self) -> Result<Dataset<Self::Elem>>;
}

impl<T: Element> Vectors for DatasetView<'_, T> {
    type Elem = T;

    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, T>) -> Result<R>) -> Result<R> {
        f(self)
    }

    fn into_dataset(self) -> Result<Dataset<T>> {
        Ok(self.to_dataset())
    }
}

impl<T: Element> Vectors for Dataset<T> {
    type Elem = T;

    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, T>) -> Result<R>) -> Result<R> {
        f(self.view())
    }

    fn into_dataset(self) -> Result<Dataset<T>> {
        Ok(self)
    }
}

impl<T: Element> Vectors for &Dataset<T> {
    type Elem = T;

    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, T>) -> Result<R>) -> Result<R> {
        f(self.view())
    }

    fn into_dataset(self) -> Result<Dataset<T>> {
        Ok(self.clone())
    }
}

impl<S> Vectors for ArrayBase<S, Ix2>
where
    S: Data,
    S::Elem: Element,
{
    type Elem = S::Elem;

    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, S::Elem>) -> Result<R>) -> Result<R> {
        array_with_view(&self, f)
    }

    fn into_dataset(self) -> Result<Dataset<S::Elem>> {
        let (rows, dim) = self.dim();
        let owned = if self.is_standard_layout() {
            // Moves an owned array; copies a view.
            self.into_owned()
        } else {
            self.as_standard_layout().into_owned()
        };
        // Row-major and contiguous: the elements are `len` consecutive ones from `offset` (not 0
        // when the array was sliced in place).
        let (mut elements, offset) = owned.into_raw_vec_and_offset();
        let (offset, len) = (offset.unwrap_or(0), rows * dim);
        if offset + len > elements.len() {
            return Err(Error::InvalidInput(format!(
                "an array of {rows} x {dim} elements holds only {} after offset {offset}",
                elements.len()
            )));
        }
        elements.truncate(offset + len);
        elements.drain(..offset);
        Dataset::from_vec(elements, rows, dim)
    }
}

impl<S> Vectors for &ArrayBase<S, Ix2>
where
    S: Data,
    S::Elem: Element,
{
    type Elem = S::Elem;

    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, S::Elem>) -> Result<R>) -> Result<R> {
        array_with_view(self, f)
    }

    fn into_dataset(self) -> Result<Dataset<S::Elem>> {
        self.view().into_dataset()
    }
}

/// `f` on a view of `a`: in place when its rows are contiguous, else on a row-major copy.
fn array_with_view<S, R>(
    a: &ArrayBase<S, Ix2>,
    f: impl FnOnce(DatasetView<'_, S::Elem>) -> Result<R>,
) -> Result<R>
where
    S: Data,
    S::Elem: Element,
{
    match DatasetView::try_from(a.view()) {
        Ok(view) => f(view),
        Err(_) => {
            let copy = a.as_standard_layout();
            f(DatasetView::try_from(copy.view())?)
        }
    }
}

impl<T: Element> Vectors for (&[T], usize) {
    type Elem = T;

    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, T>) -> Result<R>) -> Result<R> {
        f(flat_view(self.0, self.1)?)
    }

    fn into_dataset(self) -> Result<Dataset<T>> {
        Ok(flat_view(self.0, self.1)?.to_dataset())
    }
}

impl<T: Element> Vectors for (&Vec<T>, usize) {
    type Elem = T;

    fn with_view<R>(self, f: impl FnOnce(DatasetView<'_, T>) -> Result<R>) -> Result<R> {
        (self.0.as_slice(), self.1).with_view(f)
    }

    fn into_dataset(self) -> Result<Dataset<T>> {
        (self.0.as_slice(), self.1).into_dataset()
    }
}

/// `data` as rows of `dim` elements: a length that is not a multiple of `dim` is an
/// [`Error::DimensionMismatch`] (expected: the next multiple), a zero `dim` an
/// [`Error::InvalidInput`].
fn flat_view<T: Element>(data: &[T], dim: usize) -> Result<DatasetView<'_, T>> {
    if dim > 0 && !data.len().is_multiple_of(dim) {
        return Err(Error::dim_mismatch(
            format!(
                "the length of a flat slice of rows of dimension {dim} (whole rows: a multiple of {dim})"
            ),
            data.len().next_multiple_of(dim),
            data.len(),
        ));
    }
    DatasetView::from_flat(data, dim)
}

/// What a build takes: any [`Vectors`] (borrowed ones are copied into the index, owned ones
/// moved), or an [`AnyDataset`] (moved).
pub trait IndexData {
    /// The vectors as the index will hold them.
    fn into_any_dataset(self) -> Result<AnyDataset>;
}

impl<V: Vectors> IndexData for V {
    fn into_any_dataset(self) -> Result<AnyDataset> {
        Ok(AnyDataset::from_typed(self.into_dataset()?))
    }
}

impl IndexData for AnyDataset {
    fn into_any_dataset(self) -> Result<AnyDataset> {
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Array2, ShapeBuilder, s};

    use super::*;

    fn rows(v: impl Vectors<Elem = f32>) -> Vec<Vec<f32>> {
        v.with_view(|view| Ok(view.iter().map(<[f32]>::to_vec).collect()))
            .unwrap()
    }

    #[test]
    fn every_spelling_gives_the_same_rows() {
        let flat: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let array = Array2::from_shape_vec((4, 3), flat.clone()).unwrap();
        let dataset = Dataset::from_vec(flat.clone(), 4, 3).unwrap();
        let want = rows(dataset.view());
        assert_eq!(rows(&dataset), want);
        assert_eq!(rows(array.view()), want);
        assert_eq!(rows(&array), want);
        assert_eq!(rows((&flat[..], 3)), want);
        assert_eq!(rows((&flat, 3)), want);
        // Column-major: copied, same rows.
        let mut fortran = Array2::<f32>::zeros((4, 3).f());
        fortran.assign(&array);
        assert!(!fortran.is_standard_layout());
        assert_eq!(rows(fortran.view()), want);
        assert_eq!(fortran.into_dataset().unwrap().as_slice(), &flat[..]);
        assert_eq!(array.clone().into_dataset().unwrap().as_slice(), &flat[..]);
    }

    #[test]
    fn sliced_and_strided_arrays() {
        let array = Array2::from_shape_fn((5, 4), |(i, j)| (i * 4 + j) as f32);
        // Rows 1..4 in place (an offset into the buffer), moved.
        let tail = array.clone().slice_move(s![1..4, ..]);
        assert_eq!(
            tail.clone().into_dataset().unwrap().as_slice(),
            &(4..16).map(|i| i as f32).collect::<Vec<_>>()[..]
        );
        // Every other column: rows not contiguous, copied.
        let cols = array.slice(s![.., ..;2]);
        let got = rows(cols);
        assert_eq!(got[1], vec![4.0, 6.0]);
        assert_eq!(cols.into_dataset().unwrap().row(4), &[16.0, 18.0]);
    }

    #[test]
    fn malformed_slices_are_typed_errors() {
        let flat = [1.0f32; 7];
        assert!(matches!(
            (&flat[..], 2).into_dataset(),
            Err(Error::DimensionMismatch {
                expected: 8,
                found: 7,
                ..
            })
        ));
        assert!(matches!(
            (&flat[..], 0).with_view(|_| Ok(())),
            Err(Error::InvalidInput(_))
        ));
    }
}
