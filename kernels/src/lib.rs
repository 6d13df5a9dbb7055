//! # weft-kernels
//!
//! weft's CUDA kernels and their build-time side. The crate's folder is the workspace's
//! top-level `kernels/`: one folder per kernel module (`gnnd/`, `grnnd/`, `cagra/`,
//! `cagra_search/`, `ggnn/`, `ggnn_search/`, `search_rerank/`, `exact/`, `testing/`), the shared
//! headers in `include/weft/`, and this library, which the build scripts of the crates that
//! launch kernels (weft-gpu and the algorithm crates) and `cargo xtask kernels` use, so that all
//! of them list, flatten and compile modules the same way. Each crate's build script names the
//! modules it binds ([`build_weft_kernels`]); a module is its `.cu` files, compiled as one unit.
//!
//! - [`list_modules`]: the modules of a kernels folder and their files.
//! - [`flatten_module`]: one self-contained source per module, every `#include "weft/..."`
//!   replaced by the shared header ([`include_dir`]) and every `#include "args.cuh"` by the
//!   module's own header, with `#line` markers.
//! - [`find_nvcc`] and [`nvcc_compile`]: cubins and PTX at build time, when nvcc is available.
//! - [`parse_kernels`]: the `extern "C" __global__` kernels of a source, also those a macro
//!   instantiates once per element type, and the argument struct each takes by value
//!   ([`ArgStruct`], declared once in the module's `args.cuh`).
//! - [`module_source`]: the flattened source plus [`layout_asserts`], the `static_assert`s that
//!   the CUDA compiler lays out each argument struct as the generator computed it.
//! - [`generate_bindings`]: Rust code for a module: a `KernelModule` static, the `#[repr(C)]`
//!   twin of each argument struct (same name, same fields in order, its offsets and size
//!   asserted at compile time), and one launcher function per kernel (per element-type
//!   family), which passes the struct by value. The bindings are generated from the source the
//!   GPU compiles, so the two cannot drift apart.
//! - [`build_weft_kernels`]: all of the above for a weft crate's build script;
//!   [`build_crate_kernels`] for a downstream crate with kernels of its own.
//!
//! The crate has no dependencies and never touches a GPU.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// SM versions nvcc builds cubins for (PTX is built for compute_80, the oldest of them).
pub const ARCHS: [u32; 2] = [80, 90];

/// The folder of weft's kernel modules (this crate's folder, the workspace's `kernels/`).
pub fn kernels_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The folder of the shared headers: `#include "weft/<name>.cuh"` is `include_dir()/weft/<name>.cuh`.
pub fn include_dir() -> PathBuf {
    kernels_dir().join("include")
}

/// One kernel module: a folder of a kernels folder and its `.cu` files, sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    /// The folder name, which is the module's name (`gnnd`, `exact`, ...).
    pub name: String,
    /// The module's `.cu` files, sorted by path.
    pub files: Vec<PathBuf>,
}

/// The modules under `kernels` (every folder but `include/` that holds `.cu` files, so not
/// `src/`), sorted by name. A missing folder has no modules.
pub fn list_modules(kernels: &Path) -> std::io::Result<Vec<Module>> {
    let dir = match std::fs::read_dir(kernels) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut mods = Vec::new();
    for entry in dir {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !path.is_dir() || name == "include" {
            continue;
        }
        let mut files = Vec::new();
        for f in std::fs::read_dir(&path)? {
            let p = f?.path();
            if p.extension().is_some_and(|e| e == "cu") {
                files.push(p);
            }
        }
        files.sort();
        if !files.is_empty() {
            mods.push(Module { name, files });
        }
    }
    mods.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(mods)
}

/// The module's `.cu` files concatenated, each `#include "weft/..."` replaced by the header
/// from `include_dir` (once per module), with `#line` markers so that compiler messages name
/// the original files. `kernels` is the folder the files are shown relative to.
pub fn flatten_module(
    kernels: &Path,
    include_dir: &Path,
    files: &[PathBuf],
) -> std::io::Result<String> {
    let mut out = String::new();
    let mut seen = HashSet::new();
    for f in files {
        let shown = f.strip_prefix(kernels).unwrap_or(f).display().to_string();
        flatten_file(include_dir, f, &shown, &mut seen, &mut out)?;
    }
    Ok(out)
}

fn flatten_file(
    include_dir: &Path,
    path: &Path,
    shown: &str,
    seen: &mut HashSet<String>,
    out: &mut String,
) -> std::io::Result<()> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
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
        {
            // A shared header (`weft/...`), or one of the module's own (`args.cuh`), beside
            // the including file.
            let (header, inc_shown) = if inc.starts_with("weft/") {
                (include_dir.join(inc), inc.to_string())
            } else if !inc.contains('/') {
                let beside = path.with_file_name(inc);
                let shown_dir = Path::new(shown).with_file_name(inc);
                (beside, shown_dir.display().to_string())
            } else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{}: include \"weft/...\" or a header of the module's own folder, not \"{inc}\"",
                        path.display()
                    ),
                ));
            };
            if seen.insert(inc_shown.clone()) {
                flatten_file(include_dir, &header, &inc_shown, seen, out)?;
            }
            let _ = writeln!(out, "#line {} \"{shown}\"", i + 2);
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(())
}

/// nvcc from `$NVCC`, `nvcc` on PATH, or the toolchain `cargo xtask kernels` installs under
/// `target/cuda-toolchain` of `start` or one of its ancestors; `None` when `WEFT_NVCC` is `off`
/// or `0`, or when there is none.
pub fn find_nvcc(start: &Path) -> Option<PathBuf> {
    if std::env::var("WEFT_NVCC").is_ok_and(|v| v == "off" || v == "0") {
        return None;
    }
    if let Some(p) = std::env::var_os("NVCC").map(PathBuf::from)
        && p.is_file()
    {
        return Some(p);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("nvcc");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    start
        .ancestors()
        .map(|a| a.join("target/cuda-toolchain/nvidia/cu13/bin/nvcc"))
        .find(|p| p.is_file())
}

/// Runs `nvcc MODE -O3 -std=c++17 -lineinfo EXTRA -o dst src` (e.g. `MODE` = `["-cubin",
/// "-arch=sm_90"]`); on failure, the compiler's messages.
pub fn nvcc_compile(
    nvcc: &Path,
    src: &Path,
    dst: &Path,
    mode: &[&str],
    extra: &[&str],
) -> Result<String, String> {
    let out = Command::new(nvcc)
        .args(mode)
        .args(["-O3", "-std=c++17", "-lineinfo"])
        .args(extra)
        .arg("-o")
        .arg(dst)
        .arg(src)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nvcc.display()))?;
    let msg = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(msg)
    } else {
        Err(msg)
    }
}

/// The element type a macro-instantiated kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    /// `float`.
    F32,
    /// `f16_t` (`__half`).
    F16,
    /// `u8`.
    U8,
    /// `i8`.
    I8,
}

impl Element {
    /// The element of a C type name, if it is one.
    pub fn from_c_type(c: &str) -> Option<Element> {
        match c.trim() {
            "float" => Some(Element::F32),
            "f16_t" | "__half" | "half" => Some(Element::F16),
            "u8" | "uint8_t" | "unsigned char" => Some(Element::U8),
            "i8" | "int8_t" | "signed char" => Some(Element::I8),
            _ => None,
        }
    }

    /// The `weft_core::DType` variant's name.
    pub fn dtype_variant(self) -> &'static str {
        match self {
            Element::F32 => "F32",
            Element::F16 => "F16",
            Element::U8 => "U8",
            Element::I8 => "I8",
        }
    }

    const ALL: [Element; 4] = [Element::F32, Element::F16, Element::U8, Element::I8];
}

