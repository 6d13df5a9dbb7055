//! Writing vector files: whole datasets ([`write`]) and row by row ([`VectorWriter`]), always to
//! a temporary file in the target's directory that is renamed over the target at the end.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use weft_core::{DatasetView, Element, Error, Result};

use crate::any::AnyDataset;
use crate::format::{Format, StoredElement};
use crate::npy;

/// Buffer size of the writers.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Writes `data` to `path` atomically. `format: None` takes the format from the extension;
/// the format must hold `T` (`npy` holds every element type and is written in C order).
pub fn write<T: Element>(
    path: impl AsRef<Path>,
    data: DatasetView<'_, T>,
    format: Option<Format>,
) -> Result<()> {
    let mut writer = VectorWriter::<T>::create(path, data.dim(), format)?;
    writer.push_rows(data)?;
    writer.finish().map(|_| ())
}

/// Writes a dataset of any element type (see [`write`]).
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
    /// extension).
    pub fn create(path: impl AsRef<Path>, dim: usize, format: Option<Format>) -> Result<Self> {
        let path = path.as_ref();
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
            raw: RawWriter::create(path, format, StoredElement::from_dtype(T::DTYPE), dim)?,
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

    /// Completes the file: patches the header, flushes, syncs and renames it over the target.
    /// Returns the number of rows written.
    pub fn finish(self) -> Result<usize> {
        self.raw.finish()
    }
}

/// The format-level writer shared by [`VectorWriter`] and the id writer: rows arrive as bytes.
pub(crate) struct RawWriter {
    path: PathBuf,
    format: Format,
    element: StoredElement,
    dim: usize,
    rows: u64,
    out: BufWriter<tempfile::NamedTempFile>,
    /// Keeps the temporary file on the process's list ([`weft_core::temp_files`]) until it is
    /// renamed or removed.
    _registration: weft_core::temp_files::Registration,
}

impl RawWriter {
    pub(crate) fn create(
        path: &Path,
        format: Format,
        element: StoredElement,
        dim: usize,
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
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .ok_or_else(|| Error::InvalidInput(format!("{} is not a file path", path.display())))?;
        // `.name.<pid>.<random>.weft-tmp`: see weft_core::temp_files, whose cleanup of files
        // that killed writers of this target left behind runs first.
        weft_core::temp_files::remove_stale(path);
        let temp = tempfile::Builder::new()
            .prefix(&weft_core::temp_files::temp_prefix(name))
            .suffix(weft_core::temp_files::TEMP_SUFFIX)
            .tempfile_in(dir)
            .map_err(|e| Error::io(path, e))?;
        let registration = weft_core::temp_files::register(temp.path());
        let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, temp);
        match format {
            f if f.is_bin() => out
                .write_all(&[0u8, 0, 0, 0])
                .and_then(|()| out.write_all(&(dim as u32).to_le_bytes())),
            Format::Npy => {
                out.write_all(&npy::encode_header(npy::descr_for(element), 0, dim as u64))
            }
            _ => Ok(()),
        }
        .map_err(|e| Error::io(path, e))?;
        Ok(RawWriter {
            path: path.to_path_buf(),
            format,
            element,
            dim,
            rows: 0,
            out,
            _registration: registration,
        })
    }

    fn check_room(&self, more: usize) -> Result<()> {
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
        let mut temp = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        let file: &mut File = temp.as_file_mut();
        match self.format {
            f if f.is_bin() => {
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                file.write_all(&(self.rows as u32).to_le_bytes())
                    .map_err(io)?;
            }
            Format::Npy => {
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                let header =
                    npy::encode_header(npy::descr_for(self.element), self.rows, self.dim as u64);
                file.write_all(&header).map_err(io)?;
            }
            _ => {}
        }
        file.sync_all().map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // Temporary files are created owner-only; a dataset is an ordinary file.
            file.set_permissions(std::fs::Permissions::from_mode(0o644))
                .map_err(io)?;
        }
        temp.persist(&path).map_err(|e| io(e.error))?;
        Ok(self.rows as usize)
    }
}
