//! # weft-gpu
//!
//! The GPU runtime of weft, and the only crate that names cudarc. The algorithms' GPU code lives
//! in their own crates (weft-exact, weft-nndescent, weft-grnnd, weft-cagra, weft-ggnn,
//! weft-search) and
//! reaches the GPU through this crate's public API:
//!
//! - [`probe`] finds a device and returns a [`GpuContext`], or the reason there is none (it
//!   never panics, also on machines without the CUDA driver).
//! - [`GpuContext`]: device, stream, memory accounting ([`GpuContext::check_fits`] says
//!   [`weft_core::Error::OutOfDeviceMemory`] before allocating), transfers, the per-context cache
//!   of loaded kernel modules, and [`GpuContext::launch`].
//! - Device memory ([`memory`]): [`DeviceBuffer`], [`DeviceView`], [`DeviceViewMut`];
//!   [`DeviceMatrix`] (vectors, rows padded to 16 elements for 16-byte loads); device graphs
//!   ([`DeviceKnnGraph`], [`DeviceFixedGraph`]).
//! - Kernels ([`kernel`]): weft's CUDA sources are the workspace's top-level `kernels/<module>/`
//!   (the weft-kernels crate); a crate binds the modules it launches with `weft-kernels` in its
//!   build script, which generates a [`KernelModule`] and, from each kernel's argument struct,
//!   its `#[repr(C)]` Rust twin ([`KernelArgs`], pointers as [`In`] and [`Out`]) and a launcher; the
//!   shared device headers are `kernels/include/weft/`. `docs/adding-an-algorithm.md` walks through it.
//! - Kernel delivery ([`KernelLoadPath`]): cubins built by nvcc at build time when it was
//!   available, else the embedded sources compiled by NVRTC at run time and cached on disk; see
//!   `docs/kernels.md`.
//! - k-NN graph sources for GPU pipelines ([`knn_source`]): [`GpuKnnSource`], which a builder
//!   that leaves its graph on the device implements (GNND in weft-nndescent) and any
//!   `KnnGraphBuilder` through [`HostKnn`]; the graph comes as a [`GpuKnnGraph`] (host or
//!   device), which the GPU CAGRA pipeline of weft-cagra consumes.
//! - [`testing`]: the skip-or-fail helper for GPU tests and device-side checks of the kernel
//!   headers.
//!
//! Every CUDA call's result is checked and mapped to [`weft_core::Error::Gpu`] with context.

pub mod context;
pub mod device_graph;
pub mod kernel;
pub mod knn_source;
pub mod launch;
pub mod loader;
pub mod matrix;
pub mod memory;
pub mod nvrtc;
pub mod testing;

/// The generated bindings of this crate's own kernel modules.
pub(crate) mod kernels {
    /// `kernels/testing`: device-side checks of the shared headers.
    #[allow(dead_code)]
    pub(crate) mod testing {
        include!(concat!(env!("OUT_DIR"), "/testing.rs"));
    }
}

pub use context::{
    DeviceInfo, GpuContext, HostCopies, device_count, driver_library_present, probe, probe_device,
};
pub use device_graph::{DeviceFixedGraph, DeviceKnnGraph};
pub use kernel::{In, Kernel, KernelArgs, KernelModule, KernelUnit, Launch, Out};
pub use knn_source::{GpuKnnGraph, GpuKnnSource, HostKnn};
pub use loader::{KernelLoadPath, KernelMode};
pub use matrix::DeviceMatrix;
pub use memory::{DeviceBuffer, DeviceCopy, DeviceView, DeviceViewMut};

/// weft-gpu's own kernel modules (device-side tests).
pub fn kernel_modules() -> [&'static KernelModule; 1] {
    [&kernels::testing::MODULE]
}

/// Writes a diagnostic line to stderr when `WEFT_GPU_LOG` is set (kernel delivery, cache
/// problems).
pub fn log(msg: &str) {
    if std::env::var_os("WEFT_GPU_LOG").is_some_and(|v| !v.is_empty() && v != "0") {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "weft-gpu: {msg}");
    }
}
