//! NVRTC, loaded at run time through its C API.
//!
//! weft loads `libnvrtc` itself (rather than through cudarc) so that it can look in the usual
//! places beyond the loader's search path and report a clear error when it is absent, and so that
//! it can ask for a cubin (`nvrtcGetCUBIN`) instead of PTX. Search order: `$WEFT_NVRTC` (a file),
//! the loader's path (`LD_LIBRARY_PATH`, ldconfig), `$CUDA_HOME`/`$CUDA_PATH`, `/usr/local/cuda`,
//! the Python wheels (`nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib` under site-packages) and the
//! toolchain `cargo xtask kernels` installs under `target/cuda-toolchain`.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use weft_core::{Error, Result};

type NvrtcResult = c_int;
type Program = *mut c_void;

type FnVersion = unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult;
type FnCreate = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> NvrtcResult;
type FnCompile = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> NvrtcResult;
type FnSize = unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult;
type FnGet = unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult;
type FnDestroy = unsafe extern "C" fn(*mut Program) -> NvrtcResult;
type FnErrStr = unsafe extern "C" fn(NvrtcResult) -> *const c_char;

/// A loaded NVRTC library.
pub struct Nvrtc {
    path: PathBuf,
    version: (i32, i32),
    create: FnCreate,
    compile: FnCompile,
    log_size: FnSize,
    log: FnGet,
    cubin_size: FnSize,
    cubin: FnGet,
    destroy: FnDestroy,
    err_str: FnErrStr,
    // Keeps the function pointers above valid; dropped last.
    _builtins: Option<libloading::Library>,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

/// Library names tried through the dynamic loader's own search path.
const NAMES: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// Folders searched explicitly when the loader's path has no NVRTC.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.push(PathBuf::from(&v).join("lib64"));
            dirs.push(PathBuf::from(&v).join("lib"));
        }
    }
    if let Some(v) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&v));
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    dirs.push("/usr/lib/x86_64-linux-gnu".into());
    // Python wheels (nvidia-cuda-nvrtc): site-packages of the usual interpreters.
    let mut site = Vec::new();
    for base in [
        "/usr/lib",
        "/usr/local/lib",
        "/opt/torch/.venv/lib",
        "/opt/conda/lib",
    ] {
        if let Ok(rd) = std::fs::read_dir(base) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with("python3") {
                    site.push(e.path().join("site-packages"));
                    site.push(e.path().join("dist-packages"));
                }
            }
        }
    }
    for s in site {
        dirs.push(s.join("nvidia/cu13/lib"));
        dirs.push(s.join("nvidia/cuda_nvrtc/lib"));
    }
    // The toolchain `cargo xtask kernels` installs (useful when running from the source tree).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    dirs.push(root.join("target/cuda-toolchain/nvidia/cu13/lib"));
    dirs
}

/// The NVRTC library file in `dir`, if any (`libnvrtc.so.13` first).
fn lib_in(dir: &Path) -> Option<PathBuf> {
    for n in NAMES {
        let p = dir.join(n);
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

/// libnvrtc opens libnvrtc-builtins by name: loaded first from the folder of the NVRTC library,
/// the loader then finds it by its soname. `None` when `dir` has none that loads.
fn builtins_in(dir: &Path) -> Option<libloading::Library> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libnvrtc-builtins.so"))
        })
        .collect();
    found.sort();
    found.into_iter().find_map(|b| open(&b).ok())
}

/// Loads a library.
fn open(path: &Path) -> std::result::Result<libloading::Library, libloading::Error> {
    // SAFETY: loading a shared library runs its initialisers. NVRTC's are plain C initialisers
    // with no preconditions on the caller; the library stays loaded as long as the handle.
    unsafe { libloading::Library::new(path) }
}

impl Nvrtc {
    /// Finds and loads NVRTC, or says where it looked.
    pub fn load() -> Result<Nvrtc> {
        let mut tried = Vec::new();
        if let Some(p) = std::env::var_os("WEFT_NVRTC").map(PathBuf::from) {
            let builtins = p.parent().and_then(builtins_in);
            match open(&p) {
                Ok(lib) => return Self::from_lib(lib, p, builtins),
                Err(e) => tried.push(format!("{} ({e})", p.display())),
            }
        }
        for n in NAMES {
            if let Ok(lib) = open(Path::new(n)) {
                return Self::from_lib(lib, PathBuf::from(n), None);
            }
        }
        tried.push(format!("{NAMES:?} on the loader path"));
        for dir in search_dirs() {
            if let Some(p) = lib_in(&dir) {
                let builtins = builtins_in(&dir);
                match open(&p) {
                    Ok(lib) => return Self::from_lib(lib, p, builtins),
                    Err(e) => tried.push(format!("{} ({e})", p.display())),
                }
            }
        }
        Err(Error::Unsupported(format!(
            "NVRTC (libnvrtc) not found; tried {}, and the folders {:?}. Install the CUDA toolkit \
             or the `nvidia-cuda-nvrtc` wheel, or set WEFT_NVRTC to the library file",
            tried.join(", "),
            search_dirs()
        )))
    }

