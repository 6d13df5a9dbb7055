//! Writing vector files: whole datasets ([`write`]) and row by row ([`VectorWriter`]), always to
//! a temporary file in the target's directory that is renamed over the target at the end, or in
//! place to a character device (`/dev/null`) or FIFO (see [`crate::target`]).

use std::io::{BufWriter, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use weft_core::{DatasetView, Element, Error, Result};

use crate::any::AnyDataset;
use crate::format::{Format, StoredElement};
use crate::npy;
use crate::target::{Output, check_free_space};

/// Buffer size of the writers.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Writes `data` to `path` atomically (in place to a character device or FIFO). `format: None`
/// takes the format from the extension; the format must hold `T` (`npy` holds every element
/// type and is written in C order). A file its file system has no room for is refused before
/// anything is written.
pub fn write<T: Element>(
    path: impl AsRef<Path>,
    data: DatasetView<'_, T>,
    format: Option<Format>,
) -> Result<()> {
    let mut writer = VectorWriter::<T>::create_sized(path, data.dim(), data.rows() as u64, format)?;
    writer.push_rows(data)?;
    writer.finish().map(|_| ())
}

/// Writes a dataset of any element type (see [`write()`]).
pub fn write_any(path: impl AsRef<Path>, data: &AnyDataset, format: Option<Format>) -> Result<()> {
    match data {
        AnyDataset::F32(d) => write(path, d.view(), format),
        AnyDataset::F16(d) => write(path, d.view(), format),
        AnyDataset::U8(d) => write(path, d.view(), format),
        AnyDataset::I8(d) => write(path, d.view(), format),
    }
}

/// A streaming writer of `T` vectors, for sets larger than memory.
///
/// Rows go to a temporary file beside the target; [`VectorWriter::finish`] patches the row
/// count into the header (`*bin`, `npy`) and renames the file over the target, so readers never
/// see a partial file. Dropping an unfinished writer deletes the temporary file.
pub struct VectorWriter<T: Element> {
    raw: RawWriter,
    element: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for VectorWriter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorWriter")
            .field("path", &self.raw.path)
            .field("format", &self.raw.format)
            .field("dim", &self.raw.dim)
            .field("rows", &self.raw.rows)
            .finish()
    }
}

impl<T: Element> VectorWriter<T> {
    /// Starts writing rows of `dim` elements to `path` in `format` (`None`: from the
    /// extension). The row count is patched into the header at the end, so a FIFO can take
    /// only headerless formats (`*vecs`) this way; [`VectorWriter::create_sized`] streams any.
    pub fn create(path: impl AsRef<Path>, dim: usize, format: Option<Format>) -> Result<Self> {
        Self::open(path.as_ref(), dim, None, format)
    }

    /// Starts writing exactly `rows` rows of `dim` elements to `path` in `format` (`None`: from
    /// the extension): the header is written with its final row count at once (so any format
    /// streams to a FIFO), a row count the format cannot record or a file its file system has
    /// no room for ([`crate::check_free_space`]) is refused before anything is written, and
    /// [`VectorWriter::finish`] refuses another count of rows.
    pub fn create_sized(
        path: impl AsRef<Path>,
        dim: usize,
        rows: u64,
        format: Option<Format>,
    ) -> Result<Self> {
        Self::open(path.as_ref(), dim, Some(rows), format)
    }

    fn open(path: &Path, dim: usize, rows: Option<u64>, format: Option<Format>) -> Result<Self> {
        let format = Format::resolve(path, format)?;
        if !format.holds_dtype(T::DTYPE) {
            let fitting: Vec<&str> = Format::vector_formats_for(T::DTYPE)
                .iter()
                .map(|f| f.name())
                .collect();
            return Err(Error::invalid_param(
                "format",
                format!(
                    "{format} cannot hold {} vectors (use {})",
                    T::DTYPE,
                    fitting.join(" or ")
                ),
            ));
        }
        Ok(VectorWriter {
            raw: RawWriter::create(path, format, StoredElement::from_dtype(T::DTYPE), dim, rows)?,
            element: PhantomData,
        })
    }

    /// Appends one row of exactly `dim` elements.
    pub fn push_row(&mut self, row: &[T]) -> Result<()> {
        if row.len() != self.raw.dim {
            return Err(Error::dim_mismatch(
                "row written to a vector file",
                self.raw.dim,
                row.len(),
            ));
        }
        self.raw.push_row(bytemuck::cast_slice(row))
    }

    /// Appends every row of `rows`, whose dimension must be the writer's.
    pub fn push_rows(&mut self, rows: DatasetView<'_, T>) -> Result<()> {
        if rows.dim() != self.raw.dim {
            return Err(Error::dim_mismatch(
                "rows written to a vector file",
                self.raw.dim,
                rows.dim(),
            ));
        }
        match rows.as_contiguous() {
            Some(all) if !self.raw.format.is_vecs() => self
                .raw
                .push_contiguous(bytemuck::cast_slice(all), rows.rows()),
            _ => rows.iter().try_for_each(|row| self.push_row(row)),
        }
    }

    /// Rows written so far.
    pub fn rows_written(&self) -> usize {
        self.raw.rows as usize
    }

    /// Elements per row.
    pub fn dim(&self) -> usize {
        self.raw.dim
    }

    /// Completes the file: patches the header, flushes, syncs and renames it over the target
    /// (a character device or FIFO: flushes). Returns the number of rows written.
    pub fn finish(self) -> Result<usize> {
        self.raw.finish()
    }
}

