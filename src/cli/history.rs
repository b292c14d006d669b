//! `keet history` (list past analyses kept in the cache) and `keet show ID` (print one again,
//! without the profile or the model). `show` prints the stored single-kernel explain report with
//! the kernel marked `cached` and `cache_id = ID`, rendered by the explain templates exactly as
//! `keet explain` renders it (text, md) or as JSON. Neither command creates a cache file.

use crate::cache::{Cache, CacheError, HistoryRow};
use anyhow::Context;
use std::path::PathBuf;

/// JSON schema tag of `keet history --format json`.
pub const HISTORY_SCHEMA: &str = "keet.history/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShowFormat {
    Text,
    Md,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Only analyses whose file, kernel, model or verdict contains this text (case-insensitive).
    pub filter: Option<String>,
    /// The cache file (default: keet's cache dir, `analyses.sqlite3`).
    #[arg(long, env = "KEET_CACHE", value_name = "PATH")]
    pub cache: Option<PathBuf>,
    /// Show at most this many analyses, newest first (0: all).
    #[arg(long, short = 'n', default_value_t = 20)]
    pub limit: usize,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = HistoryFormat::Text)]
    pub format: HistoryFormat,
    /// Write to this file instead of standard output (written atomically).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The analysis id (first column of `keet history`).
    pub id: i64,
    /// The cache file (default: keet's cache dir, `analyses.sqlite3`).
    #[arg(long, env = "KEET_CACHE", value_name = "PATH")]
    pub cache: Option<PathBuf>,
    /// Output format (json: the stored `keet.explain/2` report, marked as coming from the cache).
    #[arg(long, short = 'f', value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
    /// Write to this file instead of standard output (written atomically).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

fn cache_path(arg: Option<PathBuf>) -> PathBuf {
    arg.filter(|p| !p.as_os_str().is_empty()).unwrap_or_else(crate::cache::default_cache_path)
}

/// Opens an existing cache; a file that is not a keet cache (or is from a newer keet) is bad
/// input: reported and mapped to exit code 2.
fn open(path: &std::path::Path) -> Result<Result<Option<Cache>, i32>, anyhow::Error> {
    match Cache::open_existing(path) {
        Ok(c) => Ok(Ok(c)),
        Err(e @ (CacheError::NotACache { .. } | CacheError::NewerSchema { .. })) => {
            eprintln!("error: {e}");
            Ok(Err(2))
        }
        Err(e) => Err(e.into()),
    }
}

pub fn run_history(a: HistoryArgs) -> anyhow::Result<i32> {
    let path = cache_path(a.cache);
    let cache = match open(&path)? {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let limit = (a.limit > 0).then_some(a.limit);
    let rows = match &cache {
        Some(c) => c.history(limit, a.filter.as_deref())?,
        None => vec![],
    };
    let out = match a.format {
        HistoryFormat::Json => crate::render::json(&serde_json::json!({
            "schema": HISTORY_SCHEMA,
            "cache": path,
            "analyses": rows,
        }))?,
        HistoryFormat::Text => {
            if cache.is_none() {
                format!("No analyses yet ({} does not exist).\n", path.display())
            } else if rows.is_empty() {
                match &a.filter {
                    Some(f) => format!("No analyses match \"{f}\" in {}.\n", path.display()),
                    None => format!("No analyses in {}.\n", path.display()),
                }
            } else {
                history_table(&rows)
            }
        }
    };
    super::write_output(a.output.as_deref(), &out)?;
    Ok(0)
}

/// Shortens `s` to `n` characters (whitespace runs collapsed), marking the cut with "...".
fn clip(s: &str, n: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > n {
        format!("{}...", s.chars().take(n.saturating_sub(3)).collect::<String>())
    } else {
        s
    }
}

/// The text table: id, date (UTC, to the minute), model, verdict, kernel, file.
pub fn history_table(rows: &[HistoryRow]) -> String {
    let header = ["ID", "DATE (UTC)", "MODEL", "VERDICT", "KERNEL", "FILE"];
    let table: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let date = r.created_utc.get(..16).unwrap_or(&r.created_utc).replace('T', " ");
            [r.id.to_string(), date, clip(&r.meta.model, 24), clip(&r.meta.verdict, 56), clip(&r.meta.kernel, 40), r.meta.file.clone()]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 6]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i == 0 {
                l.push_str(&format!("{cell:>w$}"));
            } else if i == 5 {
                l.push_str(&format!("  {cell}"));
            } else {
                l.push_str(&format!("  {cell:<w$}"));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &table {
        line([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]]);
    }
    out
}

