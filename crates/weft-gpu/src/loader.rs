//! Kernel delivery: embedded cubins, NVRTC at run time (with a disk cache), or embedded PTX.
//!
//! For each module (a folder of a crate's `kernels/`, see [`crate::kernel`]), in this order:
//! 1. unless `WEFT_KERNELS=nvrtc`: the cubin nvcc built for the device's architecture, or for an
//!    older minor version of its major one (sm_80's on sm_86 and sm_89; see [`compatible_cubin`]),
//!    when the build had nvcc ([`KernelLoadPath::Cubin`]);
//! 2. the embedded source compiled by NVRTC for the device's architecture, read from the disk
//!    cache when an earlier run compiled the same (source hash, architecture, options, NVRTC
//!    version) ([`KernelLoadPath::Nvrtc`]); the cache folder is `$WEFT_KERNEL_CACHE`, else
//!    `~/.cache/weft/kernels`;
//! 3. when NVRTC is absent, PTX that nvcc built for compute_80, compiled by the driver
//!    ([`KernelLoadPath::Ptx`]).
//!
//! `WEFT_KERNELS=cubin` requires path 1 and `WEFT_KERNELS=nvrtc` path 2; anything else fails
//! with a message naming the setting.

use std::path::PathBuf;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::Ptx;
use serde::{Deserialize, Serialize};
use weft_core::{Error, Result};

use crate::kernel::KernelModule;
use crate::nvrtc::Nvrtc;

/// How a kernel module reached the GPU; recorded in build and search reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "path")]
pub enum KernelLoadPath {
    /// A cubin nvcc built at build time for this SM version (the device's, or an older minor
    /// version of the device's major one).
    Cubin {
        /// SM version the cubin was built for (10 * major + minor).
        arch: u32,
    },
    /// The embedded source compiled by NVRTC at run time for this SM version.
    Nvrtc {
        /// SM version (10 * major + minor).
        arch: u32,
        /// Whether the cubin came from the disk cache rather than a fresh compilation.
        cached: bool,
    },
    /// Embedded PTX compiled by the driver (no NVRTC and no matching cubin).
    Ptx,
}

impl std::fmt::Display for KernelLoadPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelLoadPath::Cubin { arch } => write!(f, "cubin sm_{arch} (nvcc at build time)"),
            KernelLoadPath::Nvrtc { arch, cached } => write!(
                f,
                "NVRTC sm_{arch}{}",
                if *cached { " (disk cache)" } else { "" }
            ),
            KernelLoadPath::Ptx => f.write_str("PTX compute_80 (driver JIT)"),
        }
    }
}

/// Which delivery paths are allowed (`WEFT_KERNELS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelMode {
    /// Cubin if present, else NVRTC, else PTX (the default).
    Auto,
    /// NVRTC only (`WEFT_KERNELS=nvrtc`).
    Nvrtc,
    /// Build-time cubins only (`WEFT_KERNELS=cubin`).
    Cubin,
}

impl KernelMode {
    /// Reads `WEFT_KERNELS` (`auto`, `nvrtc`, `cubin`; unset means `auto`).
    pub fn from_env() -> Result<Self> {
        match std::env::var("WEFT_KERNELS") {
            Err(_) => Ok(KernelMode::Auto),
            Ok(v) => match v.to_ascii_lowercase().as_str() {
                "" | "auto" => Ok(KernelMode::Auto),
                "nvrtc" => Ok(KernelMode::Nvrtc),
                "cubin" | "nvcc" => Ok(KernelMode::Cubin),
                other => Err(Error::invalid_param(
                    "WEFT_KERNELS",
                    format!("unknown value `{other}` (use auto, nvrtc or cubin)"),
                )),
            },
        }
    }
}

/// The options NVRTC compiles with for `arch`.
pub fn nvrtc_options(arch: u32) -> Vec<String> {
    vec![
        format!("--gpu-architecture=sm_{arch}"),
        "-std=c++17".into(),
        "-lineinfo".into(),
    ]
}

