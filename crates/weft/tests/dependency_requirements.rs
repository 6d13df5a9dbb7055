//! Issue 19 item 4: every external dependency was pinned with `=` (ndarray included), which a
//! downstream crate cannot reconcile with its own requirements. The workspace now asks for
//! caret requirements, pins exactly only where an ABI needs it (cudarc, with the reason beside
//! it), and keeps Cargo.lock for the binaries.

use std::path::Path;

fn workspace_file(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `(name, version requirement)` of every `[workspace.dependencies]` entry without a `path`.
fn external_requirements() -> Vec<(String, String)> {
    let manifest = workspace_file("Cargo.toml");
    let section = manifest
        .split("[workspace.dependencies]")
        .nth(1)
        .expect("a [workspace.dependencies] table");
    let section = section.split("\n[").next().unwrap();
    section
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
        .filter(|l| !l.contains("path ="))
        .map(|l| {
            let (name, rest) = l.split_once('=').unwrap();
            // `"x.y.z"` or `{ version = "x.y.z", ... }`.
            let rest = rest.split("version =").nth(1).unwrap_or(rest);
            let req = rest
                .split('"')
                .nth(1)
                .expect("a quoted version")
                .to_string();
            (name.trim().to_string(), req)
        })
        .collect()
}

#[test]
fn external_dependencies_use_caret_requirements_except_abi_pins() {
    let reqs = external_requirements();
    assert!(reqs.len() > 10, "{reqs:?}");
    for (name, req) in &reqs {
        let exact = req.starts_with('=');
        if name == "cudarc" {
            assert!(exact, "cudarc stays exactly pinned (an ABI): {req}");
        } else {
            assert!(
                req.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "{name} = \"{req}\": a caret requirement (a plain version) is expected"
            );
        }
    }
    assert!(reqs.iter().any(|(n, _)| n == "ndarray"));
    // The pin says why.
    let manifest = workspace_file("Cargo.toml");
    let before_cudarc = manifest.split("\ncudarc =").next().unwrap();
    let comment = before_cudarc.rsplit("\n\n").next().unwrap();
    assert!(comment.contains("ABI"), "{comment}");
    // The binaries keep their lockfile.
    assert!(workspace_file("Cargo.lock").contains("name = \"ndarray\""));
}