pub fn run_show(a: ShowArgs) -> anyhow::Result<i32> {
    let path = cache_path(a.cache);
    let cache = match open(&path)? {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!("error: no analysis with id {} ({} does not exist; run `keet explain` first)", a.id, path.display());
            return Ok(2);
        }
        Err(code) => return Ok(code),
    };
    let Some(entry) = cache.show(a.id)? else {
        eprintln!("error: no analysis with id {} in {} (see `keet history`)", a.id, path.display());
        return Ok(2);
    };
    let mut report: serde_json::Value = serde_json::from_str(&entry.report_json)
        .with_context(|| format!("cache {}: analysis {} holds an unreadable report", path.display(), a.id))?;
    mark_cached(&mut report, entry.id);
    let out = match a.format {
        ShowFormat::Json => crate::render::json(&report)?,
        ShowFormat::Text => render_or_json("explain.txt", &report)?,
        ShowFormat::Md => render_or_json("explain.md", &report)?,
    };
    super::write_output(a.output.as_deref(), &out)?;
    Ok(0)
}

/// The stored report is what `keet explain` computed; shown again it comes from the cache, as
/// entry `id` (the fields `keet explain` sets on a cache hit).
pub fn mark_cached(report: &mut serde_json::Value, id: i64) {
    if let Some(kernels) = report.get_mut("kernels").and_then(|k| k.as_array_mut()) {
        for k in kernels.iter_mut().filter(|k| k.is_object()) {
            k["cached"] = serde_json::Value::Bool(true);
            k["cache_id"] = serde_json::Value::from(id);
        }
    }
}

fn is_fact(v: &serde_json::Value) -> bool {
    v.get("key").is_some_and(|k| k.is_string()) && v.get("value").is_some() && v.get("evidence").is_some_and(|e| e.is_array())
}

/// Every fact in a serialised [`crate::facts::Facts`], in [`crate::facts::Facts::all`] order: the
/// top-level facts, the roofline's, the occupancy limit's, the stalls'; then any other fact
/// found deeper (a newer report's additions).
pub fn facts_list(facts: &serde_json::Value) -> Vec<serde_json::Value> {
    use serde_json::Value;
    let mut out: Vec<Value> = vec![];
    let Some(obj) = facts.as_object() else { return out };
    out.extend(obj.values().filter(|v| is_fact(v)).cloned());
    if let Some(r) = obj.get("roofline").and_then(Value::as_object) {
        out.extend(r.values().filter(|v| is_fact(v)).cloned());
    }
    if let Some(f) = obj.get("occupancy_limit").and_then(|o| o.get("blocks_per_sm")).filter(|v| is_fact(v)) {
        out.push(f.clone());
    }
    for s in obj.get("stalls").and_then(Value::as_array).into_iter().flatten() {
        if let Some(f) = s.get("cycles_per_issue").filter(|v| is_fact(v)) {
            out.push(f.clone());
        }
    }
    fn walk(v: &Value, seen: &mut Vec<Value>) {
        if is_fact(v) {
            if !seen.contains(v) {
                seen.push(v.clone());
            }
            return;
        }
        match v {
            Value::Object(m) => m.values().for_each(|c| walk(c, seen)),
            Value::Array(a) => a.iter().for_each(|c| walk(c, seen)),
            _ => {}
        }
    }
    walk(facts, &mut out);
    out
}

