//! [`DeviceMatrix`]: a row-major vector set in device memory.
//!
//! Rows are `stride` elements apart, `stride` the dimension rounded up to a multiple of 16
//! elements, with the padding zeroed: every row starts 16-byte aligned and can be read in whole
//! 16-byte vectors, and the zero padding changes no distance. Large transfers go through two
//! pinned staging buffers (the host packs or unpacks one chunk of padded rows while the copy
//! engine moves the other); small ones through pageable memory.

use std::marker::PhantomData;

use rayon::prelude::*;
use weft_core::{Dataset, DatasetView, Element, Error, Result};

use crate::context::{GpuContext, HOST_COPY_PIECE};
use crate::memory::{DeviceBuffer, DeviceView, DeviceViewMut};

/// Elements per padded row for vectors of `dim` elements.
pub fn padded_stride(dim: usize) -> usize {
    dim.div_ceil(16) * 16
}

/// Writes the bytes `offset..offset + out.len()` of `data`'s rows laid out `row_bytes` apart,
/// each row's bytes followed by zeros up to `row_bytes` (any sub-range packs on its own).
fn pack_padded<T: Element>(
    data: DatasetView<'_, T>,
    row_bytes: usize,
    offset: usize,
    out: &mut [u8],
) {
    let data_bytes = data.dim() * std::mem::size_of::<T>();
    let mut pos = offset;
    let end = offset + out.len();
    while pos < end {
        let (r, within) = (pos / row_bytes, pos % row_bytes);
        let take = (row_bytes - within).min(end - pos);
        let part = &mut out[pos - offset..pos - offset + take];
        let row: &[u8] = bytemuck::cast_slice(data.row(r));
        let from_row = data_bytes.saturating_sub(within).min(take);
        if from_row > 0 {
            part[..from_row].copy_from_slice(&row[within..within + from_row]);
        }
        part[from_row..].fill(0);
        pos += take;
    }
}

/// Copies the row data among the padded-layout bytes `offset..offset + chunk.len()` (rows
/// `row_bytes` apart, `data_bytes` of data each) into `dst`, where rows are `data_bytes` apart.
/// The rows that meet the range are shared among rayon tasks of about
/// [`HOST_COPY_PIECE`] bytes each.
fn unpack_padded(dst: &mut [u8], data_bytes: usize, row_bytes: usize, offset: usize, chunk: &[u8]) {
    let end = offset + chunk.len();
    let (first, last) = (offset / row_bytes, end.div_ceil(row_bytes));
    dst[first * data_bytes..last * data_bytes]
        .par_chunks_mut(data_bytes)
        .with_min_len((HOST_COPY_PIECE / data_bytes).max(1))
        .enumerate()
        .for_each(|(i, out_row)| {
            let start = (first + i) * row_bytes;
            let lo = start.max(offset);
            let hi = (start + data_bytes).min(end);
            if lo < hi {
                out_row[lo - start..hi - start].copy_from_slice(&chunk[lo - offset..hi - offset]);
            }
        });
}

/// A row-major set of vectors on the device (see the module documentation for the layout).
pub struct DeviceMatrix<T: Element> {
    buf: DeviceBuffer<u8>,
    rows: usize,
    capacity: usize,
    dim: usize,
    stride: usize,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for DeviceMatrix<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMatrix")
            .field("dtype", &T::DTYPE)
            .field("rows", &self.rows)
            .field("capacity", &self.capacity)
            .field("dim", &self.dim)
            .field("stride", &self.stride)
            .finish()
    }
}

impl<T: Element> DeviceMatrix<T> {
    /// Device bytes a matrix of `rows` x `dim` takes.
    pub fn bytes_for(rows: usize, dim: usize) -> u64 {
        (rows as u64) * (padded_stride(dim) as u64) * (std::mem::size_of::<T>() as u64)
    }

