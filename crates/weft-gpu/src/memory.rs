//! Device memory: [`DeviceBuffer`] (owned), [`DeviceView`] and [`DeviceViewMut`] (borrowed
//! ranges), and the kernel arguments made from them ([`In`], [`Out`]).
//!
//! Allocate with [`GpuContext::alloc_zeros`](crate::GpuContext::alloc_zeros) or [`GpuContext::upload`](crate::GpuContext::upload); copy with
//! [`GpuContext::download`](crate::GpuContext::download), [`GpuContext::download_view`](crate::GpuContext::download_view), [`GpuContext::copy_to_device`](crate::GpuContext::copy_to_device) and
//! [`GpuContext::zero`](crate::GpuContext::zero). All work of a context runs on its one stream, in order, so a buffer
//! freed after a launch is freed after the kernel finishes (stream-ordered free).

use std::ops::{Bound, Range, RangeBounds};

use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceRepr, ValidAsZeroBits,
};

use crate::kernel::{In, Out};

/// Element types of device buffers: plain bytes, valid when zeroed.
pub trait DeviceCopy: bytemuck::Pod + Default + DeviceRepr + ValidAsZeroBits {}

impl DeviceCopy for u8 {}
impl DeviceCopy for i8 {}
impl DeviceCopy for u16 {}
impl DeviceCopy for u32 {}
impl DeviceCopy for i32 {}
impl DeviceCopy for u64 {}
impl DeviceCopy for i64 {}
impl DeviceCopy for f32 {}
impl DeviceCopy for f64 {}

/// The raw device address of a cudarc buffer or view. The context's single stream orders every
/// use, so the synchronisation guard cudarc returns (which records events only when a context
/// runs several streams) is not needed past this call.
fn raw_ptr<T, P: DevicePtr<T>>(p: &P, stream: &CudaStream) -> u64 {
    let (ptr, _guard) = p.device_ptr(stream);
    ptr
}

/// `bounds` as a range within `0..len`, or `None` when it does not fit.
fn range_in(bounds: &impl RangeBounds<usize>, len: usize) -> Option<Range<usize>> {
    let start = match bounds.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match bounds.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start <= end && end <= len).then_some(start..end)
}

/// Panics with a message that names the range and the length (an out-of-range slice is a bug
/// in the calling code, like slicing a `Vec` out of range).
fn out_of_range(bounds: &impl std::fmt::Debug, len: usize) -> ! {
    panic!("device range {bounds:?} out of a buffer of {len} elements")
}

/// An owned buffer of `len` elements of device memory.
pub struct DeviceBuffer<T: DeviceCopy> {
    inner: CudaSlice<T>,
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>({} elements)",
            std::any::type_name::<T>(),
            self.len()
        )
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    pub(crate) fn from_inner(inner: CudaSlice<T>) -> Self {
        DeviceBuffer { inner }
    }

    pub(crate) fn inner(&self) -> &CudaSlice<T> {
        &self.inner
    }

    pub(crate) fn inner_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.inner
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes.
    pub fn bytes(&self) -> u64 {
        self.len() as u64 * std::mem::size_of::<T>() as u64
    }

    /// The whole buffer as a view.
    pub fn view(&self) -> DeviceView<'_, T> {
        DeviceView {
            inner: self.inner.as_view(),
            stream: self.inner.stream(),
        }
    }

    /// The whole buffer as a mutable view.
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        let stream = self.inner.stream().clone();
        DeviceViewMut {
            inner: self.inner.as_view_mut(),
            stream,
        }
    }

    /// Elements `bounds`; panics when they are not within the buffer.
    pub fn slice(&self, bounds: impl RangeBounds<usize> + std::fmt::Debug) -> DeviceView<'_, T> {
        let r = range_in(&bounds, self.len()).unwrap_or_else(|| out_of_range(&bounds, self.len()));
        DeviceView {
            inner: self.inner.slice(r),
            stream: self.inner.stream(),
        }
    }

    /// Elements `bounds`, writable; panics when they are not within the buffer.
    pub fn slice_mut(
        &mut self,
        bounds: impl RangeBounds<usize> + std::fmt::Debug,
    ) -> DeviceViewMut<'_, T> {
        let len = self.len();
        let r = range_in(&bounds, len).unwrap_or_else(|| out_of_range(&bounds, len));
        let stream = self.inner.stream().clone();
        DeviceViewMut {
            inner: self.inner.slice_mut(r),
            stream,
        }
    }

    /// The buffer as a read-only kernel argument.
    pub fn input(&self) -> In<'_, T> {
        In::new(raw_ptr(&self.inner, self.inner.stream()))
    }

    /// The buffer as a writable kernel argument.
    pub fn output(&mut self) -> Out<'_, T> {
        Out::new(raw_ptr(&self.inner, self.inner.stream()))
    }
}

/// A borrowed range of a device buffer.
pub struct DeviceView<'a, T> {
    inner: CudaView<'a, T>,
    stream: &'a std::sync::Arc<CudaStream>,
}

impl<T> std::fmt::Debug for DeviceView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceView({} elements)", self.len())
    }
}

impl<'a, T> DeviceView<'a, T> {
    pub(crate) fn inner(&self) -> &CudaView<'a, T> {
        &self.inner
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements `bounds` of this view; panics when they are not within it.
    pub fn slice(&self, bounds: impl RangeBounds<usize> + std::fmt::Debug) -> DeviceView<'a, T> {
        let r = range_in(&bounds, self.len()).unwrap_or_else(|| out_of_range(&bounds, self.len()));
        DeviceView {
            inner: self.inner.slice(r),
            stream: self.stream,
        }
    }

    /// The view as a read-only kernel argument.
    pub fn input(&self) -> In<'_, T> {
        In::new(raw_ptr(&self.inner, self.stream))
    }
}

/// A borrowed, writable range of a device buffer.
pub struct DeviceViewMut<'a, T> {
    inner: CudaViewMut<'a, T>,
    stream: std::sync::Arc<CudaStream>,
}

impl<T> std::fmt::Debug for DeviceViewMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceViewMut({} elements)", self.len())
    }
}

impl<'a, T> DeviceViewMut<'a, T> {
    pub(crate) fn inner_mut(&mut self) -> &mut CudaViewMut<'a, T> {
        &mut self.inner
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements `bounds` of this view, writable; panics when they are not within it.
    pub fn slice_mut(
        &mut self,
        bounds: impl RangeBounds<usize> + std::fmt::Debug,
    ) -> DeviceViewMut<'_, T> {
        let len = self.len();
        let r = range_in(&bounds, len).unwrap_or_else(|| out_of_range(&bounds, len));
        DeviceViewMut {
            inner: self.inner.slice_mut(r),
            stream: self.stream.clone(),
        }
    }

    /// The view as a read-only kernel argument.
    pub fn input(&self) -> In<'_, T> {
        In::new(raw_ptr(&self.inner, &self.stream))
    }

    /// The view as a writable kernel argument.
    pub fn output(&mut self) -> Out<'_, T> {
        Out::new(raw_ptr(&self.inner, &self.stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_against_the_length() {
        assert_eq!(range_in(&.., 5), Some(0..5));
        assert_eq!(range_in(&(2..=3), 5), Some(2..4));
        assert_eq!(range_in(&(5..5), 5), Some(5..5));
        assert_eq!(range_in(&(4..6), 5), None);
        let (hi, lo) = (3, 2);
        assert_eq!(range_in(&(hi..lo), 5), None);
        assert_eq!(range_in(&(..=usize::MAX), 5), None);
    }
}
