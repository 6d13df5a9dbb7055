//! The commands. Each returns a [`Report`]: a JSON document and the same facts for people.

pub mod algos;
pub mod build;
pub mod demo;
pub mod eval;
pub mod gen_cmd;
pub mod gt;
pub mod info;
pub mod search;

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};
use weft::io::ReadOptions;
use weft::{AnyDataset, Metric};

/// A command's result.
pub struct Report {
    /// The machine-readable form (`--json`).
    pub json: Value,
    /// The human-readable form.
    pub text: String,
}

/// Parses a metric name.
pub fn parse_metric(s: &str) -> Result<Metric, String> {
    Metric::from_name(s).ok_or_else(|| format!("unknown metric `{s}` (use l2, ip or cosine)"))
}

/// Reads a vector file of any element type, rejecting NaN/inf unless allowed.
pub fn read_vectors(path: &Path, allow_non_finite: bool) -> Result<AnyDataset> {
    let opts = ReadOptions::new().with_allow_non_finite(allow_non_finite);
    weft::io::read_any(path, &opts)
        .with_context(|| format!("reading vectors from {}", path.display()))
}

/// Builds a parameter object from `--params JSON` and repeated `--param key=value` (values are
/// parsed as JSON when they can be, e.g. `rho=0.5`, `order="random"`, else taken as strings).
pub fn collect_params(params_json: Option<&str>, pairs: &[String]) -> Result<Value> {
    let mut map = match params_json {
        None => Map::new(),
        Some(s) => match serde_json::from_str::<Value>(s).context("--params is not valid JSON")? {
            Value::Object(m) => m,
            other => bail!("--params must be a JSON object, got {other}"),
        },
    };
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--param `{pair}` is not of the form key=value");
        };
        let key = key.trim();
        if key.is_empty() {
            bail!("--param `{pair}` has an empty key");
        }
        let value = serde_json::from_str(value.trim())
            .unwrap_or_else(|_| Value::String(value.trim().to_string()));
        map.insert(key.to_string(), value);
    }
    Ok(Value::Object(map))
}

/// Formats seconds for people.
pub fn secs(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_merge_json_and_pairs() {
        let v = collect_params(
            Some(r#"{"a": 1}"#),
            &["b=0.5".into(), "c=random".into(), "a=2".into()],
        )
        .unwrap();
        assert_eq!(v, serde_json::json!({"a": 2, "b": 0.5, "c": "random"}));
        assert!(collect_params(None, &["nokey".into()]).is_err());
        assert!(collect_params(Some("[1]"), &[]).is_err());
    }
}
