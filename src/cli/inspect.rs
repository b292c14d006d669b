//! `keet inspect`: the facts and rule findings for every launch in every file; with
//! `--all-metrics`, every raw metric of every launch too (a `metrics` array per launch in JSON, a
//! table sorted by name in text and Markdown).
//!
//! A file that ends early (a report cut off mid-write) still has its complete launches printed;
//! the cut is reported as an error and the exit status is 2, as for any bad input.

use super::args::{JobsArgs, OutputArgs};
use crate::analysis::{self, InspectDocument};
use crate::render::{self, Format};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// `.ncu-rep` files, ncu CSV exports, or directories (searched recursively).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format (text by default; JSON follows the documented `keet.inspect/1` schema).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub jobs: JobsArgs,
    /// List every raw metric of every launch: name, value, unit, raw value and raw unit as stored.
    #[arg(long)]
    pub all_metrics: bool,
}

/// Builds the template context: the document plus each launch's facts as a flat list.
pub fn template_context(doc: &InspectDocument) -> serde_json::Value {
    let mut facts_list = BTreeMap::new();
    for f in &doc.files {
        for l in &f.launches {
            facts_list.insert(format!("{}#{}", f.path.display(), l.id), l.facts.all());
        }
    }
    let mut v = serde_json::to_value(doc).expect("analysis serialises");
    v["facts_list"] = serde_json::to_value(facts_list).expect("facts serialise");
    v
}

pub fn run(a: InspectArgs) -> anyhow::Result<i32> {
    let all_metrics = a.all_metrics;
    let doc = analysis::inspect(&a.paths, a.jobs.jobs, all_metrics)?;
    let bad_input = !doc.errors.is_empty();
    let format = a.format.unwrap_or(Format::Text);
    let mut out = match format {
        Format::Json => render::json(&doc)?,
        Format::Md => render::render("inspect.md", &template_context(&doc))?,
        Format::Text | Format::Html => render::render("inspect.txt", &template_context(&doc))?,
        Format::Context => {
            eprintln!("error: inspect prints facts; --format context is for `keet explain` (add --no-llm for the rule layer alone) and `keet compare`");
            return Ok(2);
        }
    };
    if all_metrics && format != Format::Json {
        out.push_str(&metrics_tables(&doc, format == Format::Md));
    }
    a.output.write(&out)?;
    for e in &doc.errors {
        eprintln!("error: {}", e.message);
    }
    if bad_input {
        // Bad input: exit 2 as documented (other files were still reported).
        return Ok(2);
    }
    Ok(0)
}

/// The `--all-metrics` tables for text and Markdown: per launch, every metric sorted by name with
/// its value, unit, raw value and raw unit.
pub fn metrics_tables(doc: &InspectDocument, markdown: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for f in &doc.files {
        for l in &f.launches {
            let Some(rows) = &l.metrics else { continue };
            let value = |r: &analysis::MetricRow| match &r.value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), |f| f.to_string()),
                serde_json::Value::Null => r.raw_value.clone(),
                v => v.to_string(),
            };
            let cells: Vec<[String; 5]> =
                rows.iter().map(|r| [r.name.clone(), value(r), r.unit.clone(), r.raw_value.clone(), r.raw_unit.clone()]).collect();
            let head = ["metric", "value", "unit", "raw value", "raw unit"];
            let _ = writeln!(
                out,
                "\n{}{}#{} {}: {} metric(s)\n",
                if markdown { "### " } else { "== " },
                f.path.display(),
                l.id,
                l.name,
                rows.len()
            );
            if markdown {
                let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
                let _ = writeln!(out, "| {} |", head.join(" | "));
                let _ = writeln!(out, "|---|---:|---|---:|---|");
                for c in &cells {
                    let _ = writeln!(out, "| {} |", c.iter().map(|s| esc(s)).collect::<Vec<_>>().join(" | "));
                }
            } else {
                // Column widths; a long text value (ncu's `breakdown:` lists) overflows its column
                // instead of widening it for every row.
                const MAX_VALUE_WIDTH: usize = 24;
                let mut w = head.map(str::len);
                for c in &cells {
                    for (i, s) in c.iter().enumerate() {
                        let n = s.chars().count();
                        if !(i == 1 || i == 3) || n <= MAX_VALUE_WIDTH {
                            w[i] = w[i].max(n);
                        }
                    }
                }
                let line = |c: &[&str]| {
                    let mut s = String::new();
                    for (i, v) in c.iter().enumerate() {
                        let pad = w[i].saturating_sub(v.chars().count());
                        // Numbers right-aligned, text left-aligned.
                        if i == 1 || i == 3 {
                            let _ = write!(s, "{}{}  ", " ".repeat(pad), v);
                        } else {
                            let _ = write!(s, "{}{}  ", v, " ".repeat(pad));
                        }
                    }
                    s.trim_end().to_string()
                };
                let _ = writeln!(out, "{}", line(&head));
                for c in &cells {
                    let _ = writeln!(out, "{}", line(&c.each_ref().map(String::as_str)));
                }
            }
        }
    }
    out
}
