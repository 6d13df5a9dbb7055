//! Rule 6 of `cargo xtask tidy`: **no circle between files**. Within each package, a source file
//! that imports from another (`use crate::..`, `use super::..`, or a `crate::`/`super::` path in
//! code) depends on it; no chain of such dependencies may lead back to where it started. A name
//! re-exported by a module (`pub use inner::Name`) resolves to the file that defines it, so a
//! crate root or a `mod.rs` that only re-exports is not a hub that ties every file together.
//! A file's imports from its own ancestor modules (a child's `super::`) are not counted: Rust's
//! module tree gives a child its parent's items, and the two are one unit. Inline test modules
//! (`#[cfg(test)] mod .. { .. }`) are left out: a test may use anything.
//!
//! Read as text, not by the compiler: good enough for the paths this workspace writes (one
//! `use` tree per statement, `crate::`/`super::`/`self::` paths); a glob (`use super::*`) makes
//! no dependency on its own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// One source file of a package: its module path (`[]` for the crate root) and its text.
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    code: String,
}

/// The circles between the files of the package whose sources are in `src` (one line per
/// circle: its files, relative to `root`).
pub fn package_circles(root: &Path, src: &Path) -> Result<Vec<String>> {
    let files = source_files(src)?;
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    let reexports: Vec<BTreeMap<String, Vec<String>>> =
        files.iter().map(|f| reexports_of(f, &modules)).collect();
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    // The first path that made each edge, to show why.
    let mut why: BTreeMap<(usize, usize), String> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        let spans = inline_modules(&f.code);
        for (at, path) in referenced_paths(&f.code) {
            let inline = inline_path_at(&spans, at);
            let Some(abs) = absolute(f, &inline, &path, &modules) else {
                continue;
            };
            // A file's own ancestors are its context, not its dependencies: Rust's module tree
            // gives a child the parent's items (`super::`), and the two are one unit.
            if let Some(j) = resolve(&abs, &modules, &reexports, 0)
                && j != i
                && !f.module.starts_with(&files[j].module)
            {
                edges[i].insert(j);
                why.entry((i, j)).or_insert_with(|| path.join("::"));
            }
        }
    }
    let name = |i: usize| {
        let p = &files[i].path;
        p.strip_prefix(root).unwrap_or(p).display().to_string()
    };
    Ok(cycles(&edges)
        .into_iter()
        .map(|scc| {
            let names: Vec<String> = scc.iter().map(|&i| name(i)).collect();
            let ties: Vec<String> = scc
                .iter()
                .flat_map(|&i| scc.iter().map(move |&j| (i, j)))
                .filter_map(|(i, j)| why.get(&(i, j)).map(|p| format!("{} uses {p}", name(i))))
                .collect();
            format!(
                "files that import each other in a circle: {} ({})",
                names.join(", "),
                ties.join("; ")
            )
        })
        .collect())
}

/// Every `.rs` file under `src` but `src/bin` (separate crates), with its module path.
fn source_files(src: &Path) -> Result<Vec<SourceFile>> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if p.is_dir() {
                if p != src.join("bin") {
                    stack.push(p);
                }
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).expect("under src");
            let mut module: Vec<String> = rel
                .parent()
                .map(|d| {
                    d.components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            let stem = p.file_stem().unwrap_or_default().to_string_lossy();
            let at_root = rel.parent().is_none_or(|d| d.as_os_str().is_empty());
            let is_dir_module = stem == "mod" || (at_root && (stem == "lib" || stem == "main"));
            if !is_dir_module {
                module.push(stem.into_owned());
            }
            let text =
                std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
            out.push(SourceFile {
                path: p,
                module,
                code: without_tests(&strip_comments_and_strings(&text)),
            });
        }
    }
    Ok(out)
}

