//! Kernel selection: read inputs in parallel, group identical kernels (same name and launch
//! shape, across files), rank by total time, and keep those covering the requested share of time.

use super::report::KernelGroup;
use crate::analysis::FileError;
use crate::profile::{Launch, Profile, SourceKind};
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;

/// One group of identical launches and its representative (the longest launch).
#[derive(Debug, Clone)]
pub struct Group {
    pub group: KernelGroup,
    /// (profile index, launch index) of the representative.
    pub rep: (usize, usize),
}

impl Group {
    pub fn launch<'a>(&self, profiles: &'a [Profile]) -> &'a Launch {
        &profiles[self.rep.0].launches[self.rep.1]
    }
}

/// Parses every file in parallel (`jobs` threads, 0 = all cores). Bad files become errors; the
/// others go on. A progress bar is drawn on stderr only when asked and stderr is a terminal.
pub fn read_all(files: &[PathBuf], jobs: usize, progress: bool) -> (Vec<Profile>, Vec<FileError>) {
    let bar = (progress && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(files.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} reading profiles {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let run = || -> Vec<_> {
        files
            .par_iter()
            .map(|p| {
                let r = crate::profile::read_path(p);
                if let Some(b) = &bar {
                    b.inc(1);
                }
                r
            })
            .collect()
    };
    let results = match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
        Ok(pool) => pool.install(run),
        Err(_) => run(),
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut profiles = Vec::new();
    let mut errors = Vec::new();
    for (p, r) in files.iter().zip(results) {
        // A file cut short keeps its complete launches and is still reported as an error.
        let (prof, err) = crate::profile::salvage(r);
        profiles.extend(prof);
        errors.extend(err.map(|e| FileError { path: p.clone(), message: e.to_string() }));
    }
    (profiles, errors)
}

pub use crate::analysis::duration_ns;

// What makes launches identical (kernel name, block and grid): the batch table's one key.
use crate::report::batch::GroupKey;

/// Groups identical launches across all profiles, longest total time first (ties: first seen).
pub fn group_kernels(profiles: &[Profile]) -> Vec<Group> {
    let mut index: HashMap<GroupKey, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut rep_time: Vec<f64> = Vec::new();
    for (pi, p) in profiles.iter().enumerate() {
        if p.kind == SourceKind::SourceCsv {
            continue;
        }
        for (li, l) in p.launches.iter().enumerate() {
            let key = (l.name.clone(), l.block_size, l.grid_size);
            let d = duration_ns(l);
            let gi = *index.entry(key).or_insert_with(|| {
                groups.push(Group {
                    group: KernelGroup {
                        name: l.name.clone(),
                        files: vec![],
                        launch_ids: vec![],
                        launches: 0,
                        total_duration_ns: 0.0,
                        time_share_pct: 0.0,
                    },
                    rep: (pi, li),
                });
                rep_time.push(-1.0);
                groups.len() - 1
            });
            let g = &mut groups[gi];
            if !g.group.files.contains(&p.path) {
                g.group.files.push(p.path.clone());
            }
            g.group.launch_ids.push(l.id);
            g.group.launches += 1;
            g.group.total_duration_ns += d;
            if d > rep_time[gi] {
                rep_time[gi] = d;
                g.rep = (pi, li);
            }
        }
    }
    let total: f64 = groups.iter().map(|g| g.group.total_duration_ns).sum();
    for g in &mut groups {
        g.group.time_share_pct = if total > 0.0 { 100.0 * g.group.total_duration_ns / total } else { 0.0 };
    }
    // Stable: equal times keep launch order.
    groups.sort_by(|a, b| b.group.total_duration_ns.total_cmp(&a.group.total_duration_ns));
    groups
}

/// The groups that make up `coverage_pct` of the time, at most `top`; returns them and how many were skipped.
pub fn choose(groups: &[Group], coverage_pct: f64, top: usize) -> (Vec<Group>, usize) {
    let n = chosen_count(groups.iter().map(|g| (g.group.total_duration_ns, g.group.time_share_pct)), coverage_pct, top);
    (groups[..n].to_vec(), groups.len() - n)
}

/// How many of the ranked groups, given as (total time in ns, share of all time in percent),
/// longest first, make up `coverage_pct` of the time, at most `top`.
pub fn chosen_count(ranked: impl Iterator<Item = (f64, f64)> + Clone, coverage_pct: f64, top: usize) -> usize {
    let mut n = 0;
    let mut covered = 0.0;
    let has_time = ranked.clone().any(|(total_ns, _)| total_ns > 0.0);
    for (_, share_pct) in ranked {
        if n >= top.max(1) {
            break;
        }
        if has_time && covered >= coverage_pct {
            break;
        }
        covered += share_pct;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Metric, MetricValue, Unit};

    fn launch(id: u64, name: &str, ns: f64) -> Launch {
        let mut l = Launch { id, name: name.into(), block_size: Some([128, 1, 1]), grid_size: Some([10, 1, 1]), ..Default::default() };
        l.metrics.insert(
            "gpu__time_duration.sum",
            Metric {
                value: MetricValue::Number(ns),
                unit: &Unit::Nanoseconds,
                raw_value: &ns.to_string(),
                raw_unit: "ns",
                label: None,
                section: None,
                origin: Default::default(),
            },
        );
        l
    }

    #[test]
    fn groups_identical_launches_and_covers_time() {
        let p = Profile {
            path: "a.csv".into(),
            kind: SourceKind::MetricsCsv,
            launches: vec![launch(0, "a", 10.0), launch(1, "b", 85.0), launch(2, "a", 30.0), launch(3, "c", 5.0)],
            notes: vec![],
            source_files: vec![],
        };
        let g = group_kernels(std::slice::from_ref(&p));
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].group.name, "b");
        assert_eq!(g[1].group.name, "a");
        assert_eq!(g[1].group.launches, 2);
        assert_eq!(g[1].rep, (0, 2), "the longest launch represents the group");
        // b (65.4%) + a (30.8%) = 96.2% >= 95%: c is skipped.
        let (chosen, skipped) = choose(&g, 95.0, 10);
        assert_eq!(chosen.len(), 2);
        assert_eq!(skipped, 1);
        let (chosen, _) = choose(&g, 95.0, 1);
        assert_eq!(chosen.len(), 1);
    }
}
