//! Source-level pointers: attaches `--page source` exports to their kernels, and picks the
//! source lines (or SASS instructions) that carry the most stall samples or memory traffic, with
//! the text of `--source FILE.cu` when the profile holds line numbers but not the code.

use super::report::SourceLine;
use crate::profile::{Launch, Profile, SourceKind, SourceView};
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

/// Up to five hottest lines of a launch's source view (CUDA lines when the view has them). Lines
/// a reader cannot find (no text and no line number) and lines under [`MIN_HOT_LINE_PCT`] of the
/// counter are left out.
pub fn hot_lines(launch: &Launch, source_files: &[PathBuf]) -> Vec<SourceLine> {
    let Some(view) = &launch.source else { return vec![] };
    let Some(col) = pick_column(view) else { return vec![] };
    let has_lines = view.rows.iter().any(|r| r.line.is_some());
    let rows: Vec<_> = view.rows.iter().filter(|r| !has_lines || r.line.is_some()).collect();
    let total: f64 = rows.iter().filter_map(|r| r.values.get(col).copied().flatten()).sum();
    if total <= 0.0 {
        return vec![];
    }
    let mut ranked: Vec<_> =
        rows.iter().filter_map(|r| r.values.get(col).copied().flatten().filter(|v| *v > 0.0).map(|v| (v, *r))).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let texts: Vec<(PathBuf, Vec<String>)> = source_files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok().map(|t| (p.clone(), t.lines().map(String::from).collect())))
        .collect();
    ranked
        .into_iter()
        .filter(|(v, r)| 100.0 * v / total >= MIN_HOT_LINE_PCT && (r.line.is_some() || !r.text.trim().is_empty()))
        .take(5)
        .map(|(v, r)| {
            let mut text = r.text.clone();
            if let Some(n) = r.line {
                // Prefer the user's file when given (same file name as the profile's, or the only one).
                let hit = texts.iter().find(|(p, _)| {
                    r.file.as_deref().is_some_and(|f| p.file_name().is_some_and(|n| f.replace('\\', "/").ends_with(&*n.to_string_lossy())))
                });
                let hit = hit.or(if texts.len() == 1 { texts.first() } else { None });
                if let Some((_, lines)) = hit {
                    if let Some(t) = lines.get(n as usize - 1).filter(|_| n >= 1) {
                        text = t.clone();
                    }
                }
            }
            SourceLine {
                file: r.file.clone(),
                line: r.line,
                text: text.trim().to_string(),
                counter: view.columns[col].clone(),
                share_pct: 100.0 * v / total,
            }
        })
        .collect()
}

/// The lines a finding of `category` points at: none for launch-shape problems.
pub fn lines_for(category: Category, lines: &[SourceLine]) -> Vec<SourceLine> {
    match category {
        Category::GridTooSmall
        | Category::BlockSize
        | Category::TailEffect
        | Category::OccupancyRegisters
        | Category::OccupancySharedMemory
        | Category::OccupancyOther => vec![],
        _ => lines.iter().take(3).cloned().collect(),
    }
}
