//! Finding a GPU: [`probe`], and the [`GpuContext`] every GPU operation takes.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, PinnedHostSlice, PushKernelArg,
    sys,
};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::{Error, Result};

use crate::kernel::{Kernel, KernelArgs, KernelModule, Launch};
use crate::loader::{self, KernelLoadPath, KernelMode};
use crate::memory::{DeviceBuffer, DeviceCopy, DeviceView, DeviceViewMut};
use crate::nvrtc::Nvrtc;

/// Transfers of at least this many bytes go through pinned staging buffers (kept by the
/// context, so only the first staged transfer pays for pinning them). Below it a plain copy
/// from pageable memory costs less than the staging's extra pass; above it the driver's own
/// pageable path is the slower one (a search's 5 MB of queries or 2.5 MB of results).
pub const PINNED_TRANSFER_THRESHOLD: usize = 256 << 10;
/// Bytes in each of the two pinned staging buffers of a large transfer.
const STAGING_CHUNK: usize = 8 << 20;
/// Bytes one rayon task moves between a staging chunk and pageable host memory: 16 pieces
/// per chunk, so that the copy (and the first touch of fresh destination pages) uses many
/// cores while the copy engine moves the next chunk.
pub(crate) const HOST_COPY_PIECE: usize = 512 << 10;

/// Copies `src` into `dst` (equal lengths), in pieces of [`HOST_COPY_PIECE`] on rayon's pool
/// when it is larger than one piece.
fn par_copy_into(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    if src.len() <= HOST_COPY_PIECE {
        dst.write_copy_of_slice(src);
        return;
    }
    dst.par_chunks_mut(HOST_COPY_PIECE)
        .zip(src.par_chunks(HOST_COPY_PIECE))
        .for_each(|(d, s)| {
            d.write_copy_of_slice(s);
        });
}

/// Calls `fill(offset + at, piece)` for the pieces of [`HOST_COPY_PIECE`] bytes of `chunk`
/// (`at` the piece's start within `chunk`), on rayon's pool when there is more than one.
fn par_fill(chunk: &mut [u8], offset: usize, fill: &(impl Fn(usize, &mut [u8]) + Sync)) {
    if chunk.len() <= HOST_COPY_PIECE {
        fill(offset, chunk);
        return;
    }
    chunk
        .par_chunks_mut(HOST_COPY_PIECE)
        .enumerate()
        .for_each(|(i, piece)| fill(offset + i * HOST_COPY_PIECE, piece));
}

/// Maps a CUDA driver error to [`Error::Gpu`], naming what was being done.
pub(crate) fn gpu_err(
    what: impl std::fmt::Display,
) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |e| Error::Gpu(format!("{what}: {e}"))
}

/// What the device is: reported with builds and searches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Device name (`NVIDIA H100 80GB HBM3`, ...).
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// Total device memory in bytes.
    pub total_memory: u64,
    /// Driver API version (e.g. 13000 for CUDA 13.0).
    pub driver_version: u32,
    /// Shared memory a block may opt into, in bytes.
    pub max_shared_per_block: u32,
}

impl DeviceInfo {
    /// The SM version, 10 * major + minor (90 for Hopper).
    pub fn arch(&self) -> u32 {
        self.compute_capability.0 * 10 + self.compute_capability.1
    }
}

/// Names of the driver library tried before cudarc is allowed to touch it.
const LIBCUDA: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

/// Checks that the CUDA driver library can be loaded, without letting cudarc panic over it.
pub fn driver_library_present() -> Result<()> {
    for name in LIBCUDA {
        // SAFETY: loading libcuda runs the driver's initialisers, which have no preconditions;
        // the handle is dropped at once (cudarc loads it again for itself).
        if unsafe { libloading::Library::new(name) }.is_ok() {
            return Ok(());
        }
    }
    Err(Error::Unsupported(format!(
        "the CUDA driver library is not installed (tried {LIBCUDA:?})"
    )))
}

/// A usable context on device 0 (or `$WEFT_GPU_DEVICE`), or the reason there is none. Never
/// panics: the driver library's presence is checked before cudarc loads it.
pub fn probe() -> Result<GpuContext> {
    let ordinal = match std::env::var("WEFT_GPU_DEVICE") {
        Ok(v) => v.parse().map_err(|_| {
            Error::invalid_param("WEFT_GPU_DEVICE", format!("`{v}` is not a device number"))
        })?,
        Err(_) => 0,
    };
    probe_device(ordinal)
}

/// The number of CUDA devices visible to this process (as `CUDA_VISIBLE_DEVICES` leaves them),
/// or why none can be counted (no driver library, a driver that fails to start). Never panics.
pub fn device_count() -> Result<usize> {
    driver_library_present()?;
    std::panic::catch_unwind(|| -> Result<usize> {
        cudarc::driver::result::init().map_err(gpu_err("cuInit"))?;
        let count = CudaContext::device_count().map_err(gpu_err("cuDeviceGetCount"))?;
        Ok(usize::try_from(count).unwrap_or(0))
    })
    .unwrap_or_else(|_| {
        Err(Error::Unsupported(
            "the CUDA driver could not count the devices".into(),
        ))
    })
}

/// A usable context on device `ordinal`, or the reason there is none.
pub fn probe_device(ordinal: usize) -> Result<GpuContext> {
    driver_library_present()?;
    let mode = KernelMode::from_env()?;
    // cudarc panics when a driver entry point is missing (a driver older than CUDA 13): turn
    // that into an error too.
    std::panic::catch_unwind(AssertUnwindSafe(|| GpuContext::open(ordinal, mode))).unwrap_or_else(
        |p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Unsupported(format!(
                "the CUDA driver cannot be used: {msg}"
            )))
        },
    )
}

