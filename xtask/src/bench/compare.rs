//! `cargo xtask bench --compare OLD [--with NEW]`: how a re-run's figures compare with an
//! earlier run's, from their JSON lines (`weft.jsonl`, `peers.jsonl`).
//!
//! Runs are matched by dataset, library, algorithm and backend; sweep points by batch size and
//! search parameter. Quality figures (graph recall, unreachable nodes, search recall) should be
//! identical for the deterministic builds; times move with the machine. The peers' code is
//! pinned, so the median ratio of their build times and QPS between the two runs measures how
//! much faster or slower the machine itself was, and the report divides weft's ratios by it
//! ("normalised"): a normalised ratio near 1 means weft moved with the machine.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Tolerance of the verdict on normalised time ratios (build time and QPS): within
/// `1 / (1 + NOISE)` .. `1 + NOISE` counts as noise.
pub const NOISE: f64 = 0.15;

/// The JSON lines of a run folder: `weft.jsonl` and `peers.jsonl` (directly in `dir` or in
/// `dir/bench/`, as a device run leaves them).
pub fn load(dir: &Path) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut found = false;
    for name in ["weft.jsonl", "peers.jsonl"] {
        for p in [dir.join(name), dir.join("bench").join(name)] {
            if !p.exists() {
                continue;
            }
            found = true;
            let text = std::fs::read_to_string(&p)?;
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(line)
                    .with_context(|| format!("{} line {}", p.display(), i + 1))?;
                out.push(v);
            }
            break;
        }
    }
    if !found {
        bail!("no weft.jsonl or peers.jsonl under {}", dir.display());
    }
    Ok(out)
}

/// The matching key of a record: `(dataset, library, algorithm, backend)`.
fn key(v: &Value) -> (String, String, String, String) {
    let s = |x: &Value| x.as_str().unwrap_or("?").to_string();
    (
        s(&v["dataset"]["name"]),
        s(&v["algorithm"]["library"]),
        s(&v["algorithm"]["name"]),
        s(&v["algorithm"]["backend"]),
    )
}

fn label(k: &(String, String, String, String)) -> String {
    format!("{} {} ({})", k.1, k.2, k.3)
}

fn is_peer(k: &(String, String, String, String)) -> bool {
    k.1 != "weft"
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    })
}

/// One matched pair of records.
struct Pair {
    key: (String, String, String, String),
    build_ratio: Option<f64>,
    build_old: Option<f64>,
    build_new: Option<f64>,
    /// QPS new / old of every matched sweep point.
    qps_ratios: Vec<f64>,
    /// Largest |recall@10 new - old| over the matched sweep points.
    recall_delta: f64,
    points: usize,
    graph_old: Option<f64>,
    graph_new: Option<f64>,
    unreachable_old: Option<i64>,
    unreachable_new: Option<i64>,
}

fn pair(key: (String, String, String, String), a: &Value, b: &Value) -> Pair {
    let build_old = a["build"]["median_s"].as_f64();
    let build_new = b["build"]["median_s"].as_f64();
    let build_ratio = match (build_old, build_new) {
        (Some(x), Some(y)) if x > 0.0 => Some(y / x),
        _ => None,
    };
    let mut qps_ratios = Vec::new();
    let mut recall_delta = 0.0f64;
    let mut points = 0;
    let empty = Vec::new();
    let sa = a["sweep"].as_array().unwrap_or(&empty);
    let sb = b["sweep"].as_array().unwrap_or(&empty);
    for p in sa {
        let m = sb
            .iter()
            .find(|q| q["batch"] == p["batch"] && q["param"] == p["param"] && q["k"] == p["k"]);
        let Some(q) = m else { continue };
        points += 1;
        if let (Some(x), Some(y)) = (p["qps"].as_f64(), q["qps"].as_f64())
            && x > 0.0
        {
            qps_ratios.push(y / x);
        }
        if let (Some(x), Some(y)) = (p["recall_at_10"].as_f64(), q["recall_at_10"].as_f64()) {
            recall_delta = recall_delta.max((y - x).abs());
        }
    }
    Pair {
        key,
        build_ratio,
        build_old,
        build_new,
        qps_ratios,
        recall_delta,
        points,
        graph_old: a["graph"]["recall_at_10"].as_f64(),
        graph_new: b["graph"]["recall_at_10"].as_f64(),
        unreachable_old: a["graph"]["unreachable"].as_i64(),
        unreachable_new: b["graph"]["unreachable"].as_i64(),
    }
}

