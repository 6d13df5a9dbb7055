//! Generated sections of docs/benchmarks.md: the text between
//! `<!-- BEGIN generated:<name> -->` and `<!-- END generated:<name> -->` belongs to the harness,
//! everything else to people.

use anyhow::{Result, bail};

fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- BEGIN generated:{name} -->"),
        format!("<!-- END generated:{name} -->"),
    )
}

/// `doc` with the body of section `name` replaced by `body` (appended as a new marked section
/// at the end when the markers are missing). Text outside the markers is kept byte for byte.
/// Fails when the markers are unbalanced or out of order.
pub fn replace_section(doc: &str, name: &str, body: &str) -> Result<String> {
    if name.is_empty() || name.contains("-->") || name.contains(char::is_whitespace) {
        bail!("bad section name `{name}`");
    }
    let (begin, end) = markers(name);
    let body = body.trim_matches('\n');
    let b = doc
        .match_indices(&begin)
        .map(|(i, _)| i)
        .collect::<Vec<_>>();
    let e = doc.match_indices(&end).map(|(i, _)| i).collect::<Vec<_>>();
    match (b.as_slice(), e.as_slice()) {
        ([], []) => {
            let mut out = doc.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out += &format!("{begin}\n{body}\n{end}\n");
            Ok(out)
        }
        ([b], [e]) if b < e => {
            let start = b + begin.len();
            Ok(format!("{}\n{body}\n{}", &doc[..start], &doc[*e..]))
        }
        ([_], [_]) => bail!("`{end}` comes before `{begin}`"),
        _ => bail!(
            "section `{name}`: {} BEGIN and {} END markers (expected one of each)",
            b.len(),
            e.len()
        ),
    }
}

/// Replaces (or appends) section `name` of the file `path` (created when missing).
pub fn update_file(path: &std::path::Path, name: &str, body: &str) -> Result<()> {
    let doc = match std::fs::read_to_string(path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "# Benchmarks\n".to_string(),
        Err(e) => return Err(e.into()),
    };
    let new = replace_section(&doc, name, body)?;
    if new != doc {
        let tmp = path.with_extension("md.tmp");
        std::fs::write(&tmp, &new)?;
        std::fs::rename(&tmp, path)?;
    }
    eprintln!("{}: section generated:{name} updated", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# Benchmarks\n\nHand-written intro.\n\n<!-- BEGIN generated:kernels -->\nold table\n<!-- END generated:kernels -->\n\nMore hand text.\n<!-- BEGIN generated:peers-exact -->\nold peers\n<!-- END generated:peers-exact -->\ntail\n";

    #[test]
    fn replaces_only_the_named_section() {
        let out = replace_section(DOC, "kernels", "| new | table |\n").unwrap();
        assert_eq!(
            out,
            DOC.replace("old table", "| new | table |"),
            "everything but the body is kept"
        );
        let out2 = replace_section(&out, "peers-exact", "\nnew peers\n\n").unwrap();
        assert!(out2.contains("<!-- BEGIN generated:peers-exact -->\nnew peers\n<!-- END"));
        assert!(out2.contains("Hand-written intro.") && out2.ends_with("tail\n"));
        // Idempotent.
        assert_eq!(
            replace_section(&out2, "kernels", "| new | table |").unwrap(),
            out2
        );
    }

    #[test]
    fn appends_a_missing_section() {
        let out = replace_section(DOC, "quick-cpu", "report").unwrap();
        assert!(out.starts_with(DOC));
        assert!(out.ends_with(
            "tail\n\n<!-- BEGIN generated:quick-cpu -->\nreport\n<!-- END generated:quick-cpu -->\n"
        ));
        assert_eq!(
            replace_section("", "a", "x").unwrap(),
            "<!-- BEGIN generated:a -->\nx\n<!-- END generated:a -->\n"
        );
        let no_newline = replace_section("text", "a", "x").unwrap();
        assert!(no_newline.starts_with("text\n\n<!-- BEGIN"));
    }

    #[test]
    fn unbalanced_markers_and_bad_names_are_refused() {
        let only_begin = "<!-- BEGIN generated:a -->\nx\n";
        assert!(replace_section(only_begin, "a", "y").is_err());
        let reversed = "<!-- END generated:a -->\n<!-- BEGIN generated:a -->\n";
        assert!(replace_section(reversed, "a", "y").is_err());
        let twice = "<!-- BEGIN generated:a -->\n<!-- END generated:a -->\n<!-- BEGIN generated:a -->\n<!-- END generated:a -->\n";
        assert!(replace_section(twice, "a", "y").is_err());
        assert!(replace_section(DOC, "bad name", "y").is_err());
        // A prefix of another section's name is a different section.
        let out = replace_section(DOC, "peers", "p").unwrap();
        assert!(out.contains("old peers") && out.contains("generated:peers -->\np\n"));
    }

    #[test]
    fn update_file_creates_and_rewrites() {
        let dir = std::env::temp_dir().join(format!("xtask-docs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("benchmarks.md");
        let _ = std::fs::remove_file(&f);
        update_file(&f, "kernels", "one").unwrap();
        update_file(&f, "kernels", "two").unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.starts_with("# Benchmarks\n"));
        assert!(text.contains("-->\ntwo\n<!--") && !text.contains("one"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
