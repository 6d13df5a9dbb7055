//! `cargo xtask nvrtc-time [--arch 90] [--modules a,b] [--repeat N] [--units] [--units-only]
//! [--first-use [--threads N]]` (see [`HELP`]): how long NVRTC
//! takes to compile each kernel module, as a build without nvcc does on its first GPU use with
//! an empty kernel cache (issue 18 item 5). No GPU is needed: NVRTC compiles for any
//! architecture. With `--units`, each unit the run-time loader compiles on demand (one per
//! kernel instance, plus one for a module's plain kernels; `weft_kernels::kernel_units`)
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
    let mut whole = true;
    let mut first_use = false;
    let mut threads: Option<usize> = None;
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
            "--units-only" => {
                units = true;
                whole = false;
            }
            "--first-use" => first_use = true,
            "--threads" => {
                let v = it.next().context("--threads needs a count")?;
                threads = Some(
                    v.parse()
                        .ok()
                        .filter(|&t: &usize| t >= 1)
                        .with_context(|| format!("bad --threads `{v}` (1 or more)"))?,
                );
            }
            "--help" | "-h" => {
                println!("{HELP}");
                return Ok(());
            }
            "--repeat" => {
                let v = it.next().context("--repeat needs a count")?;
                repeat = v
                    .parse()
                    .ok()
                    .filter(|&r| r >= 1)
                    .with_context(|| format!("bad --repeat `{v}` (1 or more)"))?;
            }
            other => bail!("nvrtc-time: unknown option `{other}`\n\n{HELP}"),
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
    if threads.is_some() && !first_use {
        bail!("--threads goes with --first-use");
    }
    if first_use {
        let all = crate::kernels::workspace_modules(&root)?;
        return first_use_report(&nvrtc, &out, &all, arch, threads.unwrap_or(cpus), cpus);
    }
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
        if whole {
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
        }
        if !units {
            continue;
        }
        let parts =
            weft_kernels::kernel_units(src).map_err(|e| anyhow::anyhow!("module {name}: {e}"))?;
        for (i, u) in parts.iter().enumerate() {
            let label = match u.symbols.as_slice() {
                [one] => one.clone(),
                many => format!("plain ({} kernels)", many.len()),
            };
            let path = out.join(format!("{name}.unit{i}.nvrtc-time.cu"));
            std::fs::write(&path, weft_kernels::unit_source(src, &u.blank))?;
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

/// Compiles `argv[2]` with the NVRTC library `argv[1]` and options `argv[3:]` to a cubin; prints the
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

/// `cargo xtask nvrtc-time --help`.
pub const HELP: &str = "\
usage: cargo xtask nvrtc-time [options]

NVRTC's compile time with no cache, as a build without nvcc pays it on its first GPU use
(no GPU needed). NVRTC: $WEFT_NVRTC, else the toolchain `cargo xtask kernels` installs.

options:
  --arch N        SM version to compile for (default 90)
  --modules a,b   only these kernel modules (default: all)
  --repeat N      median of N runs per compilation (default 1)
  --units         also each unit the run-time loader compiles on its own
  --units-only    the units only, not the whole modules
  --first-use     per algorithm, element type (f32, f16) and metric: the units its first use
                  compiles, each phase's units (a build's, then its search's) compiled
                  together in one process on --threads threads, as GpuContext::prepare_kernels
                  does; prints the wall time, the CPU time of all units and the critical path
                  (the sum over phases of the longest unit's CPU time: the wall time with enough
                  CPUs)
  --threads N     threads for --first-use (default: the CPUs of this machine)
  -h, --help      this message";

/// The kernels one phase of a first use prepares together: (module, a kernel of each unit).
type Phase = (&'static str, Vec<String>);

/// The phases of each algorithm's first use for element type `dt` (`f32`, `f16`) and `metric`
/// (`l2`, `ip`, `cos`), as the crates prepare them: the build's kernels
/// (`weft_nndescent::gpu::build_kernels`, `weft_ggnn::gpu::build_kernels`), then the search's
/// (`weft_search::gpu::{cagra, ggnn}::search_kernels`). Each kernel names its unit; a plain
/// kernel stands for its module's plain unit.
fn first_use_phases(dt: &str, metric: &str) -> Vec<(&'static str, Vec<Phase>)> {
    let join = metric;
    let mut gnnd = vec![
        "gnnd_sample".to_string(),
        format!("gnnd_init_{dt}"),
        format!("gnnd_join_{join}_{dt}"),
    ];
    if metric == "cos" {
        gnnd.push(format!("exact_norms_{dt}"));
    }
    let cagra_search = vec![
        format!("cagra_search_{dt}"),
        "cagra_search_fill".to_string(),
    ];
    vec![
        (
            "nndescent + cagra search",
            vec![("build", gnnd), ("search", cagra_search)],
        ),
        (
            "ggnn + ggnn search",
            vec![
                (
                    "build",
                    vec![
                        "ggnn_select".to_string(),
                        format!("ggnn_top_{dt}"),
                        format!("ggnn_merge_{dt}"),
                        format!("ggnn_nearest_entry_{dt}"),
                        format!("ggnn_sym_{dt}"),
                    ],
                ),
                ("search", vec![format!("ggnn_search_{dt}")]),
            ],
        ),
    ]
}

/// The unit of `modules` that defines `symbol`: (label, source), or the whole module of a
/// module without units.
fn unit_for(modules: &[(String, String)], symbol: &str) -> Result<(String, String)> {
    for (name, src) in modules {
        let parts = weft_kernels::kernel_units(src).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        if parts.is_empty() {
            let kernels =
                weft_kernels::parse_kernels(src).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            if kernels
                .iter()
                .any(|k| k.instances.iter().any(|i| i.1 == symbol))
            {
                return Ok((name.clone(), src.clone()));
            }
            continue;
        }
        if let Some(u) = parts.iter().find(|u| u.symbols.iter().any(|s| s == symbol)) {
            let label = match u.symbols.as_slice() {
                [one] => format!("{name}.{one}"),
                _ => format!("{name}.plain"),
            };
            return Ok((label, weft_kernels::unit_source(src, &u.blank)));
        }
    }
    bail!("no kernel module defines `{symbol}`")
}

/// The `--first-use` report.
fn first_use_report(
    nvrtc: &Path,
    out: &Path,
    modules: &[(String, String)],
    arch: u32,
    threads: usize,
    cpus: usize,
) -> Result<()> {
    let mut report = format!(
        "NVRTC {} for sm_{arch}, empty cache, first use per algorithm: each phase's units \
         compiled together on {threads} threads in one process ({cpus} CPUs here)\n\
         {:<26} {:<4} {:<4} {:>8} {:>8} {:>9}  longest unit per phase (CPU s)\n",
        nvrtc.display(),
        "algorithm",
        "type",
        "dist",
        "wall s",
        "CPU s",
        "crit. s",
    );
    for dt in ["f32", "f16"] {
        for metric in ["l2", "ip", "cos"] {
            for (algo, phases) in first_use_phases(dt, metric) {
                let (mut wall, mut cpu, mut crit) = (0.0, 0.0, 0.0);
                let mut longest = Vec::new();
                for (phase, kernels) in phases {
                    let mut units: Vec<(String, String)> = Vec::new();
                    for k in &kernels {
                        let u = unit_for(modules, k)?;
                        if !units.iter().any(|(l, _)| *l == u.0) {
                            units.push(u);
                        }
                    }
                    let mut files = Vec::new();
                    for (label, src) in &units {
                        let f = out.join(format!("{label}.first-use.cu"));
                        std::fs::write(&f, src)?;
                        files.push(f);
                    }
                    let (w, per_unit) = time_parallel(nvrtc, &files, arch, threads)
                        .with_context(|| format!("{algo} {dt} {metric} {phase}"))?;
                    wall += w;
                    cpu += per_unit.iter().sum::<f64>();
                    let (i, max) = per_unit
                        .iter()
                        .enumerate()
                        .fold((0, 0.0f64), |b, (i, &c)| if c > b.1 { (i, c) } else { b });
                    crit += max;
                    longest.push(format!("{phase}: {} {max:.2}", units[i].0));
                }
                let line = format!(
                    "{algo:<26} {dt:<4} {metric:<4} {wall:>8.2} {cpu:>8.2} {crit:>9.2}  {}\n",
                    longest.join(", ")
                );
                eprint!("{line}");
                report += &line;
            }
        }
    }
    println!("{report}");
    Ok(())
}

/// Compiles `files` with NVRTC on `threads` threads of one `python3` process (ctypes releases
/// the interpreter lock during each call, so the compilations run at once, as the library's
/// threads do). Returns the wall seconds of the whole and each file's CPU seconds (its thread's).
fn time_parallel(
    lib: &Path,
    files: &[std::path::PathBuf],
    arch: u32,
    threads: usize,
) -> Result<(f64, Vec<f64>)> {
    let o = std::process::Command::new("python3")
        .args(["-c", PARALLEL_PY])
        .arg(lib)
        .arg(threads.to_string())
        .arg(format!("--gpu-architecture=sm_{arch}"))
        .args(files)
        .output()
        .context("run python3 for NVRTC")?;
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    if !o.status.success() {
        bail!("{stdout}{}", String::from_utf8_lossy(&o.stderr));
    }
    let nums: Vec<f64> = stdout
        .split_whitespace()
        .map(|v| {
            v.parse()
                .with_context(|| format!("unexpected output `{stdout}`"))
        })
        .collect::<Result<_>>()?;
    match nums.split_first() {
        Some((&wall, cpu)) if cpu.len() == files.len() => Ok((wall, cpu.to_vec())),
        _ => bail!("unexpected output `{stdout}`"),
    }
}

/// argv: library, threads, arch option, files. Prints the wall seconds of compiling every file
/// (each to a cubin, `-std=c++17 -lineinfo` as the loader) on a pool of that many threads, then
/// each file's thread CPU seconds.
const PARALLEL_PY: &str = r#"
import ctypes, glob, os, sys, time
from concurrent.futures import ThreadPoolExecutor
lib, threads, arch, files = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
opts = [arch, "-std=c++17", "-lineinfo"]
d = os.path.dirname(lib)
for b in sorted(glob.glob(os.path.join(d, "libnvrtc-builtins.so*"))):
    try:
        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL); break
    except OSError:
        pass
n = ctypes.CDLL(lib)
n.nvrtcGetErrorString.restype = ctypes.c_char_p
def one(src):
    c0 = time.thread_time()
    code = open(src, "rb").read()
    prog = ctypes.c_void_p()
    r = n.nvrtcCreateProgram(ctypes.byref(prog), code, os.path.basename(src).encode(), 0, None, None)
    if r: raise SystemExit("nvrtcCreateProgram: " + n.nvrtcGetErrorString(r).decode())
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    r = n.nvrtcCompileProgram(prog, len(opts), arr)
    if r: raise SystemExit(src + ": nvrtcCompileProgram: " + n.nvrtcGetErrorString(r).decode())
    cs = ctypes.c_size_t()
    r = n.nvrtcGetCUBINSize(prog, ctypes.byref(cs))
    if r or cs.value == 0: raise SystemExit(src + ": no cubin")
    n.nvrtcDestroyProgram(ctypes.byref(prog))
    return time.thread_time() - c0
w0 = time.perf_counter()
with ThreadPoolExecutor(max_workers=threads) as ex:
    cpu = list(ex.map(one, files))
print("%.3f" % (time.perf_counter() - w0), " ".join("%.3f" % c for c in cpu))
"#;