fn commit_of(vs: &[Value]) -> String {
    vs.iter()
        .find_map(|v| v["env"]["commit"].as_str())
        .map_or("?".to_string(), |c| c.chars().take(12).collect())
}

fn within_noise(r: f64) -> bool {
    (1.0 / (1.0 + NOISE)..=1.0 + NOISE).contains(&r)
}

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// The markdown comparison of `old` (the earlier run) and `new`.
pub fn report(old: &[Value], new: &[Value], old_name: &str, new_name: &str) -> String {
    let mut pairs = Vec::new();
    for b in new {
        let k = key(b);
        if let Some(a) = old.iter().find(|a| key(a) == k) {
            pairs.push(pair(k, a, b));
        }
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Re-run check: `{new_name}` (commit `{}`) against `{old_name}` (commit `{}`), {} runs matched by dataset, library, algorithm and backend, sweep points by batch and search parameter.\n",
        commit_of(new),
        commit_of(old),
        pairs.len()
    );
    if pairs.is_empty() {
        md += "No run of one file matches a run of the other.\n";
        return md;
    }
    // The machine factor: how the pinned peers moved.
    let peer_build = median(
        pairs
            .iter()
            .filter(|p| is_peer(&p.key))
            .filter_map(|p| p.build_ratio)
            .collect(),
    );
    let peer_qps = median(
        pairs
            .iter()
            .filter(|p| is_peer(&p.key))
            .flat_map(|p| p.qps_ratios.iter().copied())
            .collect(),
    );
    match (peer_build, peer_qps) {
        (Some(b), Some(q)) => {
            let _ = writeln!(
                md,
                "Machine factor (median over the peers, whose code is pinned): build time x{b:.3}, QPS x{q:.3}. \"norm.\" divides weft's ratios by it.\n"
            );
        }
        _ => {
            md += "No peer runs in both files: \"norm.\" is the raw ratio (the two runs are compared as they stand, e.g. two runs in one device lease).\n\n"
        }
    }
    let (peer_build, peer_qps) = (peer_build.or(Some(1.0)), peer_qps.or(Some(1.0)));
    md += "| dataset | run | build s old -> new | ratio | norm. | graph recall@10 old -> new | unreachable old -> new | sweep points | max abs. change of recall@10 | QPS ratio median (min-max) | norm. |\n";
    md += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    let mut quality_same = true;
    let mut max_recall_delta = 0.0f64;
    let mut norm_ratios = Vec::new();
    for p in &pairs {
        let qm = median(p.qps_ratios.clone());
        let qmin = p.qps_ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let qmax = p.qps_ratios.iter().copied().fold(0.0, f64::max);
        let bn = p.build_ratio.zip(peer_build).map(|(r, f)| r / f);
        let qn = qm.zip(peer_qps).map(|(r, f)| r / f);
        if !is_peer(&p.key) {
            norm_ratios.extend(bn);
            norm_ratios.extend(qn);
        }
        if p.graph_old != p.graph_new || p.unreachable_old != p.unreachable_new {
            quality_same = false;
        }
        max_recall_delta = max_recall_delta.max(p.recall_delta);
        let graph = match (p.graph_old, p.graph_new) {
            (None, None) => "-".to_string(),
            (a, b) => format!("{} -> {}", fmt_opt(a, 4), fmt_opt(b, 4)),
        };
        let unreach = match (p.unreachable_old, p.unreachable_new) {
            (None, None) => "-".to_string(),
            (a, b) => format!(
                "{} -> {}",
                a.map_or("-".into(), |x| x.to_string()),
                b.map_or("-".into(), |x| x.to_string())
            ),
        };
        let qps = match qm {
            Some(m) => format!("{m:.3} ({qmin:.3}-{qmax:.3})"),
            None => "-".to_string(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} -> {} | {} | {} | {graph} | {unreach} | {} | {:.4} | {qps} | {} |",
            p.key.0,
            label(&p.key),
            fmt_opt(p.build_old, 2),
            fmt_opt(p.build_new, 2),
            fmt_opt(p.build_ratio, 3),
            if is_peer(&p.key) {
                "-".to_string()
            } else {
                fmt_opt(bn, 3)
            },
            p.points,
            p.recall_delta,
            if is_peer(&p.key) {
                "-".to_string()
            } else {
                fmt_opt(qn, 3)
            },
        );
    }
    md += "\n";
    let outside = norm_ratios.iter().filter(|r| !within_noise(**r)).count();
    let _ = writeln!(
        md,
        "Verdict: graph quality {}; search recall@10 changed by at most {max_recall_delta:.4}; {} of {} normalised weft time ratios (build and median QPS) lie outside {:.2}-{:.2} (noise band +-{:.0}%).",
        if quality_same {
            "identical (graph recall@10 and unreachable nodes)"
        } else {
            "differs (see the table)"
        },
        outside,
        norm_ratios.len(),
        1.0 / (1.0 + NOISE),
        1.0 + NOISE,
        NOISE * 100.0
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(lib: &str, build: f64, qps: f64, recall: f64, graph: Option<f64>) -> Value {
        json!({
            "env": {"commit": format!("{lib}-commit")},
            "dataset": {"name": "d"},
            "algorithm": {"library": lib, "name": "a", "backend": "cpu"},
            "build": {"median_s": build},
            "graph": graph.map(|g| json!({"recall_at_10": g, "unreachable": 3})),
            "sweep": [
                {"batch": 10, "param": 1.0, "k": 10, "qps": qps, "recall_at_10": recall},
                {"batch": 1, "param": 1.0, "k": 10, "qps": qps / 2.0, "recall_at_10": recall}
            ]
        })
    }

    #[test]
    fn a_machine_that_is_twice_as_fast_for_everyone_is_noise() {
        let old = vec![
            rec("weft", 4.0, 100.0, 0.9, Some(0.99)),
            rec("peer", 8.0, 50.0, 0.9, None),
        ];
        let new = vec![
            rec("weft", 2.0, 200.0, 0.9, Some(0.99)),
            rec("peer", 4.0, 100.0, 0.9, None),
        ];
        let md = report(&old, &new, "old", "new");
        assert!(md.contains("build time x0.500, QPS x2.000"), "{md}");
        assert!(md.contains("graph quality identical"), "{md}");
        assert!(md.contains("0 of 2 normalised"), "{md}");
        assert!(
            md.contains("| d | weft a (cpu) | 4.00 -> 2.00 | 0.500 | 1.000 |"),
            "{md}"
        );
    }

    #[test]
    fn a_slower_weft_and_a_changed_graph_are_reported() {
        let old = vec![
            rec("weft", 4.0, 100.0, 0.9, Some(0.99)),
            rec("peer", 8.0, 50.0, 0.9, None),
        ];
        let new = vec![
            rec("weft", 8.0, 100.0, 0.8, Some(0.98)),
            rec("peer", 8.0, 50.0, 0.9, None),
        ];
        let md = report(&old, &new, "old", "new");
        assert!(md.contains("graph quality differs"), "{md}");
        assert!(md.contains("changed by at most 0.1000"), "{md}");
        assert!(md.contains("1 of 2 normalised"), "{md}");
    }

    #[test]
    fn without_peers_the_raw_ratios_are_judged() {
        let old = vec![rec("weft", 4.0, 100.0, 0.9, Some(0.99))];
        let new = vec![rec("weft", 6.0, 100.0, 0.9, Some(0.99))];
        let md = report(&old, &new, "old", "new");
        assert!(md.contains("is the raw ratio"), "{md}");
        assert!(md.contains("1 of 2 normalised"), "{md}");
    }

    #[test]
    fn unmatched_runs_are_said() {
        let old = vec![rec("weft", 4.0, 100.0, 0.9, Some(0.99))];
        let new = vec![rec("other", 4.0, 100.0, 0.9, None)];
        assert!(report(&old, &new, "o", "n").contains("No run of one file matches"));
    }

    #[test]
    fn load_reads_both_files_and_fails_on_an_empty_folder() {
        let dir = std::env::temp_dir().join(format!("weft-compare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bench")).unwrap();
        assert!(load(&dir).is_err());
        std::fs::write(dir.join("weft.jsonl"), "{\"a\":1}\n\n").unwrap();
        std::fs::write(dir.join("bench/peers.jsonl"), "{\"b\":2}\n").unwrap();
        assert_eq!(load(&dir).unwrap().len(), 2);
        std::fs::write(dir.join("weft.jsonl"), "{not json\n").unwrap();
        assert!(load(&dir).unwrap_err().to_string().contains("line 1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
