//! The markdown report: one section per dataset (build, graph quality, memory, search at
//! recall targets), the plots embedded, the environment and the reproducing command.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::pareto::qps_at_recall;
use crate::schema::Record;

/// Recall@10 targets of the QPS columns.
pub const TARGETS: [f64; 3] = [0.90, 0.95, 0.99];

/// A run's label in tables and legends: `weft nndescent (cpu)`, `hnswlib hnsw (cpu)`; a GPU
/// search on f16 says so: `weft cagra (gpu, f16 traversal)` (weft's f16 traversal with f32
/// rerank, `params.search_precision`), `cuvs cagra (gpu, f16 data)` (cuVS searching an f16
/// copy, `params.dtype`).
pub fn label(r: &Record) -> String {
    let p = &r.algorithm.params;
    let f16 = if p.get("search_precision").and_then(|v| v.as_str()) == Some("f16") {
        ", f16 traversal"
    } else if p.get("dtype").and_then(|v| v.as_str()) == Some("f16") {
        ", f16 data"
    } else {
        ""
    };
    format!(
        "{} {} ({}{f16})",
        r.algorithm.library, r.algorithm.name, r.algorithm.backend
    )
}

/// Records grouped by dataset name (sorted), in input order within a dataset.
pub fn by_dataset(records: &[Record]) -> BTreeMap<String, Vec<&Record>> {
    let mut m: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records {
        m.entry(r.dataset.name.clone()).or_default().push(r);
    }
    m
}

/// (recall@10, QPS) points of a record at batch size `batch` (`None`: the largest batch).
pub fn curve(r: &Record, batch: Option<usize>) -> Vec<(f64, f64)> {
    let b = batch.unwrap_or_else(|| r.sweep.iter().map(|p| p.batch).max().unwrap_or(0));
    r.sweep
        .iter()
        .filter(|p| p.batch == b)
        .filter_map(|p| p.recall_at_10.map(|rc| (rc, p.qps)))
        .collect()
}

fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.digits$}"),
        _ => "-".into(),
    }
}

fn qps(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.0}"),
        _ => "-".into(),
    }
}

/// The markdown of the dataset tables (no title, no environment): what `--update-docs` puts
/// between the `generated:<suite>` markers, and the body of the full report. `plots` is the
/// folder prefix of the embedded SVG plots relative to the markdown file (`None`: no images);
/// `png` adds links to the PNG versions.
pub fn tables(records: &[Record], plots: Option<&str>, png: bool) -> String {
    let png_link = |dir: &str, stem: &str| {
        if png {
            format!(" ([PNG]({dir}/{stem}.png))")
        } else {
            String::new()
        }
    };
    let mut md = String::new();
    for (name, runs) in by_dataset(records) {
        let d = &runs[0].dataset;
        let _ = writeln!(
            md,
            "#### {name}\n\n{} x {} {}, {}, {} queries; source: {}; ground truth: {} neighbours.\n",
            d.n, d.dim, d.dtype, d.metric, d.nq, d.source, d.gt_k
        );
        md += "| run | threads | build s (median, min-max) | warm-up s | graph recall@10 | graph recall@k | out-degree min/mean/max | unreachable | peak RSS MiB | device MiB |";
        md += "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for r in &runs {
            if let Some(e) = &r.error {
                let _ = writeln!(
                    md,
                    "| {} | {} | failed: {} | | | | | | | |",
                    label(r),
                    r.algorithm.threads,
                    e.replace('|', "/").lines().next().unwrap_or("")
                );
                continue;
            }
            let b = r.build.as_ref();
            let g = r.graph.as_ref();
            let m = r.memory.as_ref();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                label(r),
                r.algorithm.threads,
                b.map_or("-".into(), |b| format!(
                    "{:.2} ({:.2}-{:.2}, {} runs)",
                    b.median_s,
                    b.min_s,
                    b.max_s,
                    b.runs_s.len()
                )),
                b.map_or("-".into(), |b| if b.warmup_rows > 0 {
                    format!("{:.2} ({} rows)", b.warmup_s, b.warmup_rows)
                } else {
                    format!("{:.2}", b.warmup_s)
                }),
                num(g.map(|g| g.recall_at_10), 4),
                g.map_or("-".into(), |g| format!(
                    "{:.4} (k={})",
                    g.recall_at_k, g.recall_k
                )),
                g.map_or("-".into(), |g| format!(
                    "{:.0}/{:.1}/{:.0}",
                    g.out_degree[0], g.out_degree[1], g.out_degree[2]
                )),
                g.and_then(|g| g.unreachable)
                    .map_or("-".into(), |u| u.to_string()),
                num(m.map(|m| m.peak_rss_mib), 0),
                num(m.and_then(|m| m.device_peak_mib), 0),
            );
        }
        md += "\nSearch: highest QPS reaching recall@10 of 0.90 / 0.95 / 0.99, at batch = all queries and at batch = 1 (one query per call, one thread); best recall@10 and recall@100 of the sweep.\n\n";
        md += "| run | swept | batch QPS @0.90 | @0.95 | @0.99 | batch-1 QPS @0.90 | @0.95 | @0.99 | batch-1 queries | max recall@10 | max recall@100 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for r in runs.iter().filter(|r| !r.sweep.is_empty()) {
            let big = curve(r, None);
            let one = curve(r, Some(1));
            let max10 = big.iter().map(|p| p.0).fold(f64::NAN, f64::max);
            let max100 = r
                .sweep
                .iter()
                .filter_map(|p| p.recall_at_100)
                .fold(f64::NAN, f64::max);
            let params: Vec<String> = r
                .sweep
                .iter()
                .filter(|p| p.batch != 1)
                .map(|p| format!("{}", p.param))
                .collect();
            let b1 = r
                .sweep
                .iter()
                .find(|p| p.batch == 1)
                .map_or("-".into(), |p| p.queries.to_string());
            let _ = writeln!(
                md,
                "| {} | {} {} | {} | {} | {} | {} | {} | {} | {b1} | {} | {} |",
                label(r),
                r.algorithm.search_param,
                params.join(","),
                qps(qps_at_recall(&big, TARGETS[0])),
                qps(qps_at_recall(&big, TARGETS[1])),
                qps(qps_at_recall(&big, TARGETS[2])),
                qps(qps_at_recall(&one, TARGETS[0])),
                qps(qps_at_recall(&one, TARGETS[1])),
                qps(qps_at_recall(&one, TARGETS[2])),
                num(Some(max10), 4),
                num(Some(max100), 4),
            );
        }
        if let Some(dir) = plots {
            let f = file_stem(&name);
            let _ = writeln!(
                md,
                "\n![QPS vs recall@10, {name}]({dir}/pareto-{f}.svg){}\n",
                png_link(dir, &format!("pareto-{f}"))
            );
        } else {
            md += "\n";
        }
    }
    if let Some(dir) = plots {
        let _ = writeln!(
            md,
            "#### Build time\n\n![build time vs graph recall]({dir}/build-vs-recall.svg){}\n\n![build time vs n]({dir}/build-vs-n.svg){}\n",
            png_link(dir, "build-vs-recall"),
            png_link(dir, "build-vs-n")
        );
    }
    md
}

