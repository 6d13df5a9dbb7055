//! [`AnyDataset`]: a dataset of whichever element type a file holds.

use std::any::Any;

use half::f16;
use rayon::prelude::*;
use weft_core::{DType, Dataset, Element, Error, Result};

/// A dataset of whichever element type a file holds.
#[derive(Clone, Debug)]
pub enum AnyDataset {
    /// 32-bit float vectors.
    F32(Dataset<f32>),
    /// 16-bit float vectors.
    F16(Dataset<f16>),
    /// Unsigned byte vectors.
    U8(Dataset<u8>),
    /// Signed byte vectors.
    I8(Dataset<i8>),
}

/// Runs `$body` with `$d` bound to the typed dataset inside `$any`.
macro_rules! with_dataset {
    ($any:expr, $d:ident => $body:expr) => {
        match $any {
            AnyDataset::F32($d) => $body,
            AnyDataset::F16($d) => $body,
            AnyDataset::U8($d) => $body,
            AnyDataset::I8($d) => $body,
        }
    };
}

impl AnyDataset {
    /// Wraps a typed dataset.
    pub fn from_typed<T: Element>(data: Dataset<T>) -> Self {
        let boxed: Box<dyn Any> = Box::new(data);
        let boxed = match boxed.downcast::<Dataset<f32>>() {
            Ok(d) => return AnyDataset::F32(*d),
            Err(b) => b,
        };
        let boxed = match boxed.downcast::<Dataset<f16>>() {
            Ok(d) => return AnyDataset::F16(*d),
            Err(b) => b,
        };
        let boxed = match boxed.downcast::<Dataset<u8>>() {
            Ok(d) => return AnyDataset::U8(*d),
            Err(b) => b,
        };
        match boxed.downcast::<Dataset<i8>>() {
            Ok(d) => AnyDataset::I8(*d),
            Err(_) => unreachable!("Element is sealed to f32, f16, u8 and i8"),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            AnyDataset::F32(_) => DType::F32,
            AnyDataset::F16(_) => DType::F16,
            AnyDataset::U8(_) => DType::U8,
            AnyDataset::I8(_) => DType::I8,
        }
    }

    /// Number of vectors.
    pub fn rows(&self) -> usize {
        with_dataset!(self, d => d.rows())
    }

    /// Elements per vector.
    pub fn dim(&self) -> usize {
        with_dataset!(self, d => d.dim())
    }

    /// Whether the storage borrows a memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        with_dataset!(self, d => d.is_mapped())
    }

    /// The typed dataset; fails when the element type is not `T` (no silent conversion: use
    /// [`AnyDataset::into_f32`] to convert).
    pub fn into_typed<T: Element>(self) -> Result<Dataset<T>> {
        let found = self.dtype();
        let boxed: Box<dyn Any> = with_dataset!(self, d => Box::new(d));
        boxed.downcast::<Dataset<T>>().map(|d| *d).map_err(|_| {
            Error::InvalidInput(format!(
                "the dataset holds {found} vectors but {} vectors were requested \
                 (use into_f32 to convert explicitly)",
                T::DTYPE
            ))
        })
    }

    /// The typed dataset by reference; fails when the element type is not `T`.
    pub fn as_typed<T: Element>(&self) -> Result<&Dataset<T>> {
        let any: &dyn Any = with_dataset!(self, d => d);
        any.downcast_ref::<Dataset<T>>().ok_or_else(|| {
            Error::InvalidInput(format!(
                "the dataset holds {} vectors but {} vectors were requested",
                self.dtype(),
                T::DTYPE
            ))
        })
    }

    /// Converts to `f32` vectors (no copy when already `f32`). Integer and `f16` values convert
    /// exactly.
    pub fn into_f32(self) -> Dataset<f32> {
        match self {
            AnyDataset::F32(d) => d,
            other => other.to_f32(),
        }
    }

    /// A converted `f32` copy (a cheap shared clone when already `f32`).
    pub fn to_f32(&self) -> Dataset<f32> {
        fn convert<T: Element>(d: &Dataset<T>) -> Dataset<f32> {
            let values: Vec<f32> = d.as_slice().par_iter().map(|v| v.to_f32()).collect();
            Dataset::from_vec(values, d.rows(), d.dim()).expect("same shape as the source")
        }
        match self {
            AnyDataset::F32(d) => d.clone(),
            AnyDataset::F16(d) => convert(d),
            AnyDataset::U8(d) => convert(d),
            AnyDataset::I8(d) => convert(d),
        }
    }
}

impl<T: Element> From<Dataset<T>> for AnyDataset {
    fn from(data: Dataset<T>) -> Self {
        AnyDataset::from_typed(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_round_trip_and_conversion() {
        let d = Dataset::from_vec(vec![1u8, 2, 3, 250], 2, 2).unwrap();
        let any = AnyDataset::from(d.clone());
        assert_eq!(any.dtype(), DType::U8);
        assert_eq!((any.rows(), any.dim()), (2, 2));
        assert_eq!(any.to_f32().as_slice(), &[1.0, 2.0, 3.0, 250.0]);
        assert!(matches!(
            any.clone().into_typed::<f32>(),
            Err(Error::InvalidInput(_))
        ));
        assert_eq!(any.as_typed::<u8>().unwrap().row(1), &[3, 250]);
        assert!(any.as_typed::<i8>().is_err());
        assert_eq!(any.into_typed::<u8>().unwrap().as_slice(), d.as_slice());
        let h = AnyDataset::from_typed(Dataset::from_vec(vec![f16::from_f32(0.5)], 1, 1).unwrap());
        assert_eq!(h.dtype(), DType::F16);
        assert_eq!(h.into_f32().as_slice(), &[0.5]);
    }
}