    /// `data` uploaded into the matrix held in `slot` (a session's reused query
    /// buffer): kept when its capacity suffices, else replaced by a new one of capacity
    /// `data.rows()`, checked against `budget` first and counted in `allocations`.
    pub fn upload_reusing<'s>(
        slot: &'s mut Option<Self>,
        ctx: &GpuContext,
        data: DatasetView<'_, T>,
        budget: Option<u64>,
        allocations: &mut u64,
    ) -> Result<&'s mut Self> {
        let m = match slot.take() {
            Some(m) if m.capacity() >= data.rows() => m,
            old => {
                drop(old);
                ctx.check_fits(Self::bytes_for(data.rows(), data.dim()), budget)?;
                *allocations += 1;
                Self::with_capacity(ctx, data.rows(), data.dim())?
            }
        };
        let m = slot.insert(m);
        m.upload_rows(ctx, data)?;
        Ok(m)
    }

    /// A zeroed matrix with room for `capacity` rows of `dim` elements (and `rows() == 0`).
    pub fn with_capacity(ctx: &GpuContext, capacity: usize, dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(Error::InvalidInput(
                "vector dimension must be at least 1".into(),
            ));
        }
        let stride = padded_stride(dim);
        let bytes = capacity
            .checked_mul(stride * std::mem::size_of::<T>())
            .ok_or_else(|| Error::InvalidInput("matrix size overflows".into()))?;
        let buf = ctx.alloc_zeros::<u8>(bytes)?;
        Ok(DeviceMatrix {
            buf,
            rows: 0,
            capacity,
            dim,
            stride,
            _t: PhantomData,
        })
    }

    /// Sets `rows()` to `rows` (at most `capacity()`) without touching the contents, for a
    /// matrix a kernel fills through [`DeviceMatrix::rows_view_mut`] (e.g. a converted copy of
    /// another matrix): rows not written since keep their earlier contents (zeros when never
    /// written).
    pub fn set_rows(&mut self, rows: usize) -> Result<()> {
        if rows > self.capacity {
            return Err(Error::InvalidInput(format!(
                "{rows} rows do not fit a device matrix of capacity {}",
                self.capacity
            )));
        }
        self.rows = rows;
        Ok(())
    }

    /// Uploads `data`.
    pub fn upload(ctx: &GpuContext, data: DatasetView<'_, T>) -> Result<Self> {
        let mut m = Self::with_capacity(ctx, data.rows(), data.dim())?;
        m.upload_rows(ctx, data)?;
        Ok(m)
    }

    /// Replaces the contents with `data` (same dimension, at most `capacity()` rows).
    pub fn upload_rows(&mut self, ctx: &GpuContext, data: DatasetView<'_, T>) -> Result<()> {
        if data.dim() != self.dim {
            return Err(Error::dim_mismatch(
                "device matrix upload",
                self.dim,
                data.dim(),
            ));
        }
        if data.rows() > self.capacity {
            return Err(Error::InvalidInput(format!(
                "{} rows do not fit a device matrix of capacity {}",
                data.rows(),
                self.capacity
            )));
        }
        let elem = std::mem::size_of::<T>();
        let row_bytes = self.stride * elem;
        let total = data.rows() * row_bytes;
        ctx.upload_staged(
            &mut self.buf.inner_mut().slice_mut(0..total),
            total,
            |offset, piece| pack_padded(data, row_bytes, offset, piece),
        )?;
        self.rows = data.rows();
        Ok(())
    }

    /// Copies the matrix back (without padding; through pinned staging when it is large, each
    /// staged chunk unpacked by several threads, a share of whole rows each).
    pub fn download(&self, ctx: &GpuContext) -> Result<Dataset<T>> {
        let elem = std::mem::size_of::<T>();
        let row_bytes = self.stride * elem;
        let data_bytes = self.dim * elem;
        let mut out = vec![T::default(); self.rows * self.dim];
        if !out.is_empty() {
            let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out[..]);
            let total = self.rows * row_bytes;
            ctx.download_staged(&self.buf.inner().slice(0..total), total, |offset, chunk| {
                unpack_padded(dst, data_bytes, row_bytes, offset, chunk)
            })?;
        }
        Dataset::from_vec(out, self.rows, self.dim)
    }

    /// Number of vectors held.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Rows the allocation can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Elements per vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Elements between row starts (a multiple of 16).
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The raw bytes of rows `start..end` (checked against `rows()`), for kernel arguments; an
    /// empty range still covers one byte, so that its pointer is valid.
    pub fn rows_view(&self, start: usize, end: usize) -> Result<DeviceView<'_, u8>> {
        let bytes = self.row_bytes_range(start, end)?;
        Ok(self.buf.slice(bytes))
    }

    /// The byte range of rows `start..end` (checked against `rows()`), at least one byte long
    /// so that an empty range still carries a valid pointer.
    fn row_bytes_range(&self, start: usize, end: usize) -> Result<std::ops::Range<usize>> {
        if start > end || end > self.rows {
            return Err(Error::InvalidInput(format!(
                "rows {start}..{end} outside a device matrix of {} rows",
                self.rows
            )));
        }
        let row_bytes = self.stride * std::mem::size_of::<T>();
        let hi = (end * row_bytes)
            .max(start * row_bytes + 1)
            .min(self.buf.len());
        Ok(start * row_bytes..hi)
    }

    /// The raw bytes of rows `start..end` (checked against `rows()`), writable, for kernels
    /// that fill the matrix; they must keep the layout (padding zero). An empty range still
    /// covers one byte, as in [`DeviceMatrix::rows_view`].
    pub fn rows_view_mut(&mut self, start: usize, end: usize) -> Result<DeviceViewMut<'_, u8>> {
        let bytes = self.row_bytes_range(start, end)?;
        Ok(self.buf.slice_mut(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of `dim` bytes, `stride` apart when padded; `rows` of them.
    fn sample(rows: usize, dim: usize) -> Vec<u8> {
        (0..rows * dim)
            .map(|i| (i * 7 + i / 13) as u8 | 1)
            .collect()
    }

    /// The padded layout, built one row at a time.
    fn padded(data: &[u8], dim: usize, stride: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for row in data.chunks(dim) {
            out.extend_from_slice(row);
            out.resize(out.len() + stride - dim, 0);
        }
        out
    }

    /// Cut points of `0..total`: chunk-sized steps, then also odd ones.
    fn cuts(total: usize, step: usize) -> Vec<usize> {
        (0..total).step_by(step.max(1)).chain([total]).collect()
    }

    #[test]
    fn packing_and_unpacking_any_split_match_the_row_layout() {
        // Several pieces of parallel work (rows of 37 bytes padded to 48, ~3 MiB), and a small
        // case, split at staging-chunk-like and odd boundaries (rows straddle them).
        for (rows, dim, stride) in [(66_000usize, 37usize, 48usize), (50, 5, 16), (1, 16, 16)] {
            let data = sample(rows, dim);
            let view = DatasetView::new(&data, rows, dim).unwrap();
            let want = padded(&data, dim, stride);
            let total = want.len();
            for step in [total, 1 << 20, 999_983, 4_099, 48, 7] {
                let cut = cuts(total, step);
                let mut packed = vec![0xAAu8; total];
                let mut unpacked = vec![0u8; rows * dim];
                for w in cut.windows(2) {
                    pack_padded(view, stride, w[0], &mut packed[w[0]..w[1]]);
                    unpack_padded(&mut unpacked, dim, stride, w[0], &want[w[0]..w[1]]);
                }
                assert!(
                    packed == want,
                    "pack {rows}x{dim}/{stride} in steps of {step}"
                );
                assert!(
                    unpacked == data,
                    "unpack {rows}x{dim}/{stride} in steps of {step}"
                );
            }
        }
    }
}
