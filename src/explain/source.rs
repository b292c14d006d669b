//! Source-level pointers: attaches `--page source` exports to their kernels, and picks the
//! source lines (or SASS instructions) that carry the most stall samples or memory traffic, with
//! the text of `--source FILE.cu` when the profile holds line numbers but not the code.

use super::report::{LineCounter, SourceLine};
use crate::profile::{Launch, Profile, SourceFile, SourceKind, SourceView};
use crate::rules::Category;
use std::path::PathBuf;

/// Attaches each source-page profile's view to the launches of the same kernel in the other inputs.
pub fn attach_source_views(mut profiles: Vec<Profile>) -> Vec<Profile> {
    let views: Vec<(String, SourceView)> = profiles
        .iter()
        .filter(|p| p.kind == SourceKind::SourceCsv)
        .flat_map(|p| p.launches.iter().filter_map(|l| l.source.clone().map(|s| (l.name.clone(), s))))
        .collect();
    for (name, view) in views {
        for p in profiles.iter_mut().filter(|p| p.kind != SourceKind::SourceCsv) {
            for l in p.launches.iter_mut().filter(|l| l.name == name || strip_args(&l.name) == name) {
                // A CUDA+SASS view (with line numbers) is preferred over a SASS-only one.
                let better = match &l.source {
                    None => true,
                    Some(old) => old.rows.iter().all(|r| r.line.is_none()) && view.rows.iter().any(|r| r.line.is_some()),
                };
                if better {
                    l.source = Some(view.clone());
                }
            }
        }
    }
    profiles
}

fn strip_args(name: &str) -> &str {
    name.split('(').next().unwrap_or(name).trim()
}

/// The counter column used to rank lines: stall samples first, then executed instructions.
/// The first preferred column that has any counts (a profile without stall samples falls back to
/// executed instructions).
fn pick_column(view: &SourceView) -> Option<usize> {
    let prefs = [
        "Warp Stall Sampling (All Samples)",
        "Warp Stall Sampling",
        "Sampling",
        "L2 Theoretical Sectors Global Excessive",
        "Instructions Executed",
    ];
    for p in prefs {
        if let Some(i) = view.columns.iter().position(|c| c.contains(p)) {
            let total: f64 = view.rows.iter().filter_map(|r| r.values.get(i).copied().flatten()).sum();
            if total > 0.0 {
                return Some(i);
            }
        }
    }
    None
}

/// A line with less than this share of its counter is not worth a reader's attention.
const MIN_HOT_LINE_PCT: f64 = 1.0;

/// The counters a hot line carries, by their column labels on ncu's Source page.
const LINE_COUNTERS: &[&str] = &[
    "Warp Stall Sampling (All Samples)",
    "L2 Theoretical Sectors Global Excessive",
    "L1 Wavefronts Shared Excessive",
    "Instructions Executed",
];

/// One line of a source view: a CUDA line with the counts of all its SASS instructions summed, or
/// one instruction where the view has no lines.
struct LineCounts<'a> {
    file: Option<&'a str>,
    line: Option<u64>,
    text: &'a str,
    values: Vec<f64>,
}

/// The view's rows per source line (file and line) where it has lines, summed; else per row.
fn per_line(view: &SourceView) -> Vec<LineCounts<'_>> {
    let has_lines = view.rows.iter().any(|r| r.line.is_some());
    let mut out: Vec<LineCounts> = Vec::new();
    let mut index: std::collections::HashMap<(Option<&str>, u64), usize> = std::collections::HashMap::new();
    for row in view.rows.iter().filter(|r| !has_lines || r.line.is_some()) {
        let values = (0..view.columns.len()).map(|c| row.values.get(c).copied().flatten().unwrap_or(0.0));
        let key = row.line.map(|line| (row.file.as_deref(), line));
        match key.and_then(|k| index.get(&k)) {
            Some(&at) => out[at].values.iter_mut().zip(values).for_each(|(sum, v)| *sum += v),
            None => {
                if let Some(k) = key {
                    index.insert(k, out.len());
                }
                out.push(LineCounts { file: row.file.as_deref(), line: row.line, text: &row.text, values: values.collect() });
            }
        }
    }
    out
}

/// Up to five hottest lines of a launch's source view (CUDA lines when the view has them, each
/// with its SASS instructions' counts summed). Lines a reader cannot find (no text and no line
/// number) and lines under [`MIN_HOT_LINE_PCT`] of the counter are left out.
pub fn hot_lines(launch: &Launch, source_files: &[PathBuf]) -> Vec<SourceLine> {
    hot_lines_with(launch, source_files, &[])
}