/// The first 12 hex digits of a commit, keeping a `-dirty` suffix.
pub fn short_commit(c: &str) -> String {
    let (sha, dirty) = match c.strip_suffix("-dirty") {
        Some(s) => (s, "-dirty"),
        None => (c, ""),
    };
    format!("{}{dirty}", &sha[..sha.len().min(12)])
}

/// What the binary had for kernels, from a record's `env.gpu.cubins`: weft writes one
/// `[module, [SM versions]]` pair per kernel module (an empty list: no cubin, so NVRTC compiles
/// that module on first use), a peer the names of its precompiled libraries. A list of modules
/// is not "cubins embedded" unless the modules have cubins.
pub fn kernel_delivery(cubins: &serde_json::Value) -> String {
    let Some(list) = cubins.as_array().filter(|a| !a.is_empty()) else {
        return ", NVRTC at run time".into();
    };
    let pairs: Vec<(&str, Vec<u64>)> = list
        .iter()
        .filter_map(|m| {
            let name = m.get(0)?.as_str()?;
            let archs = m
                .get(1)?
                .as_array()?
                .iter()
                .filter_map(|a| a.as_u64())
                .collect();
            Some((name, archs))
        })
        .collect();
    if pairs.is_empty() {
        // A peer's precompiled libraries.
        return ", cubins embedded".into();
    }
    let with: Vec<&(&str, Vec<u64>)> = pairs.iter().filter(|(_, a)| !a.is_empty()).collect();
    if with.is_empty() {
        return ", no cubins embedded: NVRTC at run time".into();
    }
    let mut archs: Vec<u64> = with.iter().flat_map(|(_, a)| a.iter().copied()).collect();
    archs.sort_unstable();
    archs.dedup();
    let archs = archs
        .iter()
        .map(|a| format!("sm_{a}"))
        .collect::<Vec<_>>()
        .join(", ");
    if with.len() == pairs.len() {
        format!(", cubins embedded ({archs})")
    } else {
        let missing: Vec<&str> = pairs
            .iter()
            .filter(|(_, a)| a.is_empty())
            .map(|(n, _)| *n)
            .collect();
        format!(
            ", cubins ({archs}) for {} of {} modules, NVRTC for {}",
            with.len(),
            pairs.len(),
            missing.join(", ")
        )
    }
}

