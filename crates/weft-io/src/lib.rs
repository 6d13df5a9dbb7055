//! # weft-io
//!
//! Vector and id files for weft: reading, writing, inspecting, and synthetic datasets.
//!
//! - Formats ([`Format`]): TEXMEX `fvecs`/`ivecs`/`bvecs`, big-ann-benchmarks
//!   `fbin`/`ibin`/`u8bin`/`i8bin`, and NumPy `.npy` (v1/v2/v3, 2-D, C or Fortran order,
//!   `f32`/`f16`/`u8`/`i8`, either byte order). The format comes from the extension or is named
//!   explicitly; an unknown extension is an [`Error::Format`](weft_core::Error::Format).
//! - Reading ([`read`], [`read_any`], [`read_rows`], [`VectorFile`]): headers are checked
//!   against the file length before anything is allocated; `fbin`/`u8bin`/`i8bin` and
//!   little-endian C-order `npy` are memory-mapped without a copy (the [`weft_core::Dataset`]
//!   borrows the map), so files larger than RAM work; Fortran-order `npy` is transposed in
//!   cache-sized tiles; `*vecs` rows are copied with every row header checked. Row ranges
//!   `[a, b)` read only those rows. NaN and infinities are rejected with their row number
//!   unless [`ReadOptions::allow_non_finite`] is set.
//! - [`info`]: format, element type, rows, dim, sizes and npy order, from the header alone.
//! - [`AnyDataset`]: a dataset of whichever element type the file holds, with an explicit
//!   conversion to `f32`.
//! - Writing ([`write()`], [`VectorWriter`], [`write_file`]): always to a temporary file beside
//!   the target, renamed over it at the end; the streaming writer patches the row count into
//!   the header. A character device (`/dev/null`) or FIFO is written in place instead, never
//!   replaced; a directory is refused. Writes of known size check the free space first
//!   ([`check_free_space`]).
//! - Inputs that are not regular files (FIFOs, devices, directories) are refused before they
//!   are opened ([`check_input_file`]).
//! - Ids ([`IdMatrix`], [`read_ids`], [`write_ids`]): ground truth in `ivecs`, `ibin` or `npy`.
//! - [`synthetic`]: seeded benchmark-shaped datasets ([`Preset`], [`SyntheticSpec`]).
//!
//! ```
//! use weft_io::{Preset, ReadOptions, Split, VectorWriter, read, read_rows, info, write};
//! # fn main() -> weft_core::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("base.fbin");
//! // A seeded SIFT-like set; the same seed gives the same bytes on any thread count.
//! let generator = Preset::Sift.generator(42)?;
//! write(&path, generator.base(1000)?.view(), None)?;
//! assert_eq!((info(&path)?.rows, info(&path)?.dim), (1000, 128));
//! let base = read::<f32>(&path, &ReadOptions::default())?; // memory-mapped, no copy
//! let block = read_rows::<f32>(&path, 100..200, &ReadOptions::default())?;
//! assert_eq!(block.row(0), base.row(100));
//! // Streaming, for sets larger than memory.
//! let mut writer = VectorWriter::<f32>::create(dir.path().join("queries.npy"), 128, None)?;
//! generator.write_rows(Split::Queries, 100, &mut writer)?;
//! writer.finish()?;
//! # Ok(())
//! # }
//! ```
//!
//! Every failure is a typed [`weft_core::Error`] naming the file; no input makes a reader panic
//! (a fuzz target in `fuzz/` checks this). Data is assumed little-endian on disk except where
//! an npy header says otherwise; the host must be little-endian.

#[cfg(target_endian = "big")]
compile_error!(
    "weft-io reads and writes little-endian data in place and needs a little-endian host"
);

mod any;
mod file;
mod format;
mod ids;
mod npy;
pub mod synthetic;
mod target;
mod write;

pub use any::AnyDataset;
pub use file::{
    FileInfo, ReadOptions, VectorFile, info, info_with_format, read, read_any, read_ids, read_rows,
    read_rows_any,
};
pub use format::{Format, Order, StoredElement};
pub use ids::{IdMatrix, write_ids};
pub use synthetic::{Generator, Preset, Shaping, Split, SyntheticSpec};
pub use target::{available_bytes, check_free_space, check_input_file, write_file};
pub use write::{VectorWriter, vector_file_bytes, write, write_any};
