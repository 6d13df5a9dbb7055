//! Issue 19: `shard_schedule=nearest` failed with serde's words ("invalid type: unit variant,
//! expected newtype variant") that named neither the parameter nor its values. A bad JSON
//! parameter is now an `InvalidParams` naming the parameter, and for an enum its accepted values.

use weft::io::Preset;
use weft::{AnyDataset, BuildCtx, Error, Index, Metric};

fn refusal(algorithm: &str, params: serde_json::Value, k: Option<usize>) -> (String, String) {
    let data: AnyDataset = Preset::Sift.generator(1).unwrap().base(100).unwrap().into();
    match Index::build(
        data,
        Metric::L2Squared,
        algorithm,
        &params,
        k,
        &BuildCtx::new(0),
    ) {
        Err(Error::InvalidParams { name, reason }) => (name, reason),
        other => panic!(
            "{algorithm} {params}: expected InvalidParams, got {:?}",
            other.err()
        ),
    }
}

#[test]
fn a_bad_enum_parameter_names_itself_and_its_values() {
    for bad in [
        serde_json::json!("nearest"),
        serde_json::json!("bogus"),
        serde_json::json!({"nearest": "x"}),
        serde_json::json!(3),
    ] {
        let (name, reason) = refusal(
            "nndescent",
            serde_json::json!({ "shard_schedule": bad, "max_iters": 3 }),
            Some(8),
        );
        assert_eq!(name, "shard_schedule", "{bad}");
        for needle in ["`auto`", "`all_pairs`", "{\"nearest\": M}"] {
            assert!(reason.contains(needle), "{bad}: {reason}");
        }
        assert!(!reason.contains("variant"), "{bad}: {reason}");
    }
    // A unit enum: serde's message lists the variants; the parameter is named.
    let (name, reason) = refusal(
        "rnndescent",
        serde_json::json!({ "update_order": "bogus" }),
        None,
    );
    assert_eq!(name, "update_order");
    assert!(
        reason.contains("`random`") && reason.contains("`ascending`"),
        "{reason}"
    );
    // A wrong type elsewhere names that parameter, not `params`.
    let (name, _) = refusal("rnndescent", serde_json::json!({ "rho": "abc" }), None);
    assert_eq!(name, "rho");
}
