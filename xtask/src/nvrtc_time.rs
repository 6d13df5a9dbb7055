//! `cargo xtask nvrtc-time [--arch 90] [--modules a,b] [--repeat N] [--units]`: how long NVRTC
//! takes to compile each kernel module, as a build without nvcc does on its first GPU use with
//! an empty kernel cache (issue 18 item 5). No GPU is needed: NVRTC compiles for any
//! architecture. With `--units`, each unit the run-time loader compiles on demand (one per
//! kernel instance, plus one for a module's plain kernels; `weft_kernel_build::kernel_units`)
//! is compiled and timed on its own as well, which also checks that every unit compiles.
//!
//! Each module is flattened exactly as the crates' build scripts do it and compiled to a cubin
//! in a fresh `python3` process (ctypes; no cache of any kind), with the options the run-time
//! loader uses (`weft_gpu::loader::nvrtc_options`: `--gpu-architecture=sm_<arch> -std=c++17
//! -lineinfo`). Per module it prints the wall time and the CPU time of the compiling process
//! (the CPU time is the steadier figure on a shared machine), the median of `--repeat` runs,
//! and the total over the modules. NVRTC: `$WEFT_NVRTC`, or the toolchain `cargo xtask kernels`
//! uses.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::util::root;

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let mut arch = 90u32;
    let mut only: Option<Vec<String>> = None;
    let mut repeat = 1usize;
    let mut units = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--arch" => {
                let v = it.next().context("--arch needs a number, e.g. 90")?;
                arch = v
                    .trim_start_matches("sm_")
                    .parse()
                    .with_context(|| format!("bad --arch `{v}`"))?;
            }
            "--modules" => {
                let v = it
                    .next()
                    .context("--modules needs a list, e.g. gnnd,ggnn")?;
                only = Some(v.split(',').map(|s| s.trim().to_string()).collect());
            }
            "--units" => units = true,
            "--repeat" => {
                let v = it.next().context("--repeat needs a count")?;
                repeat = v
                    .parse()
                    .ok()
                    .filter(|&r| r >= 1)
                    .with_context(|| format!("bad --repeat `{v}` (1 or more)"))?;
            }
            other => bail!(
                "nvrtc-time: unknown option `{other}` (use --arch 90, --modules a,b, --repeat N, --units)"
            ),
        }
    }
    let root = root();
    let nvrtc = match std::env::var_os("WEFT_NVRTC") {
        Some(p) if Path::new(&p).is_file() => p.into(),
        _ => crate::kernels::toolchain(&root)?.1,
    };
    let out = root.join("target/kernels");
    std::fs::create_dir_all(&out)?;
    let mut modules = crate::kernels::workspace_modules(&root)?;
    if let Some(only) = &only {
        for name in only {
            if !modules.iter().any(|(n, _)| n == name) {
                bail!("no kernel module `{name}`");
            }
        }
        modules.retain(|(n, _)| only.contains(n));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut report = format!(
        "NVRTC {} for sm_{arch}, empty cache, one module at a time, {cpus} CPUs, median of {repeat}\n\
         {:<14} {:>10} {:>10} {:>10}\n",
        nvrtc.display(),
        "module",
        "source KB",
        "wall s",
        "CPU s"
    );
    let (mut total_wall, mut total_cpu) = (0.0, 0.0);
    let median = |path: &Path, what: &str| -> Result<(f64, f64)> {
        let mut runs = Vec::with_capacity(repeat);
        for _ in 0..repeat {
            runs.push(time_one(&nvrtc, path, arch).with_context(|| what.to_string())?);
        }
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(runs[runs.len() / 2])
    };
    let mut unit_lines = String::new();
    for (name, src) in &modules {
        let path = out.join(format!("{name}.nvrtc-time.cu"));
        std::fs::write(&path, src)?;
        let (wall, cpu) = median(&path, &format!("module {name}"))?;
        total_wall += wall;
        total_cpu += cpu;
        let _ = writeln!(
            report,
            "{name:<14} {:>10.1} {wall:>10.2} {cpu:>10.2}",
            src.len() as f64 / 1024.0
        );
        eprint!(
            "{}",
            report
                .lines()
                .last()
                .map_or(String::new(), |l| format!("{l}\n"))
        );
        if !units {
            continue;
        }
        let parts = weft_kernel_build::kernel_units(src)
            .map_err(|e| anyhow::anyhow!("module {name}: {e}"))?;
        for (i, u) in parts.iter().enumerate() {
            let label = match u.symbols.as_slice() {
                [one] => one.clone(),
                many => format!("plain ({} kernels)", many.len()),
            };
            let path = out.join(format!("{name}.unit{i}.nvrtc-time.cu"));
            std::fs::write(&path, weft_kernel_build::unit_source(src, &u.blank))?;
            let (wall, cpu) = median(&path, &format!("module {name}, unit {label}"))?;
            let line = format!("{name:<14} {label:<28} {wall:>8.2} {cpu:>8.2}\n");
            eprint!("{line}");
            unit_lines += &line;
        }
    }
    let _ = writeln!(
        report,
        "{:<14} {:>10} {total_wall:>10.2} {total_cpu:>10.2}",
        "total", ""
    );
    if units {
        let _ = write!(
            report,
            "\nper unit (what a launch compiles where no cubin fits the device):\n\
             {:<14} {:<28} {:>8} {:>8}\n{unit_lines}",
            "module", "unit", "wall s", "CPU s"
        );
    }
    println!("{report}");
    Ok(())
}

/// (wall, CPU) seconds of one NVRTC compilation of `src` to a cubin for `sm_<arch>`.
fn time_one(lib: &Path, src: &Path, arch: u32) -> Result<(f64, f64)> {
    let stdout = crate::kernels::run_nvrtc_script(TIME_PY, lib, src, arch)?;
    let mut it = stdout.split_whitespace();
    let mut next = || -> Result<f64> {
        it.next()
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("unexpected output `{stdout}`"))
    };
    Ok((next()?, next()?))
}

/// Compiles argv[2] with the NVRTC library argv[1] and options argv[3:] to a cubin; prints the
/// wall and CPU seconds of the compilation (program creation to cubin size).
const TIME_PY: &str = r#"
import ctypes, glob, os, resource, sys, time
lib, src, opts = sys.argv[1], sys.argv[2], sys.argv[3:]
d = os.path.dirname(lib)
for b in glob.glob(os.path.join(d, "libnvrtc-builtins.so*")):
    try:
        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL); break
    except OSError:
        pass
n = ctypes.CDLL(lib)
n.nvrtcGetErrorString.restype = ctypes.c_char_p
code = open(src, "rb").read()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
w0, c0 = time.perf_counter(), cpu()
prog = ctypes.c_void_p()
r = n.nvrtcCreateProgram(ctypes.byref(prog), code, os.path.basename(src).encode(), 0, None, None)
if r: sys.exit("nvrtcCreateProgram: " + n.nvrtcGetErrorString(r).decode())
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
r = n.nvrtcCompileProgram(prog, len(opts), arr)
if r: sys.exit("nvrtcCompileProgram: " + n.nvrtcGetErrorString(r).decode())
cs = ctypes.c_size_t()
r = n.nvrtcGetCUBINSize(prog, ctypes.byref(cs))
if r or cs.value == 0: sys.exit("no cubin")
print("%.3f %.3f" % (time.perf_counter() - w0, cpu() - c0))
"#;