/// The environment lines: commit, CPU, GPU (device, driver, kernel-load path), suite.
pub fn environment(records: &[Record]) -> String {
    let mut md = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for r in records {
        let e = &r.env;
        let gpu = if e.gpu["available"] == true {
            let dev = &e.gpu["device"];
            format!(
                "{} (sm_{}{}, driver API {}, kernels: {}{})",
                dev["name"].as_str().unwrap_or("?"),
                dev["compute_capability"][0],
                dev["compute_capability"][1],
                dev["driver_version"],
                e.gpu["kernel_mode"].as_str().unwrap_or("?"),
                kernel_delivery(&e.gpu["cubins"])
            )
        } else {
            format!(
                "none ({})",
                e.gpu["reason"].as_str().unwrap_or("not available")
            )
        };
        let line = format!(
            "- {} {}: commit `{}`, host `{}`, CPU {} ({} logical CPUs), GPU: {gpu}, suite `{}`",
            r.algorithm.library,
            r.algorithm.version,
            short_commit(&e.commit),
            e.host,
            e.cpu,
            e.cpus,
            r.suite
        );
        if seen.insert(line.clone()) {
            md += &line;
            md += "\n";
        }
    }
    md
}

/// The whole report file.
pub fn full(records: &[Record], command: &str, wall_s: Option<f64>) -> String {
    let mut md = String::from("# weft benchmark report\n\n");
    let _ = writeln!(md, "Reproduce: `{command}`\n");
    if let Some(w) = wall_s {
        let _ = writeln!(md, "Wall time of the whole run: {w:.0} s.\n");
    }
    md += &environment(records);
    md += "\nBuild times exclude the warm-up build (kernel compilation, JIT, first touches), which is reported apart. Graph recall: the first k out-neighbours of 1,000 sampled vertices against their exact k nearest (distance ties credited). Search recall: ids against the prepared ground truth (the same file for every library). QPS at batch = all queries uses the listed threads; batch 1 is one query per call on one thread.\n\n";
    md += &tables(records, Some("plots"), true);
    md
}

/// A file-name-safe stem for a dataset name.
pub fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::sample;

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(file_stem("glove-50d/angular x"), "glove-50d_angular_x");
    }

    #[test]
    fn kernel_delivery_needs_cubins_not_just_modules() {
        use serde_json::json;
        // The records of docs/benchmarks.md's cuVS runs: every module listed, none with a cubin.
        let none = json!([["exact", []], ["gnnd", []]]);
        assert_eq!(
            kernel_delivery(&none),
            ", no cubins embedded: NVRTC at run time"
        );
        let all = json!([["exact", [80, 90]], ["gnnd", [80, 90]]]);
        assert_eq!(kernel_delivery(&all), ", cubins embedded (sm_80, sm_90)");
        let some = json!([["exact", [90]], ["gnnd", []]]);
        assert_eq!(
            kernel_delivery(&some),
            ", cubins (sm_90) for 1 of 2 modules, NVRTC for gnnd"
        );
        assert_eq!(kernel_delivery(&json!(["libcuvs"])), ", cubins embedded");
        assert_eq!(kernel_delivery(&json!(null)), ", NVRTC at run time");
    }

    #[test]
    fn labels_name_f16_searches() {
        let mut w = sample("weft", "cagra", &[]);
        w.algorithm.backend = "gpu".into();
        assert_eq!(label(&w), "weft cagra (gpu)");
        w.algorithm.params["search_precision"] = "f16".into();
        assert_eq!(label(&w), "weft cagra (gpu, f16 traversal)");
        let mut c = sample("cuvs", "cagra", &[]);
        c.algorithm.backend = "gpu".into();
        c.algorithm.params["dtype"] = "f32".into();
        assert_eq!(label(&c), "cuvs cagra (gpu)");
        c.algorithm.params["dtype"] = "f16".into();
        assert_eq!(label(&c), "cuvs cagra (gpu, f16 data)");
    }

    #[test]
    fn tables_list_every_run_and_the_qps_at_targets() {
        let a = sample(
            "weft",
            "nndescent",
            &[(0.85, 5000.0), (0.96, 2000.0), (0.995, 500.0)],
        );
        let mut b = sample("hnswlib", "hnsw", &[(0.9, 3000.0)]);
        b.algorithm.search_param = "ef".into();
        let mut c = sample("weft", "broken", &[]);
        c.error = Some("out of memory | really".into());
        c.build = None;
        let md = tables(&[a, b, c], Some("plots"), true);
        assert!(md.contains("#### tiny"));
        assert!(md.contains("| weft nndescent (cpu) | 2 | 2.00 (1.00-3.00, 3 runs) |"));
        assert!(md.contains("| 2000 | 2000 | 500 |"), "{md}");
        assert!(md.contains("| hnswlib hnsw (cpu) | ef"), "{md}");
        assert!(md.contains("failed: out of memory / really"));
        assert!(md.contains("plots/pareto-tiny.svg"));
        assert!(md.contains("([PNG](plots/pareto-tiny.png))"));
        assert!(!tables(&[], None, false).contains("####"));
        assert_eq!(short_commit("0123456789abcdef-dirty"), "0123456789ab-dirty");
        assert_eq!(short_commit("abc"), "abc");
    }
}
