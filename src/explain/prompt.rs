//! Prompts: the minijinja templates in `prompts/` (embedded at build time), rendered with one
//! kernel's identity, salient facts (values and units) and the rule layer's findings.

use super::report::{KernelGroup, SourceLine};
use super::schema;
use crate::validate::Context;
use minijinja::Environment;
use serde_json::json;

const SYSTEM: &str = include_str!("../../prompts/system.jinja");
const KERNEL: &str = include_str!("../../prompts/kernel.jinja");
const REPAIR: &str = include_str!("../../prompts/repair.jinja");
const PROSE_REPAIR: &str = include_str!("../../prompts/prose-repair.jinja");
const CHOOSE: &str = include_str!("../../prompts/choose.jinja");

/// sha256 of the prompt templates and the prose gate's files (part of every cache key).
pub fn templates_sha256() -> String {
    crate::cache::sha256_hex(format!("{SYSTEM}\0{KERNEL}\0{REPAIR}\0{PROSE_REPAIR}\0{CHOOSE}\0{}", crate::prose::files_sha256()).as_bytes())
}

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env
}

/// The system prompt; `mode` is the prose mode (`free`, `guided`, `choose`): the latter two carry a
/// worked example.
pub fn system(mode: &str) -> Result<String, minijinja::Error> {
    env().render_str(SYSTEM, json!({ "mode": mode }))
}

/// The re-ask after sentences failed the prose gate: `fails` are (field, text, reasons).
pub fn prose_repair(category: &str, topic: &[String], fails: &[(String, String, Vec<String>)]) -> Result<String, minijinja::Error> {
    let fails: Vec<_> = fails.iter().map(|(f, t, r)| json!({"field": f, "text": t, "reasons": r})).collect();
    env().render_str(PROSE_REPAIR, json!({ "category": category, "topic": topic.iter().take(8).collect::<Vec<_>>(), "fails": fails }))
}

/// One stall cause `--prose choose` offers (`prompts/choose.jinja`).
pub fn stall_cause(reason: &str, hint: &str) -> Result<String, minijinja::Error> {
    Ok(env().render_str(CHOOSE, json!({ "reason": reason, "hint": hint }))?.trim().to_string())
}

/// The user message for one kernel.
pub fn kernel(ctx: &Context, group: &KernelGroup, lines: &[SourceLine], max_findings: usize) -> Result<String, minijinja::Error> {
    let l = ctx.launch;
    let dims = |d: Option<[u64; 3]>| d.map(|d| format!("({}, {}, {})", d[0], d[1], d[2]));
    let mut metrics: Vec<schema::Citable> = Vec::new();
    let mut findings = Vec::new();
    let mut seen = Vec::new();
    for r in ctx.rules {
        if seen.contains(&r.category) {
            continue;
        }
        seen.push(r.category);
        let cites = schema::citables(ctx, r.category);
        findings.push(json!({
            "category": r.category.as_str(),
            "severity": r.severity,
            "claim": r.claim,
            "metrics": cites.iter().map(|c| c.metric.clone()).collect::<Vec<_>>(),
        }));
        for c in cites {
            if !metrics.iter().any(|m| m.metric == c.metric) {
                metrics.push(c);
            }
        }
    }
    let metrics: Vec<_> = metrics
        .iter()
        .map(|c| json!({"label": c.label, "metric": c.metric, "value": serde_json::Value::from(c.value).to_string(), "unit": c.unit}))
        .collect();
    let bound = ctx.facts.bound.as_ref().map(|b| {
        let mut s = serde_json::to_value(b.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        if let Some(u) = b.busiest_unit {
            s.push_str(&format!(", busiest unit {u}"));
        }
        s
    });
    let source_lines: Vec<_> = lines
        .iter()
        .take(5)
        .map(|s| {
            json!({
                "location": match (&s.file, s.line) { (Some(f), Some(n)) => format!("{f}:{n}"), (None, Some(n)) => format!("line {n}"), _ => "sass".into() },
                "text": s.text.trim(),
            })
        })
        .collect();
    let data = json!({
        "kernel": {
            "name": l.name,
            "grid": dims(l.grid_size),
            "block": dims(l.block_size),
            "launches": group.launches,
            "duration": ctx.facts.duration_ns.as_ref().map(|d| crate::render::human_duration(d.value)),
            "share": format!("{:.1}%", group.time_share_pct),
            "bound": bound,
        },
        "metrics": metrics,
        "findings": findings,
        "source_lines": source_lines,
        "max_findings": max_findings,
    });
    env().render_str(KERNEL, data)
}

/// The re-ask message after a finding failed validation.
pub fn repair(reasons: &[String]) -> Result<String, minijinja::Error> {
    env().render_str(REPAIR, json!({ "reasons": reasons }))
}