/// `text` with comments and the contents of string and char literals blanked (line ends kept).
fn strip_comments_and_strings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if b[i] == b'\n' {
                            out.push('\n');
                        }
                        i += 1;
                    }
                }
            }
            b'r' if b.get(i + 1) == Some(&b'#') || b.get(i + 1) == Some(&b'"') => {
                // A raw string r"..." or r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                let word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
                if b.get(j) == Some(&b'"') && word_start {
                    j += 1;
                    let close: Vec<u8> = std::iter::once(b'"')
                        .chain(std::iter::repeat_n(b'#', hashes))
                        .collect();
                    while j < b.len() && !b[j..].starts_with(&close) {
                        if b[j] == b'\n' {
                            out.push('\n');
                        }
                        j += 1;
                    }
                    out.push_str("\"\"");
                    i = (j + close.len()).min(b.len());
                } else {
                    out.push('r');
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    } else if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
                out.push_str("\"\"");
                i += 1;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): blank only the former.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|p| i + 2 + p)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match end {
                    Some(e) => {
                        out.push_str("' '");
                        i = e + 1;
                    }
                    None => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
            _ => {
                // Copy one whole character (the text is UTF-8).
                let len = utf8_len(b[i]);
                out.push_str(&text[i..(i + len).min(b.len())]);
                i += len;
            }
        }
    }
    out
}

/// The byte length of the UTF-8 character that starts with byte `first`.
fn utf8_len(first: u8) -> usize {
    match first {
        0xf0..=0xff => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}

/// `code` without its `#[cfg(test)]` items (test modules and test-only functions).
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at the matching `}` of its first `{`, or at a `;` before any `{`.
        let brace = after.find('{');
        let semi = after.find(';');
        let end = match (brace, semi) {
            (Some(b), Some(s)) if s < b => s + 1,
            (Some(b), _) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, c) in after[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The module paths `code` names, each with where it occurs: every path of its `use` trees
/// and every `crate::`, `super::` or `self::` path in its code, as segments (`["crate", "gpu",
/// "common", "check_out_rows"]`). Re-exports (`pub use`) are left out: they make no dependency
/// of their own (see [`reexports_of`]).
fn referenced_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut paths = Vec::new();
    for (at, is_pub, tree) in use_statements(code) {
        if !is_pub {
            paths.extend(expand_use_tree(&tree).into_iter().map(|p| (at, p)));
        }
    }
    // Paths in code (outside `use` statements).
    let code_only = remove_use_statements(code);
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code_only.match_indices(start) {
            let prev = code_only[..at].chars().next_back();
            if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code_only[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let segs: Vec<String> = path
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if segs.len() > 1 {
                paths.push((at, segs));
            }
        }
    }
    paths
}

/// Every `use` statement of `code`: (where it starts, whether it is a re-export, its tree).
fn use_statements(code: &str) -> Vec<(usize, bool, String)> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("use ") {
        let before = &code[..at];
        let prev = before.chars().next_back();
        if prev.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let line_start = before.rfind(['\n', ';', '{', '}']).map_or(0, |p| p + 1);
        let prefix = before[line_start..].trim();
        let is_pub = prefix.starts_with("pub");
        if !(prefix.is_empty() || prefix.starts_with("pub") || prefix.starts_with("#[")) {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            continue;
        };
        out.push((at, is_pub, code[at + 4..at + end].trim().to_string()));
    }
    out
}

