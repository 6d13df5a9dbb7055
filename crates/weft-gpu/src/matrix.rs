//! [`DeviceMatrix`]: a row-major vector set in device memory.
//!
//! Rows are `stride` elements apart, `stride` the dimension rounded up to a multiple of 16
//! elements, with the padding zeroed: every row starts 16-byte aligned and can be read in whole
//! 16-byte vectors, and the zero padding changes no distance. Large transfers go through two
//! pinned staging buffers (the host packs or unpacks one chunk of padded rows while the copy
//! engine moves the other); small ones through pageable memory.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView};
use weft_core::{Dataset, DatasetView, Element, Error, Result};

use crate::context::GpuContext;

/// Elements per padded row for vectors of `dim` elements.
pub fn padded_stride(dim: usize) -> usize {
    dim.div_ceil(16) * 16
}

/// A row-major set of vectors on the device (see the module documentation for the layout).
pub struct DeviceMatrix<T: Element> {
    buf: CudaSlice<u8>,
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
        let data_bytes = self.dim * elem;
        let total = data.rows() * row_bytes;
        ctx.upload_staged(&mut self.buf.slice_mut(0..total), total, |offset, chunk| {
            // Write the padded rows' bytes `offset..offset + chunk.len()`.
            let mut pos = offset;
            let end = offset + chunk.len();
            while pos < end {
                let (r, within) = (pos / row_bytes, pos % row_bytes);
                let take = (row_bytes - within).min(end - pos);
                let out = &mut chunk[pos - offset..pos - offset + take];
                let row: &[u8] = bytemuck::cast_slice(data.row(r));
                let from_row = data_bytes.saturating_sub(within).min(take);
                if from_row > 0 {
                    out[..from_row].copy_from_slice(&row[within..within + from_row]);
                }
                out[from_row..].fill(0);
                pos += take;
            }
        })?;
        self.rows = data.rows();
        Ok(())
    }

    /// Copies the matrix back (without padding; through pinned staging when it is large).
    pub fn download(&self, ctx: &GpuContext) -> Result<Dataset<T>> {
        let elem = std::mem::size_of::<T>();
        let row_bytes = self.stride * elem;
        let data_bytes = self.dim * elem;
        let mut out = vec![T::default(); self.rows * self.dim];
        if !out.is_empty() {
            let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out[..]);
            let total = self.rows * row_bytes;
            ctx.download_staged(&self.buf.slice(0..total), total, |offset, chunk| {
                // Keep the data part of the padded rows' bytes `offset..offset + chunk.len()`.
                let mut pos = offset;
                let end = offset + chunk.len();
                while pos < end {
                    let (r, within) = (pos / row_bytes, pos % row_bytes);
                    let take = (row_bytes - within).min(end - pos);
                    let keep = data_bytes.saturating_sub(within).min(take);
                    if keep > 0 {
                        let at = r * data_bytes + within;
                        dst[at..at + keep]
                            .copy_from_slice(&chunk[pos - offset..pos - offset + keep]);
                    }
                    pos += take;
                }
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

    /// The raw bytes of rows `start..end` (checked against `rows()`).
    pub(crate) fn rows_view(&self, start: usize, end: usize) -> Result<CudaView<'_, u8>> {
        if start > end || end > self.rows {
            return Err(Error::InvalidInput(format!(
                "rows {start}..{end} outside a device matrix of {} rows",
                self.rows
            )));
        }
        let row_bytes = self.stride * std::mem::size_of::<T>();
        // Keep at least one byte so that empty views still carry a valid pointer.
        let hi = (end * row_bytes)
            .max(start * row_bytes + 1)
            .min(self.buf.len());
        Ok(self.buf.slice(start * row_bytes..hi))
    }
}