/// The explain templates' context built from a stored report's JSON, as
/// [`crate::render::explain::template_context`] builds it from the typed report: kernels in rank
/// order with `facts_list`, `gain_rank` and `model_findings`, and `totals`. (`chart` is only drawn
/// by the HTML page, which `keet show` does not produce.)
pub fn show_context(report: &serde_json::Value) -> serde_json::Value {
    use serde_json::{json, Value};
    let mut v = report.clone();
    let mut kernels: Vec<Value> = report.get("kernels").and_then(Value::as_array).cloned().unwrap_or_default();
    kernels.sort_by_key(|k| k.get("rank").and_then(Value::as_u64).unwrap_or(u64::MAX));
    let gain = |k: &Value| k.get("estimated_gain_ns").and_then(Value::as_f64).filter(|g| g.is_finite());
    let rank = |k: &Value| k.get("rank").and_then(Value::as_u64).unwrap_or(u64::MAX);
    let mut by_gain: Vec<usize> = (0..kernels.len()).filter(|&i| gain(&kernels[i]).is_some()).collect();
    by_gain.sort_by(|&a, &b| gain(&kernels[b]).unwrap().total_cmp(&gain(&kernels[a]).unwrap()).then(rank(&kernels[a]).cmp(&rank(&kernels[b]))));
    let (mut model, mut rules, mut dropped, mut explained_ns) = (0usize, 0usize, 0usize, 0f64);
    for (i, k) in kernels.iter_mut().enumerate() {
        let gain_rank = by_gain.iter().position(|&j| j == i).map(|p| json!(p + 1)).unwrap_or(Value::Null);
        let facts = k.pointer("/analysis/facts").cloned().unwrap_or(Value::Null);
        let findings = k.get("findings").and_then(Value::as_array).cloned().unwrap_or_default();
        let m = findings.iter().filter(|f| f.get("origin").and_then(Value::as_str) != Some("rules")).count();
        model += m;
        rules += findings.len() - m;
        dropped += k.get("dropped").and_then(Value::as_array).map_or(0, Vec::len);
        if let Some(d) = k.pointer("/kernel/total_duration_ns").and_then(Value::as_f64).filter(|d| d.is_finite()) {
            explained_ns += d;
        }
        if k.is_object() {
            k["facts_list"] = Value::Array(facts_list(&facts));
            k["gain_rank"] = gain_rank;
            k["model_findings"] = json!(m);
        }
    }
    let total = report.get("total_duration_ns").and_then(Value::as_f64).unwrap_or(0.0);
    let share = if total > 0.0 { 100.0 * explained_ns / total } else { 0.0 };
    if v.is_object() {
        v["kernels"] = Value::Array(kernels);
        v["totals"] = json!({
            "model_findings": model,
            "rules_findings": rules,
            "dropped": dropped,
            "explained_ns": explained_ns,
            "explained_share_pct": share,
        });
        v["chart"] = Value::Null;
    }
    v
}

/// Renders the stored report with the explain template (see [`show_context`]); a keet built
/// without that template prints the JSON instead (with a note on standard error).
pub fn render_or_json(template: &str, report: &serde_json::Value) -> anyhow::Result<String> {
    let rendered = crate::render::explain::environment()
        .get_template(template)
        .and_then(|t| t.render(minijinja::Value::from_serialize(show_context(report))))
        .map(|mut s| {
            if !s.ends_with('\n') {
                s.push('\n');
            }
            s
        })
        .map_err(|source| crate::render::RenderError::Template { name: template.into(), source });
    match rendered {
        Ok(s) => Ok(s),
        Err(crate::render::RenderError::Template { source, .. }) if source.kind() == minijinja::ErrorKind::TemplateNotFound => {
            eprintln!("note: no {template} template in this keet; printing the stored JSON");
            Ok(crate::render::json(report)?)
        }
        Err(e) => Err(e).with_context(|| format!("rendering the stored report with {template}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheKey, EntryMeta};

    #[test]
    fn table_aligns_and_clips() {
        let rows = vec![
            HistoryRow {
                id: 12,
                created_utc: "2026-11-22T17:52:14Z".into(),
                key: CacheKey::from_hex("ab"),
                keet_version: "0.1.0".into(),
                meta: EntryMeta {
                    file: "runs/a.ncu-rep".into(),
                    kernel: "void gemm<float, 128, 128>(float const*, float const*, float*, int, int, int)".into(),
                    model: "qwen2.5-coder-1.5b".into(),
                    verdict: "memory: uncoalesced global loads waste 75% of DRAM traffic".into(),
                },
            },
            HistoryRow {
                id: 3,
                created_utc: "2026-11-21T08:00:00Z".into(),
                key: CacheKey::from_hex("cd"),
                keet_version: "0.1.0".into(),
                meta: EntryMeta { file: "b.csv".into(), kernel: "reduce".into(), model: "none".into(), verdict: "latency".into() },
            },
        ];
        let t = history_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("ID  DATE (UTC)"), "{t}");
        assert!(lines[1].starts_with("12  2026-11-22 17:52  qwen2.5-coder-1.5b"), "{t}");
        assert!(lines[2].starts_with(" 3  2026-11-21 08:00  none"), "{t}");
        assert!(lines[1].contains("void gemm<float, 128, 128>(float cons...  "), "{t}");
        assert!(lines[1].ends_with("runs/a.ncu-rep") && lines[2].ends_with("b.csv"), "{t}");
        // Columns line up: the kernel column starts at the same offset on every row.
        let col = lines[0].find("KERNEL").unwrap();
        assert_eq!(&lines[2][col..col + 6], "reduce");
    }
}