/// How a kernel parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// By value.
    Scalar,
    /// A pointer to device memory the kernel only reads (`const T*`).
    In,
    /// A pointer to device memory the kernel may write (`T*`).
    Out,
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The field name in the argument struct (the C name, lower-cased; a raw identifier where
    /// it is a Rust keyword).
    pub field: String,
    /// The declaration as written in the kernel (for the field's doc comment).
    pub c_decl: String,
    /// How it is passed.
    pub kind: ParamKind,
    /// The Rust type of the value or of the pointed-to elements (`u8` for the instantiated
    /// element type: the data is passed as bytes).
    pub rust_type: &'static str,
}

/// One kernel, or one family of kernels instantiated by a macro once per element type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelDecl {
    /// The launcher's name: the symbol, or for a family the symbols' common stem
    /// (`gnnd_init` for `gnnd_init_f32`, `gnnd_init_f16`, ...).
    pub name: String,
    /// The symbols: one with no element for a plain kernel, else one per instantiated element.
    pub instances: Vec<(Option<Element>, String)>,
    /// The argument struct the kernel takes by value (declared in the module's `args.cuh`).
    pub args: ArgStruct,
}

/// A kernel argument struct: `struct <Name>Args { <type> <field>; ... };`, declared once in a
/// module's `args.cuh` (inside `namespace weft`) and taken by value by the kernels that name
/// it (`const __grid_constant__ <Name>Args a`). Its Rust twin is generated `#[repr(C)]`, and
/// the layout computed here is asserted on both sides: `offset_of!`/`size_of` in Rust,
/// `static_assert` in the CUDA source ([`layout_asserts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgStruct {
    /// The struct's name (the same in CUDA and Rust).
    pub name: String,
    /// The fields, in order.
    pub fields: Vec<Param>,
    /// Each field's byte offset under C's layout rules (natural alignment).
    pub offsets: Vec<usize>,
    /// The struct's size in bytes, padded to its alignment.
    pub size: usize,
}

impl Param {
    /// Size and alignment in bytes of the field in C (a device pointer is 8 bytes).
    fn c_size(&self) -> usize {
        if self.kind != ParamKind::Scalar {
            return 8;
        }
        match self.rust_type {
            "u8" | "i8" => 1,
            "u16" => 2,
            "u64" | "i64" | "f64" => 8,
            _ => 4,
        }
    }
}

/// Removes `//` and `/* */` comments, keeping string and character literals and newlines.
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == b'"' || c == b'\'' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            out.push_str(&src[start..i]);
        } else {
            let ch = src[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// A `__global__` declaration found in text: its name expression and its parameter list.
struct RawKernel {
    name: String,
    params: String,
    extern_c: bool,
}

/// The `__global__` function declarations of `text` (name as written, which may contain `##`).
fn find_globals(text: &str) -> Result<Vec<RawKernel>, String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find("__global__") {
        let at = from + pos;
        from = at + "__global__".len();
        let before = &text[..at];
        let extern_c = before.trim_end().ends_with("extern \"C\"");
        let mut rest = text[from..].trim_start();
        rest = rest
            .strip_prefix("void")
            .ok_or_else(|| {
                format!(
                    "a __global__ function that does not return void near `{}`",
                    head(rest)
                )
            })?
            .trim_start();
        if let Some(r) = rest.strip_prefix("__launch_bounds__") {
            let (_, after) = balanced(r.trim_start())?;
            rest = after.trim_start();
        }
        let open = rest
            .find('(')
            .ok_or_else(|| format!("no parameter list after `{}`", head(rest)))?;
        let name: String = rest[..open].split_whitespace().collect();
        let (params, _) = balanced(&rest[open..])?;
        found.push(RawKernel {
            name,
            params: params.to_string(),
            extern_c,
        });
    }
    Ok(found)
}

fn head(s: &str) -> &str {
    let end = s.char_indices().nth(60).map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// For text starting with `(`: the inside of the balanced parentheses and what follows them.
fn balanced(s: &str) -> Result<(&str, &str), String> {
    if !s.starts_with('(') {
        return Err(format!("expected `(` at `{}`", head(s)));
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok((&s[1..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    Err(format!("unbalanced parentheses at `{}`", head(s)))
}

/// Splits at commas outside parentheses, trimming each part; empty input gives no parts.
fn split_top(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '<' => depth += 1,
            ')' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        parts.push(cur.trim().to_string());
    }
    parts
}

const RUST_KEYWORDS: [&str; 38] = [
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "gen",
];

/// The Rust type of a C scalar type.
fn rust_scalar(c: &str) -> Option<&'static str> {
    Some(match c {
        "u32" | "unsigned" | "unsigned int" | "uint32_t" => "u32",
        "i32" | "int" | "int32_t" => "i32",
        "u64" | "unsigned long long" | "uint64_t" | "size_t" => "u64",
        "i64" | "long long" | "int64_t" => "i64",
        "float" => "f32",
        "double" => "f64",
        "u8" | "uint8_t" | "unsigned char" => "u8",
        "i8" | "int8_t" | "signed char" => "i8",
        "u16" | "uint16_t" => "u16",
        "MetricCode" => "weft_core::Metric",
        _ => return None,
    })
}

/// Parses one field declaration of argument struct `owner` (data of a kernel's element type is
/// declared as bytes, `const u8*`).
fn parse_param(decl: &str, owner: &str) -> Result<Param, String> {
    let pointer = decl.contains('*');
    let spaced = decl.replace('*', " * ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    // `const T*` and `T const*` point to constant data; `T* const` is a constant pointer.
    let is_const = match (
        words.iter().position(|w| *w == "const"),
        words.iter().position(|w| *w == "*"),
    ) {
        (Some(c), Some(star)) => c < star,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let name = words
        .last()
        .filter(|w| w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| format!("struct {owner}: cannot read the field `{decl}`"))?;
    let base: Vec<&str> = words[..words.len() - 1]
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "const" | "__restrict__" | "volatile" | "*"))
        .collect();
    let base = base.join(" ");
    if decl.matches('*').count() > 1 {
        return Err(format!(
            "struct {owner}: the field `{decl}` is a pointer to a pointer"
        ));
    }
    let rust_type = rust_scalar(&base).ok_or_else(|| {
        format!("struct {owner}: the field `{decl}` has the type `{base}`, which has no binding")
    })?;
    let lower = name.to_ascii_lowercase();
    let field = if RUST_KEYWORDS.contains(&lower.as_str()) {
        format!("r#{lower}")
    } else {
        lower
    };
    let kind = match (pointer, is_const) {
        (false, _) => ParamKind::Scalar,
        (true, true) => ParamKind::In,
        (true, false) => ParamKind::Out,
    };
    Ok(Param {
        field,
        c_decl: words.join(" ").replace(" * ", "* ").replace(" *", "*"),
        kind,
        rust_type,
    })
}

/// The argument structs of a (comment-stripped) source: every `struct <Name>Args { ... };`,
/// one declaration per field, with C's layout computed.
fn parse_arg_structs(text: &str) -> Result<BTreeMap<String, ArgStruct>, String> {
    let mut out = BTreeMap::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find("struct ") {
        let at = from + pos;
        from = at + "struct ".len();
        if at > 0 && text[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = text[from..].trim_start();
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if !name.ends_with("Args") {
            continue;
        }
        let after = rest[name_end..].trim_start();
        let Some(body) = after.strip_prefix('{') else {
            continue; // a forward declaration or a use
        };
        let close = body
            .find('}')
            .ok_or_else(|| format!("struct {name}: no closing brace"))?;
        let mut fields = Vec::new();
        for decl in body[..close]
            .split(';')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            if decl.contains(',') || decl.contains('[') || decl.contains('(') {
                return Err(format!(
                    "struct {name}: declare one scalar or pointer per field, not `{decl}`"
                ));
            }
            fields.push(parse_param(decl, name)?);
        }
        if fields.is_empty() {
            return Err(format!("struct {name} has no field"));
        }
        let mut seen = HashSet::new();
        for f in &fields {
            if !seen.insert(f.field.clone()) {
                return Err(format!(
                    "struct {name}: two fields are both `{}` once lower-cased; rename one",
                    f.field
                ));
            }
        }
        let mut offsets = Vec::with_capacity(fields.len());
        let (mut at_byte, mut align) = (0usize, 1usize);
        for f in &fields {
            let sz = f.c_size();
            at_byte = at_byte.div_ceil(sz) * sz;
            offsets.push(at_byte);
            at_byte += sz;
            align = align.max(sz);
        }
        let size = at_byte.div_ceil(align) * align;
        if out
            .insert(
                name.to_string(),
                ArgStruct {
                    name: name.to_string(),
                    fields,
                    offsets,
                    size,
                },
            )
            .is_some()
        {
            return Err(format!("two structs are called {name}"));
        }
    }
    Ok(out)
}

/// The argument struct a kernel's parameter list names: exactly one parameter, passed by
/// value (`const __grid_constant__ <Name>Args a`).
fn kernel_args<'s>(
    list: &str,
    structs: &'s BTreeMap<String, ArgStruct>,
    kernel: &str,
) -> Result<&'s ArgStruct, String> {
    let parts = split_top(list);
    let hint = "take the parameters as one struct declared in the module's args.cuh, \
                `const __grid_constant__ <Name>Args a`";
    let [one] = parts.as_slice() else {
        return Err(format!(
            "kernel {kernel} has {} parameters: {hint}",
            parts.len()
        ));
    };
    if one.contains('*') || one.contains('&') {
        return Err(format!(
            "kernel {kernel}: its argument struct is passed by value, not `{one}`"
        ));
    }
    let words: Vec<&str> = one
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "__grid_constant__"))
        .collect();
    let ty = words.first().copied().unwrap_or("");
    structs.get(ty.trim_start_matches("weft::")).ok_or_else(|| {
        format!("kernel {kernel}: the parameter `{one}` is not an argument struct: {hint}")
    })
}

