//! Opening vector files: header parsing and size checks ([`VectorFile::open`], [`info`]), and
//! whole-file or row-range reads, zero-copy over a memory map where the layout allows it.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytemuck::Pod;
use rayon::prelude::*;
use weft_core::{ByteSource, DType, Dataset, DatasetView, Element, Error, Result, SharedSlice};

use crate::any::AnyDataset;
use crate::format::{Format, Order, StoredElement};
use crate::ids::IdMatrix;
use crate::npy;

/// Bytes read per chunk when copying `*vecs` rows (bounds the scratch memory of a read).
const VECS_CHUNK_BYTES: usize = 8 << 20;

/// How files are opened and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// The format; `None` (the default) takes it from the file extension.
    pub format: Option<Format>,
    /// Keep NaN and infinite values instead of failing with [`Error::NonFinite`] (default: false).
    /// Turning this on also skips the scan for them.
    pub allow_non_finite: bool,
    /// Memory-map the file (default: true). Layouts that need no conversion (`fbin`, `u8bin`,
    /// `i8bin`, little-endian C-order `npy`) are then read without a copy: the returned dataset
    /// borrows the map, which is what makes files larger than RAM usable. With `false`, data is
    /// read into owned memory with positioned reads. As with any memory map, another process
    /// truncating or rewriting the file while a mapped dataset is alive is undefined; weft's own
    /// writers never do that (they replace files by renaming).
    pub mmap: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            format: None,
            allow_non_finite: false,
            mmap: true,
        }
    }
}

impl ReadOptions {
    /// The defaults: format from the extension, non-finite values rejected, memory-mapped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the format explicitly instead of taking it from the extension.
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }

    /// Keeps (`true`) or rejects (`false`, the default) NaN and infinite values.
    pub fn with_allow_non_finite(mut self, allow: bool) -> Self {
        self.allow_non_finite = allow;
        self
    }

    /// Memory-maps the file (`true`, the default) or reads it into owned memory.
    pub fn with_mmap(mut self, mmap: bool) -> Self {
        self.mmap = mmap;
        self
    }
}

/// What a file holds, learned from its header and length without reading the data.
/// Serializes (e.g. to JSON for `weft info --json`) with the field names below.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileInfo {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// The element type stored.
    pub element: StoredElement,
    /// Number of rows (vectors, or id lists).
    pub rows: usize,
    /// Elements per row.
    pub dim: usize,
    /// The file's size in bytes.
    pub file_bytes: u64,
    /// Byte offset of the first row's data (for `*vecs`, of the first row's dimension header).
    pub data_offset: u64,
    /// Bytes from the start of one row to the start of the next, headers included.
    pub row_bytes: u64,
    /// The array order (`npy` only).
    pub order: Option<Order>,
    /// The `(major, minor)` format version (`npy` only).
    pub npy_version: Option<(u8, u8)>,
    /// Whether multi-byte elements are big-endian (only `npy` files can be).
    pub big_endian: bool,
}

impl FileInfo {
    /// The vector element type, or `None` when the file holds integer ids.
    pub fn dtype(&self) -> Option<DType> {
        self.element.dtype()
    }

    /// Bytes of vector data (`rows * dim * element size`, headers excluded).
    pub fn data_bytes(&self) -> u64 {
        self.rows as u64 * self.dim as u64 * self.element.size() as u64
    }
}