/// `code` with its `use` statements blanked (positions kept).
fn remove_use_statements(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    for (at, _, _) in use_statements(code) {
        let end = code[at..].find(';').map_or(code.len(), |e| at + e);
        for b in &mut out[at..end] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The inline modules of `code` (`mod name { .. }`): (start, end, name).
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &code[at + 4..];
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        let mut end = code.len();
        for (k, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push((open, end, name));
    }
    out
}

/// The inline module path at byte `pos` of a file whose inline modules are `spans`.
fn inline_path_at(spans: &[(usize, usize, String)], pos: usize) -> Vec<String> {
    let mut enclosing: Vec<&(usize, usize, String)> = spans
        .iter()
        .filter(|(s, e, _)| *s < pos && pos < *e)
        .collect();
    enclosing.sort_by_key(|(s, _, _)| *s);
    enclosing.into_iter().map(|(_, _, n)| n.clone()).collect()
}

/// The paths of one `use` tree (`a::{b, c::{d, e}}` gives `a::b`, `a::c::d`, `a::c::e`), as
/// segments; `self` in a group names the group's prefix; globs and renames keep their path.
fn expand_use_tree(tree: &str) -> Vec<Vec<String>> {
    let tree = compact_tree(tree);
    let mut out = Vec::new();
    expand(&tree, &mut Vec::new(), &mut out);
    out
}

fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Some(open) = tree.find('{') {
        let head = &tree[..open];
        let close = tree.rfind('}').unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let added: Vec<String> = head
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let n = added.len();
        prefix.extend(added);
        for part in split_top_level(inner) {
            if part == "self" {
                out.push(prefix.clone());
            } else if !part.is_empty() {
                expand(&part, prefix, out);
            }
        }
        prefix.truncate(prefix.len() - n);
    } else {
        let path = tree.split('@').next().unwrap_or(tree);
        if path.ends_with('*') {
            // A glob names no item of its own.
            return;
        }
        let mut segs = prefix.clone();
        segs.extend(path.split("::").filter(|s| !s.is_empty()).map(String::from));
        if !segs.is_empty() {
            out.push(segs);
        }
    }
}

/// A `use` tree without whitespace, its renames (`x as y`) written `x@y`.
fn compact_tree(tree: &str) -> String {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if *w == "as" && i > 0 {
            out.push('@');
        } else {
            out.push_str(w);
        }
    }
    out
}

/// `a,b::{c,d},e` split at its top-level commas.
fn split_top_level(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0usize);
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

/// `path` as seen from `file`, made absolute from the crate root (`None`: another crate's, or
/// an item in scope that is not a module path).
fn absolute(
    file: &SourceFile,
    inline: &[String],
    path: &[String],
    modules: &BTreeMap<Vec<String>, usize>,
) -> Option<Vec<String>> {
    let mut module = file.module.clone();
    module.extend(inline.iter().cloned());
    let mut segs = path.iter().peekable();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            module.clear();
            segs.next();
        }
        Some("super") => {
            while segs.peek().map(|s| s.as_str()) == Some("super") {
                segs.next();
                module.pop()?;
            }
        }
        Some("self") => {
            segs.next();
        }
        // A path of a child module of this file (`use inner::X`), or of another crate: only
        // the former is this package's (an inline child resolves to this file).
        Some(first) => {
            let mut child = module.clone();
            child.push(first.to_string());
            let inline_child = inline.is_empty()
                && inline_modules(&file.code)
                    .iter()
                    .any(|(_, _, n)| n == first);
            if !modules.contains_key(&child) && !inline_child {
                return None;
            }
        }
        None => return None,
    }
    module.extend(segs.cloned());
    Some(module)
}

/// The file that defines what the absolute path `abs` names: the deepest file module on the
/// path; a name a module re-exports (`pub use`) followed to its own file. `depth` stops
/// re-export chains that loop.
fn resolve(
    abs: &[String],
    modules: &BTreeMap<Vec<String>, usize>,
    reexports: &[BTreeMap<String, Vec<String>>],
    depth: usize,
) -> Option<usize> {
    let mut at = *modules.get(&Vec::new())?;
    let mut prefix: Vec<String> = Vec::new();
    for (k, seg) in abs.iter().enumerate() {
        prefix.push(seg.clone());
        if let Some(&m) = modules.get(&prefix) {
            at = m;
            continue;
        }
        // Not a file module: an item of `at`, or a name `at` re-exports.
        if depth < 8
            && let Some(target) = reexports[at].get(seg)
        {
            let mut next = target.clone();
            next.extend(abs[k + 1..].iter().cloned());
            return resolve(&next, modules, reexports, depth + 1).or(Some(at));
        }
        return Some(at);
    }
    Some(at)
}