/// The bytes of a vector or id file of `rows` rows of `dim` elements in `format`: header, rows
/// and their per-row headers (`*vecs`).
pub fn vector_file_bytes(format: Format, element: StoredElement, rows: u64, dim: usize) -> u64 {
    let row = dim as u64 * element.size() as u64 + if format.is_vecs() { 4 } else { 0 };
    let header = match format {
        f if f.is_bin() => 8,
        Format::Npy => npy::encode_header(npy::descr_for(element), rows, dim as u64).len() as u64,
        _ => 0,
    };
    header.saturating_add(rows.saturating_mul(row))
}

/// Whether `path` is a FIFO (or a symbolic link to one).
fn is_fifo(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// The refusal of a header whose row count would be patched at the end, on an output that
/// cannot be rewound.
fn unrewindable(path: &Path, format: Format) -> Error {
    Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!(
                "a FIFO (or a device that cannot seek) cannot be rewound to record the row \
                 count in the {format} header at the end; write a headerless format (fvecs, \
                 ivecs, bvecs) to it, or a regular file"
            ),
        ),
    )
}

/// The format-level writer shared by [`VectorWriter`] and the id writer: rows arrive as bytes.
pub(crate) struct RawWriter {
    path: PathBuf,
    format: Format,
    element: StoredElement,
    dim: usize,
    rows: u64,
    /// The row count announced in the header at creation, if known then.
    expected: Option<u64>,
    out: BufWriter<Output>,
}

impl RawWriter {
    /// Starts a file of `dim`-element rows; `rows`, when known, goes into the header at once.
    pub(crate) fn create(
        path: &Path,
        format: Format,
        element: StoredElement,
        dim: usize,
        rows: Option<u64>,
    ) -> Result<Self> {
        if dim == 0 {
            return Err(Error::InvalidInput(
                "vector dimension must be at least 1".into(),
            ));
        }
        let dim_limit = if format.is_vecs() {
            i32::MAX as usize
        } else {
            u32::MAX as usize
        };
        if dim > dim_limit {
            return Err(Error::InvalidInput(format!(
                "dimension {dim} exceeds what {format} can record ({dim_limit})"
            )));
        }
        if let Some(rows) = rows {
            if format.is_bin() && rows > u32::MAX as u64 {
                return Err(Error::InvalidInput(format!(
                    "{}: {rows} rows exceed what {format} can record ({}); use npy or {}",
                    path.display(),
                    u32::MAX,
                    if element.size() == 1 {
                        "bvecs"
                    } else {
                        "fvecs"
                    }
                )));
            }
            check_free_space(path, vector_file_bytes(format, element, rows, dim))?;
        }
        let has_header = format.is_bin() || format == Format::Npy;
        // A FIFO cannot be rewound: said before it is opened (an open blocks until a reader
        // comes); a character device that cannot seek either (a terminal), once opened.
        if has_header && rows.is_none() && is_fifo(path) {
            return Err(unrewindable(path, format));
        }
        let mut output = Output::create(path)?;
        if has_header && rows.is_none() && output.is_stream() && !output.can_seek() {
            return Err(unrewindable(path, format));
        }
        let header_rows = rows.unwrap_or(0);
        match format {
            f if f.is_bin() => output
                .write_all(&(header_rows as u32).to_le_bytes())
                .and_then(|()| output.write_all(&(dim as u32).to_le_bytes())),
            Format::Npy => output.write_all(&npy::encode_header(
                npy::descr_for(element),
                header_rows,
                dim as u64,
            )),
            _ => Ok(()),
        }
        .map_err(|e| Error::io(path, e))?;
        Ok(RawWriter {
            path: path.to_path_buf(),
            format,
            element,
            dim,
            rows: 0,
            expected: rows,
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, output),
        })
    }

    fn check_room(&self, more: usize) -> Result<()> {
        if let Some(expected) = self.expected
            && self.rows + more as u64 > expected
        {
            return Err(Error::InvalidInput(format!(
                "{}: more than the {expected} rows announced written",
                self.path.display()
            )));
        }
        if self.format.is_bin() && self.rows + more as u64 > u32::MAX as u64 {
            return Err(Error::InvalidInput(format!(
                "{}: {} rows exceed what {} can record ({})",
                self.path.display(),
                self.rows + more as u64,
                self.format,
                u32::MAX
            )));
        }
        Ok(())
    }

    /// Appends one row given as its bytes (`dim * element size` of them).
    pub(crate) fn push_row(&mut self, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(bytes.len(), self.dim * self.element.size());
        self.check_room(1)?;
        if self.format.is_vecs() {
            self.out
                .write_all(&(self.dim as i32).to_le_bytes())
                .map_err(|e| Error::io(&self.path, e))?;
        }
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, e))?;
        self.rows += 1;
        Ok(())
    }

    /// Appends `rows` contiguous rows (formats without per-row headers only).
    fn push_contiguous(&mut self, bytes: &[u8], rows: usize) -> Result<()> {
        debug_assert!(!self.format.is_vecs());
        self.check_room(rows)?;
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, e))?;
        self.rows += rows as u64;
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<usize> {
        let path = self.path;
        let io = |e: std::io::Error| Error::io(&path, e);
        if let Some(expected) = self.expected
            && self.rows != expected
        {
            return Err(Error::InvalidInput(format!(
                "{}: {} rows written of the {expected} announced",
                path.display(),
                self.rows
            )));
        }
        let mut out = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        out.flush().map_err(io)?;
        // The header already holds the row count when it was announced.
        if self.expected.is_none() {
            match self.format {
                f if f.is_bin() => out
                    .patch_start(&(self.rows as u32).to_le_bytes())
                    .map_err(io)?,
                Format::Npy => {
                    let header = npy::encode_header(
                        npy::descr_for(self.element),
                        self.rows,
                        self.dim as u64,
                    );
                    out.patch_start(&header).map_err(io)?;
                }
                _ => {}
            }
        }
        out.commit(&path)?;
        Ok(self.rows as usize)
    }
}