impl std::fmt::Display for FileInfo {
    /// One line for `weft info`, e.g.
    /// `fbin: 1000000 x 128 f32, 512000008 bytes (data at byte 8)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} x {} {}{}, {} bytes (data at byte {})",
            self.format,
            self.rows,
            self.dim,
            self.element,
            if self.element.is_id() { " ids" } else { "" },
            self.file_bytes,
            self.data_offset
        )?;
        if let (Some(order), Some((major, minor))) = (self.order, self.npy_version) {
            write!(
                f,
                ", {} order, npy {major}.{minor}{}",
                order,
                if self.big_endian { ", big-endian" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// Reads `path`'s header and reports what it holds, without reading the data. The format is
/// taken from the extension.
pub fn info(path: impl AsRef<Path>) -> Result<FileInfo> {
    info_with_format(path, None)
}

/// [`info`] with an explicit format (`None`: from the extension).
pub fn info_with_format(path: impl AsRef<Path>, format: Option<Format>) -> Result<FileInfo> {
    let options = ReadOptions {
        format,
        mmap: false,
        ..ReadOptions::default()
    };
    Ok(VectorFile::open(path, &options)?.info)
}

/// Reads a whole file of `T` vectors. Fails with a clear error when the file holds another
/// element type (use [`read_any`] and [`AnyDataset::into_f32`] to convert).
pub fn read<T: Element>(path: impl AsRef<Path>, options: &ReadOptions) -> Result<Dataset<T>> {
    VectorFile::open(path, options)?.read()
}

/// Reads rows `rows` (`[a, b)`) of a file of `T` vectors, touching only those rows' bytes.
pub fn read_rows<T: Element>(
    path: impl AsRef<Path>,
    rows: Range<usize>,
    options: &ReadOptions,
) -> Result<Dataset<T>> {
    VectorFile::open(path, options)?.read_rows(rows)
}

/// Reads a whole file of vectors of whichever element type it holds.
pub fn read_any(path: impl AsRef<Path>, options: &ReadOptions) -> Result<AnyDataset> {
    VectorFile::open(path, options)?.read_any()
}

/// Reads rows `rows` of a file of vectors of whichever element type it holds.
pub fn read_rows_any(
    path: impl AsRef<Path>,
    rows: Range<usize>,
    options: &ReadOptions,
) -> Result<AnyDataset> {
    VectorFile::open(path, options)?.read_rows_any(rows)
}

/// A read-only memory map, shareable as a [`ByteSource`].
struct MappedFile(memmap2::Mmap);

impl ByteSource for MappedFile {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// An opened, header-checked vector or id file. Opening reads only the header (and, for a
/// `*vecs` file whose length is not a whole number of rows, the row headers, to say which row is
/// bad); the `read*` methods read data. Keep one open for repeated row-range reads.
pub struct VectorFile {
    info: FileInfo,
    file: File,
    map: Option<Arc<MappedFile>>,
    options: ReadOptions,
}

impl std::fmt::Debug for VectorFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorFile")
            .field("info", &self.info)
            .field("mapped", &self.map.is_some())
            .finish()
    }
}

impl VectorFile {
    /// Opens `path` and checks its header against its length; no allocation depends on a size
    /// the header claims until that size has been checked against the file.
    pub fn open(path: impl AsRef<Path>, options: &ReadOptions) -> Result<Self> {
        let path = path.as_ref();
        let format = Format::resolve(path, options.format)?;
        // A FIFO or a device is refused before it is opened (opening a FIFO blocks).
        crate::check_input_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let metadata = file.metadata().map_err(|e| Error::io(path, e))?;
        if !metadata.is_file() {
            return Err(Error::format(path, "not a regular file"));
        }
        let file_bytes = metadata.len();
        if file_bytes == 0 {
            return Err(Error::format(
                path,
                format!("empty file (0 bytes): not a valid {format} file"),
            ));
        }
        let info = match format {
            Format::Fvecs | Format::Ivecs | Format::Bvecs => {
                parse_vecs_header(path, &file, format, file_bytes)?
            }
            Format::Fbin | Format::Ibin | Format::U8bin | Format::I8bin => {
                parse_bin_header(path, &file, format, file_bytes)?
            }
            Format::Npy => parse_npy_header(path, &file, file_bytes)?,
        };
        let map = if options.mmap {
            // SAFETY: the map is read-only and weft never modifies a file in place (its writers
            // write a temporary file and rename it over the target, which leaves existing maps
            // of the old file intact). Another process truncating or rewriting the file while
            // it is mapped is outside what any memory-mapped reader can guard against; that is
            // documented on `ReadOptions::mmap`, and `mmap: false` avoids it.
            let mmap = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
            if (mmap.len() as u64) < file_bytes {
                return Err(Error::format(path, "the file shrank while being opened"));
            }
            Some(Arc::new(MappedFile(mmap)))
        } else {
            None
        };
        Ok(VectorFile {
            info,
            file,
            map,
            options: *options,
        })
    }

    /// What the file holds.
    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.info.rows
    }

    /// Elements per row.
    pub fn dim(&self) -> usize {
        self.info.dim
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.info.path
    }

    /// Reads every row as `T` vectors.
    pub fn read<T: Element>(&self) -> Result<Dataset<T>> {
        self.read_rows(0..self.info.rows)
    }

    /// Reads rows `[rows.start, rows.end)` as `T` vectors. Fails when the file holds another
    /// element type, or (unless [`ReadOptions::allow_non_finite`]) a NaN or infinity, reported
    /// with its row number in the file.
    pub fn read_rows<T: Element>(&self, rows: Range<usize>) -> Result<Dataset<T>> {
        if self.info.element != StoredElement::from_dtype(T::DTYPE) {
            return Err(self.element_mismatch(T::DTYPE.name(), "vectors"));
        }
        let first_row = rows.start;
        let data: SharedSlice<T> = self.load_raw(rows.clone())?;
        if !self.options.allow_non_finite && matches!(T::DTYPE, DType::F32 | DType::F16) {
            check_finite(&data, self.info.dim, first_row)?;
        }
        Dataset::from_shared(data, rows.len(), self.info.dim)
    }

    /// Reads every row as vectors of whichever element type the file holds.
    pub fn read_any(&self) -> Result<AnyDataset> {
        self.read_rows_any(0..self.info.rows)
    }

    /// Reads rows `[rows.start, rows.end)` as vectors of whichever element type the file holds.
    pub fn read_rows_any(&self, rows: Range<usize>) -> Result<AnyDataset> {
        Ok(match self.info.element {
            StoredElement::F32 => AnyDataset::F32(self.read_rows(rows)?),
            StoredElement::F16 => AnyDataset::F16(self.read_rows(rows)?),
            StoredElement::U8 => AnyDataset::U8(self.read_rows(rows)?),
            StoredElement::I8 => AnyDataset::I8(self.read_rows(rows)?),
            _ => return Err(self.element_mismatch("f32, f16, u8 or i8", "vectors")),
        })
    }

    /// Reads every row as ids (`ivecs`, `ibin`, or an integer `npy`).
    pub fn read_ids(&self) -> Result<IdMatrix> {
        self.read_id_rows(0..self.info.rows)
    }

    /// Reads rows `[rows.start, rows.end)` as ids. `i32` values are reinterpreted as `u32` (so
    /// `-1` padding becomes [`weft_core::INVALID`]); 64-bit values must fit in `u32` (`-1` maps
    /// to `INVALID`).
    pub fn read_id_rows(&self, rows: Range<usize>) -> Result<IdMatrix> {
        let n = rows.len();
        let first_row = rows.start;
        let dim = self.info.dim;
        let ids: Vec<u32> = match self.info.element {
            StoredElement::I32 | StoredElement::U32 => self.load_raw::<u32>(rows)?.into_vec(),
            StoredElement::I64 | StoredElement::U64 => {
                let signed = self.info.element == StoredElement::I64;
                let wide = self.load_raw::<u64>(rows)?;
                let mut out = Vec::with_capacity(wide.len());
                for (i, &v) in wide.iter().enumerate() {
                    let id = if signed && v as i64 == -1 {
                        weft_core::INVALID
                    } else {
                        u32::try_from(v).map_err(|_| {
                            Error::format(
                                &self.info.path,
                                format!(
                                    "id {} at row {}, column {} does not fit in 32 bits",
                                    if signed {
                                        (v as i64).to_string()
                                    } else {
                                        v.to_string()
                                    },
                                    first_row + i / dim,
                                    i % dim
                                ),
                            )
                        })?
                    };
                    out.push(id);
                }
                out
            }
            _ => return Err(self.element_mismatch("integer", "ids")),
        };
        IdMatrix::new(ids, n, dim)
    }

    fn element_mismatch(&self, wanted: &str, what: &str) -> Error {
        let found = if self.info.element.is_id() {
            "integer ids"
        } else {
            "vectors"
        };
        Error::InvalidInput(format!(
            "{}: the file holds {} {found} but {wanted} {what} were requested{}",
            self.info.path.display(),
            self.info.element,
            if self.info.element.is_id() {
                " (read id files with read_ids)"
            } else if what == "vectors" {
                " (use read_any and AnyDataset::into_f32 to convert explicitly)"
            } else {
                ""
            }
        ))
    }

    /// Loads rows `range` as raw elements of `P` (whose size must be the stored element's):
    /// zero-copy where possible, else copied; byte order fixed; Fortran order transposed.
    fn load_raw<P: Pod + Send + Sync>(&self, range: Range<usize>) -> Result<SharedSlice<P>> {
        let info = &self.info;
        debug_assert_eq!(std::mem::size_of::<P>(), info.element.size());
        if range.start > range.end || range.end > info.rows {
            return Err(Error::InvalidInput(format!(
                "{}: row range {range:?} is outside the file's 0..{} rows",
                info.path.display(),
                info.rows
            )));
        }
        let n = range.len();
        if n == 0 {
            return Ok(SharedSlice::from_vec(Vec::new()));
        }
        let size = info.element.size();
        if info.format.is_vecs() {
            return self.load_vecs(range).map(SharedSlice::from_vec);
        }
        if info.order == Some(Order::Fortran) {
            return self.load_fortran(range).map(SharedSlice::from_vec);
        }
        // Contiguous, row-major data.
        let offset = info.data_offset + range.start as u64 * info.row_bytes;
        let count = n * info.dim;
        if let (Some(map), false) = (&self.map, info.big_endian) {
            let source: Arc<dyn ByteSource> = map.clone();
            if let Ok(slice) = SharedSlice::from_source(source, offset as usize, count) {
                return Ok(slice);
            }
            // Misaligned for `P` (an unusual npy header length): fall through to a copy.
        }
        let mut out: Vec<P> = zeroed_vec(count);
        self.read_into(offset, bytemuck::cast_slice_mut(&mut out))?;
        if info.big_endian {
            swap_bytes(&mut out, size);
        }
        Ok(SharedSlice::from_vec(out))
    }

    /// Copies `*vecs` rows, checking that every row's dimension header equals the first's.
    fn load_vecs<P: Pod>(&self, range: Range<usize>) -> Result<Vec<P>> {
        let info = &self.info;
        let dim = info.dim;
        let row_bytes = info.row_bytes as usize;
        let payload = row_bytes - 4;
        let mut out: Vec<P> = zeroed_vec(range.len() * dim);
        let rows_per_chunk = (VECS_CHUNK_BYTES / row_bytes).max(1);
        let mut buf = vec![0u8; rows_per_chunk.min(range.len()) * row_bytes];
        let out_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        let mut row = range.start;
        while row < range.end {
            let chunk_rows = rows_per_chunk.min(range.end - row);
            let chunk = &mut buf[..chunk_rows * row_bytes];
            self.read_into(info.data_offset + row as u64 * info.row_bytes, chunk)?;
            for (i, src) in chunk.chunks_exact(row_bytes).enumerate() {
                let header = i32::from_le_bytes([src[0], src[1], src[2], src[3]]);
                if header as i64 != dim as i64 {
                    return Err(Error::format(
                        &info.path,
                        format!(
                            "row {} has dimension {header} but the first row has {dim}",
                            row + i
                        ),
                    ));
                }
                let dst = (row + i - range.start) * payload;
                out_bytes[dst..dst + payload].copy_from_slice(&src[4..]);
            }
            row += chunk_rows;
        }
        Ok(out)
    }

    /// Reads rows of a Fortran-order (column-major) npy array into row-major order.
    fn load_fortran<P: Pod + Send + Sync>(&self, range: Range<usize>) -> Result<Vec<P>> {
        let info = &self.info;
        let (rows, dim, size) = (info.rows, info.dim, info.element.size());
        let n = range.len();
        let mut out: Vec<P> = zeroed_vec(n * dim);
        if let (Some(map), false) = (&self.map, info.big_endian) {
            let start = info.data_offset as usize;
            let bytes = &map.bytes()[start..start + rows * dim * size];
            if let Ok(columns) = bytemuck::try_cast_slice::<u8, P>(bytes) {
                transpose_columns(columns, rows, range.start, n, dim, &mut out);
                return Ok(out);
            }
        }
        // Copy the needed part of each column, then transpose.
        let mut columns: Vec<P> = zeroed_vec(n * dim);
        for (c, column) in columns.chunks_exact_mut(n).enumerate() {
            let offset = info.data_offset + ((c * rows + range.start) * size) as u64;
            self.read_into(offset, bytemuck::cast_slice_mut(column))?;
        }
        if info.big_endian {
            swap_bytes(&mut columns, size);
        }
        transpose_columns(&columns, n, 0, n, dim, &mut out);
        Ok(out)
    }

    /// Fills `dst` with the file's bytes at `offset` (from the map when there is one).
    fn read_into(&self, offset: u64, dst: &mut [u8]) -> Result<()> {
        if let Some(map) = &self.map {
            let bytes = map.bytes();
            let start = offset as usize;
            let src = bytes.get(start..start + dst.len()).ok_or_else(|| {
                Error::format(&self.info.path, "the file is shorter than its header says")
            })?;
            dst.copy_from_slice(src);
            Ok(())
        } else {
            read_exact_at(&self.file, dst, offset).map_err(|e| Error::io(&self.info.path, e))
        }
    }
}

/// `len` zero elements.
fn zeroed_vec<P: Pod>(len: usize) -> Vec<P> {
    vec![P::zeroed(); len]
}

/// Reverses the bytes of each `size`-byte element (big-endian to little-endian).
fn swap_bytes<P: Pod>(data: &mut [P], size: usize) {
    if size > 1 {
        for element in bytemuck::cast_slice_mut::<P, u8>(data).chunks_exact_mut(size) {
            element.reverse();
        }
    }
}

/// Writes the row-major `n x dim` block starting at row `first_row` of a column-major array
/// (`src[c * col_stride + r]` is element `(r, c)`) into `dst`, in cache-sized tiles, in
/// parallel over row blocks.
fn transpose_columns<P: Pod + Send + Sync>(
    src: &[P],
    col_stride: usize,
    first_row: usize,
    n: usize,
    dim: usize,
    dst: &mut [P],
) {
    const TILE: usize = 64;
    dst[..n * dim]
        .par_chunks_mut(TILE * dim)
        .enumerate()
        .for_each(|(block, out)| {
            let r0 = first_row + block * TILE;
            let block_rows = out.len() / dim;
            for c0 in (0..dim).step_by(TILE) {
                let c1 = (c0 + TILE).min(dim);
                for c in c0..c1 {
                    let column = &src[c * col_stride + r0..c * col_stride + r0 + block_rows];
                    for (r, &v) in column.iter().enumerate() {
                        out[r * dim + c] = v;
                    }
                }
            }
        });
}

/// Fails with [`Error::NonFinite`] at the first NaN or infinity
/// ([`DatasetView::check_no_nan_or_inf`]: any finite value reads back as stored; builders and
/// searches refuse rows too long for finite distances); rows are numbered from `first_row` (their number in the
/// file).
fn check_finite<T: Element>(data: &[T], dim: usize, first_row: usize) -> Result<()> {
    DatasetView::from_flat(data, dim)?
        .check_no_nan_or_inf()
        .map_err(|e| match e {
            Error::NonFinite { row, col, value } => Error::NonFinite {
                row: first_row + row,
                col,
                value,
            },
            other => other,
        })
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes at `offset`; returns how many were read (fewer at end of file).
fn read_prefix(
    path: &Path,
    file: &File,
    offset: u64,
    buf: &mut [u8],
    file_bytes: u64,
) -> Result<usize> {
    let available = file_bytes.saturating_sub(offset).min(buf.len() as u64) as usize;
    read_exact_at(file, &mut buf[..available], offset).map_err(|e| Error::io(path, e))?;
    Ok(available)
}

fn base_info(path: &Path, format: Format, element: StoredElement, file_bytes: u64) -> FileInfo {
    FileInfo {
        path: path.to_path_buf(),
        format,
        element,
        rows: 0,
        dim: 0,
        file_bytes,
        data_offset: 0,
        row_bytes: 0,
        order: None,
        npy_version: None,
        big_endian: false,
    }
}

fn parse_vecs_header(
    path: &Path,
    file: &File,
    format: Format,
    file_bytes: u64,
) -> Result<FileInfo> {
    let element = format
        .fixed_element()
        .expect("vecs formats have a fixed element");
    let mut head = [0u8; 4];
    if read_prefix(path, file, 0, &mut head, file_bytes)? < 4 {
        return Err(Error::format(
            path,
            format!(
                "truncated: {file_bytes} bytes is too short for the first row's dimension header"
            ),
        ));
    }
    let dim = i32::from_le_bytes(head);
    if dim <= 0 {
        return Err(Error::format(
            path,
            format!("the first row's dimension header is {dim}; it must be positive"),
        ));
    }
    let dim = dim as usize;
    let row_bytes = 4 + dim as u64 * element.size() as u64;
    if !file_bytes.is_multiple_of(row_bytes) {
        return Err(diagnose_vecs(path, file, dim, row_bytes, file_bytes));
    }
    let rows = usize::try_from(file_bytes / row_bytes)
        .map_err(|_| Error::format(path, "too many rows for this machine"))?;
    Ok(FileInfo {
        rows,
        dim,
        row_bytes,
        ..base_info(path, format, element, file_bytes)
    })
}

/// Explains why a `*vecs` file's length is not a whole number of rows: the first row whose
/// dimension header differs from the first row's, or a truncated last row.
fn diagnose_vecs(path: &Path, file: &File, dim: usize, row_bytes: u64, file_bytes: u64) -> Error {
    let mut offset = 0u64;
    let mut row = 0u64;
    while offset + row_bytes <= file_bytes {
        let mut head = [0u8; 4];
        if let Err(e) = read_exact_at(file, &mut head, offset) {
            return Error::io(path, e);
        }
        let found = i32::from_le_bytes(head);
        if found as i64 != dim as i64 {
            return Error::format(
                path,
                format!("row {row} has dimension {found} but the first row has {dim}"),
            );
        }
        offset += row_bytes;
        row += 1;
    }
    Error::format(
        path,
        format!(
            "truncated: row {row} has {} of its {row_bytes} bytes (the file's {file_bytes} bytes \
             are not a whole number of rows of dimension {dim})",
            file_bytes - offset
        ),
    )
}

fn parse_bin_header(path: &Path, file: &File, format: Format, file_bytes: u64) -> Result<FileInfo> {
    let element = format
        .fixed_element()
        .expect("bin formats have a fixed element");
    let mut head = [0u8; 8];
    if read_prefix(path, file, 0, &mut head, file_bytes)? < 8 {
        return Err(Error::format(
            path,
            format!("truncated: {file_bytes} bytes is too short for the 8-byte (rows, dim) header"),
        ));
    }
    let rows = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as u64;
    let dim = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as u64;
    if dim == 0 {
        return Err(Error::format(
            path,
            format!("the header's dimension is 0 ({rows} rows)"),
        ));
    }
    let row_bytes = dim * element.size() as u64;
    check_data_size(path, rows, dim, row_bytes, 8, file_bytes)?;
    Ok(FileInfo {
        rows: rows as usize,
        dim: dim as usize,
        data_offset: 8,
        row_bytes,
        ..base_info(path, format, element, file_bytes)
    })
}

/// Checks that `rows` rows of `row_bytes` after `offset` are exactly the rest of the file.
fn check_data_size(
    path: &Path,
    rows: u64,
    dim: u64,
    row_bytes: u64,
    offset: u64,
    file_bytes: u64,
) -> Result<()> {
    let available = file_bytes.saturating_sub(offset);
    let needed = rows.checked_mul(row_bytes);
    match needed {
        Some(needed) if needed == available => {}
        Some(needed) if needed < available => {
            return Err(Error::format(
                path,
                format!(
                    "the header says {rows} rows of dimension {dim} ({needed} bytes of data) but \
                     the file holds {available} bytes of data: {} trailing bytes",
                    available - needed
                ),
            ));
        }
        _ => {
            return Err(Error::format(
                path,
                format!(
                    "truncated: the header says {rows} rows of dimension {dim} ({} bytes of data) \
                     but the file holds only {available} bytes of data ({} whole rows)",
                    needed.map_or_else(|| "overflowing".to_string(), |n| n.to_string()),
                    available / row_bytes.max(1)
                ),
            ));
        }
    }
    if usize::try_from(rows.saturating_mul(dim)).is_err() {
        return Err(Error::format(
            path,
            "too large for this machine's address space",
        ));
    }
    Ok(())
}

fn parse_npy_header(path: &Path, file: &File, file_bytes: u64) -> Result<FileInfo> {
    let mut prefix = [0u8; npy::PREAMBLE_LEN];
    let got = read_prefix(path, file, 0, &mut prefix, file_bytes)?;
    let (version, start, len) = npy::parse_preamble(path, &prefix[..got], file_bytes)?;
    let mut text = vec![0u8; len];
    read_exact_at(file, &mut text, start as u64).map_err(|e| Error::io(path, e))?;
    let header = npy::parse_header_text(path, version, start, &text)?;
    if header.cols == 0 {
        return Err(Error::format(
            path,
            format!(
                "the array's shape is ({}, 0): the dimension must be at least 1",
                header.rows
            ),
        ));
    }
    let element = header.element;
    let row_bytes = header.cols as u64 * element.size() as u64;
    check_data_size(
        path,
        header.rows as u64,
        header.cols as u64,
        row_bytes,
        header.data_offset as u64,
        file_bytes,
    )?;
    Ok(FileInfo {
        rows: header.rows,
        dim: header.cols,
        data_offset: header.data_offset as u64,
        row_bytes,
        order: Some(header.order),
        npy_version: Some(header.version),
        big_endian: header.big_endian,
        ..base_info(path, Format::Npy, element, file_bytes)
    })
}

/// Reads an id file (`ivecs`, `ibin`, or an `npy` of `i32`/`u32`/`i64`/`u64`); `format: None`
/// takes the format from the extension. `ivecs` values are reinterpreted as `u32`, so `-1`
/// becomes [`weft_core::INVALID`].
pub fn read_ids(path: impl AsRef<Path>, format: Option<Format>) -> Result<IdMatrix> {
    let options = ReadOptions {
        format,
        ..ReadOptions::default()
    };
    VectorFile::open(path, &options)?.read_ids()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_matches_naive() {
        let (rows, dim) = (150usize, 70usize);
        let columns: Vec<u32> = (0..rows * dim).map(|i| i as u32).collect();
        for (first, n) in [(0, rows), (3, 100), (149, 1), (64, 64)] {
            let mut out = vec![0u32; n * dim];
            transpose_columns(&columns, rows, first, n, dim, &mut out);
            for r in 0..n {
                for c in 0..dim {
                    assert_eq!(out[r * dim + c], columns[c * rows + first + r]);
                }
            }
        }
    }
}