/// One retain of each opened device's primary context, held until the process exits.
///
/// Every [`GpuContext`] retains its device's primary context (the one context per device and
/// process that the CUDA runtime, PyTorch and CuPy share) and releases it when dropped. Without
/// this hold, a process whose calls each probe and drop a context (Python's `gpu_info()`, a
/// build, a search: each its own) destroyed the primary context whenever the last one was
/// dropped, and made it again at the next probe. Measured on an H200 (driver 580): a thread
/// that had used the destroyed context keeps it bound, and a driver call made there before the
/// next retain fails with `CUDA_ERROR_CONTEXT_IS_DESTROYED`; and each remake sets the device
/// up again. Held here, the primary context is made once per device and lives as long as the
/// process, as the CUDA runtime keeps it: no thread is ever bound to a destroyed context, and a
/// later probe costs a retain. The price is the context's own device memory, kept until exit.
///
/// This is process-wide state, as the primary context it holds is: each slot is written once
/// (the first open of that device) and never changed; nothing is released (the driver frees
/// the context at exit).
static PRIMARY_CONTEXTS: OnceLock<Box<[OnceLock<Arc<CudaContext>>]>> = OnceLock::new();

/// Retains device `ordinal`'s primary context for the rest of the process (see
/// [`PRIMARY_CONTEXTS`]); `count` is the number of visible devices.
fn keep_primary_context(ordinal: usize, count: usize) -> Result<()> {
    let slots = PRIMARY_CONTEXTS.get_or_init(|| (0..count).map(|_| OnceLock::new()).collect());
    let Some(slot) = slots.get(ordinal) else {
        return Err(Error::Unsupported(format!(
            "CUDA device {ordinal} was not visible when this process first opened a GPU ({} \
             were)",
            slots.len()
        )));
    };
    if slot.get().is_none() {
        let held = CudaContext::new(ordinal).map_err(gpu_err(format!(
            "retain the primary context of device {ordinal}"
        )))?;
        // Two threads opening the device at once each retain it; the loser's retain is
        // released when its Arc drops here, the winner's is kept.
        let _ = slot.set(held);
    }
    Ok(())
}

/// `$WEFT_NVRTC_THREADS` (a positive number), else the number of CPUs.
fn compile_threads_from_env() -> Result<usize> {
    match std::env::var("WEFT_NVRTC_THREADS") {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                Error::invalid_param(
                    "WEFT_NVRTC_THREADS",
                    format!("`{v}` is not a positive number of threads"),
                )
            }),
        Err(_) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// One device, its stream, its loaded kernels and its memory accounting. Create with [`probe`];
/// pass it to every GPU operation. It holds no global state: two contexts are independent.
pub struct GpuContext {
    cuda: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    mode: KernelMode,
    /// Threads that compile kernel units at once in [`GpuContext::prepare_kernels`].
    compile_threads: usize,
    margin: u64,
    modules: Mutex<HashMap<&'static str, LoadedModule>>,
    /// Units of modules compiled on their own by NVRTC (module name, unit index).
    units: Mutex<HashMap<(&'static str, usize), LoadedModule>>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    nvrtc: Mutex<Option<Arc<Nvrtc>>>,
    staging: Mutex<Vec<PinnedHostSlice<u8>>>,
}

/// A module loaded on a context: the module it came from (to tell two modules of one name
/// apart), the driver's module, and how it was delivered.
#[derive(Clone)]
struct LoadedModule {
    from: &'static KernelModule,
    module: Arc<CudaModule>,
    path: KernelLoadPath,
}

/// A context's pinned staging buffers, out of it for one transfer (see `GpuContext::staging`);
/// dropping the guard puts them back, or frees them when the context has a pair again. Every
/// staged transfer synchronises the stream before it returns, so no copy still uses them then.
struct Staging<'a> {
    ctx: &'a GpuContext,
    bufs: Vec<PinnedHostSlice<u8>>,
}

impl std::ops::Deref for Staging<'_> {
    type Target = [PinnedHostSlice<u8>];
    fn deref(&self) -> &Self::Target {
        &self.bufs
    }
}

impl std::ops::DerefMut for Staging<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.bufs
    }
}

/// Copies of small device views into host memory, queued on the stream together and waited
/// for once ([`GpuContext::host_copies`]): each is a DMA into one of the context's pinned staging
/// buffers, and [`HostCopies::finish`] synchronises once and moves the bytes into their
/// destinations. A search's ids, distances and counters thus cost one round trip, not three.
/// Dropped unfinished (an error on the way), it still waits for the copies it queued, so the
/// staging buffers go back to the context idle.
pub struct HostCopies<'c, 'h> {
    ctx: &'c GpuContext,
    staging: Staging<'c>,
    used: usize,
    pending: Vec<(usize, &'h mut [u8])>,
}

impl<'h> HostCopies<'_, 'h> {
    /// Queues the copy of `src` into `dst` (the same length). A copy that does not fit what is
    /// left of the staging buffer is made at once through [`GpuContext::copy_to_host`].
    pub fn add<T: DeviceCopy>(&mut self, src: &DeviceView<'_, T>, dst: &'h mut [T]) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::InvalidInput(format!(
                "copy of a device range of {} elements into {}",
                src.len(),
                dst.len()
            )));
        }
        let bytes = std::mem::size_of_val(dst);
        if bytes == 0 {
            return Ok(());
        }
        let at = self.used.next_multiple_of(16);
        if at + bytes > STAGING_CHUNK {
            return self.ctx.copy_to_host(src, dst);
        }
        // SAFETY: reinterpreting a view of `T` (Pod: no padding) as its `bytes` bytes, which
        // the view holds (same length as `dst`).
        let from = unsafe { src.inner().transmute::<u8>(bytes) }
            .ok_or_else(|| Error::Gpu("reinterpret a device view as bytes".into()))?;
        let host = &mut self.staging[0]
            .as_mut_slice()
            .map_err(gpu_err("pinned host memory"))?[at..at + bytes];
        self.ctx
            .stream
            .memcpy_dtoh(&from, host)
            .map_err(gpu_err("copy from the device"))?;
        self.pending.push((at, bytemuck::cast_slice_mut(dst)));
        self.used = at + bytes;
        Ok(())
    }

    /// Waits for the queued copies and moves their bytes into the destinations.
    pub fn finish(mut self) -> Result<()> {
        self.ctx.synchronize()?;
        let pending = std::mem::take(&mut self.pending);
        let host = self.staging[0]
            .as_slice()
            .map_err(gpu_err("pinned host memory"))?;
        for (at, dst) in pending {
            let len = dst.len();
            dst.copy_from_slice(&host[at..at + len]);
        }
        Ok(())
    }
}

