//! `weft search` never throws its results away: with --out it writes the ids and, beside them,
//! the distances; without --out it prints both.

mod common;

use common::{fails_with, ok_json, ok_text, p};
use weft::io::{ReadOptions, read, read_ids};

/// A 500-point SIFT-like set, its 7 queries and an RNN-Descent graph of it.
fn setup(d: &std::path::Path) -> (String, String, String) {
    common::sift_rnndescent(d, 500, 7)
}

fn search_args<'a>(base: &'a str, queries: &'a str, graph: &'a str) -> Vec<&'a str> {
    vec![
        "search",
        "--data",
        base,
        "--graph",
        graph,
        "--queries",
        queries,
        "-k",
        "5",
        "--backend",
        "cpu",
        "--beam",
        "32",
    ]
}

#[test]
fn results_are_written_ids_beside_distances_or_printed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = setup(d);
    // No --out: the results are the output, the same as those written with --out.
    let printed = ok_json(&search_args(&base, &queries, &graph));
    let ids = printed["ids"].as_array().unwrap();
    let dists = printed["distances"].as_array().unwrap();
    assert_eq!((ids.len(), dists.len()), (7, 7));
    assert!(ids.iter().all(|r| r.as_array().unwrap().len() == 5));
    let text = ok_text(&search_args(&base, &queries, &graph));
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(lines.len(), 7, "{text}");
    let first: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(first[0], "0:");
    assert_eq!(first.len(), 6, "{text}");
    assert_eq!(
        first[1],
        format!("{}:{}", ids[0][0], dists[0][0].as_f64().unwrap() as f32)
    );

    for (out, dists_file) in [
        ("r.ivecs", "r.dists.fvecs"),
        ("r.ibin", "r.dists.fbin"),
        ("r.npy", "r.dists.npy"),
    ] {
        let mut a = search_args(&base, &queries, &graph);
        let out = p(d, out);
        a.extend(["--out", &out]);
        let j = ok_json(&a);
        assert!(j.get("ids").is_none(), "written, not printed");
        assert_eq!(j["distances_out"], p(d, dists_file));
        let written_ids = read_ids(&out, None).unwrap();
        let written: weft::Dataset<f32> =
            read(p(d, dists_file), &ReadOptions::default().with_mmap(false)).unwrap();
        assert_eq!((written.rows(), written.dim()), (7, 5));
        for q in 0..7 {
            let want: Vec<u32> = ids[q]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(&written_ids.as_slice()[q * 5..q * 5 + 5], &want[..]);
            let want_d: Vec<f32> = dists[q]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            assert_eq!(written.row(q), &want_d[..]);
            assert!(written.row(q).windows(2).all(|w| w[0] <= w[1]));
        }
    }

    // An explicit distance file, and the ones refused before anything is searched.
    let mut a = search_args(&base, &queries, &graph);
    let (out, named) = (p(d, "s.ivecs"), p(d, "named.fbin"));
    a.extend(["--out", &out, "--distances-out", &named]);
    assert_eq!(ok_json(&a)["distances_out"], named);
    let mut bad = search_args(&base, &queries, &graph);
    let wrong = p(d, "d.ivecs");
    bad.extend(["--out", &out, "--distances-out", &wrong]);
    fails_with(&bad, &["--distances-out", "fvecs, fbin or npy"]);
    let mut same = search_args(&base, &queries, &graph);
    let npy = p(d, "x.npy");
    same.extend(["--out", &npy, "--distances-out", &npy]);
    fails_with(&same, &["--distances-out", "--out file"]);
    let mut over = search_args(&base, &queries, &graph);
    over.extend(["--out", &out, "--distances-out", &base]);
    fails_with(&over, &["--distances-out", "same file as --data"]);
    let mut alone = search_args(&base, &queries, &graph);
    alone.extend(["--distances-out", &named]);
    fails_with(&alone, &["--out"]);
}