/// The names `file` re-exports (`pub use a::b::Name;`, `pub use a::{B, C as D}`), each with
/// the absolute path it names.
fn reexports_of(
    file: &SourceFile,
    modules: &BTreeMap<Vec<String>, usize>,
) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let spans = inline_modules(&file.code);
    for (at, is_pub, tree) in use_statements(&file.code) {
        if !is_pub || !inline_path_at(&spans, at).is_empty() {
            continue;
        }
        let compact = compact_tree(&tree);
        for segs in expand_use_tree(&tree) {
            let Some(last) = segs.last() else { continue };
            // `X as Y` re-exports X under Y; expand_use_tree keeps the path of X.
            let name = rename_of(&compact, last).unwrap_or_else(|| last.clone());
            if let Some(abs) = absolute(file, &[], &segs, modules) {
                out.insert(name, abs);
            }
        }
    }
    out
}

/// The new name of `name` where the compacted `tree` renames it (`name@new`).
fn rename_of(tree: &str, name: &str) -> Option<String> {
    let at = tree.find(&format!("{name}@"))?;
    let rest = &tree[at + name.len() + 1..];
    let new: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!new.is_empty()).then_some(new)
}

/// The strongly connected components of more than one node (Tarjan), each sorted.
fn cycles(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort_unstable();
                s.out.push(scc);
            }
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        for (name, text) in files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    #[test]
    fn a_circle_between_two_files_is_found_and_reexports_are_followed() {
        let dir = std::env::temp_dir().join(format!("weft-circles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let src = dir.join("src");
        write(
            &src,
            &[
                (
                    "lib.rs",
                    "mod a;\nmod b;\nmod gpu;\npub use a::Alpha;\npub use b::{Beta, Gamma as G};\n",
                ),
                // a uses b directly; b reaches a through the crate root's re-export.
                ("a.rs", "use crate::b::Beta;\npub struct Alpha;\n"),
                (
                    "b.rs",
                    "pub struct Beta;\npub struct Gamma;\nfn f() { let _ = crate::Alpha; }\n",
                ),
                // gpu/x.rs -> gpu/y.rs only, and a test module that would close a circle.
                ("gpu/mod.rs", "mod x;\nmod y;\npub use x::X;\n"),
                ("gpu/x.rs", "use super::y::Y;\npub struct X;\n"),
                (
                    "gpu/y.rs",
                    "pub struct Y;\n// use super::x::X; in a comment\nconst S: &str = \"super::x::X\";\n#[cfg(test)]\nmod tests {\n    use super::super::x::X;\n}\n",
                ),
            ],
        );
        let circles = package_circles(&dir, &src).unwrap();
        assert_eq!(circles.len(), 1, "{circles:?}");
        assert!(
            circles[0].contains("src/a.rs") && circles[0].contains("src/b.rs"),
            "{circles:?}"
        );
        // The circle goes once b stops naming the root's re-export of Alpha.
        write(&src, &[("b.rs", "pub struct Beta;\npub struct Gamma;\n")]);
        assert!(package_circles(&dir, &src).unwrap().is_empty());
        // A rename through a re-export resolves to the file that defines the item.
        write(
            &src,
            &[(
                "b.rs",
                "pub struct Beta;\npub struct Gamma;\nuse crate::G;\n",
            )],
        );
        assert!(package_circles(&dir, &src).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn use_trees_expand() {
        assert_eq!(
            expand_use_tree("crate::a::{b, c::{d, e as f}, self}"),
            [
                vec!["crate", "a", "b"],
                vec!["crate", "a", "c", "d"],
                vec!["crate", "a", "c", "e"],
                vec!["crate", "a"],
            ]
        );
        assert!(expand_use_tree("super::*").is_empty());
        assert_eq!(expand_use_tree("crate::base as b"), [vec!["crate", "base"]]);
    }
}
