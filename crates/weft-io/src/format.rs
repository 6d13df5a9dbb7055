//! The file formats weft reads and writes, and how a format is chosen from a path.

use std::path::Path;

use serde::{Deserialize, Serialize};
use weft_core::{DType, Error, Result};

/// A vector or id file format.
///
/// | format | layout | element |
/// | --- | --- | --- |
/// | `fvecs` | per row: `i32` dim, then `dim` values (TEXMEX) | `f32` |
/// | `ivecs` | per row: `i32` dim, then `dim` values (TEXMEX) | `i32` ids |
/// | `bvecs` | per row: `i32` dim, then `dim` values (TEXMEX) | `u8` |
/// | `fbin` | `u32` rows, `u32` dim, then row-major data (big-ann-benchmarks) | `f32` |
/// | `ibin` | `u32` rows, `u32` dim, then row-major data (big-ann-benchmarks) | `u32` ids |
/// | `u8bin` | `u32` rows, `u32` dim, then row-major data (big-ann-benchmarks) | `u8` |
/// | `i8bin` | `u32` rows, `u32` dim, then row-major data (big-ann-benchmarks) | `i8` |
/// | `npy` | NumPy `.npy` v1/v2/v3, 2-D, C or Fortran order | `f32`, `f16`, `u8`, `i8` (ids: `i32`, `u32`, `i64`, `u64`) |
///
/// All integers in headers are little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// TEXMEX `.fvecs`: `f32` rows, each preceded by its dimension.
    Fvecs,
    /// TEXMEX `.ivecs`: `i32` rows (ids, ground truth), each preceded by its dimension.
    Ivecs,
    /// TEXMEX `.bvecs`: `u8` rows, each preceded by its dimension.
    Bvecs,
    /// big-ann-benchmarks `.fbin`: `f32` rows after a `(rows, dim)` header.
    Fbin,
    /// big-ann-benchmarks `.ibin`: `u32` id rows (ground truth) after a `(rows, dim)` header.
    Ibin,
    /// big-ann-benchmarks `.u8bin`: `u8` rows after a `(rows, dim)` header.
    U8bin,
    /// big-ann-benchmarks `.i8bin`: `i8` rows after a `(rows, dim)` header.
    I8bin,
    /// NumPy `.npy`: a 2-D array whose element type is recorded in the file.
    Npy,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 8] = [
        Format::Fvecs,
        Format::Ivecs,
        Format::Bvecs,
        Format::Fbin,
        Format::Ibin,
        Format::U8bin,
        Format::I8bin,
        Format::Npy,
    ];

    /// The format's name, which is also its file extension (`fvecs`, `fbin`, `npy`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Format::Fvecs => "fvecs",
            Format::Ivecs => "ivecs",
            Format::Bvecs => "bvecs",
            Format::Fbin => "fbin",
            Format::Ibin => "ibin",
            Format::U8bin => "u8bin",
            Format::I8bin => "i8bin",
            Format::Npy => "npy",
        }
    }

    /// Parses a format name or extension (case-insensitive, with or without a leading dot).
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.strip_prefix('.').unwrap_or(name).to_ascii_lowercase();
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The format named by `path`'s extension; an unknown or missing extension is an
    /// [`Error::Format`] naming the file.
    pub fn from_path(path: &Path) -> Result<Self> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        Format::from_name(ext).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            Error::format(
                path,
                format!(
                    "unknown file extension `{ext}`: expected one of {} (or name the format explicitly)",
                    names.join(", ")
                ),
            )
        })
    }

    /// `explicit` when given, else the format named by `path`'s extension.
    pub fn resolve(path: &Path, explicit: Option<Format>) -> Result<Self> {
        match explicit {
            Some(f) => Ok(f),
            None => Format::from_path(path),
        }
    }

    /// Whether rows carry their own `i32` dimension header (the TEXMEX `*vecs` family).
    pub const fn is_vecs(self) -> bool {
        matches!(self, Format::Fvecs | Format::Ivecs | Format::Bvecs)
    }

    /// Whether the file starts with a `(u32 rows, u32 dim)` header (the big-ann `*bin` family).
    pub const fn is_bin(self) -> bool {
        matches!(
            self,
            Format::Fbin | Format::Ibin | Format::U8bin | Format::I8bin
        )
    }

    /// Whether the format holds 32-bit ids rather than vectors (`ivecs`, `ibin`).
    pub const fn is_id_format(self) -> bool {
        matches!(self, Format::Ivecs | Format::Ibin)
    }

    /// The vector element type the format stores, for formats with a fixed one. `None` for
    /// id formats and for `npy`, whose element type is in its header.
    pub const fn fixed_dtype(self) -> Option<DType> {
        match self {
            Format::Fvecs | Format::Fbin => Some(DType::F32),
            Format::Bvecs | Format::U8bin => Some(DType::U8),
            Format::I8bin => Some(DType::I8),
            Format::Ivecs | Format::Ibin | Format::Npy => None,
        }
    }

    /// The element type the format stores, for formats with a fixed one (all but `npy`).
    pub const fn fixed_element(self) -> Option<StoredElement> {
        match self {
            Format::Ivecs => Some(StoredElement::I32),
            Format::Ibin => Some(StoredElement::U32),
            Format::Npy => None,
            f => match f.fixed_dtype() {
                Some(d) => Some(StoredElement::from_dtype(d)),
                None => None,
            },
        }
    }

    /// Whether vectors of `dtype` can be stored in this format.
    pub fn holds_dtype(self, dtype: DType) -> bool {
        match self {
            Format::Npy => true,
            f => f.fixed_dtype() == Some(dtype),
        }
    }

    /// The vector formats that can store `dtype` (for error messages and CLI help).
    pub fn vector_formats_for(dtype: DType) -> Vec<Format> {
        Format::ALL
            .into_iter()
            .filter(|f| !f.is_id_format() && f.holds_dtype(dtype))
            .collect()
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Format::from_name(s).ok_or_else(|| {
            Error::invalid_param(
                "format",
                format!(
                    "unknown format `{s}` (use fvecs, ivecs, bvecs, fbin, ibin, u8bin, i8bin or npy)"
                ),
            )
        })
    }
}

