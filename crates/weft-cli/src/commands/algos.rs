//! `weft algos`.

use anyhow::Result;
use weft::GpuStatus;
use weft::registry::{GPU_ONLY, PLANNED};

use super::Report;
use crate::progress::Session;

/// Arguments of `weft algos`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Lists the registered algorithms, the GPU-only ones this machine cannot run, and the planned
/// ones.
pub fn run(_args: &Args, s: &Session) -> Result<Report> {
    let registry = s.registry()?;
    let mut list = registry.list();
    for a in &mut list {
        a.default_params = super::tidy_floats(std::mem::take(&mut a.default_params));
    }
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
    let no_gpu = match registry.gpu() {
        GpuStatus::Unavailable(reason) => Some(reason.clone()),
        #[allow(unreachable_patterns)]
        _ => None,
    };
    let mut needs_gpu = Vec::new();
    if let Some(reason) = &no_gpu {
        let missing: Vec<_> = GPU_ONLY
            .iter()
            .filter(|(name, _)| !list.iter().any(|a| a.name == *name))
            .collect();
        if !missing.is_empty() {
            text += &format!("GPU only, and this machine has no usable GPU ({reason}):\n");
        }
        for (name, what) in missing {
            text += &format!("  {name:<12} {what}\n");
            needs_gpu.push(serde_json::json!({"name": name, "description": what}));
        }
    }
    if !PLANNED.is_empty() {
        text += "not available yet:\n";
    }
    for (name, why) in PLANNED {
        text += &format!("  {name:<12} {why}\n");
    }
    let planned: Vec<_> = PLANNED
        .iter()
        .map(|(n, w)| serde_json::json!({"name": n, "status": w}))
        .collect();
    Ok(Report {
        json: serde_json::json!({
            "algorithms": list,
            "needs_gpu": needs_gpu,
            "gpu_unavailable": no_gpu,
            "planned": planned,
        }),
        text,
    })
}
