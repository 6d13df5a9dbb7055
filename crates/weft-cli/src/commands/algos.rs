//! `weft algos`.

use anyhow::Result;
use weft::Registry;
use weft::registry::PLANNED;

use super::Report;
use crate::progress::Session;

/// Arguments of `weft algos`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Lists the registered algorithms and the planned ones.
pub fn run(_args: &Args, _s: &Session) -> Result<Report> {
    let list = Registry::available().list();
    let mut text = String::from("algorithms in this build:\n");
    for a in &list {
        text += &format!(
            "  {:<12} {:<4} {:<13} {}\n      defaults: {}\n",
            a.name,
            a.backend.name(),
            format!("{:?}", a.produces),
            a.description,
            a.default_params
        );
    }
    text += "not available yet:\n";
    for (name, why) in PLANNED {
        text += &format!("  {name:<12} {why}\n");
    }
    let planned: Vec<_> = PLANNED
        .iter()
        .map(|(n, w)| serde_json::json!({"name": n, "status": w}))
        .collect();
    Ok(Report {
        json: serde_json::json!({ "algorithms": list, "planned": planned }),
        text,
    })
}
