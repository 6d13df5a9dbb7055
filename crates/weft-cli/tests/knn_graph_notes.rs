//! A k-NN graph (nndescent, exact) is not a search graph: `build`, `search`, `eval` and `demo`
//! say so in their text and JSON, and say where its searches start (entry points spread over the
//! data); a search graph gets none of these notes.

mod common;

use common::{ok_json, ok_text, p};

const NOT_SEARCH_GRAPH: &str = "k-NN graph, not a search graph";
const SPREAD_LINE: &str =
    "no entry points stored; searching from 256 entry points spread over the data";

#[test]
fn knn_graphs_are_marked_and_search_graphs_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, knn, exact, rnnd) = (
        p(d, "b.fbin"),
        p(d, "b.queries.fbin"),
        p(d, "knn.wgraph"),
        p(d, "exact.wgraph"),
        p(d, "rnnd.wgraph"),
    );
    ok_json(&[
        "gen",
        "--preset",
        "deep",
        "-n",
        "600",
        "--queries",
        "12",
        "--seed",
        "4",
        "--out",
        &base,
    ]);

    // build: text and JSON say a k-NN graph is not a search graph.
    let build = |algo: &str, k: Option<&str>, out: &str| {
        let mut a = vec!["build", "--algo", algo, "--data", &base, "--out", out];
        if let Some(k) = k {
            a.extend(["-k", k]);
        }
        (ok_json(&a), ok_text(&a))
    };
    for (algo, out) in [("nndescent", &knn), ("exact", &exact)] {
        let (j, text) = build(algo, Some("8"), out);
        assert_eq!(j["graph_kind"], "knn", "{algo}");
        assert_eq!(j["search_graph"], false, "{algo}");
        let note = j["note"].as_str().unwrap();
        assert!(
            note.contains(NOT_SEARCH_GRAPH)
                && note.contains("no connectivity repair")
                && note.contains("cagra, rnndescent, grnnd or ggnn"),
            "{note}"
        );
        assert_eq!(j["entry_points"]["source"], "spread");
        assert_eq!(j["entry_points"]["count"], 256);
        assert_eq!(j["stats"]["entry_points"].as_array().unwrap().len(), 256);
        assert!(text.contains(NOT_SEARCH_GRAPH), "{text}");
        assert!(
            text.contains("reachable from the 256 entry points a search spreads over the data"),
            "{text}"
        );
    }
    let (j, text) = build("rnndescent", None, &rnnd);
    assert_eq!(j["graph_kind"], "fixed");
    assert_eq!(j["search_graph"], true);
    assert!(j.get("note").is_none());
    assert_eq!(j["entry_points"]["source"], "graph");
    assert!(j["entry_points"].get("seed").is_none());
    assert!(!text.contains(NOT_SEARCH_GRAPH), "{text}");
    assert!(text.contains("reachable from the entry points,"), "{text}");

    // search: a line and a field saying where the searches start.
    let search = |graph: &str, extra: &[&str]| {
        let mut a = vec![
            "search",
            "--data",
            &base,
            "--graph",
            graph,
            "--queries",
            &queries,
            "--backend",
            "cpu",
        ];
        a.extend_from_slice(extra);
        (ok_json(&a), ok_text(&a))
    };
    let (j, text) = search(&knn, &[]);
    assert_eq!(j["graph_kind"], "knn");
    assert_eq!(j["search_graph"], false);
    assert_eq!(j["entry_points"]["source"], "spread");
    assert_eq!(j["entry_points"]["count"], 256);
    assert_eq!(j["entry_points"]["seed"], 0);
    assert!(
        text.contains(&format!("{NOT_SEARCH_GRAPH}: {SPREAD_LINE}"))
            && text.contains("not connectivity-repaired"),
        "{text}"
    );
    let (j, text) = search(&knn, &["--seed", "3"]);
    assert_eq!(j["entry_points"]["seed"], 3);
    assert!(text.contains("(seed 3,"), "{text}");
    let (j, text) = search(&knn, &["--exact"]);
    assert_eq!(j["graph_kind"], "knn");
    assert!(j["entry_points"].is_null());
    assert!(!text.contains(SPREAD_LINE), "{text}");
    let (j, text) = search(&rnnd, &[]);
    assert_eq!(j["graph_kind"], "fixed");
    assert_eq!(j["search_graph"], true);
    assert_eq!(j["entry_points"]["source"], "graph");
    assert!(!text.contains(SPREAD_LINE) && !text.contains(NOT_SEARCH_GRAPH));

    // eval: the same.
    let eval = |graph: &str| {
        let a = [
            "eval",
            "--data",
            &base,
            "--graph",
            graph,
            "--queries",
            &queries,
            "--beam",
            "10,32",
            "--runs",
            "1",
            "--backend",
            "cpu",
        ];
        (ok_json(&a), ok_text(&a))
    };
    let (j, text) = eval(&knn);
    assert_eq!(j["graph_kind"], "knn");
    assert_eq!(j["search_graph"], false);
    assert_eq!(j["entry_points"]["source"], "spread");
    assert_eq!(j["entry_points"]["count"], 256);
    assert!(text.contains(SPREAD_LINE), "{text}");
    // A 600-row deep-like set is not clustered: spread entry points find the neighbours.
    assert!(j["points"][1]["recall"].as_f64().unwrap() >= 0.9, "{j}");
    let (j, text) = eval(&rnnd);
    assert_eq!(j["graph_kind"], "fixed");
    assert_eq!(j["entry_points"]["source"], "graph");
    assert!(!text.contains(SPREAD_LINE) && !text.contains(NOT_SEARCH_GRAPH));
}

#[test]
fn demo_marks_knn_graph_rows() {
    let a = [
        "demo",
        "-n",
        "500",
        "--queries",
        "10",
        "--algos",
        "exact,nndescent,rnndescent",
        "--backend",
        "cpu",
    ];
    let j = ok_json(&a);
    let rows = j["results"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["algorithm"] == name)
            .unwrap_or_else(|| panic!("no {name} row in {j}"))
    };
    for name in ["exact", "nndescent"] {
        let r = row(name);
        assert_eq!(r["graph_kind"], "knn", "{name}");
        assert_eq!(r["search_graph"], false, "{name}");
        assert!(r["note"].as_str().unwrap().contains(NOT_SEARCH_GRAPH));
    }
    // The exact row is searched exhaustively; the nndescent one from spread entry points.
    assert!(row("exact")["entry_points"].is_null());
    assert_eq!(row("nndescent")["entry_points"]["source"], "spread");
    assert_eq!(row("nndescent")["entry_points"]["count"], 256);
    let r = row("rnndescent");
    assert_eq!(r["graph_kind"], "fixed");
    assert_eq!(r["search_graph"], true);
    assert!(r.get("note").is_none());
    assert_eq!(r["entry_points"]["source"], "graph");

    let text = ok_text(&a);
    assert!(
        text.contains(&format!("nndescent (cpu), {NOT_SEARCH_GRAPH}:"))
            && text.contains(&format!("exact (cpu), {NOT_SEARCH_GRAPH}:"))
            && text.contains("searched from 256 entry points spread over the data"),
        "{text}"
    );
    assert!(text.contains("rnndescent (cpu): built"), "{text}");
}
