//! Finding a GPU: [`probe`], and the [`GpuContext`] every GPU operation takes.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, PinnedHostSlice,
    ValidAsZeroBits, sys,
};
use serde::{Deserialize, Serialize};
use weft_core::{Error, Result};

use crate::loader::{self, KernelLoadPath, KernelMode};
use crate::nvrtc::Nvrtc;

/// Transfers of at least this many bytes go through pinned staging buffers.
pub const PINNED_TRANSFER_THRESHOLD: usize = 8 << 20;
/// Bytes in each of the two pinned staging buffers of a large transfer.
const STAGING_CHUNK: usize = 8 << 20;

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

/// One device, its stream, its loaded kernels and its memory accounting. Create with [`probe`];
/// pass it to every GPU operation. It holds no global state: two contexts are independent.
pub struct GpuContext {
    cuda: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    mode: KernelMode,
    margin: u64,
    modules: Mutex<HashMap<&'static str, (Arc<CudaModule>, KernelLoadPath)>>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    nvrtc: Mutex<Option<Arc<Nvrtc>>>,
    staging: Mutex<Vec<PinnedHostSlice<u8>>>,
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
            modules: Mutex::new(HashMap::new()),
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
    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
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
            .map_err(gpu_err(format!("allocate {bytes} bytes")))
    }

    /// Copies host data into a new device buffer (budget-checked).
    /// Large transfers go through pinned staging.
    pub fn upload<T: DeviceRepr + ValidAsZeroBits + bytemuck::Pod>(
        &self,
        data: &[T],
    ) -> Result<CudaSlice<T>> {
        let mut buf = self.alloc_zeros::<T>(data.len())?;
        if !data.is_empty() {
            let bytes: &[u8] = bytemuck::cast_slice(data);
            // SAFETY: the buffer holds `data.len()` elements of `T` (Pod: plain bytes, no
            // padding), i.e. exactly `bytes.len()` bytes.
            let mut dst = unsafe { buf.transmute_mut::<u8>(bytes.len()) }
                .ok_or_else(|| Error::Gpu("reinterpret a device buffer as bytes".into()))?;
            self.upload_staged(&mut dst, bytes.len(), |offset, chunk| {
                chunk.copy_from_slice(&bytes[offset..offset + chunk.len()])
            })?;
        }
        Ok(buf)
    }

    /// Copies the first `len` elements of a device buffer to the host (through pinned staging
    /// when the transfer is large).
    pub fn download<T: DeviceRepr + Default + Clone + bytemuck::Pod>(
        &self,
        buf: &CudaSlice<T>,
        len: usize,
    ) -> Result<Vec<T>> {
        if len > buf.len() {
            return Err(Error::InvalidInput(format!(
                "cannot download {len} elements from a buffer of {}",
                buf.len()
            )));
        }
        let mut out = vec![T::default(); len];
        if len > 0 {
            let size = std::mem::size_of::<T>();
            // SAFETY: reinterpreting a slice of `T` (Pod: any bytes are a valid `T`, no padding)
            // as bytes of the same length; the device buffer holds at least `len` elements.
            let src = unsafe { buf.slice(0..len).transmute::<u8>(len * size) }
                .ok_or_else(|| Error::Gpu("reinterpret a device buffer as bytes".into()))?;
            let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out[..]);
            self.download_staged(&src, dst.len(), |offset, chunk| {
                dst[offset..offset + chunk.len()].copy_from_slice(chunk)
            })?;
        }
        Ok(out)
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
        // Queues the copy of chunk `c` into staging buffer `c % 2`. A whole chunk fills the
        // whole pinned buffer (an asynchronous copy its event tracks); the last, partial chunk
        // goes into a plain slice of it (cudarc copies whole pinned buffers only), which no
        // event tracks, so the stream is synchronised before it is read.
        let queue = |staging: &mut [PinnedHostSlice<u8>], c: usize| -> Result<()> {
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
            .map_err(gpu_err("copy from the device"))
        };
        queue(&mut staging, 0)?;
        for (c, &(lo, hi)) in chunks.iter().enumerate() {
            if c + 1 < chunks.len() {
                queue(&mut staging, c + 1)?;
            }
            if hi - lo < STAGING_CHUNK {
                self.synchronize()?;
            }
            let done = staging[c % 2]
                .as_slice()
                .map_err(gpu_err("wait for a staged copy"))?;
            take(lo, &done[..hi - lo]);
        }
        self.synchronize()
    }

    /// Copies `total` bytes into the device buffer `dst` (from its start), through the
    /// context's two pinned staging buffers when `total` is at least
    /// [`PINNED_TRANSFER_THRESHOLD`]: `fill(offset, chunk)` writes the bytes `offset..offset +
    /// chunk.len()`, so the host packs one chunk while the copy engine moves the other. Returns
    /// when the host buffers are no longer read.
    pub(crate) fn upload_staged(
        &self,
        dst: &mut cudarc::driver::CudaViewMut<'_, u8>,
        total: usize,
        mut fill: impl FnMut(usize, &mut [u8]),
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
            fill(0, &mut host);
            self.stream
                .memcpy_htod(&host[..], &mut dst.slice_mut(0..total))
                .map_err(gpu_err("copy to the device"))?;
            return self.synchronize();
        }
        let mut staging = self.staging()?;
        for (i, lo) in (0..total).step_by(STAGING_CHUNK).enumerate() {
            let hi = (lo + STAGING_CHUNK).min(total);
            let buf = &mut staging[i % 2];
            // Waits until the copy that last used this buffer has finished.
            let host = buf
                .as_mut_slice()
                .map_err(gpu_err("wait for a staged copy"))?;
            fill(lo, &mut host[..hi - lo]);
            let mut to = dst.slice_mut(lo..hi);
            if hi - lo == STAGING_CHUNK {
                // The whole pinned buffer: an asynchronous copy, awaited through its event.
                self.stream.memcpy_htod(&*buf, &mut to)
            } else {
                // The last, partial chunk (cudarc copies whole pinned buffers only): a plain
                // slice of the pinned memory, which no event tracks, so wait for it here.
                let part = &buf.as_slice().map_err(gpu_err("pinned host memory"))?[..hi - lo];
                self.stream
                    .memcpy_htod(part, &mut to)
                    .and_then(|()| self.stream.synchronize())
            }
            .map_err(gpu_err("copy to the device"))?;
        }
        // Before the buffers serve another transfer, `as_mut_slice`/`as_slice` wait for their
        // last copies.
        Ok(())
    }

    /// The two pinned staging buffers, allocated on first use and kept for the context's life
    /// (allocating page-locked memory costs milliseconds); held locked for one transfer.
    fn staging(&self) -> Result<std::sync::MutexGuard<'_, Vec<PinnedHostSlice<u8>>>> {
        let mut slot = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_empty() {
            *slot = vec![self.pinned(STAGING_CHUNK)?, self.pinned(STAGING_CHUNK)?];
        }
        Ok(slot)
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

    /// Waits for all work on the context's stream; kernel faults surface here.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(gpu_err("synchronize the stream"))
    }

    /// The stream all work of this context runs on.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// How each kernel module loaded so far reached the GPU.
    pub fn kernel_load_paths(&self) -> Vec<(&'static str, KernelLoadPath)> {
        let mods = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = mods.iter().map(|(k, (_, p))| (*k, *p)).collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Loads kernel module `name` (once per context) and says how it was delivered.
    pub fn load_module(&self, name: &str) -> Result<KernelLoadPath> {
        Ok(self.module(name)?.1)
    }

    fn module(&self, name: &str) -> Result<(Arc<CudaModule>, KernelLoadPath)> {
        let m = loader::embedded(name)?;
        let mut mods = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = mods.get(m.name) {
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
        mods.insert(m.name, (module.clone(), path));
        Ok((module, path))
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

    /// Kernel `function` of module `module`, loading the module if needed.
    pub(crate) fn function(&self, module: &str, function: &str) -> Result<CudaFunction> {
        let key = format!("{module}/{function}");
        if let Some(f) = self
            .functions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(f.clone());
        }
        let (m, _) = self.module(module)?;
        let f = m
            .load_function(function)
            .map_err(gpu_err(format!("kernel {function} in module {module}")))?;
        self.functions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, f.clone());
        Ok(f)
    }
}