impl Drop for HostCopies<'_, '_> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            // Unfinished: the copies may still be writing into the staging buffer.
            let _ = self.ctx.synchronize();
        }
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        let mut slot = self.ctx.staging.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_empty() {
            *slot = std::mem::take(&mut self.bufs);
        }
    }
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("info", &self.info)
            .field("mode", &self.mode)
            .field("margin", &self.margin)
            .finish()
    }
}

impl GpuContext {
    fn open(ordinal: usize, mode: KernelMode) -> Result<GpuContext> {
        cudarc::driver::result::init().map_err(gpu_err("cuInit"))?;
        let count = CudaContext::device_count().map_err(gpu_err("cuDeviceGetCount"))?;
        if count <= 0 {
            return Err(Error::Unsupported("no CUDA device is visible".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::Unsupported(format!(
                "CUDA device {ordinal} does not exist ({count} visible)"
            )));
        }
        keep_primary_context(ordinal, count as usize)?;
        let cuda = CudaContext::new(ordinal)
            .map_err(gpu_err(format!("create a context on device {ordinal}")))?;
        let stream = cuda.default_stream();
        let name = cuda.name().map_err(gpu_err("cuDeviceGetName"))?;
        let (major, minor) = cuda
            .compute_capability()
            .map_err(gpu_err("compute capability"))?;
        let attr = |a: sys::CUdevice_attribute, what: &str| {
            cuda.attribute(a)
                .map_err(gpu_err(format!("device attribute {what}")))
        };
        let sm_count = attr(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "multiprocessor count",
        )?;
        let max_shared = attr(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            "shared memory per block",
        )?;
        let total = cuda.total_mem().map_err(gpu_err("cuDeviceTotalMem"))? as u64;
        let mut driver = 0i32;
        // SAFETY: cuDriverGetVersion writes one int through a valid pointer; the driver library
        // is loaded (checked above, and cuInit succeeded).
        let r = unsafe { sys::cuDriverGetVersion(&mut driver) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::Gpu(format!("cuDriverGetVersion: {r:?}")));
        }
        let info = DeviceInfo {
            ordinal,
            name,
            compute_capability: (major as u32, minor as u32),
            sm_count: sm_count as u32,
            total_memory: total,
            driver_version: driver as u32,
            max_shared_per_block: max_shared as u32,
        };
        if info.compute_capability.0 < 7 {
            return Err(Error::Unsupported(format!(
                "{} has compute capability {major}.{minor}; weft needs 7.0 or newer",
                info.name
            )));
        }
        Ok(GpuContext {
            cuda,
            stream,
            margin: (256u64 << 20).max(total / 20),
            info,
            mode,
            compile_threads: compile_threads_from_env()?,
            modules: Mutex::new(HashMap::new()),
            units: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            nvrtc: Mutex::new(None),
            staging: Mutex::new(Vec::new()),
        })
    }

    /// The device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The kernel delivery mode (from `WEFT_KERNELS` at probe time).
    pub fn kernel_mode(&self) -> KernelMode {
        self.mode
    }

    /// Uses `mode` for modules loaded from now on.
    pub fn with_kernel_mode(mut self, mode: KernelMode) -> Self {
        self.mode = mode;
        self
    }

    /// Threads [`GpuContext::prepare_kernels`] compiles kernel units on (`$WEFT_NVRTC_THREADS`
    /// at probe time, else the number of CPUs).
    pub fn compile_threads(&self) -> usize {
        self.compile_threads
    }

    /// Compiles kernel units on up to `threads` threads at once from now on (1: one after
    /// another).
    pub fn with_compile_threads(mut self, threads: std::num::NonZeroUsize) -> Self {
        self.compile_threads = threads.get();
        self
    }

    /// Device memory kept free by the default budget, in bytes (default: 256 MiB or 5% of the
    /// device, whichever is larger).
    pub fn margin(&self) -> u64 {
        self.margin
    }

    /// Sets the margin the default budget keeps free.
    pub fn with_margin(mut self, bytes: u64) -> Self {
        self.margin = bytes;
        self
    }

    /// (free, total) device memory in bytes, now.
    pub fn memory(&self) -> Result<(u64, u64)> {
        let (free, total) = self.cuda.mem_get_info().map_err(gpu_err("cuMemGetInfo"))?;
        Ok((free as u64, total as u64))
    }

    /// The default memory budget: free memory minus the margin.
    pub fn default_budget(&self) -> Result<u64> {
        Ok(self.memory()?.0.saturating_sub(self.margin))
    }

    /// Fails with [`Error::OutOfDeviceMemory`] unless `needed` bytes fit in `budget` (or the
    /// default budget) — said before anything is allocated.
    pub fn check_fits(&self, needed: u64, budget: Option<u64>) -> Result<()> {
        let free = match budget {
            Some(b) => b.min(self.memory()?.0),
            None => self.default_budget()?,
        };
        if needed > free {
            return Err(Error::OutOfDeviceMemory { needed, free });
        }
        Ok(())
    }

    /// Allocates `len` zeroed elements, after checking that they fit in free memory minus the
    /// margin.
    pub fn alloc_zeros<T: DeviceCopy>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = (len as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        let free = self.memory()?.0;
        if bytes > free.saturating_sub(self.margin.min(free / 2)) {
            return Err(Error::OutOfDeviceMemory {
                needed: bytes,
                free: free.saturating_sub(self.margin.min(free / 2)),
            });
        }
        self.stream
            .alloc_zeros::<T>(len.max(1))
            .map(DeviceBuffer::from_inner)
            .map_err(gpu_err(format!("allocate {bytes} bytes")))
    }