    fn from_lib(
        lib: libloading::Library,
        path: PathBuf,
        builtins: Option<libloading::Library>,
    ) -> Result<Nvrtc> {
        fn sym<T: Copy>(lib: &libloading::Library, name: &[u8], path: &Path) -> Result<T> {
            // SAFETY: each symbol is looked up with the C signature NVRTC documents for it
            // (nvrtc.h); `T` is always the matching `unsafe extern "C" fn` type above.
            unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
                Error::Gpu(format!(
                    "{} lacks {}: {e}",
                    path.display(),
                    String::from_utf8_lossy(name)
                ))
            })
        }
        let version: FnVersion = sym(&lib, b"nvrtcVersion\0", &path)?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion writes two ints through valid pointers.
        let r = unsafe { version(&mut major, &mut minor) };
        if r != 0 {
            return Err(Error::Gpu(format!(
                "nvrtcVersion failed ({r}) in {}",
                path.display()
            )));
        }
        Ok(Nvrtc {
            version: (major, minor),
            create: sym(&lib, b"nvrtcCreateProgram\0", &path)?,
            compile: sym(&lib, b"nvrtcCompileProgram\0", &path)?,
            log_size: sym(&lib, b"nvrtcGetProgramLogSize\0", &path)?,
            log: sym(&lib, b"nvrtcGetProgramLog\0", &path)?,
            cubin_size: sym(&lib, b"nvrtcGetCUBINSize\0", &path)?,
            cubin: sym(&lib, b"nvrtcGetCUBIN\0", &path)?,
            destroy: sym(&lib, b"nvrtcDestroyProgram\0", &path)?,
            err_str: sym(&lib, b"nvrtcGetErrorString\0", &path)?,
            path,
            _builtins: builtins,
            _lib: lib,
        })
    }

    /// The library file (or name) that was loaded.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// NVRTC's (major, minor) version.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    fn err(&self, what: &str, r: NvrtcResult) -> Error {
        // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string for any code.
        let s = unsafe { CStr::from_ptr((self.err_str)(r)) };
        Error::Gpu(format!("NVRTC {what}: {}", s.to_string_lossy()))
    }

    /// Compiles `source` (named `name` in messages) to a cubin with `options`
    /// (e.g. `--gpu-architecture=sm_90`). Returns the cubin and the compiler log (warnings).
    pub fn compile_cubin(
        &self,
        source: &str,
        name: &str,
        options: &[String],
    ) -> Result<(Vec<u8>, String)> {
        let src = CString::new(source)
            .map_err(|_| Error::Gpu(format!("kernel source {name} contains a NUL byte")))?;
        let cname = CString::new(name)
            .map_err(|_| Error::Gpu(format!("kernel name {name:?} contains a NUL byte")))?;
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::Gpu("an NVRTC option contains a NUL byte".into()))?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: `src` and `cname` are NUL-terminated and outlive the call; no headers are
        // passed (count 0, null arrays), as the sources are self-contained.
        let r = unsafe {
            (self.create)(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if r != 0 {
            return Err(self.err("nvrtcCreateProgram", r));
        }
        let guard = ProgramGuard { nvrtc: self, prog };
        // SAFETY: `prog` is a live program; `opt_ptrs` holds `opts.len()` valid C strings that
        // outlive the call.
        let r = unsafe { (self.compile)(prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
        let log = guard.log();
        if r != 0 {
            return Err(Error::Gpu(format!(
                "NVRTC could not compile kernel module {name} with {options:?}: {}\n{log}",
                self.err("nvrtcCompileProgram", r)
            )));
        }
        let mut size = 0usize;
        // SAFETY: writes the cubin size through a valid pointer.
        let r = unsafe { (self.cubin_size)(prog, &mut size) };
        if r != 0 {
            return Err(self.err("nvrtcGetCUBINSize", r));
        }
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` has exactly the `size` bytes NVRTC asked for.
        let r = unsafe { (self.cubin)(prog, cubin.as_mut_ptr().cast()) };
        if r != 0 {
            return Err(self.err("nvrtcGetCUBIN", r));
        }
        drop(guard);
        Ok((cubin, log))
    }
}

/// Destroys an NVRTC program when dropped.
struct ProgramGuard<'a> {
    nvrtc: &'a Nvrtc,
    prog: Program,
}

impl ProgramGuard<'_> {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: writes the log size through a valid pointer for a live program.
        if unsafe { (self.nvrtc.log_size)(self.prog, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has the `size` bytes (terminating NUL included) NVRTC asked for.
        if unsafe { (self.nvrtc.log)(self.prog, buf.as_mut_ptr().cast()) } != 0 {
            return String::new();
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).trim().to_string()
    }
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `prog` was created by nvrtcCreateProgram and is destroyed exactly once.
        let _ = unsafe { (self.nvrtc.destroy)(&mut self.prog) };
    }
}
