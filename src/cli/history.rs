//! `keet history` (list past analyses kept in the cache) and `keet show ID` (print one again,
//! without the profile or the model). `show` prints the stored single-kernel explain report with
//! the kernel marked `cached` and `cache_id = ID`, as JSON or rendered by the explain templates
//! through the same template context as `keet explain`
//! ([`crate::render::explain_view`]: the report's JSON is all either needs; the typed report is
//! serialise-only). Neither command creates a cache file.

use super::args::{CacheFileArg, OutputArgs};
use crate::cache::{Cache, CacheError, HistoryRow};
use anyhow::Context;

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
    #[command(flatten)]
    pub cache: CacheFileArg,
    /// Show at most this many analyses, newest first (0: all).
    #[arg(long, short = 'n', default_value_t = 20)]
    pub limit: usize,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = HistoryFormat::Text)]
    pub format: HistoryFormat,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The analysis id (first column of `keet history`).
    pub id: i64,
    #[command(flatten)]
    pub cache: CacheFileArg,
    /// Output format (json: the stored `keet.explain/2` report, marked as coming from the cache).
    #[arg(long, short = 'f', value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
    #[command(flatten)]
    pub output: OutputArgs,
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
    let path = a.cache.path();
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
    a.output.write(&out)?;
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
    let path = a.cache.path();
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
        ShowFormat::Text => render_stored("explain.txt", &report)?,
        ShowFormat::Md => render_stored("explain.md", &report)?,
    };
    a.output.write(&out)?;
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

/// Renders the stored report with an explain template through the explain templates' own context
/// ([`crate::render::explain_view::template_context_from_json`], the one `keet explain` uses).
pub fn render_stored(template: &str, report: &serde_json::Value) -> anyhow::Result<String> {
    let ctx = crate::render::explain_view::template_context_from_json(report);
    let mut out = crate::templating::report_environment()
        .get_template(template)
        .and_then(|t| t.render(minijinja::Value::from_serialize(ctx)))
        .map_err(|source| crate::render::RenderError::Template { name: template.into(), source })
        .with_context(|| format!("rendering the stored report with {template}"))?;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
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