/// FNV-1a, 64-bit: a hash that stays the same across Rust versions (cache keys).
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate the parts so that ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The kernel cache folder: `$WEFT_KERNEL_CACHE`, else `~/.cache/weft/kernels`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("WEFT_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("weft/kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/weft/kernels"))
}

fn load_image(
    ctx: &Arc<CudaContext>,
    name: &str,
    image: Vec<u8>,
    what: &str,
) -> Result<Arc<CudaModule>> {
    ctx.load_module(Ptx::from_binary(image))
        .map_err(|e| Error::Gpu(format!("cannot load kernel module {name} ({what}): {e}")))
}

/// The embedded cubin a device of SM version `arch` can run: the one built for `arch`, else
/// the newest built for the same major version and an older minor one (a cubin for sm_XY runs
/// on sm_XZ for Z >= Y, e.g. sm_80's on an sm_86 or sm_89 device); `None` when no cubin fits
/// (NVRTC then compiles for the device). Returns the cubin's SM version and image.
pub fn compatible_cubin(
    cubins: &'static [(u32, &'static [u8])],
    arch: u32,
) -> Option<(u32, &'static [u8])> {
    if let Some(&(a, img)) = cubins.iter().find(|(a, _)| *a == arch) {
        return Some((a, img));
    }
    cubins
        .iter()
        .filter(|(a, _)| a / 10 == arch / 10 && *a < arch)
        .max_by_key(|(a, _)| *a)
        .map(|&(a, img)| (a, img))
}

/// Loads module `m` for a device of SM version `arch`; `nvrtc` is called at most once, when
/// NVRTC is needed.
pub(crate) fn load_module(
    ctx: &Arc<CudaContext>,
    m: &KernelModule,
    arch: u32,
    mode: KernelMode,
    nvrtc: impl FnOnce() -> Result<Arc<Nvrtc>>,
) -> Result<(Arc<CudaModule>, KernelLoadPath)> {
    if mode != KernelMode::Nvrtc {
        if let Some((built, img)) = compatible_cubin(m.cubins, arch) {
            let module = load_image(ctx, m.name, img.to_vec(), "embedded cubin")?;
            return Ok((module, KernelLoadPath::Cubin { arch: built }));
        }
        if mode == KernelMode::Cubin {
            return Err(Error::Unsupported(format!(
                "WEFT_KERNELS=cubin, but this binary has no cubin of module {} for sm_{arch} \
                 (it has {:?}); build with nvcc available or unset WEFT_KERNELS",
                m.name,
                m.cubins.iter().map(|c| c.0).collect::<Vec<_>>()
            )));
        }
    }
    let nv = match nvrtc() {
        Ok(nv) => nv,
        Err(e) => {
            if mode == KernelMode::Auto
                && let Some(ptx) = m.ptx
            {
                let module = ctx.load_module(Ptx::from_src(ptx)).map_err(|e| {
                    Error::Gpu(format!(
                        "cannot load kernel module {} (embedded PTX): {e}",
                        m.name
                    ))
                })?;
                return Ok((module, KernelLoadPath::Ptx));
            }
            return Err(e);
        }
    };
    compile_cached(ctx, m.name, m.source, arch, &nv)
}

/// Compiles unit `unit` of module `m` (see [`KernelModule::units`]) with NVRTC for `arch`, or
/// reads it from the disk cache: what a launch needs on a device no embedded cubin fits.
pub(crate) fn load_unit(
    ctx: &Arc<CudaContext>,
    m: &KernelModule,
    unit: usize,
    arch: u32,
    nv: &Nvrtc,
) -> Result<(Arc<CudaModule>, KernelLoadPath)> {
    let label = match m.units.get(unit).map(|u| u.symbols) {
        Some([one]) => format!("{}.{one}", m.name),
        _ => format!("{}.plain", m.name),
    };
    compile_cached(ctx, &label, &m.unit_source(unit), arch, nv)
}

