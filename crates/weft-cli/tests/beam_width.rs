//! Issue 17 item 4: one name for the list size. `--beam-width` on `weft search` and `weft eval`,
//! `--beam` kept as its alias (the same results), `beam_width` in the JSON output, and no
//! separate GPU list size (`--itopk` is refused by clap with a clear error).

mod common;

use common::{fails_with, graph_cmd, ok_json, ok_text, p};

/// `weft search` of a 600-point SIFT-like set's 9 queries on the CPU, with `extra` options.
fn search(base: &str, queries: &str, graph: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = graph_cmd(
        "search",
        base,
        graph,
        queries,
        &["-k", "10", "--backend", "cpu"],
    );
    args.extend_from_slice(extra);
    ok_json(&args)
}

#[test]
fn beam_width_and_its_alias_beam_give_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = common::sift_rnndescent(d, 600, 9);
    let named = search(&base, &queries, &graph, &["--beam-width", "24"]);
    let alias = search(&base, &queries, &graph, &["--beam", "24"]);
    assert_eq!(named["beam_width"], 24);
    assert_eq!(alias["beam_width"], 24);
    assert!(named.get("beam").is_none(), "{named}");
    assert_eq!(named["ids"], alias["ids"]);
    assert_eq!(named["distances"], alias["distances"]);
    assert_eq!(named["mode"], "beam search, beam width 24");
    // The search registry's name of the search that ran.
    assert_eq!(named["search"], "beam", "{named}");
    // A different width is a different search (the option is not ignored).
    let wide = search(&base, &queries, &graph, &["--beam-width", "96"]);
    assert_eq!(wide["beam_width"], 96);

    // eval: the same sweep under either name, reported as `beam_width`.
    let eval = |flag: &str| {
        ok_json(&graph_cmd(
            "eval",
            &base,
            &graph,
            &queries,
            &["-k", "10", flag, "16,32", "--runs", "1", "--backend", "cpu"],
        ))
    };
    let (named, alias) = (eval("--beam-width"), eval("--beam"));
    for e in [&named, &alias] {
        let widths: Vec<u64> = e["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["beam_width"].as_u64().unwrap())
            .collect();
        assert_eq!(widths, [16, 32]);
    }
    let recalls = |e: &serde_json::Value| -> Vec<f64> {
        e["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["recall"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(recalls(&named), recalls(&alias));
}

#[test]
fn itopk_is_gone_and_help_names_the_alias() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = (p(d, "b.fbin"), p(d, "q.fbin"), p(d, "g.wgraph"));
    for cmd in ["search", "eval"] {
        // Refused while parsing the arguments, before any file is read.
        let err = fails_with(
            &graph_cmd(cmd, &base, &graph, &queries, &["--itopk", "32"]),
            &["--itopk"],
        );
        assert!(err.contains("unexpected argument"), "{err}");
        let help = ok_text(&[cmd, "--help"]);
        assert!(help.contains("--beam-width"), "{help}");
        assert!(help.contains("--beam"), "{help}");
        assert!(help.contains("alias: --beam"), "{help}");
        assert!(!help.contains("itopk"), "{help}");
    }
}