/// The element type stored in a file: a vector element type, or an integer id type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredElement {
    /// 32-bit float vectors.
    F32,
    /// 16-bit float vectors.
    F16,
    /// Unsigned byte vectors.
    U8,
    /// Signed byte vectors.
    I8,
    /// Signed 32-bit integers (ids in `ivecs` and `npy`).
    I32,
    /// Unsigned 32-bit integers (ids in `ibin` and `npy`).
    U32,
    /// Signed 64-bit integers (ids in `npy`).
    I64,
    /// Unsigned 64-bit integers (ids in `npy`).
    U64,
}

impl StoredElement {
    /// The stored element of vectors of `dtype`.
    pub const fn from_dtype(dtype: DType) -> Self {
        match dtype {
            DType::F32 => StoredElement::F32,
            DType::F16 => StoredElement::F16,
            DType::U8 => StoredElement::U8,
            DType::I8 => StoredElement::I8,
        }
    }

    /// The vector element type, or `None` for integer id types.
    pub const fn dtype(self) -> Option<DType> {
        match self {
            StoredElement::F32 => Some(DType::F32),
            StoredElement::F16 => Some(DType::F16),
            StoredElement::U8 => Some(DType::U8),
            StoredElement::I8 => Some(DType::I8),
            _ => None,
        }
    }

    /// Whether this is an integer id type rather than a vector element type.
    pub const fn is_id(self) -> bool {
        self.dtype().is_none()
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            StoredElement::U8 | StoredElement::I8 => 1,
            StoredElement::F16 => 2,
            StoredElement::F32 | StoredElement::I32 | StoredElement::U32 => 4,
            StoredElement::I64 | StoredElement::U64 => 8,
        }
    }

    /// The lower-case name (`f32`, `f16`, `u8`, `i8`, `i32`, `u32`, `i64`, `u64`).
    pub const fn name(self) -> &'static str {
        match self {
            StoredElement::F32 => "f32",
            StoredElement::F16 => "f16",
            StoredElement::U8 => "u8",
            StoredElement::I8 => "i8",
            StoredElement::I32 => "i32",
            StoredElement::U32 => "u32",
            StoredElement::I64 => "i64",
            StoredElement::U64 => "u64",
        }
    }
}

impl std::fmt::Display for StoredElement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The memory order of a 2-D array in an `.npy` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Order {
    /// Row-major (`fortran_order: False`).
    C,
    /// Column-major (`fortran_order: True`).
    Fortran,
}

impl Order {
    /// `C` or `F`.
    pub const fn name(self) -> &'static str {
        match self {
            Order::C => "C",
            Order::Fortran => "F",
        }
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_extensions_resolve() {
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(f));
            let p = format!("/tmp/x.{}", f.name().to_uppercase());
            assert_eq!(Format::from_path(Path::new(&p)).unwrap(), f);
        }
        assert!(matches!(
            Format::from_path(Path::new("/tmp/x.bin")),
            Err(Error::Format { .. })
        ));
        assert!(Format::from_path(Path::new("/tmp/noext")).is_err());
        assert_eq!(
            Format::resolve(Path::new("/tmp/x.bin"), Some(Format::Fbin)).unwrap(),
            Format::Fbin
        );
        assert!("hdf5".parse::<Format>().is_err());
    }
}
