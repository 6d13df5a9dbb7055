//! Kernel delivery: embedded cubins, NVRTC at run time (with a disk cache), or embedded PTX.
//!
//! For each module (a folder of weft's `kernels/`, or of a downstream crate's, see [`crate::kernel`]), in this order:
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

/// The name unit `unit` of module `m` goes by in messages and cache files: `<module>.<kernel>`
/// for a unit of one kernel, `<module>.plain` for the plain kernels, the module's name for the
/// whole module (`None` or an index out of range).
pub fn unit_label(m: &KernelModule, unit: Option<usize>) -> String {
    match unit.and_then(|u| m.units.get(u)).map(|u| u.symbols) {
        None => m.name.to_string(),
        Some([one]) => format!("{}.{one}", m.name),
        Some(_) => format!("{}.plain", m.name),
    }
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
    compile_cached(
        ctx,
        &unit_label(m, Some(unit)),
        &m.unit_source(unit),
        arch,
        nv,
    )
}

/// A cubin NVRTC compiled (or the disk cache held) for one unit or module.
#[derive(Debug)]
pub struct CompiledImage {
    /// The cubin.
    pub image: Vec<u8>,
    /// Whether it came from the disk cache.
    pub cached: bool,
    /// Seconds NVRTC took (0 for a cached image).
    pub seconds: f64,
}

/// The cubin of `source` (named `name` in messages and cache files) for `arch`: from the disk
/// cache folder `cache` (the loader passes [`cache_dir`]; `None`: no cache) when an earlier run compiled the same source with the same options and
/// NVRTC version, else compiled by NVRTC and written to the cache. Needs no GPU and no CUDA
/// context, and may run on several threads at once (NVRTC compiles distinct programs
/// concurrently).
pub fn compile_image(
    name: &str,
    source: &str,
    arch: u32,
    nv: &Nvrtc,
    cache: Option<&std::path::Path>,
) -> Result<CompiledImage> {
    compile_image_with(name, source, arch, nv, cache, true)
}

/// [`compile_image`], reading the disk cache only when `read_cache`.
fn compile_image_with(
    name: &str,
    source: &str,
    arch: u32,
    nv: &Nvrtc,
    cache: Option<&std::path::Path>,
    read_cache: bool,
) -> Result<CompiledImage> {
    let options = nvrtc_options(arch);
    let (vmaj, vmin) = nv.version();
    let key = fnv1a64(&[
        source.as_bytes(),
        options.join(" ").as_bytes(),
        format!("nvrtc {vmaj}.{vmin}").as_bytes(),
    ]);
    let file = cache.map(|d| d.join(format!("{name}-sm_{arch}-{key:016x}.cubin")));
    if read_cache
        && let Some(f) = &file
        && let Ok(image) = std::fs::read(f)
        && !image.is_empty()
    {
        return Ok(CompiledImage {
            image,
            cached: true,
            seconds: 0.0,
        });
    }
    let start = std::time::Instant::now();
    let (image, log) = nv.compile_cubin(source, &format!("{name}.cu"), &options)?;
    let seconds = start.elapsed().as_secs_f64();
    crate::log(&format!(
        "NVRTC compiled {name} for sm_{arch} in {seconds:.2} s"
    ));
    if !log.is_empty() {
        crate::log(&format!("NVRTC messages for module {name}:\n{log}"));
    }
    if let Some(f) = &file
        && let Err(e) = write_atomic(f, &image)
    {
        crate::log(&format!("cannot write kernel cache {}: {e}", f.display()));
    }
    Ok(CompiledImage {
        image,
        cached: false,
        seconds,
    })
}

/// [`compile_image`] for each of `jobs` ((name, source) pairs), on up to `threads` threads
/// (at least one, at most one per job): each thread takes the next job in order until none is
/// left. The results come back in the order of `jobs`, whatever the timing, so the caller's
/// outcome does not depend on which thread finished first.
pub fn compile_images(
    jobs: &[(String, String)],
    arch: u32,
    nv: &Nvrtc,
    cache: Option<&std::path::Path>,
    threads: usize,
) -> Vec<Result<CompiledImage>> {
    let threads = threads.clamp(1, jobs.len().max(1));
    if threads == 1 {
        return jobs
            .iter()
            .map(|(name, src)| compile_image(name, src, arch, nv, cache))
            .collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<CompiledImage>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, src)) = jobs.get(i) else {
                        break;
                    };
                    let r = compile_image(name, src, arch, nv, cache);
                    *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Err(Error::Gpu("an NVRTC compilation thread panicked".into())))
        })
        .collect()
}

