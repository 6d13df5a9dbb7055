//! [`DeviceMatrix`]: a row-major vector set in device memory.
//!
//! Rows are `stride` elements apart, `stride` the dimension rounded up to a multiple of 16
//! elements, with the padding zeroed: every row starts 16-byte aligned and can be read in whole
//! 16-byte vectors, and the zero padding changes no distance. Transfers go through pageable host
//! memory (one staging copy when rows need padding); cudarc's pinned buffers are not used.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView};
use weft_core::{Dataset, DatasetView, Element, Error, Result};

use crate::context::{GpuContext, gpu_err};

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
        let n = data.rows() * self.stride;
        let staged: Vec<T>;
        let host: &[T] = match data.as_contiguous() {
            Some(s) if self.stride == self.dim => s,
            _ => {
                let mut v = vec![T::default(); n];
                for (r, row) in data.iter().enumerate() {
                    v[r * self.stride..r * self.stride + self.dim].copy_from_slice(row);
                }
                staged = v;
                &staged
            }
        };
        let bytes: &[u8] = bytemuck::cast_slice(host);
        if !bytes.is_empty() {
            ctx.stream()
                .memcpy_htod(bytes, &mut self.buf.slice_mut(0..bytes.len()))
                .map_err(gpu_err("copy vectors to the device"))?;
        }
        self.rows = data.rows();
        Ok(())
    }

    /// Copies the matrix back (without padding).
    pub fn download(&self, ctx: &GpuContext) -> Result<Dataset<T>> {
        let n = self.rows * self.stride;
        let mut host = vec![T::default(); n];
        if n > 0 {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut host);
            let len = bytes.len();
            ctx.stream()
                .memcpy_dtoh(&self.buf.slice(0..len), bytes)
                .map_err(gpu_err("copy vectors from the device"))?;
            ctx.synchronize()?;
        }
        let mut out = Vec::with_capacity(self.rows * self.dim);
        for r in 0..self.rows {
            out.extend_from_slice(&host[r * self.stride..r * self.stride + self.dim]);
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