/// The layout checks appended to a module's source: `static_assert`s that the C compiler lays
/// out each argument struct the kernels take as [`ArgStruct`] computed it (and the generated
/// Rust twin asserts the same offsets), so that the two sides cannot drift apart. The sizes
/// are checked by every compiler, the offsets by nvcc (NVRTC has no `__builtin_offsetof`).
pub fn layout_asserts(source: &str) -> Result<String, String> {
    let decls = parse_kernels(source)?;
    let mut used: Vec<&ArgStruct> = decls.iter().map(|d| &d.args).collect();
    used.sort_by(|a, b| a.name.cmp(&b.name));
    used.dedup_by(|a, b| a.name == b.name);
    // NVRTC has no `__builtin_offsetof` (and no <cstddef>): it checks the sizes, nvcc (every
    // build with cubins, and `cargo xtask kernels --check` in CI) the offsets too; both compile
    // the same source with the same front end and layout rules.
    let mut s = String::from(
        "\n// Generated by weft-kernels: the argument structs' layout as the Rust bindings see it.\n\
         namespace weft {}\nusing namespace weft;\n",
    );
    for st in &used {
        let name = &st.name;
        let _ = writeln!(
            s,
            "static_assert(sizeof({name}) == {}, \"{name}: size differs from its Rust twin\");",
            st.size
        );
    }
    s.push_str("#ifndef __CUDACC_RTC__\n");
    for st in &used {
        let name = &st.name;
        for (f, off) in st.fields.iter().zip(&st.offsets) {
            let c_name = f.c_decl.rsplit([' ', '*']).next().unwrap_or("");
            let _ = writeln!(
                s,
                "static_assert(__builtin_offsetof({name}, {c_name}) == {off}, \"{name}::{c_name}: offset differs from its Rust twin\");"
            );
        }
    }
    s.push_str("#endif\n");
    Ok(s)
}

/// A module's source as it is compiled: the files flattened ([`flatten_module`]) followed by
/// the argument structs' layout checks ([`layout_asserts`]).
pub fn module_source(
    kernels: &Path,
    include_dir: &Path,
    files: &[PathBuf],
) -> Result<String, String> {
    let flat = flatten_module(kernels, include_dir, files).map_err(|e| e.to_string())?;
    let asserts = layout_asserts(&flat)?;
    Ok(flat + &asserts)
}

/// The `extern "C" __global__` kernels of a (flattened) module source, in source order: plain
/// ones, and macro-instantiated families (a `#define M(T, NAME)` whose body declares
/// `extern "C" __global__` kernels, and the lines `M(float, f32)`, ... that instantiate it). A
/// family's launcher takes the element type; parameters of the element type are passed as
/// bytes. `__global__` functions without `extern "C"` (templates) are not launchable by name
/// and are skipped. Errors name the kernel and the parameter that cannot be bound.
pub fn parse_kernels(source: &str) -> Result<Vec<KernelDecl>, String> {
    let text = strip_comments(source)
        .replace("\\\r\n", " ")
        .replace("\\\n", " ");
    let mut plain = String::new();
    // name -> (params, body)
    let mut macros: BTreeMap<String, (Vec<String>, String)> = BTreeMap::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(def) = t
            .strip_prefix("#define ")
            .or_else(|| t.strip_prefix("#define\t"))
        {
            let def = def.trim_start();
            let name_end = def
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(def.len());
            let name = &def[..name_end];
            let rest = &def[name_end..];
            if rest.starts_with('(') && rest.contains("__global__") {
                let (params, body) = balanced(rest)?;
                let params = split_top(params);
                macros.insert(name.to_string(), (params, body.to_string()));
            }
            plain.push('\n');
            continue;
        }
        plain.push_str(line);
        plain.push('\n');
    }

    let structs = parse_arg_structs(&text)?;
    let mut decls: Vec<KernelDecl> = Vec::new();
    let mut order: Vec<(usize, KernelDecl)> = Vec::new();
    for k in find_globals(&plain)? {
        if !k.extern_c {
            continue;
        }
        if k.name.contains("##") {
            return Err(format!("kernel `{}`: `##` outside a macro", k.name));
        }
        let args = kernel_args(&k.params, &structs, &k.name)?;
        let at = plain.find(&k.name).unwrap_or(0);
        order.push((
            at,
            KernelDecl {
                name: k.name.clone(),
                instances: vec![(None, k.name)],
                args: args.clone(),
            },
        ));
    }

    for (mname, (mparams, body)) in &macros {
        let templates: Vec<RawKernel> = find_globals(body)?
            .into_iter()
            .filter(|k| k.extern_c)
            .collect();
        if templates.is_empty() {
            continue;
        }
        // The invocations `M(args)` on lines of their own.
        let mut invocations: Vec<(usize, Vec<String>)> = Vec::new();
        let mut offset = 0;
        for line in plain.lines() {
            let t = line.trim();
            if let Some(r) = t.strip_prefix(mname.as_str())
                && r.trim_start().starts_with('(')
            {
                let (args, _) = balanced(r.trim_start())?;
                let args = split_top(args);
                if args.len() != mparams.len() {
                    return Err(format!("{mname} takes {} arguments: `{t}`", mparams.len()));
                }
                invocations.push((offset, args));
            }
            offset += line.len() + 1;
        }
        for tk in &templates {
            let mut instances = Vec::new();
            for (_, args) in &invocations {
                // The element: the argument that is an element type name.
                let mut element = None;
                for (p, a) in mparams.iter().zip(args) {
                    if let Some(e) = Element::from_c_type(a)
                        && !is_name_part(&tk.name, p)
                    {
                        element = Some(e);
                    }
                }
                let element = element.ok_or_else(|| {
                    format!(
                        "{mname}({}): no argument is an element type",
                        args.join(", ")
                    )
                })?;
                let symbol = expand_name(&tk.name, mparams, args);
                if instances.iter().any(|(e, _)| *e == Some(element)) {
                    return Err(format!("{mname}: two instances for {element:?}"));
                }
                instances.push((Some(element), symbol));
            }
            if instances.is_empty() {
                continue;
            }
            let family = family_name(&tk.name, mparams, &instances)?;
            let args = kernel_args(&tk.params, &structs, &family)?;
            let at = invocations.first().map_or(0, |i| i.0);
            order.push((
                at,
                KernelDecl {
                    name: family,
                    instances,
                    args: args.clone(),
                },
            ));
        }
    }
    order.sort_by_key(|(at, d)| (*at, d.name.clone()));
    let mut names = HashSet::new();
    for (_, d) in order {
        if !names.insert(d.name.clone()) {
            return Err(format!("two kernels or families are called `{}`", d.name));
        }
        decls.push(d);
    }
    Ok(decls)
}