/// `source` (named `name` in messages and cache files) compiled by NVRTC for `arch`, from the
/// disk cache when an earlier run compiled the same, and loaded on `ctx`.
fn compile_cached(
    ctx: &Arc<CudaContext>,
    name: &str,
    source: &str,
    arch: u32,
    nv: &Nvrtc,
) -> Result<(Arc<CudaModule>, KernelLoadPath)> {
    let cache = cache_dir();
    let c = compile_image(name, source, arch, nv, cache.as_deref())?;
    load_compiled(ctx, name, source, arch, nv, cache.as_deref(), c)
}

/// Loads `c`, the [`CompiledImage`] of `source`, on `ctx`; a cached image the driver rejects is
/// reported and replaced by a fresh compilation (which overwrites the cache file).
pub(crate) fn load_compiled(
    ctx: &Arc<CudaContext>,
    name: &str,
    source: &str,
    arch: u32,
    nv: &Nvrtc,
    cache: Option<&std::path::Path>,
    c: CompiledImage,
) -> Result<(Arc<CudaModule>, KernelLoadPath)> {
    let c = if c.cached {
        match load_image(ctx, name, c.image, "cached NVRTC cubin") {
            Ok(module) => return Ok((module, KernelLoadPath::Nvrtc { arch, cached: true })),
            Err(e) => crate::log(&format!("ignoring an unusable cached cubin of {name}: {e}")),
        }
        compile_image_with(name, source, arch, nv, cache, false)?
    } else {
        c
    };
    let module = load_image(ctx, name, c.image, "NVRTC cubin")?;
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
        assert_eq!(names, ["testing"]);
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
    fn unit_labels_name_the_kernel_or_the_plain_part() {
        let testing = &crate::kernels::testing::MODULE;
        assert_eq!(unit_label(testing, None), "testing");
        assert_eq!(unit_label(testing, Some(usize::MAX)), "testing");
        for (i, u) in testing.units.iter().enumerate() {
            let label = unit_label(testing, Some(i));
            match u.symbols {
                [one] => assert_eq!(label, format!("testing.{one}")),
                _ => assert_eq!(label, "testing.plain"),
            }
        }
    }

    /// The units of weft-gpu's modules compiled on four threads: the same cubins, in the same
    /// order, as one after another, each written to the cache once; a second preparation reads
    /// every one of them from the cache.
    #[test]
    fn parallel_compilation_matches_sequential_and_fills_the_cache_once() {
        let nv = match Nvrtc::load() {
            Ok(nv) => nv,
            Err(e) => {
                assert!(
                    !crate::testing::gpu_required(),
                    "WEFT_REQUIRE_GPU is set but NVRTC is missing: {e}"
                );
                eprintln!(
                    "parallel_compilation_matches_sequential_and_fills_the_cache_once: SKIPPED \
                     (no NVRTC: {e})"
                );
                return;
            }
        };
        let m = &crate::kernels::testing::MODULE;
        assert!(
            m.units.len() >= 3,
            "the testing module has {} units",
            m.units.len()
        );
        let jobs: Vec<(String, String)> = (0..m.units.len())
            .map(|u| (unit_label(m, Some(u)), m.unit_source(u)))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let parallel = compile_images(&jobs, 90, &nv, Some(dir.path()), 4);
        let sequential = compile_images(&jobs, 90, &nv, None, 1);
        for (r, (name, _)) in parallel.iter().chain(&sequential).zip(jobs.iter().cycle()) {
            assert!(r.is_ok(), "{name}: {:?}", r.as_ref().err());
        }
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, jobs.len(), "one cache file per unit");
        let again = compile_images(&jobs, 90, &nv, Some(dir.path()), 4);
        for (((p, s), a), (name, _)) in parallel.into_iter().zip(sequential).zip(again).zip(&jobs) {
            let (p, s, a) = (p.unwrap(), s.unwrap(), a.unwrap());
            assert!(!p.cached && !s.cached, "{name}: compiled, not cached");
            assert!(a.cached, "{name}: the second preparation reads the cache");
            assert!(!p.image.is_empty(), "{name}: empty cubin");
            assert!(
                p.image == s.image && a.image == p.image,
                "{name}: cubins differ"
            );
        }
        assert!(compile_images(&[], 90, &nv, None, 4).is_empty());
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
