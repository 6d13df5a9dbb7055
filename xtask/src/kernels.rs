//! `cargo xtask kernels [--arch 80,90] [--check]`: compiles every CUDA kernel module with nvcc
//! and with NVRTC, for each architecture, and prints registers, spills and shared memory per
//! kernel (ptxas -v).
//!
//! - nvcc: `$NVCC`, `nvcc` on PATH, or the toolchain under `target/cuda-toolchain`;
//! - NVRTC: `$WEFT_NVRTC`, the toolchain under `target/cuda-toolchain`, or the CUDA toolkit;
//! - where either is missing, the PyPI wheels (`nvidia-cuda-nvcc`, `nvidia-cuda-nvrtc`,
//!   `nvidia-cuda-runtime`, `nvidia-cuda-cccl`, `nvidia-nvvm`, `nvidia-cuda-crt`, all for CUDA
//!   13.0) are installed into `target/cuda-toolchain` with `python3 -m pip`.
//!
//! The modules are the workspace's `kernels/<module>/*.cu`, each listed and flattened by
//! weft-kernels exactly as the crates' build scripts do (the shared `weft/*.cuh` headers of
//! `kernels/include/` inlined), and compiled as one unit. nvcc runs with
//! `-Werror all-warnings`; NVRTC's log must be empty. With `--check` any warning fails the task
//! (without it, warnings are printed and errors still fail), and every unit the run-time loader
//! compiles on its own (`weft_kernels::kernel_units`) is compiled with NVRTC as well, for
//! the newest architecture asked for. No GPU is needed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::root;