/// [`hot_lines`], with the line texts also taken from the files the report embeds for the launch
/// (`ncu --import-source yes`) when the user gave none.
pub fn hot_lines_with(launch: &Launch, source_files: &[PathBuf], embedded: &[SourceFile]) -> Vec<SourceLine> {
    let Some(view) = &launch.source else { return vec![] };
    let Some(col) = pick_column(view) else { return vec![] };
    let lines = per_line(view);
    let totals: Vec<f64> = (0..view.columns.len()).map(|c| lines.iter().map(|l| l.values[c]).sum()).collect();
    if totals[col] <= 0.0 {
        return vec![];
    }
    let mut ranked: Vec<&LineCounts> = lines.iter().filter(|l| l.values[col] > 0.0).collect();
    ranked.sort_by(|a, b| b.values[col].total_cmp(&a.values[col]));
    let mut texts: Vec<(PathBuf, Vec<String>)> = source_files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok().map(|t| (p.clone(), t.lines().map(String::from).collect())))
        .collect();
    if texts.is_empty() {
        texts = embedded.iter().map(|f| (PathBuf::from(&f.path), f.text.lines().map(String::from).collect())).collect();
    }
    ranked
        .into_iter()
        .filter(|l| 100.0 * l.values[col] / totals[col] >= MIN_HOT_LINE_PCT && (l.line.is_some() || !l.text.trim().is_empty()))
        .take(5)
        .map(|l| SourceLine {
            file: l.file.map(String::from),
            line: l.line,
            text: line_text(l, &texts).trim().to_string(),
            counter: view.columns[col].clone(),
            share_pct: 100.0 * l.values[col] / totals[col],
            counters: line_counters(view, l, &totals),
        })
        .collect()
}

/// The line's text: from the user's file when given (same file name as the profile's, or the only
/// one), else the view's.
fn line_text(l: &LineCounts, texts: &[(PathBuf, Vec<String>)]) -> String {
    let Some(n) = l.line.filter(|n| *n >= 1) else { return l.text.to_string() };
    let hit = texts
        .iter()
        .find(|(p, _)| l.file.is_some_and(|f| p.file_name().is_some_and(|name| f.replace('\\', "/").ends_with(&*name.to_string_lossy()))));
    let hit = hit.or(if texts.len() == 1 { texts.first() } else { None });
    hit.and_then(|(_, lines)| lines.get(n as usize - 1)).cloned().unwrap_or_else(|| l.text.to_string())
}

/// The line's counts of [`LINE_COUNTERS`] that the view has and the line uses.
fn line_counters(view: &SourceView, l: &LineCounts, totals: &[f64]) -> Vec<LineCounter> {
    LINE_COUNTERS
        .iter()
        .filter_map(|label| view.columns.iter().position(|c| c == label))
        .filter(|&c| l.values[c] > 0.0 && totals[c] > 0.0)
        .map(|c| LineCounter { counter: view.columns[c].clone(), value: l.values[c], share_pct: 100.0 * l.values[c] / totals[c] })
        .collect()
}

/// The lines a finding of `category` points at: none for launch-shape problems; for uncoalesced
/// loads and bank conflicts, the hot lines that carry the wasted sectors or the conflicting
/// wavefronts, most first (where the profile counts them per line); else the hottest three.
pub fn lines_for(category: Category, lines: &[SourceLine]) -> Vec<SourceLine> {
    let counter = match category {
        Category::GridTooSmall
        | Category::BlockSize
        | Category::TailEffect
        | Category::OccupancyRegisters
        | Category::OccupancySharedMemory
        | Category::OccupancyOther => return vec![],
        Category::MemoryCoalescing => Some("L2 Theoretical Sectors Global Excessive"),
        Category::SharedBankConflicts => Some("L1 Wavefronts Shared Excessive"),
        _ => None,
    };
    let share = |l: &SourceLine| counter.and_then(|c| l.counters.iter().find(|x| x.counter == c)).map(|x| x.share_pct);
    let mut carrying: Vec<&SourceLine> = lines.iter().filter(|l| share(l).is_some()).collect();
    if carrying.is_empty() {
        return lines.iter().take(3).cloned().collect();
    }
    carrying.sort_by(|a, b| share(b).unwrap_or(0.0).total_cmp(&share(a).unwrap_or(0.0)));
    carrying.into_iter().take(3).cloned().collect()
}