/// Whether macro parameter `p` is used in the kernel's name expression.
fn is_name_part(name_expr: &str, p: &str) -> bool {
    name_expr.split("##").any(|part| part.trim() == p)
}

/// The kernel symbol for one invocation: macro parameters replaced, `##` pasted.
fn expand_name(name_expr: &str, params: &[String], args: &[String]) -> String {
    name_expr
        .split("##")
        .map(|part| {
            let part = part.trim();
            params
                .iter()
                .position(|p| p == part)
                .map_or(part.to_string(), |i| args[i].clone())
        })
        .collect()
}

/// A family's launcher name: the fixed part of the name expression, or, where the whole name
/// is a macro argument, the common stem of the symbols; trailing `_` trimmed.
fn family_name(
    name_expr: &str,
    params: &[String],
    instances: &[(Option<Element>, String)],
) -> Result<String, String> {
    let fixed: String = name_expr
        .split("##")
        .map(str::trim)
        .filter(|part| !params.iter().any(|p| p == part))
        .collect();
    let stem = if fixed.is_empty() {
        let first = &instances[0].1;
        let mut len = first.len();
        for (_, s) in instances {
            len = len.min(
                first
                    .chars()
                    .zip(s.chars())
                    .take_while(|(a, b)| a == b)
                    .count(),
            );
        }
        first[..len].to_string()
    } else {
        fixed
    };
    let stem = stem.trim_end_matches('_').to_string();
    if stem.is_empty() {
        return Err(format!("cannot name the kernel family `{name_expr}`"));
    }
    Ok(stem)
}

/// A part of a module that NVRTC compiles on its own: the module's source with the other
/// kernels blanked out (see [`kernel_units`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// The kernel symbols the unit defines.
    pub symbols: Vec<String>,
    /// Byte ranges `[start, end)` of the module source that the unit blanks: every byte but
    /// line ends (and the backslash of a line continuation) becomes a space, so line numbers and
    /// the `#line` markers stay right.
    pub blank: Vec<(usize, usize)>,
}

/// `src` with comments replaced by spaces byte for byte (line ends kept), string and character
/// literals kept: the same length as `src`, so offsets into it are offsets into `src`.
fn blank_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out[i] = b' ';
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i;
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
            for o in &mut out[start..i] {
                if *o != b'\n' {
                    *o = b' ';
                }
            }
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    // Whole multi-byte characters were replaced or kept: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| src.to_string())
}

/// The end of the definition whose text starts at `from` in `text` (comments blanked): past
/// the `}` that closes the first `{` after the parameter list that starts at `params`.
fn definition_end(text: &str, params: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = params;
    let mut depth = 0i32;
    // The parameter list.
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    i += 1;
                    break;
                }
            }
            _ => {}
        }
        i += 1;
    }
    while i < b.len() && b[i] != b'{' {
        if b[i] == b';' {
            return None; // a declaration
        }
        i += 1;
    }
    let mut depth = 0i32;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                let q = b[i];
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// A kernel definition in a source: (start of `extern`, end past the body, name expression as
/// written).
type Definition = (usize, usize, String);

/// The `extern "C" __global__` definitions in `text[from..to]`.
fn definitions(text: &str, from: usize, to: usize) -> Result<Vec<Definition>, String> {
    let mut found = Vec::new();
    let mut at = from;
    while let Some(pos) = text[at..to].find("__global__") {
        let g = at + pos;
        at = g + "__global__".len();
        let before = text[..g].trim_end();
        let Some(ext) = before.strip_suffix("extern \"C\"") else {
            continue;
        };
        let start = ext.len();
        let skip_ws = |p: usize| {
            p + text[p..]
                .bytes()
                .take_while(|c| c.is_ascii_whitespace())
                .count()
        };
        let mut p = skip_ws(at);
        p = skip_ws(
            p + if text[p..].starts_with("void") {
                4
            } else {
                return Err(format!(
                    "a __global__ function that does not return void near `{}`",
                    head(&text[p..])
                ));
            },
        );
        if text[p..].starts_with("__launch_bounds__") {
            p = skip_ws(p + "__launch_bounds__".len());
            let (_, rest) = balanced(&text[p..])?;
            p = text.len() - rest.len();
        }
        let params = text[p..to]
            .find('(')
            .map(|o| p + o)
            .ok_or_else(|| format!("no parameter list after `{}`", head(&text[p..])))?;
        let name: String = text[p..params].split_whitespace().collect();
        let end = definition_end(text, params)
            .filter(|&e| e <= to)
            .ok_or_else(|| format!("kernel `{name}`: no body found"))?;
        found.push((start, end, name));
        at = end;
    }
    Ok(found)
}