/// The wheels that make up the toolchain (one pip call: `--target` cannot merge installs).
const WHEELS: [&str; 6] = [
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-nvrtc==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
];

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let mut archs = vec![80u32, 90];
    let mut check = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--check" => check = true,
            "--arch" => {
                let v = it.next().context("--arch needs a list, e.g. 80,90")?;
                archs = v
                    .split(',')
                    .map(|s| s.trim().trim_start_matches("sm_").parse::<u32>())
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("bad --arch list `{v}`"))?;
            }
            other => bail!("kernels: unknown option `{other}` (use --arch 80,90, --check)"),
        }
    }
    let root = root();
    let out = root.join("target/kernels");
    std::fs::create_dir_all(&out)?;
    let (nvcc, nvrtc) = toolchain(&root)?;
    eprintln!("nvcc: {}\nNVRTC: {}", nvcc.display(), nvrtc.display());

    let modules = workspace_modules(&root)?;
    if modules.is_empty() {
        bail!(
            "no kernel modules under {}/crates/*/kernels",
            root.display()
        );
    }
    let mut report = String::new();
    let mut warnings = 0usize;
    let mut failures = Vec::new();
    for (name, src) in &modules {
        let src_path = out.join(format!("{name}.cu"));
        std::fs::write(&src_path, src)?;
        for &arch in &archs {
            // nvcc, with ptxas's resource report.
            let cubin = out.join(format!("{name}.sm_{arch}.cubin"));
            let arch_flag = format!("-arch=sm_{arch}");
            let compiled = weft_kernels::nvcc_compile(
                &nvcc,
                &src_path,
                &cubin,
                &["-cubin", &arch_flag],
                &["-Werror", "all-warnings", "-Xptxas", "-v"],
            );
            let ok = compiled.is_ok();
            let err = compiled.unwrap_or_else(|e| e);
            let w = err
                .lines()
                .filter(|l| l.to_lowercase().contains("warning"))
                .count();
            warnings += w;
            if !ok {
                eprintln!("{err}");
                failures.push(format!("nvcc {name} sm_{arch}"));
                continue;
            }
            if w > 0 {
                eprintln!("{err}");
            }
            report_ptxas(&mut report, name, arch, &err);
            // NVRTC, as weft-gpu compiles at run time.
            match nvrtc_compile(&nvrtc, &src_path, arch) {
                Ok(log) if log.trim().is_empty() => {}
                Ok(log) => {
                    warnings += 1;
                    eprintln!("NVRTC {name} sm_{arch}:\n{log}");
                }
                Err(e) => {
                    eprintln!("NVRTC {name} sm_{arch}: {e:#}");
                    failures.push(format!("NVRTC {name} sm_{arch}"));
                }
            }
        }
    }
    println!("{report}");
    // The units NVRTC compiles on demand at run time (weft_kernels::kernel_units), each on
    // its own, for the newest architecture asked for: what a build without nvcc compiles.
    if check && let Some(&arch) = archs.iter().max() {
        let mut count = 0;
        for (name, src) in &modules {
            let units = weft_kernels::kernel_units(src)
                .map_err(|e| anyhow::anyhow!("module {name}: {e}"))?;
            for (i, u) in units.iter().enumerate() {
                let path = out.join(format!("{name}.unit{i}.cu"));
                std::fs::write(&path, weft_kernels::unit_source(src, &u.blank))?;
                count += 1;
                match nvrtc_compile(&nvrtc, &path, arch) {
                    Ok(log) if log.trim().is_empty() => {}
                    Ok(log) => {
                        warnings += 1;
                        eprintln!("NVRTC {name} unit {:?} sm_{arch}:\n{log}", u.symbols);
                    }
                    Err(e) => {
                        eprintln!("NVRTC {name} unit {:?} sm_{arch}: {e:#}", u.symbols);
                        failures.push(format!("NVRTC {name} unit {:?}", u.symbols));
                    }
                }
            }
        }
        eprintln!("{count} kernel units compiled on their own with NVRTC for sm_{arch}");
    }
    if !failures.is_empty() {
        bail!("kernel compilation failed: {}", failures.join(", "));
    }
    if check && warnings > 0 {
        bail!("{warnings} compiler warning(s) (--check treats warnings as errors)");
    }
    println!(
        "all {} kernel modules compile with nvcc and NVRTC for {:?}{}",
        modules.len(),
        archs.iter().map(|a| format!("sm_{a}")).collect::<Vec<_>>(),
        if warnings > 0 {
            format!(" ({warnings} warnings)")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Appends one line per kernel: registers, stack, spills, shared memory.
fn report_ptxas(report: &mut String, module: &str, arch: u32, log: &str) {
    if report.is_empty() {
        let _ = writeln!(
            report,
            "{:<10} {:<7} {:<36} {:>5} {:>7} {:>12} {:>10}",
            "module", "arch", "kernel", "regs", "stack", "spill st/ld", "smem"
        );
    }
    let mut func = String::new();
    let (mut stack, mut spills) = (String::from("0"), String::from("0/0"));
    for line in log.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("ptxas info    : Function properties for ") {
            func = rest.trim().to_string();
        } else if l.contains("bytes stack frame") {
            let nums: Vec<&str> = l
                .split_whitespace()
                .filter(|w| w.parse::<u64>().is_ok())
                .collect();
            if nums.len() >= 3 {
                stack = nums[0].to_string();
                spills = format!("{}/{}", nums[1], nums[2]);
            }
        } else if let Some(rest) = l.strip_prefix("ptxas info    : Used ") {
            let regs = rest.split_whitespace().next().unwrap_or("?");
            let smem = rest
                .split(',')
                .find(|p| p.contains("smem"))
                .map(|p| p.trim().replace(" bytes smem", " B"))
                .unwrap_or_else(|| "0 B".into());
            let _ = writeln!(
                report,
                "{module:<10} sm_{arch:<4} {func:<36} {regs:>5} {stack:>7} {spills:>12} {smem:>10}"
            );
        }
    }
}

/// nvcc and the NVRTC library, installing the wheels into target/cuda-toolchain if needed.
pub fn toolchain(root: &Path) -> Result<(PathBuf, PathBuf)> {
    let tc = root.join("target/cuda-toolchain");
    let tc_nvcc = tc.join("nvidia/cu13/bin/nvcc");
    let tc_nvrtc = tc.join("nvidia/cu13/lib/libnvrtc.so.13");
    let marker = tc.join(".weft-complete");
    let find_nvcc = || -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("NVCC")
            .map(PathBuf::from)
            .filter(|p| p.is_file())
        {
            return Some(p);
        }
        if marker.is_file() && tc_nvcc.is_file() {
            return Some(tc_nvcc.clone());
        }
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("nvcc"))
                .find(|p| p.is_file())
        })
    };
    let find_nvrtc = || -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("WEFT_NVRTC")
            .map(PathBuf::from)
            .filter(|p| p.is_file())
        {
            return Some(p);
        }
        if marker.is_file() && tc_nvrtc.is_file() {
            return Some(tc_nvrtc.clone());
        }
        let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        dirs.push("/usr/local/cuda/lib64".into());
        dirs.into_iter()
            .flat_map(|d| ["libnvrtc.so.13", "libnvrtc.so"].map(|n| d.join(n)))
            .find(|p| p.is_file())
    };
    if let (Some(n), Some(r)) = (find_nvcc(), find_nvrtc()) {
        return Ok((n, r));
    }
    eprintln!(
        "installing the CUDA 13.0 compilers from PyPI into {}",
        tc.display()
    );
    if tc.exists() {
        std::fs::remove_dir_all(&tc).with_context(|| format!("remove {}", tc.display()))?;
    }
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .arg("--target")
        .arg(&tc)
        .args(WHEELS)
        .status()
        .context("run python3 -m pip (python3 with pip is needed to install the CUDA wheels)")?;
    if !status.success() {
        bail!("pip could not install {WHEELS:?}");
    }
    if !tc_nvcc.is_file() || !tc_nvrtc.is_file() {
        bail!(
            "the wheels did not provide {} and {}",
            tc_nvcc.display(),
            tc_nvrtc.display()
        );
    }
    std::fs::write(&marker, WHEELS.join("\n"))?;
    Ok((
        find_nvcc().unwrap_or(tc_nvcc),
        find_nvrtc().unwrap_or(tc_nvrtc),
    ))
}