/// `source` (named `name` in messages and cache files) compiled by NVRTC for `arch`, from the
/// disk cache when an earlier run compiled the same.
fn compile_cached(
    ctx: &Arc<CudaContext>,
    name: &str,
    source: &str,
    arch: u32,
    nv: &Nvrtc,
) -> Result<(Arc<CudaModule>, KernelLoadPath)> {
    let options = nvrtc_options(arch);
    let (vmaj, vmin) = nv.version();
    let key = fnv1a64(&[
        source.as_bytes(),
        options.join(" ").as_bytes(),
        format!("nvrtc {vmaj}.{vmin}").as_bytes(),
    ]);
    let file = cache_dir().map(|d| d.join(format!("{name}-sm_{arch}-{key:016x}.cubin")));
    if let Some(f) = &file
        && let Ok(img) = std::fs::read(f)
        && !img.is_empty()
    {
        match load_image(ctx, name, img, "cached NVRTC cubin") {
            Ok(module) => return Ok((module, KernelLoadPath::Nvrtc { arch, cached: true })),
            Err(e) => crate::log(&format!(
                "ignoring unusable cache file {}: {e}",
                f.display()
            )),
        }
    }
    let start = std::time::Instant::now();
    let (img, log) = nv.compile_cubin(source, &format!("{name}.cu"), &options)?;
    crate::log(&format!(
        "NVRTC compiled {name} for sm_{arch} in {:.2} s",
        start.elapsed().as_secs_f64()
    ));
    if !log.is_empty() {
        crate::log(&format!("NVRTC messages for module {name}:\n{log}"));
    }
    if let Some(f) = &file
        && let Err(e) = write_atomic(f, &img)
    {
        crate::log(&format!("cannot write kernel cache {}: {e}", f.display()));
    }
    let module = load_image(ctx, name, img, "NVRTC cubin")?;
    Ok((
        module,
        KernelLoadPath::Nvrtc {
            arch,
            cached: false,
        },
    ))
}

/// Writes `data` to `path` through a temporary file and a rename, so that concurrent processes
/// never read half a file.
fn write_atomic(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_modules_are_embedded_and_self_contained() {
        let names: Vec<&str> = crate::kernel_modules().iter().map(|m| m.name).collect();
        assert_eq!(names, ["exact", "testing"]);
        for m in crate::kernel_modules() {
            assert!(
                !m.source.contains("#include"),
                "{} still has an #include",
                m.name
            );
            assert!(m.source.contains("extern \"C\""));
        }
    }

    #[test]
    fn cubins_run_on_their_major_version_only() {
        static CUBINS: [(u32, &[u8]); 2] = [(80, b"a"), (90, b"b")];
        let pick = |arch| compatible_cubin(&CUBINS, arch).map(|c| c.0);
        assert_eq!(pick(90), Some(90));
        assert_eq!(pick(80), Some(80));
        assert_eq!(pick(86), Some(80));
        assert_eq!(pick(89), Some(80));
        // Newer majors and older devices need NVRTC (or PTX).
        assert_eq!(pick(100), None);
        assert_eq!(pick(120), None);
        assert_eq!(pick(75), None);
        assert_eq!(compatible_cubin(&[], 90), None);
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(fnv1a64(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fnv1a64(&[b"ab", b"c"]), fnv1a64(&[b"a", b"bc"]));
        // A fixed value: the cache key must not change between builds.
        assert_eq!(fnv1a64(&[b"weft"]), fnv1a64(&[b"weft"]));
    }

    #[test]
    fn load_path_serializes() {
        let s = serde_json::to_string(&KernelLoadPath::Nvrtc {
            arch: 90,
            cached: true,
        })
        .unwrap();
        assert_eq!(s, r#"{"path":"nvrtc","arch":90,"cached":true}"#);
    }
}