/// Splits a (flattened) module into the units NVRTC compiles on demand, so that a build
/// without nvcc compiles on its first GPU use only the kernels it launches (issue 18 item 5:
/// gnnd compiled whole took 35-49 s, one of its kernels a few seconds): one unit with every
/// plain `extern "C"` kernel (no macro instance), and one unit per instance of each
/// macro-instantiated kernel (`gnnd_join_l2_f32`, ...). Each unit is the whole source with the
/// other kernels' definitions and the other macro invocations blanked ([`Unit::blank`]), so
/// every template, device function and constant stays in reach and line numbers hold. A
/// module with one kernel or none has no units (it is compiled whole), and neither has one with
/// a variable in device memory (`__device__`, `__constant__` or `__managed__` data), which its
/// kernels would no longer share once compiled apart.
pub fn kernel_units(source: &str) -> Result<Vec<Unit>, String> {
    let text = blank_comments(source)
        .replace("\\\r\n", "   ")
        .replace("\\\n", "  ");
    debug_assert_eq!(text.len(), source.len());
    if has_device_variables(&text) {
        return Ok(Vec::new());
    }
    // Logical lines: (start, end) in `text` (a macro definition is one line now).
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, c) in text.bytes().enumerate() {
        if c == b'\n' {
            lines.push((start, i));
            start = i + 1;
        }
    }
    lines.push((start, text.len()));
    // Family macros: name -> (parameters, their kernels: (start, end, name expression)).
    let mut macros: BTreeMap<String, (Vec<String>, Vec<Definition>)> = BTreeMap::new();
    let mut plain = Vec::new();
    let mut define_lines = Vec::new();
    for &(ls, le) in &lines {
        let line = &text[ls..le];
        let t = line.trim_start();
        if let Some(def) = t.strip_prefix("#define") {
            define_lines.push((ls, le));
            let def = def.trim_start();
            let name_end = def
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(def.len());
            let name = &def[..name_end];
            let rest = &def[name_end..];
            if rest.starts_with('(') && rest.contains("__global__") {
                let (params, _) = balanced(rest)?;
                let body_from = le - rest.len();
                let kernels = definitions(&text, body_from, le)?;
                if !kernels.is_empty() {
                    macros.insert(name.to_string(), (split_top(params), kernels));
                }
            }
        }
    }
    // Plain kernels: definitions outside #define lines.
    for (s, e, name) in definitions(&text, 0, text.len())? {
        if define_lines.iter().any(|&(ls, le)| s >= ls && s < le) {
            continue;
        }
        if name.contains("##") {
            return Err(format!("kernel `{name}`: `##` outside a macro"));
        }
        plain.push((s, e, name));
    }
    // Invocations of family macros: (line start, line end, macro, arguments).
    let mut invocations = Vec::new();
    for &(ls, le) in &lines {
        let t = text[ls..le].trim_start();
        for (mname, (params, _)) in &macros {
            if let Some(r) = t.strip_prefix(mname.as_str())
                && r.trim_start().starts_with('(')
            {
                let (args, _) = balanced(r.trim_start())?;
                let args = split_top(args);
                if args.len() != params.len() {
                    return Err(format!("{mname} takes {} arguments: `{t}`", params.len()));
                }
                invocations.push((ls, le, mname.clone(), args));
            }
        }
    }
    let kernel_count = plain.len()
        + invocations
            .iter()
            .map(|(_, _, m, _)| macros[m].1.len())
            .sum::<usize>();
    if kernel_count <= 1 {
        return Ok(Vec::new());
    }
    let mut units = Vec::new();
    if !plain.is_empty() {
        units.push(Unit {
            symbols: plain.iter().map(|p| p.2.clone()).collect(),
            blank: invocations.iter().map(|i| (i.0, i.1)).collect(),
        });
    }
    for (n, (_, _, mname, args)) in invocations.iter().enumerate() {
        let (params, kernels) = &macros[mname];
        for (k, (_, _, name_expr)) in kernels.iter().enumerate() {
            let mut blank: Vec<(usize, usize)> = plain.iter().map(|p| (p.0, p.1)).collect();
            blank.extend(
                invocations
                    .iter()
                    .enumerate()
                    .filter(|(m, _)| *m != n)
                    .map(|(_, i)| (i.0, i.1)),
            );
            blank.extend(
                kernels
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != k)
                    .map(|(_, d)| (d.0, d.1)),
            );
            blank.sort_unstable();
            units.push(Unit {
                symbols: vec![expand_name(name_expr, params, args)],
                blank,
            });
        }
    }
    Ok(units)
}

/// Whether `text` (comments blanked) declares data in device memory: `__constant__` or
/// `__managed__` anywhere, or a `__device__` declaration that reaches `;`, `=` or `[` before
/// any `(` (a variable, not a function).
fn has_device_variables(text: &str) -> bool {
    if text.contains("__constant__") || text.contains("__managed__") {
        return true;
    }
    text.match_indices("__device__").any(|(at, _)| {
        let rest = &text[at + "__device__".len()..];
        rest.find(['(', ';', '=', '[', '{'])
            .is_some_and(|i| matches!(rest.as_bytes()[i], b';' | b'=' | b'['))
    })
}