/// Compiles `src` with NVRTC through python3's ctypes (no GPU needed); returns the log.
fn nvrtc_compile(lib: &Path, src: &Path, arch: u32) -> Result<String> {
    run_nvrtc_script(NVRTC_PY, lib, src, arch)
}

/// Runs the python3 `script` that compiles `src` with the NVRTC library `lib` for `sm_<arch>`
/// (the project's NVRTC options); returns its standard output, or an error with its output.
pub(crate) fn run_nvrtc_script(script: &str, lib: &Path, src: &Path, arch: u32) -> Result<String> {
    let o = Command::new("python3")
        .args(["-c", script])
        .arg(lib)
        .arg(src)
        .arg(format!("--gpu-architecture=sm_{arch}"))
        .args(["-std=c++17", "-lineinfo"])
        .output()
        .context("run python3 for NVRTC")?;
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    if !o.status.success() {
        bail!("{}{}", stdout, String::from_utf8_lossy(&o.stderr));
    }
    Ok(stdout)
}

const NVRTC_PY: &str = r#"
import ctypes, glob, os, sys
lib, src, opts = sys.argv[1], sys.argv[2], sys.argv[3:]
d = os.path.dirname(lib)
for b in glob.glob(os.path.join(d, "libnvrtc-builtins.so*")):
    try:
        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL); break
    except OSError:
        pass
n = ctypes.CDLL(lib)
n.nvrtcGetErrorString.restype = ctypes.c_char_p
prog = ctypes.c_void_p()
code = open(src, "rb").read()
r = n.nvrtcCreateProgram(ctypes.byref(prog), code, os.path.basename(src).encode(), 0, None, None)
if r: sys.exit("nvrtcCreateProgram: " + n.nvrtcGetErrorString(r).decode())
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
r = n.nvrtcCompileProgram(prog, len(opts), arr)
size = ctypes.c_size_t()
n.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
buf = ctypes.create_string_buffer(size.value)
n.nvrtcGetProgramLog(prog, buf)
log = buf.value.decode(errors="replace").strip()
if r:
    sys.exit("nvrtcCompileProgram: " + n.nvrtcGetErrorString(r).decode() + "\n" + log)
cs = ctypes.c_size_t()
r = n.nvrtcGetCUBINSize(prog, ctypes.byref(cs))
if r or cs.value == 0: sys.exit("no cubin")
print(log)
"#;

/// weft's kernel modules (the folders of the workspace's `kernels/`), flattened as the crates'
/// build scripts do: (name, source), sorted by name.
pub fn workspace_modules(root: &Path) -> Result<Vec<(String, String)>> {
    let kernels = root.join("kernels");
    let include = kernels.join("include");
    let mut modules: Vec<(String, String)> = Vec::new();
    for m in weft_kernels::list_modules(&kernels)
        .with_context(|| format!("list {}", kernels.display()))?
    {
        let src = weft_kernels::module_source(&kernels, &include, &m.files)
            .map_err(|e| anyhow::anyhow!("module {}: {e}", m.name))?;
        modules.push((m.name, src));
    }
    if modules.is_empty() {
        bail!("no kernel modules under {}", kernels.display());
    }
    modules.sort();
    Ok(modules)
}