    /// Copies host data into a new device buffer (budget-checked).
    /// Large transfers go through pinned staging.
    pub fn upload<T: DeviceCopy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = self.alloc_zeros::<T>(data.len())?;
        if !data.is_empty() {
            self.copy_to_device(data, &mut buf.slice_mut(0..data.len()))?;
        }
        Ok(buf)
    }

    /// Copies the first `len` elements of a device buffer to the host (through pinned staging
    /// when the transfer is large); see [`GpuContext::download_view`].
    pub fn download<T: DeviceCopy>(&self, buf: &DeviceBuffer<T>, len: usize) -> Result<Vec<T>> {
        if len > buf.len() {
            return Err(Error::InvalidInput(format!(
                "cannot download {len} elements from a buffer of {}",
                buf.len()
            )));
        }
        self.download_view(&buf.slice(0..len))
    }

    /// Copies a view of a device buffer (e.g. `buf.slice(lo..hi)`) into a new vector. Large
    /// transfers go through pinned staging; each staged chunk is copied into the vector by
    /// several threads (rayon's pool, or the installed one), and the vector is written once,
    /// without zero-filling it first. Synchronises before returning.
    pub fn download_view<T: DeviceCopy>(&self, src: &DeviceView<'_, T>) -> Result<Vec<T>> {
        let src = src.inner();
        let len = src.len();
        let size = std::mem::size_of::<T>();
        if len == 0 || size == 0 {
            return Ok(vec![T::default(); len]);
        }
        let total = len
            .checked_mul(size)
            .ok_or_else(|| Error::InvalidInput(format!("{len} elements overflow a download")))?;
        // SAFETY: reinterpreting a view of `T` (Pod: any bytes are a valid `T`, no padding) as
        // its `len * size` bytes, which the view holds.
        let bytes = unsafe { src.transmute::<u8>(total) }
            .ok_or_else(|| Error::Gpu("reinterpret a device buffer as bytes".into()))?;
        let mut out = Vec::<T>::with_capacity(len);
        let spare = out.spare_capacity_mut();
        debug_assert!(spare.len() >= len);
        // SAFETY: the spare capacity holds at least `len` elements of `T`, i.e. `total` bytes,
        // exclusively borrowed from `out` until the download below returns; `MaybeUninit<u8>`
        // has size and alignment 1 and may hold any byte or none, so the same memory as
        // `total` of them is a valid, properly aligned slice.
        let dst: &mut [MaybeUninit<u8>] =
            unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), total) };
        self.download_staged_into(&bytes, dst)?;
        // SAFETY: the bytes `0..total` of the spare capacity, i.e. the first `len` elements,
        // were all written above (a gapless prefix of `total` bytes: checked per chunk and in
        // sum), and any bytes are a valid `T` (Pod).
        unsafe { out.set_len(len) };
        Ok(out)
    }

    /// Copies the first `dst.len()` bytes of `src` into `dst` through [`Self::download_staged`],
    /// each staged chunk by several threads; errors unless every byte of `dst` was written (a
    /// gapless prefix, checked per chunk and in sum), so the caller may treat it as initialised.
    fn download_staged_into(
        &self,
        src: &cudarc::driver::CudaView<'_, u8>,
        dst: &mut [MaybeUninit<u8>],
    ) -> Result<()> {
        let total = dst.len();
        let mut written = 0usize;
        self.download_staged(src, total, |offset, chunk| {
            // `written` counts a prefix: the chunks must arrive in order, without gaps.
            assert_eq!(offset, written, "staged download chunks out of order");
            par_copy_into(&mut dst[offset..offset + chunk.len()], chunk);
            written += chunk.len();
        })?;
        if written != total {
            return Err(Error::Gpu(format!(
                "a download delivered {written} of {total} bytes"
            )));
        }
        Ok(())
    }

    /// Copies `total` bytes from the device into host memory, through the context's two pinned
    /// staging buffers when `total` is at least [`PINNED_TRANSFER_THRESHOLD`]: `take(offset,
    /// chunk)` receives the bytes `offset..offset + chunk.len()` in order, while the copy engine
    /// moves the next chunk. Synchronises before returning.
    pub(crate) fn download_staged(
        &self,
        src: &cudarc::driver::CudaView<'_, u8>,
        total: usize,
        mut take: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        if total > src.len() {
            return Err(Error::InvalidInput(format!(
                "cannot download {total} bytes from a buffer of {}",
                src.len()
            )));
        }
        if total < PINNED_TRANSFER_THRESHOLD {
            let mut host = vec![0u8; total];
            self.stream
                .memcpy_dtoh(&src.slice(0..total), &mut host[..])
                .map_err(gpu_err("copy from the device"))?;
            self.synchronize()?;
            take(0, &host);
            return Ok(());
        }
        let mut staging = self.staging()?;
        let chunks: Vec<(usize, usize)> = (0..total)
            .step_by(STAGING_CHUNK)
            .map(|o| (o, (o + STAGING_CHUNK).min(total)))
            .collect();
        // Queues the copy of chunk `c` into staging buffer `c % 2` and returns an event that
        // completes with it. cudarc's own event on a pinned buffer is recorded only when a
        // context runs several streams (this one runs one), so the transfer keeps its own.
        let queue = |staging: &mut [PinnedHostSlice<u8>], c: usize| -> Result<CudaEvent> {
            let (lo, hi) = chunks[c];
            let from = src.slice(lo..hi);
            let buf = &mut staging[c % 2];
            if hi - lo == STAGING_CHUNK {
                self.stream.memcpy_dtoh(&from, buf)
            } else {
                let part =
                    &mut buf.as_mut_slice().map_err(gpu_err("pinned host memory"))?[..hi - lo];
                self.stream.memcpy_dtoh(&from, part)
            }
            .map_err(gpu_err("copy from the device"))?;
            self.stream
                .record_event(None)
                .map_err(gpu_err("record a staged copy"))
        };
        let mut pending = queue(&mut staging, 0)?;
        for (c, &(lo, hi)) in chunks.iter().enumerate() {
            // Chunk c + 1 goes into the other buffer, whose chunk c - 1 the host has taken.
            let next = if c + 1 < chunks.len() {
                Some(queue(&mut staging, c + 1)?)
            } else {
                None
            };
            pending
                .synchronize()
                .map_err(gpu_err("wait for a staged copy"))?;
            let done = staging[c % 2]
                .as_slice()
                .map_err(gpu_err("pinned host memory"))?;
            take(lo, &done[..hi - lo]);
            if let Some(e) = next {
                pending = e;
            }
        }
        self.synchronize()
    }

    /// Copies `total` bytes into the device buffer `dst` (from its start), through the
    /// context's two pinned staging buffers when `total` is at least
    /// [`PINNED_TRANSFER_THRESHOLD`]: `fill(offset, piece)` writes the bytes `offset..offset +
    /// piece.len()`, so the host packs one chunk while the copy engine moves the other. Each
    /// chunk is packed in pieces of [`HOST_COPY_PIECE`] bytes on rayon's pool (in any order,
    /// concurrently), so `fill` must pack any sub-range on its own. Returns when the host
    /// buffers are no longer read.
    pub(crate) fn upload_staged(
        &self,
        dst: &mut cudarc::driver::CudaViewMut<'_, u8>,
        total: usize,
        fill: impl Fn(usize, &mut [u8]) + Sync,
    ) -> Result<()> {
        if total > dst.len() {
            return Err(Error::InvalidInput(format!(
                "cannot upload {total} bytes into a buffer of {}",
                dst.len()
            )));
        }
        if total == 0 {
            return Ok(());
        }
        if total < PINNED_TRANSFER_THRESHOLD {
            let mut host = vec![0u8; total];
            par_fill(&mut host, 0, &fill);
            // `host` is pageable (a fresh vector): an asynchronous copy from pageable memory
            // returns once the driver has taken the bytes into its own staging, so `host` may go
            // right after, and the stream orders the copy before any later kernel. No
            // synchronisation: a small upload (a batch-1 query) costs one driver call.
            return self
                .stream
                .memcpy_htod(&host[..], &mut dst.slice_mut(0..total))
                .map_err(gpu_err("copy to the device"));
        }
        let mut staging = self.staging()?;
        // Per staging buffer, an event that completes with the last copy reading it (cudarc's
        // own is recorded only when a context runs several streams; this one runs one).
        let mut read_by: [Option<CudaEvent>; 2] = [None, None];
        for (i, lo) in (0..total).step_by(STAGING_CHUNK).enumerate() {
            let hi = (lo + STAGING_CHUNK).min(total);
            if let Some(e) = read_by[i % 2].take() {
                e.synchronize().map_err(gpu_err("wait for a staged copy"))?;
            }
            let buf = &mut staging[i % 2];
            let host = buf.as_mut_slice().map_err(gpu_err("pinned host memory"))?;
            par_fill(&mut host[..hi - lo], lo, &fill);
            let mut to = dst.slice_mut(lo..hi);
            if hi - lo == STAGING_CHUNK {
                // The whole pinned buffer: an asynchronous copy.
                self.stream.memcpy_htod(&*buf, &mut to)
            } else {
                // The last, partial chunk (cudarc copies whole pinned buffers only): a plain
                // slice of the pinned memory.
                let part = &buf.as_slice().map_err(gpu_err("pinned host memory"))?[..hi - lo];
                self.stream.memcpy_htod(part, &mut to)
            }
            .map_err(gpu_err("copy to the device"))?;
            read_by[i % 2] = Some(
                self.stream
                    .record_event(None)
                    .map_err(gpu_err("record a staged copy"))?,
            );
        }
        // The buffers serve the next transfer only once the device has read them.
        self.synchronize()
    }

    /// The two pinned staging buffers, allocated on first use and kept for the context's life
    /// (allocating page-locked memory costs milliseconds), taken out of the context for one
    /// transfer and put back when the returned guard drops. The lock is never held during a
    /// transfer: its host copies run on rayon, and a worker waiting for its pieces may pick up
    /// another task that makes a transfer on this context (it would wait for itself). A
    /// transfer that finds the buffers out (a concurrent one) allocates a pair of its own.
    fn staging(&self) -> Result<Staging<'_>> {
        let taken = std::mem::take(&mut *self.staging.lock().unwrap_or_else(|p| p.into_inner()));
        let bufs = if taken.is_empty() {
            vec![self.pinned(STAGING_CHUNK)?, self.pinned(STAGING_CHUNK)?]
        } else {
            taken
        };
        Ok(Staging { ctx: self, bufs })
    }

    /// A zero-filled page-locked host buffer of `len` bytes.
    fn pinned(&self, len: usize) -> Result<PinnedHostSlice<u8>> {
        // SAFETY: the allocation is filled with zeros below before anything reads it.
        let mut buf = unsafe { self.cuda.alloc_pinned_with_flags::<u8>(len, 0) }.map_err(
            gpu_err(format!("allocate {len} bytes of pinned host memory")),
        )?;
        buf.as_mut_slice()
            .map_err(gpu_err("pinned host memory"))?
            .fill(0);
        Ok(buf)
    }

    /// Copies `src` into the device view `dst` of the same length (through the context's pinned
    /// staging buffers from [`PINNED_TRANSFER_THRESHOLD`] bytes, as [`GpuContext::upload`]).
    /// Synchronises before returning, so `src` may change or go right after.
    pub fn copy_to_device<T: DeviceCopy>(
        &self,
        src: &[T],
        dst: &mut DeviceViewMut<'_, T>,
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::InvalidInput(format!(
                "copy of {} elements into a device range of {}",
                src.len(),
                dst.len()
            )));
        }
        if src.is_empty() {
            return Ok(());
        }
        let bytes: &[u8] = bytemuck::cast_slice(src);
        if bytes.len() >= PINNED_TRANSFER_THRESHOLD {
            // SAFETY: the view holds `src.len()` elements of `T` (Pod: plain bytes, no
            // padding), i.e. exactly `bytes.len()` bytes.
            let mut to = unsafe { dst.inner_mut().transmute_mut::<u8>(bytes.len()) }
                .ok_or_else(|| Error::Gpu("reinterpret a device view as bytes".into()))?;
            return self.upload_staged(&mut to, bytes.len(), |offset, piece| {
                piece.copy_from_slice(&bytes[offset..offset + piece.len()])
            });
        }
        self.stream
            .memcpy_htod(src, dst.inner_mut())
            .map_err(gpu_err("copy to the device"))?;
        self.synchronize()
    }

    /// Small copies from the device to host memory queued together and waited for once (see
    /// [`HostCopies`]).
    pub fn host_copies<'h>(&self) -> Result<HostCopies<'_, 'h>> {
        Ok(HostCopies {
            ctx: self,
            staging: self.staging()?,
            used: 0,
            pending: Vec::new(),
        })
    }

    /// Copies the device view `src` into `dst` of the same length (through the pinned staging
    /// buffers from [`PINNED_TRANSFER_THRESHOLD`] bytes); synchronises.
    pub fn copy_to_host<T: DeviceCopy>(
        &self,
        src: &DeviceView<'_, T>,
        dst: &mut [T],
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::InvalidInput(format!(
                "copy of a device range of {} elements into {}",
                src.len(),
                dst.len()
            )));
        }
        if dst.is_empty() {
            return Ok(());
        }
        let total = std::mem::size_of_val(dst);
        if total >= PINNED_TRANSFER_THRESHOLD {
            // SAFETY: reinterpreting a view of `T` (Pod: no padding) as its `total` bytes,
            // which the view holds (same length as `dst`).
            let from = unsafe { src.inner().transmute::<u8>(total) }
                .ok_or_else(|| Error::Gpu("reinterpret a device view as bytes".into()))?;
            // SAFETY: `dst` is `total` bytes of `T` exclusively borrowed until this returns;
            // any bytes are a valid `T` (Pod), and `MaybeUninit<u8>` has size and alignment 1.
            let to: &mut [MaybeUninit<u8>] =
                unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast(), total) };
            return self.download_staged_into(&from, to);
        }
        self.stream
            .memcpy_dtoh(src.inner(), dst)
            .map_err(gpu_err("copy from the device"))?;
        self.synchronize()
    }

    /// Sets every element of `dst` to zero (queued on the stream, like a kernel).
    pub fn zero<T: DeviceCopy>(&self, dst: &mut DeviceViewMut<'_, T>) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        self.stream
            .memset_zeros(dst.inner_mut())
            .map_err(gpu_err("zero device memory"))
    }

    /// Launches `kernel` with `launch` and `args` (its argument struct, passed by value as the
    /// kernel's one parameter) on the context's stream, after checking the configuration
    /// against the device's limits. Call it through the kernel's generated launcher, which pairs
    /// the kernel with its own argument struct.
    ///
    /// # Safety
    /// `args` must be the struct `kernel` takes (its generated twin), and every pointer in it
    /// must cover what the kernel reads and writes for the sizes `args` and `launch` pass (see
    /// [`crate::kernel`]).
    pub unsafe fn launch<A: KernelArgs>(
        &self,
        kernel: &Kernel,
        launch: Launch,
        args: &A,
    ) -> Result<()> {
        check_launch(self, kernel.symbol(), &launch)?;
        let f = self.function(kernel)?;
        let by_value = ByValue::of(args);
        let mut b = self.stream.launch_builder(&f);
        b.arg(by_value);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: launch.grid,
            block_dim: (launch.block, 1, 1),
            shared_mem_bytes: launch.shared_bytes,
        };
        // SAFETY: this function's contract: the one parameter is the kernel's own argument
        // struct, laid out as the CUDA struct (`KernelArgs`), and its pointers cover what the
        // kernel touches; they are borrowed from live device buffers for the call, and the
        // context's single stream frees buffers only after the kernels queued before.
        unsafe { b.launch(cfg) }.map_err(gpu_err(format!("launch {}", kernel.symbol())))?;
        Ok(())
    }

    /// Waits for all work on the context's stream; kernel faults surface here.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(gpu_err("synchronize the stream"))
    }

    /// An identity of the context's stream, for callers that keep device buffers across calls
    /// and must not use them on another context (the buffers of one context are not valid on
    /// another's device).
    pub fn stream_id(&self) -> usize {
        Arc::as_ptr(&self.stream) as usize
    }

    /// How each kernel module loaded so far reached the GPU. A module of which only some
    /// kernels were compiled by NVRTC (its units) counts as cached when every one of them came
    /// from the disk cache.
    pub fn kernel_load_paths(&self) -> Vec<(&'static str, KernelLoadPath)> {
        let mods = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = mods.iter().map(|(k, m)| (*k, m.path)).collect();
        let units = self.units.lock().unwrap_or_else(|p| p.into_inner());
        for ((name, _), u) in units.iter() {
            if mods.contains_key(name) {
                continue;
            }
            match v.iter_mut().find(|(n, _)| n == name) {
                Some((_, KernelLoadPath::Nvrtc { cached, .. })) => {
                    *cached &= matches!(u.path, KernelLoadPath::Nvrtc { cached: true, .. });
                }
                Some(_) => {}
                None => v.push((*name, u.path)),
            }
        }
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// The units NVRTC compiled (or read from the disk cache) on this context so far, per
    /// module: the kernels of each, sorted. Empty where every kernel came from a cubin or a
    /// whole module.
    pub fn compiled_units(&self) -> Vec<(&'static str, Vec<&'static str>)> {
        let units = self.units.lock().unwrap_or_else(|p| p.into_inner());
        let mut by_module: std::collections::BTreeMap<&'static str, Vec<&'static str>> =
            std::collections::BTreeMap::new();
        for ((name, index), entry) in units.iter() {
            let symbols = entry.from.units.get(*index).map_or(&[][..], |u| u.symbols);
            by_module.entry(*name).or_default().extend(symbols);
        }
        by_module
            .into_iter()
            .map(|(name, mut symbols)| {
                symbols.sort_unstable();
                (name, symbols)
            })
            .collect()
    }

    /// Whether kernels of `m` are compiled on this device (NVRTC) rather than loaded from an
    /// embedded cubin.
    fn compiles(&self, m: &KernelModule) -> bool {
        match self.mode {
            KernelMode::Nvrtc => true,
            KernelMode::Cubin => false,
            KernelMode::Auto => loader::compatible_cubin(m.cubins, self.info.arch()).is_none(),
        }
    }

    /// The loaded module that holds `kernel`: its unit where NVRTC compiles (only the kernels
    /// launched get compiled), else the whole module.
    fn holder(&self, kernel: &Kernel) -> Result<LoadedModule> {
        let m = kernel.module();
        if let Some(unit) = m.unit_of(kernel.symbol())
            && self.compiles(m)
        {
            if let Some(entry) = self
                .modules
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(m.name)
                && std::ptr::eq(entry.from, m)
            {
                return Ok(entry.clone());
            }
            return self.unit(m, unit);
        }
        self.module(m)
    }

    fn unit(&self, m: &'static KernelModule, unit: usize) -> Result<LoadedModule> {
        let mut units = self.units.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = units.get(&(m.name, unit)) {
            if !std::ptr::eq(entry.from, m) && entry.from.source != m.source {
                return Err(Error::Gpu(format!(
                    "two different kernel modules are called `{}`",
                    m.name
                )));
            }
            return Ok(entry.clone());
        }
        let nv = match self.nvrtc() {
            Ok(nv) => nv,
            // No NVRTC: the whole module, from its PTX where it has one.
            Err(_) if self.mode == KernelMode::Auto => {
                drop(units);
                return self.module(m);
            }
            Err(e) => return Err(e),
        };
        let (module, path) = loader::load_unit(&self.cuda, m, unit, self.info.arch(), &nv)?;
        crate::log(&format!(
            "kernel module {} unit {:?} on {} (sm_{}): {path}",
            m.name,
            m.units[unit].symbols,
            self.info.name,
            self.info.arch()
        ));
        let entry = LoadedModule {
            from: m,
            module,
            path,
        };
        units.insert((m.name, unit), entry.clone());
        Ok(entry)
    }

    /// Loads kernel module `module` (once per context) and says how it was delivered. Two
    /// different modules of one name are an error: names identify modules in caches and
    /// reports.
    pub fn load_module(&self, module: &'static KernelModule) -> Result<KernelLoadPath> {
        Ok(self.module(module)?.path)
    }

    /// Makes `kernels` ready to launch: where NVRTC compiles them (no embedded cubin fits the
    /// device, or `WEFT_KERNELS=nvrtc`), the units (or whole modules) that hold them and that
    /// this context has not loaded yet are compiled together, on up to
    /// [`compile_threads`](GpuContext::compile_threads) threads, or read from the disk cache,
    /// and loaded; a later launch of any of them finds its unit loaded. A builder calls it with
    /// every kernel it will launch before its first launch, so that a first use with an empty
    /// cache waits for the longest unit rather than for the sum of them. Kernels that come from
    /// embedded cubins (or PTX where there is no NVRTC) are left to their first launch, as
    /// before. The units are loaded in a fixed order (module name, unit index), whatever the
    /// compilation order; the first failure, in that order, is returned after every
    /// compilation has ended.
    pub fn prepare_kernels(&self, kernels: &[Kernel]) -> Result<()> {
        let jobs = self.pending_jobs(kernels)?;
        if jobs.is_empty() {
            return Ok(());
        }
        let nv = match self.nvrtc() {
            Ok(nv) => nv,
            // No NVRTC: each launch loads its module from PTX, as without preparation.
            Err(_) if self.mode == KernelMode::Auto => return Ok(()),
            Err(e) => return Err(e),
        };
        let arch = self.info.arch();
        let sources: Vec<(String, String)> = jobs
            .iter()
            .map(|&(m, unit)| {
                (
                    loader::unit_label(m, unit),
                    unit.map_or_else(|| m.source.to_string(), |u| m.unit_source(u)),
                )
            })
            .collect();
        let start = std::time::Instant::now();
        let cache = loader::cache_dir();
        let images =
            loader::compile_images(&sources, arch, &nv, cache.as_deref(), self.compile_threads);
        crate::log(&format!(
            "prepared {} kernel unit(s) on {} thread(s) in {:.2} s",
            jobs.len(),
            self.compile_threads.min(jobs.len()),
            start.elapsed().as_secs_f64()
        ));
        let mut first_err = None;
        for ((&(m, unit), (label, source)), image) in jobs.iter().zip(&sources).zip(images) {
            let loaded = image.and_then(|c| {
                loader::load_compiled(&self.cuda, label, source, arch, &nv, cache.as_deref(), c)
            });
            match loaded {
                Ok((module, path)) => {
                    let entry = LoadedModule {
                        from: m,
                        module,
                        path,
                    };
                    crate::log(&format!(
                        "kernel {label} on {} (sm_{arch}): {path}",
                        self.info.name
                    ));
                    match unit {
                        Some(u) => {
                            self.units
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .entry((m.name, u))
                                .or_insert(entry);
                        }
                        None => {
                            self.modules
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .entry(m.name)
                                .or_insert(entry);
                        }
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// What [`GpuContext::prepare_kernels`] has to compile for `kernels`: (module, unit; `None`
    /// for the whole module), sorted by module name and unit, each once, leaving out what is
    /// loaded already and what does not compile on this device.
    fn pending_jobs(
        &self,
        kernels: &[Kernel],
    ) -> Result<Vec<(&'static KernelModule, Option<usize>)>> {
        let mut jobs: Vec<(&'static KernelModule, Option<usize>)> = Vec::new();
        let mods = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let units = self.units.lock().unwrap_or_else(|p| p.into_inner());
        for k in kernels {
            let m = k.module();
            if !self.compiles(m) {
                continue;
            }
            if let Some(entry) = mods.get(m.name) {
                if !std::ptr::eq(entry.from, m) && entry.from.source != m.source {
                    return Err(Error::Gpu(format!(
                        "two different kernel modules are called `{}`",
                        m.name
                    )));
                }
                continue;
            }
            // A kernel in no unit is compiled with its whole module, as its launch would be.
            let unit = m.unit_of(k.symbol());
            if unit.is_some_and(|u| units.contains_key(&(m.name, u))) {
                continue;
            }
            if let Some(&(other, _)) = jobs.iter().find(|(o, _)| o.name == m.name)
                && !std::ptr::eq(other, m)
                && other.source != m.source
            {
                return Err(Error::Gpu(format!(
                    "two different kernel modules are called `{}`",
                    m.name
                )));
            }
            if !jobs.iter().any(|(o, u)| o.name == m.name && *u == unit) {
                jobs.push((m, unit));
            }
        }
        jobs.sort_by(|a, b| (a.0.name, a.1).cmp(&(b.0.name, b.1)));
        Ok(jobs)
    }

    fn module(&self, m: &'static KernelModule) -> Result<LoadedModule> {
        let mut mods = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = mods.get(m.name) {
            if !std::ptr::eq(entry.from, m) && entry.from.source != m.source {
                return Err(Error::Gpu(format!(
                    "two different kernel modules are called `{}`",
                    m.name
                )));
            }
            return Ok(entry.clone());
        }
        let (module, path) =
            loader::load_module(&self.cuda, m, self.info.arch(), self.mode, || self.nvrtc())?;
        crate::log(&format!(
            "kernel module {} on {} (sm_{}): {path}",
            m.name,
            self.info.name,
            self.info.arch()
        ));
        let entry = LoadedModule {
            from: m,
            module,
            path,
        };
        mods.insert(m.name, entry.clone());
        Ok(entry)
    }

    /// NVRTC, loaded on first use.
    pub fn nvrtc(&self) -> Result<Arc<Nvrtc>> {
        let mut slot = self.nvrtc.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = slot.as_ref() {
            return Ok(n.clone());
        }
        let n = Arc::new(Nvrtc::load()?);
        crate::log(&format!(
            "NVRTC {}.{} from {}",
            n.version().0,
            n.version().1,
            n.path().display()
        ));
        *slot = Some(n.clone());
        Ok(n)
    }

    /// The driver's handle of `kernel`, loading its module if needed.
    fn function(&self, kernel: &Kernel) -> Result<CudaFunction> {
        let key = format!("{}/{}", kernel.module().name, kernel.symbol());
        if let Some(f) = self
            .functions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(f.clone());
        }
        let m = self.holder(kernel)?;
        let f = m
            .module
            .load_function(kernel.symbol())
            .map_err(gpu_err(format!(
                "kernel {} in module {}",
                kernel.symbol(),
                kernel.module().name
            )))?;
        self.functions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, f.clone());
        Ok(f)
    }
}

/// Checks a launch configuration against the device's limits.
fn check_launch(ctx: &GpuContext, symbol: &str, launch: &Launch) -> Result<()> {
    let (gx, gy, gz) = launch.grid;
    if gx == 0 || gy == 0 || gz == 0 || launch.block == 0 {
        return Err(Error::Gpu(format!("{symbol}: empty launch {launch:?}")));
    }
    if launch.block > 1024 || gx > i32::MAX as u32 || gy > 65_535 || gz > 65_535 {
        return Err(Error::Gpu(format!(
            "{symbol}: launch {launch:?} exceeds the device limits"
        )));
    }
    if launch.shared_bytes > (48 * 1024).min(ctx.info().max_shared_per_block) {
        return Err(Error::Gpu(format!(
            "{symbol}: {} bytes of dynamic shared memory exceed the 48 KiB default limit",
            launch.shared_bytes
        )));
    }
    Ok(())
}

/// A kernel argument struct as the driver reads a by-value parameter: the bytes at its
/// address.
#[repr(transparent)]
struct ByValue<A>(A);

impl<A: KernelArgs> ByValue<A> {
    fn of(args: &A) -> &ByValue<A> {
        // SAFETY: `ByValue` is `repr(transparent)` over `A`, so the reference casts in place.
        unsafe { &*(args as *const A).cast::<ByValue<A>>() }
    }
}

// SAFETY: `KernelArgs` types are `#[repr(C)]` twins of the kernels' CUDA structs (sizes and
// offsets asserted on both sides), so their bytes are the parameter the kernel declares.
unsafe impl<A: KernelArgs> cudarc::driver::DeviceRepr for ByValue<A> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_host_copies_cover_every_byte_once() {
        for len in [
            0,
            1,
            HOST_COPY_PIECE - 1,
            HOST_COPY_PIECE,
            HOST_COPY_PIECE + 1,
            STAGING_CHUNK,
            3 * HOST_COPY_PIECE + 12_345,
        ] {
            let src: Vec<u8> = (0..len).map(|i| (i ^ (i >> 9)) as u8).collect();
            let mut dst = vec![MaybeUninit::new(0u8); len];
            par_copy_into(&mut dst, &src);
            assert!(dst.iter().zip(&src).all(|(d, s)| {
                // SAFETY: every element was initialised by `vec!` above.
                let v = unsafe { d.assume_init() };
                v == *s
            }));
            // Pieces see their absolute offsets: each byte is written from its own position
            // (and a second write would be caught by the XOR).
            let offset = 1_000_003;
            let mut chunk = vec![0u8; len];
            par_fill(&mut chunk, offset, &|at, piece: &mut [u8]| {
                for (i, b) in piece.iter_mut().enumerate() {
                    *b ^= ((at + i) % 251) as u8;
                }
            });
            assert!(
                chunk
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == ((offset + i) % 251) as u8),
                "fill of {len} bytes"
            );
        }
    }
}
