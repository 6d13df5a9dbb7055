//! Embeds the CUDA kernels of `kernels/` into weft-gpu.
//!
//! Always: each module folder `kernels/<module>/` becomes one self-contained source (its `.cu`
//! files with the `weft/*.cuh` headers inlined), embedded for NVRTC at run time.
//! When nvcc is available (`$NVCC`, `nvcc` on PATH, or the toolchain `cargo xtask kernels`
//! installs under `target/cuda-toolchain`) and `WEFT_NVCC` is not `off`: also cubins for sm_80 and
//! sm_90 and PTX for compute_80. A failing or missing nvcc never fails the build: the sources are
//! embedded regardless. This script never runs nvidia-smi and never touches a GPU.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const ARCHS: [u32; 2] = [80, 90];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let root = manifest.join("..").join("..");
    let kernels = root.join("kernels");
    println!("cargo:rerun-if-changed={}", kernels.display());
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=WEFT_NVCC");

    let mut table = String::from("&[\n");
    let modules = list_modules(&kernels);
    if modules.is_empty() {
        println!(
            "cargo:warning=weft-gpu: no kernel modules under {}; GPU kernels will be unavailable",
            kernels.display()
        );
    }
    let nvcc = find_nvcc(&root);
    for (name, files) in &modules {
        let source = match flatten_module(&kernels, files) {
            Ok(s) => s,
            Err(e) => {
                println!("cargo:warning=weft-gpu: cannot read kernel module {name}: {e}");
                continue;
            }
        };
        let src_path = out.join(format!("{name}.cu"));
        std::fs::write(&src_path, &source).expect("write to OUT_DIR");
        let mut cubins = String::new();
        let mut ptx = String::from("None");
        if let Some(nvcc) = &nvcc {
            for arch in ARCHS {
                let dst = out.join(format!("{name}.sm_{arch}.cubin"));
                let arch_flag = format!("-arch=sm_{arch}");
                if run_nvcc(nvcc, &src_path, &dst, &["-cubin", &arch_flag]) {
                    let _ = write!(
                        cubins,
                        "({arch}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.sm_{arch}.cubin\")) as &[u8]), "
                    );
                }
            }
            let dst = out.join(format!("{name}.compute_80.ptx"));
            if run_nvcc(nvcc, &src_path, &dst, &["-ptx", "-arch=compute_80"]) {
                ptx = format!(
                    "Some(include_str!(concat!(env!(\"OUT_DIR\"), \"/{name}.compute_80.ptx\")))"
                );
            }
        }
        let _ = writeln!(
            table,
            "    EmbeddedModule {{ name: {name:?}, source: include_str!(concat!(env!(\"OUT_DIR\"), \"/{name}.cu\")), cubins: &[{cubins}], ptx: {ptx} }},"
        );
    }
    table.push(']');
    std::fs::write(out.join("embedded.rs"), table).expect("write to OUT_DIR");
}

/// Module folders (every folder of `kernels/` but `include/`) and their `.cu` files, sorted.
fn list_modules(kernels: &Path) -> Vec<(String, Vec<PathBuf>)> {
    let Ok(dir) = std::fs::read_dir(kernels) else {
        return Vec::new();
    };
    let mut mods = Vec::new();
    for entry in dir.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !path.is_dir() || name == "include" {
            continue;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "cu"))
            .collect();
        files.sort();
        if !files.is_empty() {
            mods.push((name, files));
        }
    }
    mods.sort();
    mods
}

/// The module's `.cu` files concatenated, with each `#include "weft/..."` replaced by the header
/// (once), and `#line` markers so that compiler messages name the original files.
fn flatten_module(kernels: &Path, files: &[PathBuf]) -> std::io::Result<String> {
    let mut out = String::new();
    let mut seen = HashSet::new();
    for f in files {
        let rel = f.strip_prefix(kernels).unwrap_or(f).display().to_string();
        flatten_file(kernels, f, &rel, &mut seen, &mut out)?;
    }
    Ok(out)
}

fn flatten_file(
    kernels: &Path,
    path: &Path,
    shown: &str,
    seen: &mut HashSet<String>,
    out: &mut String,
) -> std::io::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let _ = writeln!(out, "#line 1 \"{shown}\"");
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t == "#pragma once" {
            out.push('\n');
            continue;
        }
        if let Some(inc) = t
            .strip_prefix("#include \"")
            .and_then(|r| r.strip_suffix('"'))
            .filter(|inc| inc.starts_with("weft/"))
        {
            if seen.insert(inc.to_string()) {
                let header = kernels.join("include").join(inc);
                flatten_file(kernels, &header, inc, seen, out)?;
            }
            let _ = writeln!(out, "#line {} \"{shown}\"", i + 2);
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(())
}

/// nvcc from `$NVCC`, PATH or the xtask toolchain, unless `WEFT_NVCC=off`.
fn find_nvcc(root: &Path) -> Option<PathBuf> {
    if std::env::var("WEFT_NVCC").is_ok_and(|v| v == "off" || v == "0") {
        return None;
    }
    if let Some(p) = std::env::var_os("NVCC").map(PathBuf::from) {
        if p.is_file() {
            return Some(p);
        }
        println!(
            "cargo:warning=weft-gpu: $NVCC={} is not a file; ignored",
            p.display()
        );
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("nvcc");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let p = root.join("target/cuda-toolchain/nvidia/cu13/bin/nvcc");
    p.is_file().then_some(p)
}

fn run_nvcc(nvcc: &Path, src: &Path, dst: &Path, mode: &[&str]) -> bool {
    let out = Command::new(nvcc)
        .args(mode)
        .args(["-O3", "-std=c++17", "-lineinfo", "-o"])
        .arg(dst)
        .arg(src)
        .output();
    match out {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            let msg = String::from_utf8_lossy(&o.stderr);
            let first = msg.lines().next().unwrap_or("");
            println!(
                "cargo:warning=weft-gpu: nvcc {mode:?} failed for {} (kernels stay NVRTC-only): {first}",
                src.display()
            );
            false
        }
        Err(e) => {
            println!("cargo:warning=weft-gpu: cannot run {}: {e}", nvcc.display());
            false
        }
    }
}