/// The source of a unit: `source` with `blank`'s ranges turned into spaces, keeping line ends
/// and line continuations (the run-time loader does the same with the embedded ranges).
pub fn unit_source(source: &str, blank: &[(usize, usize)]) -> String {
    let mut b = source.as_bytes().to_vec();
    for &(s, e) in blank {
        let e = e.min(b.len());
        for i in s.min(e)..e {
            let keep = b[i] == b'\n'
                || (b[i] == b'\r' && b.get(i + 1) == Some(&b'\n'))
                || (b[i] == b'\\'
                    && (b.get(i + 1) == Some(&b'\n')
                        || (b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n'))));
            if !keep {
                b[i] = b' ';
            }
        }
    }
    String::from_utf8(b).unwrap_or_else(|_| source.to_string())
}

/// What nvcc built for a module, named relative to `OUT_DIR`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuiltImages {
    /// The flattened source file.
    pub source_file: String,
    /// Cubins: (SM version, file).
    pub cubins: Vec<(u32, String)>,
    /// PTX for compute_80, if built.
    pub ptx_file: Option<String>,
}

/// The `# Safety` contract of every generated launcher: what no type can say about a launch.
const LAUNCH_SAFETY: &str = "Every pointer in `args` must cover what the kernel reads and writes \
    for the sizes that `args` and `launch` pass (check the buffers' lengths first, as \
    `weft_gpu::launch::need` does).";

/// Rust bindings for module `module`: the `MODULE` static (its embedded files named by
/// `images`, relative to `OUT_DIR`), and per kernel an argument struct (`<Name>Args`) and a
/// launcher function (`<name>`). `runtime` is the path of the weft-gpu crate as the including
/// crate sees it (`weft_gpu`, or `crate` inside weft-gpu).
pub fn generate_bindings(
    module: &str,
    runtime: &str,
    kernels: &[KernelDecl],
    images: &BuiltImages,
    units: &[Unit],
) -> String {
    let r = runtime;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by weft-kernels from the kernel module `{module}`. Do not edit: change\n\
         // the module's argument structs (its args.cuh) and rebuild.\n"
    );
    let cubins: String = images
        .cubins
        .iter()
        .map(|(arch, f)| {
            format!("({arch}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{f}\")) as &[u8]), ")
        })
        .collect();
    let ptx = images.ptx_file.as_ref().map_or("None".to_string(), |f| {
        format!("Some(include_str!(concat!(env!(\"OUT_DIR\"), \"/{f}\")))")
    });
    let units: String = units
        .iter()
        .map(|u| {
            let symbols: Vec<String> = u.symbols.iter().map(|s| format!("{s:?}")).collect();
            let blank: Vec<String> = u.blank.iter().map(|(a, b)| format!("({a}, {b})")).collect();
            format!(
                "\n        {r}::KernelUnit {{ symbols: &[{}], blank: &[{}] }},",
                symbols.join(", "),
                blank.join(", ")
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "/// The kernel module `{module}`: its self-contained source for NVRTC, and the cubins and\n\
         /// PTX nvcc built at build time (none when nvcc was not available).\n\
         pub static MODULE: {r}::KernelModule = {r}::KernelModule {{\n    \
         name: {module:?},\n    \
         source: include_str!(concat!(env!(\"OUT_DIR\"), \"/{src}\")),\n    \
         cubins: &[{cubins}],\n    \
         ptx: {ptx},\n    \
         units: &[{units}\n    ],\n}};\n",
        src = images.source_file
    );
    let mut emitted: HashSet<&str> = HashSet::new();
    for k in kernels {
        let ty = k.args.name.clone();
        let has_ptr = k.args.fields.iter().any(|p| p.kind != ParamKind::Scalar);
        let impl_lt = if has_ptr { "<'_>" } else { "" };
        let symbols: Vec<&str> = k.instances.iter().map(|(_, s)| s.as_str()).collect();
        if emitted.insert(k.args.name.as_str()) {
            let users: Vec<&str> = kernels
                .iter()
                .filter(|o| o.args.name == k.args.name)
                .flat_map(|o| o.instances.iter().map(|(_, s)| s.as_str()))
                .collect();
            let lt = if has_ptr { "<'a>" } else { "" };
            let _ = writeln!(
                s,
                "/// The argument struct `{ty}` (the module's `args.cuh`), which `{}` take by\n\
                 /// value: the `#[repr(C)]` twin of the CUDA struct, field for field.\n\
                 #[repr(C)]\n#[derive(Debug)]\npub struct {ty}{lt} {{",
                users.join("`, `")
            );
            for p in &k.args.fields {
                let field_ty = match p.kind {
                    ParamKind::Scalar => p.rust_type.to_string(),
                    ParamKind::In => format!("{r}::In<'a, {}>", p.rust_type),
                    ParamKind::Out => format!("{r}::Out<'a, {}>", p.rust_type),
                };
                let _ = writeln!(
                    s,
                    "    /// `{}`\n    pub {}: {field_ty},",
                    p.c_decl, p.field
                );
            }
            let _ = writeln!(s, "}}\n");
            let static_lt = if has_ptr { "<'static>" } else { "" };
            let size = k.args.size;
            let _ = writeln!(
                s,
                "// The layout the CUDA side asserts too (weft_kernels::layout_asserts).\n\
                 const _: () = {{\n    \
                 assert!(::core::mem::size_of::<{ty}{static_lt}>() == {size});"
            );
            for (p, at) in k.args.fields.iter().zip(&k.args.offsets) {
                let _ = writeln!(
                    s,
                    "    assert!(::core::mem::offset_of!({ty}{static_lt}, {}) == {at});",
                    p.field
                );
            }
            let _ = writeln!(
                s,
                "}};\n\n\
                 // SAFETY: `#[repr(C)]` with the CUDA struct's fields in order, each of the C type's\n\
                 // size (device pointers as `In`/`Out`, 8 bytes); the offsets are asserted above and\n\
                 // in the CUDA source.\n\
                 unsafe impl {r}::KernelArgs for {ty}{impl_lt} {{}}\n"
            );
        }
        match k.instances.as_slice() {
            [(None, symbol)] => {
                let _ = writeln!(
                    s,
                    "/// The kernel `{symbol}` (for `GpuContext::prepare_kernels`).\n\
                     pub fn {name}_kernel() -> {r}::Kernel {{\n    \
                     {r}::Kernel::new(&MODULE, {symbol:?})\n}}\n\n\
                     /// Launches `{symbol}` with `launch` on the context's stream.\n\
                     ///\n\
                     /// # Safety\n\
                     /// {SAFETY_DOC}\n\
                     pub unsafe fn {name}(ctx: &{r}::GpuContext, launch: {r}::Launch, args: &{ty}{impl_lt}) -> weft_core::Result<()> {{\n    \
                     // SAFETY: the caller's contract (above); `args` is this kernel's own.\n    \
                     unsafe {{ ctx.launch(&{name}_kernel(), launch, args) }}\n}}\n",
                    name = k.name,
                    SAFETY_DOC = LAUNCH_SAFETY
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "/// The `{name}` kernel for `dtype` (`{syms}`), for\n\
                     /// `GpuContext::prepare_kernels`; an element type the module has no kernel for\n\
                     /// is [`weft_core::Error::Unsupported`].\n\
                     pub fn {name}_kernel(dtype: weft_core::DType) -> weft_core::Result<{r}::Kernel> {{\n    \
                     let symbol = match dtype {{",
                    name = k.name,
                    syms = symbols.join("`, `")
                );
                for e in Element::ALL {
                    match k.instances.iter().find(|(el, _)| *el == Some(e)) {
                        Some((_, sym)) => {
                            let _ = writeln!(
                                s,
                                "        weft_core::DType::{} => {sym:?},",
                                e.dtype_variant()
                            );
                        }
                        None => {
                            let _ = writeln!(
                                s,
                                "        weft_core::DType::{} => return Err(weft_core::Error::Unsupported(\"kernel `{}` has no {:?} instance\".into())),",
                                e.dtype_variant(),
                                k.name,
                                e
                            );
                        }
                    }
                }
                let _ = writeln!(
                    s,
                    "    }};\n    Ok({r}::Kernel::new(&MODULE, symbol))\n}}\n\n\
                     /// Launches the `{name}` kernel for `dtype` with `launch` on the context's stream\n\
                     /// (see [`{name}_kernel`]).\n\
                     ///\n\
                     /// # Safety\n\
                     /// {SAFETY_DOC}\n\
                     pub unsafe fn {name}(ctx: &{r}::GpuContext, dtype: weft_core::DType, launch: {r}::Launch, args: &{ty}{impl_lt}) -> weft_core::Result<()> {{\n    \
                     // SAFETY: the caller's contract (above); `args` is this kernel's own.\n    \
                     unsafe {{ ctx.launch(&{name}_kernel(dtype)?, launch, args) }}\n}}\n",
                    name = k.name,
                    SAFETY_DOC = LAUNCH_SAFETY
                );
            }
        }
    }
    s
}

/// Whether `WEFT_REQUIRE_CUBINS` is `1`: then a build script without nvcc, or whose nvcc
/// fails, fails the build instead of leaving the module to NVRTC at run time (`cargo xtask
/// device-pack` sets it, so that a pack never compiles kernels on the device by accident).
pub fn require_cubins() -> bool {
    std::env::var("WEFT_REQUIRE_CUBINS").is_ok_and(|v| v == "1")
}

/// Builds and binds the weft kernel modules `modules` (folders of [`kernels_dir`]) for the
/// calling crate, from its build script: see [`build_modules`]. Panics (failing the build) when
/// a named module does not exist.
pub fn build_weft_kernels(runtime: &str, modules: &[&str]) {
    let dir = kernels_dir();
    let all = list_modules(&dir)
        .unwrap_or_else(|e| panic!("cannot list the kernel modules of {}: {e}", dir.display()));
    let chosen: Vec<Module> = modules
        .iter()
        .map(|&name| {
            all.iter()
                .find(|m| m.name == name)
                .cloned()
                .unwrap_or_else(|| {
                    panic!(
                        "no kernel module `{name}` in {} (modules: {:?})",
                        dir.display(),
                        all.iter().map(|m| m.name.as_str()).collect::<Vec<_>>()
                    )
                })
        })
        .collect();
    build_modules(runtime, &dir, &chosen);
}

/// Builds and binds every kernel module of the calling crate's own `kernels/` folder (a
/// downstream crate with kernels of its own), from its build script, with weft's shared headers:
/// see [`build_modules`]. Returns the modules' names.
pub fn build_crate_kernels(runtime: &str) -> Vec<String> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let dir = manifest.join("kernels");
    let modules = list_modules(&dir)
        .unwrap_or_else(|e| panic!("cannot list the kernel modules of {}: {e}", dir.display()));
    build_modules(runtime, &dir, &modules);
    modules.into_iter().map(|m| m.name).collect()
}

/// Builds and binds `modules` (folders of `dir`) from a build script:
///
/// - shared headers from [`include_dir`];
/// - for each module: the flattened source, cubins for [`ARCHS`] and PTX when nvcc is
///   available (a failing nvcc is a warning: the source is embedded regardless and NVRTC
///   compiles it at run time; with `WEFT_REQUIRE_CUBINS=1` a missing or failing nvcc fails the
///   build, see [`require_cubins`]), and `$OUT_DIR/<module>.rs` from [`generate_bindings`], which the
///   crate includes with `include!(concat!(env!("OUT_DIR"), "/<module>.rs"))`;
/// - `runtime` is how the crate names weft-gpu (`weft_gpu`, or `crate` inside weft-gpu).
///
/// Panics (failing the build with the message) when a file cannot be read or a kernel or an
/// argument struct cannot be bound.
pub fn build_modules(runtime: &str, dir: &Path, modules: &[Module]) {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let kernels = dir;
    let include = include_dir();
    for m in modules {
        println!(
            "cargo::rerun-if-changed={}",
            kernels.join(&m.name).display()
        );
    }
    println!("cargo::rerun-if-changed={}", include.display());
    println!("cargo::rerun-if-env-changed=NVCC");
    println!("cargo::rerun-if-env-changed=WEFT_NVCC");
    println!("cargo::rerun-if-env-changed=WEFT_REQUIRE_CUBINS");
    let require = require_cubins();
    let nvcc = find_nvcc(&manifest);
    if require && nvcc.is_none() {
        panic!(
            "WEFT_REQUIRE_CUBINS=1, but there is no nvcc (set NVCC, put nvcc on PATH or run \
             `cargo xtask kernels` to install it; WEFT_NVCC={:?})",
            std::env::var("WEFT_NVCC").unwrap_or_default()
        );
    }
    for m in modules {
        let source = module_source(kernels, &include, &m.files)
            .unwrap_or_else(|e| panic!("kernel module {}: {e}", m.name));
        let decls =
            parse_kernels(&source).unwrap_or_else(|e| panic!("kernel module {}: {e}", m.name));
        let mut images = BuiltImages {
            source_file: format!("{}.cu", m.name),
            ..BuiltImages::default()
        };
        let src_path = out.join(&images.source_file);
        std::fs::write(&src_path, &source).expect("write to OUT_DIR");
        if let Some(nvcc) = &nvcc {
            for arch in ARCHS {
                let file = format!("{}.sm_{arch}.cubin", m.name);
                let arch_flag = format!("-arch=sm_{arch}");
                match nvcc_compile(
                    nvcc,
                    &src_path,
                    &out.join(&file),
                    &["-cubin", &arch_flag],
                    &[],
                ) {
                    Ok(_) => images.cubins.push((arch, file)),
                    Err(msg) if require => panic!(
                        "WEFT_REQUIRE_CUBINS=1, but nvcc failed for kernel module {} (sm_{arch}):\n{msg}",
                        m.name
                    ),
                    Err(msg) => println!(
                        "cargo::warning=nvcc failed for kernel module {} (sm_{arch}; NVRTC at run time instead): {}",
                        m.name,
                        msg.lines().next().unwrap_or("")
                    ),
                }
            }
            let file = format!("{}.compute_80.ptx", m.name);
            if nvcc_compile(
                nvcc,
                &src_path,
                &out.join(&file),
                &["-ptx", "-arch=compute_80"],
                &[],
            )
            .is_ok()
            {
                images.ptx_file = Some(file);
            }
        }
        let units =
            kernel_units(&source).unwrap_or_else(|e| panic!("kernel module {}: {e}", m.name));
        let rust = generate_bindings(&m.name, runtime, &decls, &images, &units);
        std::fs::write(out.join(format!("{}.rs", m.name)), rust).expect("write to OUT_DIR");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
#line 1 "x.cu"
// a comment with __global__ in it
/* and extern "C" __global__ void fake(int x) */
namespace weft {
struct PlainKernelArgs {
    const u32* __restrict__ ids;
    u32 n;
    float* out;
    unsigned long long* counters;
    MetricCode metric;
    u64 seed;
};
// A struct that no kernel takes, and one that is not an argument struct.
struct UnusedArgs { u8 x; };
struct Helper { int y; };
struct SampleNormsArgs { const u8* x; u32 rows; float* out; };
struct WholeArgs { const u8* data; u32 K; };
}
template <typename T> __global__ void helper(const T* x) {}
extern "C" __global__ void __launch_bounds__(256, 2) plain_kernel(const __grid_constant__ PlainKernelArgs a) {
    const char* s = "not ) a paren";
}
#define WEFT_SAMPLE(T, NAME)                                            \
    extern "C" __global__ void sample_norms_##NAME(                     \
        const __grid_constant__ SampleNormsArgs a) {                    \
        helper<T>(as_elements<T>(a.x));                                 \
    }
WEFT_SAMPLE(float, f32)
WEFT_SAMPLE(u8, u8)
#define WEFT_WHOLE(NAME, T) extern "C" __global__ void NAME(const WholeArgs a) {}
WEFT_WHOLE(whole_f32, float)
WEFT_WHOLE(whole_i8, i8)
"#;

    #[test]
    fn parses_plain_and_macro_kernels() {
        let k = parse_kernels(SAMPLE).unwrap();
        let names: Vec<&str> = k.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["plain_kernel", "sample_norms", "whole"]);
        let p = &k[0];
        assert_eq!(p.instances, vec![(None, "plain_kernel".to_string())]);
        assert_eq!(p.args.name, "PlainKernelArgs");
        let kinds: Vec<(&str, ParamKind, &str)> = p
            .args
            .fields
            .iter()
            .map(|q| (q.field.as_str(), q.kind, q.rust_type))
            .collect();
        assert_eq!(
            kinds,
            [
                ("ids", ParamKind::In, "u32"),
                ("n", ParamKind::Scalar, "u32"),
                ("out", ParamKind::Out, "f32"),
                ("counters", ParamKind::Out, "u64"),
                ("metric", ParamKind::Scalar, "weft_core::Metric"),
                ("seed", ParamKind::Scalar, "u64"),
            ]
        );
        // C's layout: pointers 8, u32 and the metric 4, u64 8, naturally aligned.
        assert_eq!(p.args.offsets, [0, 8, 16, 24, 32, 40]);
        assert_eq!(p.args.size, 48);
        let f = &k[1];
        assert_eq!(
            f.instances,
            vec![
                (Some(Element::F32), "sample_norms_f32".to_string()),
                (Some(Element::U8), "sample_norms_u8".to_string())
            ]
        );
        assert_eq!(f.args.fields[0].kind, ParamKind::In);
        assert_eq!(f.args.fields[0].rust_type, "u8", "element data is bytes");
        assert_eq!(
            (f.args.offsets.as_slice(), f.args.size),
            (&[0, 8, 16][..], 24)
        );
        let w = &k[2];
        assert_eq!(w.instances[1], (Some(Element::I8), "whole_i8".to_string()));
        assert_eq!(w.args.fields[1].field, "k");
        assert_eq!(w.args.size, 16, "padded to the pointer's alignment");
    }

    #[test]
    fn unbindable_kernels_and_fields_are_errors_that_name_them() {
        let structs = "namespace weft { struct FooArgs { u32 n; }; }\n";
        for (src, want) in [
            // Positional parameters, a pointer to the struct, an unknown struct.
            ("extern \"C\" __global__ void bad(u32 n, u32 m) {}", "bad"),
            (
                "extern \"C\" __global__ void byptr(const FooArgs* a) {}",
                "by value",
            ),
            (
                "extern \"C\" __global__ void other(const BarArgs a) {}",
                "BarArgs",
            ),
            // Fields: an unknown type, two fields alike once lower-cased, a pointer to a
            // pointer, an array.
            (
                "struct BadArgs { Foo* f; };\nextern \"C\" __global__ void k(BadArgs a) {}",
                "Foo",
            ),
            (
                "struct TwoArgs { u32 N; u32 n; };\nextern \"C\" __global__ void k(TwoArgs a) {}",
                "`n`",
            ),
            (
                "struct PpArgs { u32** p; };\nextern \"C\" __global__ void k(PpArgs a) {}",
                "pointer to a pointer",
            ),
            (
                "struct ArrArgs { u32 v[4]; };\nextern \"C\" __global__ void k(ArrArgs a) {}",
                "one scalar or pointer",
            ),
        ] {
            let e = parse_kernels(&format!("{structs}{src}")).unwrap_err();
            assert!(e.contains(want), "{src}: {e}");
        }
    }

    #[test]
    fn keyword_field_names_become_raw_identifiers() {
        let k = parse_kernels(
            "struct KwArgs { u32 type; float* in; };\nextern \"C\" __global__ void kw(KwArgs a) {}",
        )
        .unwrap();
        let fields: Vec<&str> = k[0].args.fields.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["r#type", "r#in"]);
    }

    #[test]
    fn bindings_name_every_instance_and_field_and_assert_the_layout() {
        let k = parse_kernels(SAMPLE).unwrap();
        let images = BuiltImages {
            source_file: "m.cu".into(),
            cubins: vec![(90, "m.sm_90.cubin".into())],
            ptx_file: None,
        };
        let units = kernel_units(SAMPLE).unwrap();
        let rs = generate_bindings("m", "weft_gpu", &k, &images, &units);
        for needle in [
            "pub static MODULE: weft_gpu::KernelModule",
            "(90, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/m.sm_90.cubin\"))",
            "#[repr(C)]\n#[derive(Debug)]\npub struct PlainKernelArgs<'a> {",
            "pub ids: weft_gpu::In<'a, u32>,",
            "pub counters: weft_gpu::Out<'a, u64>,",
            "pub metric: weft_core::Metric,",
            "assert!(::core::mem::size_of::<PlainKernelArgs<'static>>() == 48);",
            "assert!(::core::mem::offset_of!(PlainKernelArgs<'static>, seed) == 40);",
            "unsafe impl weft_gpu::KernelArgs for PlainKernelArgs<'_> {}",
            "pub unsafe fn plain_kernel(ctx: &weft_gpu::GpuContext, launch: weft_gpu::Launch, args: &PlainKernelArgs<'_>)",
            "# Safety",
            "weft_core::DType::F32 => \"sample_norms_f32\",",
            "weft_core::DType::F16 => return Err(",
            "pub struct WholeArgs<'a> {",
            "pub fn plain_kernel_kernel() -> weft_gpu::Kernel {",
            "pub fn sample_norms_kernel(dtype: weft_core::DType) -> weft_core::Result<weft_gpu::Kernel> {",
            "ctx.launch(&sample_norms_kernel(dtype)?, launch, args)",
        ] {
            assert!(rs.contains(needle), "missing `{needle}` in\n{rs}");
        }
        assert!(
            !rs.contains("UnusedArgs"),
            "structs no kernel takes are not bound"
        );
        // The CUDA side asserts the same layout, for the structs the kernels take.
        let c = layout_asserts(SAMPLE).unwrap();
        for needle in [
            "static_assert(sizeof(PlainKernelArgs) == 48,",
            "static_assert(__builtin_offsetof(PlainKernelArgs, seed) == 40,",
            "static_assert(__builtin_offsetof(WholeArgs, K) == 8,",
            "static_assert(sizeof(SampleNormsArgs) == 24,",
        ] {
            assert!(c.contains(needle), "missing `{needle}` in\n{c}");
        }
        assert!(!c.contains("UnusedArgs"));
        // NVRTC has no __builtin_offsetof: the offsets are nvcc's to check.
        let guard = c.find("#ifndef __CUDACC_RTC__").unwrap();
        assert!(c.find("__builtin_offsetof").unwrap() > guard);
        assert!(c.find("static_assert(sizeof(").unwrap() < guard);
    }

    fn symbols_of(src: &str) -> Vec<String> {
        parse_kernels(src)
            .unwrap()
            .into_iter()
            .flat_map(|d| d.instances.into_iter().map(|i| i.1))
            .collect()
    }

    #[test]
    fn units_hold_their_kernels_only_and_keep_every_line() {
        let units = kernel_units(SAMPLE).unwrap();
        let symbols: Vec<Vec<String>> = units.iter().map(|u| u.symbols.clone()).collect();
        assert_eq!(
            symbols,
            [
                vec!["plain_kernel"],
                vec!["sample_norms_f32"],
                vec!["sample_norms_u8"],
                vec!["whole_f32"],
                vec!["whole_i8"]
            ]
        );
        for u in &units {
            let src = unit_source(SAMPLE, &u.blank);
            assert_eq!(src.len(), SAMPLE.len());
            assert_eq!(src.lines().count(), SAMPLE.lines().count());
            assert_eq!(symbols_of(&src), u.symbols, "unit source:\n{src}");
            // Templates and line markers stay for every unit.
            assert!(src.contains("template <typename T> __global__ void helper"));
            assert!(src.contains("#line 1 \"x.cu\""));
        }
        // Kernels that share data in device memory stay together.
        for shared in [
            "__device__ u32 counter;\n",
            "__device__ float table[4] = {0};\n",
            "__constant__ float c[2];\n",
        ] {
            let src = format!("{shared}{SAMPLE}");
            assert!(kernel_units(&src).unwrap().is_empty(), "{shared}");
        }
        assert!(!has_device_variables(
            "__device__ __forceinline__ float f(float x) { return x; }"
        ));
        // A module of one kernel is compiled whole.
        assert!(
            kernel_units(
                "struct OneArgs { u32 n; };\nextern \"C\" __global__ void one(OneArgs a) {}"
            )
            .unwrap()
            .is_empty()
        );
    }

    /// Every weft kernel module splits into units that hold exactly their kernels and together
    /// every kernel of the module (the units NVRTC compiles on demand).
    #[test]
    fn workspace_modules_split_into_units() {
        let kernels = kernels_dir();
        let include = include_dir();
        let mut seen = 0;
        for m in list_modules(&kernels).unwrap() {
            let src = module_source(&kernels, &include, &m.files).unwrap();
            let all = symbols_of(&src);
            let units = kernel_units(&src).unwrap();
            if all.len() <= 1 {
                assert!(units.is_empty());
                continue;
            }
            let mut covered = Vec::new();
            for u in &units {
                let us = unit_source(&src, &u.blank);
                assert_eq!(us.lines().count(), src.lines().count(), "{}", m.name);
                assert_eq!(symbols_of(&us), u.symbols, "module {}", m.name);
                covered.extend(u.symbols.clone());
            }
            covered.sort();
            let mut all = all;
            all.sort();
            assert_eq!(covered, all, "module {}", m.name);
            seen += 1;
        }
        assert!(
            seen >= 5,
            "only {seen} modules found under {}",
            kernels.display()
        );
    }

    /// weft's modules, one folder each at the top of the kernels folder; `src/` (this library)
    /// and `include/` are not modules.
    #[test]
    fn weft_modules_are_the_folders_of_the_kernels_folder() {
        let names: Vec<String> = list_modules(&kernels_dir())
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        for want in [
            "cagra",
            "cagra_search",
            "exact",
            "ggnn",
            "ggnn_search",
            "gnnd",
            "grnnd",
            "search_rerank",
            "testing",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
        }
        assert!(
            !names.iter().any(|n| n == "src" || n == "include"),
            "{names:?}"
        );
        assert!(include_dir().join("weft/types.cuh").is_file());
    }

    #[test]
    fn modules_and_flattening() {
        let dir = std::env::temp_dir().join(format!("weft-kernels-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("include/weft")).unwrap();
        std::fs::create_dir_all(dir.join("one")).unwrap();
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        std::fs::write(dir.join("include/weft/a.cuh"), "#pragma once\nint a;\n").unwrap();
        std::fs::write(dir.join("one/args.cuh"), "#pragma once\nint own;\n").unwrap();
        std::fs::write(
            dir.join("one/x.cu"),
            "#include \"weft/a.cuh\"\n#include \"weft/a.cuh\"\n#include \"args.cuh\"\n#include \"args.cuh\"\nint x;\n",
        )
        .unwrap();
        let mods = list_modules(&dir).unwrap();
        assert_eq!(mods.len(), 1);
        assert_eq!(mods[0].name, "one");
        let flat = flatten_module(&dir, &dir.join("include"), &mods[0].files).unwrap();
        assert_eq!(flat.matches("int a;").count(), 1, "{flat}");
        assert_eq!(flat.matches("int own;").count(), 1, "{flat}");
        assert!(flat.contains("#line 1 \"one/args.cuh\""), "{flat}");
        assert!(flat.contains("#line 1 \"one/x.cu\"") && flat.contains("int x;"));
        // Only weft/ headers and the module's own.
        std::fs::write(dir.join("one/x.cu"), "#include \"sub/other.cuh\"\n").unwrap();
        let e = flatten_module(&dir, &dir.join("include"), &mods[0].files).unwrap_err();
        assert!(e.to_string().contains("sub/other.cuh"), "{e}");
        assert!(list_modules(&dir.join("missing")).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
