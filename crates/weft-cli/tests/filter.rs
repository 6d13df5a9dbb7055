//! `weft search --filter FILE`: only the listed ids come back (graph search and --exact), the
//! JSON output records the filter; a bad id, a line that is not an id, or a missing file is an
//! error naming --filter, the file and the line.

mod common;

use common::{fails_with, ok_json, ok_text, p};

/// A 600-point SIFT-like set, its 9 queries and an RNN-Descent graph of it.
fn setup(d: &std::path::Path) -> (String, String, String) {
    common::sift_rnndescent(d, 600, 9)
}

#[test]
fn search_returns_only_the_listed_ids() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = setup(d);
    // Every third id, with a comment, a blank line and a repeat.
    let mut text = String::from("# allowed ids\n\n");
    for i in (0..600).step_by(3) {
        text.push_str(&format!("{i}\n"));
    }
    text.push_str("3\n");
    let filter = p(d, "allowed.txt");
    std::fs::write(&filter, text).unwrap();
    for extra in [&["--backend", "cpu", "--beam", "32"][..], &["--exact"][..]] {
        let mut args = vec![
            "search",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "-k",
            "5",
            "--filter",
            &filter,
        ];
        args.extend_from_slice(extra);
        let json = ok_json(&args);
        assert_eq!(json["filter"]["allowed"], 200, "{json}");
        assert_eq!(json["filter"]["n"], 600);
        let ids = json["ids"].as_array().unwrap();
        assert_eq!(ids.len(), 9);
        for row in ids {
            let row: Vec<u64> = row
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(row.len(), 5);
            assert!(row.iter().all(|i| i % 3 == 0), "{row:?}");
        }
        let text = ok_text(&args);
        assert!(text.contains("filter: 200 of 600 ids allowed"), "{text}");
    }
    // Fewer allowed ids than k: padding after them, in the output files too.
    let two = p(d, "two.txt");
    std::fs::write(&two, "7\n11\n").unwrap();
    let json = ok_json(&[
        "search",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "5",
        "--backend",
        "cpu",
        "--filter",
        &two,
    ]);
    let row = json["ids"][0].as_array().unwrap();
    let mut first: Vec<u64> = row[..2].iter().map(|v| v.as_u64().unwrap()).collect();
    first.sort_unstable();
    assert_eq!(first, [7, 11]);
    assert!(
        row[2..].iter().all(|v| v.as_u64() == Some(u32::MAX as u64)),
        "{row:?}"
    );
}

#[test]
fn bad_filter_files_are_errors_naming_the_option_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = setup(d);
    let search = |filter: &str| {
        vec![
            "search".to_string(),
            "--data".into(),
            base.clone(),
            "--graph".into(),
            graph.clone(),
            "--queries".into(),
            queries.clone(),
            "-k".into(),
            "5".into(),
            "--backend".into(),
            "cpu".into(),
            "--filter".into(),
            filter.to_string(),
        ]
    };
    let run = |filter: &str, needles: &[&str]| {
        let args = search(filter);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&args, needles);
    };
    let out_of_range = p(d, "range.txt");
    std::fs::write(&out_of_range, "1\n2\n600\n").unwrap();
    run(
        &out_of_range,
        &["--filter", "line 3", "id 600 is out of range", "600 points"],
    );
    let not_an_id = p(d, "words.txt");
    std::fs::write(&not_an_id, "1\nseven\n").unwrap();
    run(&not_an_id, &["--filter", "line 2", "`seven` is not an id"]);
    let negative = p(d, "neg.txt");
    std::fs::write(&negative, "-4\n").unwrap();
    run(&negative, &["--filter", "line 1", "is not an id"]);
    let binary = p(d, "bin.u32");
    std::fs::write(&binary, [0u8, 0, 0, 0, 255, 254, 0, 1]).unwrap();
    run(&binary, &["--filter", "not a text file"]);
    run(&p(d, "missing.txt"), &["--filter", "missing.txt"]);
}

#[test]
fn eval_measures_filtered_recall_against_filtered_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = setup(d);
    let filter = p(d, "half.txt");
    let text: String = (0..600)
        .filter(|i| i % 2 == 1)
        .map(|i| format!("{i}\n"))
        .collect();
    std::fs::write(&filter, text).unwrap();
    let json = ok_json(&[
        "eval",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "5",
        "--beam",
        "16,64",
        "--runs",
        "1",
        "--backend",
        "cpu",
        "--filter",
        &filter,
    ]);
    assert_eq!(json["filter"]["allowed"], 300, "{json}");
    let points = json["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert!(points[1]["recall"].as_f64().unwrap() >= 0.9, "{json}");
    // The ground truth comes from the filter: --gt cannot be given with it.
    let gt = p(d, "gt.ivecs");
    ok_json(&[
        "gt",
        "--base",
        &base,
        "--queries",
        &queries,
        "-k",
        "5",
        "--out",
        &gt,
    ]);
    fails_with(
        &[
            "eval",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "-k",
            "5",
            "--gt",
            &gt,
            "--filter",
            &filter,
        ],
        &["--filter"],
    );
    // Fewer allowed ids than k.
    let two = p(d, "two.txt");
    std::fs::write(&two, "1\n2\n").unwrap();
    fails_with(
        &[
            "eval",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "-k",
            "5",
            "--filter",
            &two,
        ],
        &["--filter", "fewer than k = 5"],
    );
}
