//! The one scan: reading profiles (with one progress bar and thread pool), grouping identical
//! launches (same name and launch shape) into the batch table, and ranking and choosing groups by
//! their share of time. `keet explain` streams a batch through it, `keet compare` ranks each side
//! with the same table, and `keet merge` combines shards' tables.
//!
//! Memory does not grow with the batch's raw metrics: each profile is parsed (a few at a time, in
//! parallel), reduced to its launches' identity and duration, and dropped. What stays is a
//! [`BatchTable`]: one [`GroupEntry`] per group of identical launches (same name and launch shape)
//! with its launch ids, exact total time, the place it was first seen, and its representative
//! (the longest launch). After ranking, the explain stage re-reads only the files that hold the
//! chosen representatives ([`load_reps`]).
//!
//! The table is written into the JSON report (`batch`), so shard reports can be merged into
//! exactly the report an unsharded run gives: totals are exact sums ([`ExactSum`]), independent of
//! the order the launches were added in, and ties are broken by where a group was first seen.

use crate::analysis::FileError;
use crate::profile::{Launch, Profile, SourceKind};
use crate::report::explain::KernelGroup;
use crate::sets::Member;
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;

pub use crate::report::batch::{BatchTable, ExactSum, GroupEntry, GroupKey, LaunchRef, ReportSettings, Run};

/// One launch reduced to what the table keeps.
struct LaunchSummary {
    name: String,
    block_size: Option<[u64; 3]>,
    grid_size: Option<[u64; 3]>,
    id: u64,
    duration_ns: f64,
    /// The diagnosis in brief (family, primary category and its estimate), for the profile view.
    brief: crate::rules::Brief,
}

impl LaunchSummary {
    fn of(l: &Launch) -> LaunchSummary {
        LaunchSummary {
            name: l.name.clone(),
            block_size: l.block_size,
            grid_size: l.grid_size,
            id: l.id,
            duration_ns: crate::analysis::duration_ns(l),
            brief: crate::rules::brief(l),
        }
    }
}

/// What one file contributes (its profile is dropped once this is made); a file cut off mid-write
/// gives its complete launches and the error.
enum FileSummary {
    /// The launches, the file's set members when asked for ([`crate::sets::members::of_profile`]),
    /// and the error of a file cut off mid-write.
    Launches(SourceKind, Vec<LaunchSummary>, Vec<Member>, Option<String>),
    Error(String),
}

/// Input bytes parsed at the same time, at most (a larger file is parsed alone). Parsing takes
/// several times a file's size in memory, so without this the peak of a long batch is whenever its
/// largest files happen to be parsed together; with it, the peak does not depend on the batch.
pub const BYTES_IN_FLIGHT: u64 = 4 << 20;

/// A counting semaphore over input bytes.
#[derive(Default)]
struct Budget {
    used: std::sync::Mutex<u64>,
    freed: std::sync::Condvar,
}

impl Budget {
    fn acquire(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used > 0 && *used + n > BYTES_IN_FLIGHT {
            used = self.freed.wait(used).unwrap_or_else(|p| p.into_inner());
        }
        *used += n;
    }

    fn release(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        *used -= n;
        self.freed.notify_all();
    }
}

fn summarise(p: &std::path::Path, budget: &Budget, members: bool) -> FileSummary {
    let n = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    budget.acquire(n);
    let s = summarise_now(p, members);
    budget.release(n);
    s
}

fn summarise_now(p: &std::path::Path, members: bool) -> FileSummary {
    // A file cut off mid-write keeps its complete launches, and its error is reported too.
    match crate::profile::salvage(crate::profile::read_path(p)) {
        (Some(prof), err) => {
            let launches = prof.launches.iter().map(LaunchSummary::of).collect();
            let members = if members { crate::sets::members::of_profile(&prof) } else { vec![] };
            FileSummary::Launches(prof.kind, launches, members, err.map(|e| e.to_string()))
        }
        (None, err) => FileSummary::Error(err.map(|e| e.to_string()).unwrap_or_else(|| "unreadable".into())),
    }
}

impl BatchTable {
    /// Adds one profile's launches (the profile can be dropped afterwards).
    pub fn add_profile(&mut self, p: &Profile) {
        self.add(p.path.clone(), p.kind, p.launches.iter().map(LaunchSummary::of).collect());
    }

    fn add(&mut self, path: PathBuf, kind: SourceKind, launches: Vec<LaunchSummary>) {
        let fi = u32::try_from(self.files.len()).expect("fewer than 4 billion files");
        self.files.push(path);
        if kind == SourceKind::SourceCsv {
            self.source_pages.push(fi);
            return;
        }
        for (li, l) in launches.into_iter().enumerate() {
            let li = u32::try_from(li).expect("fewer than 4 billion launches in a file");
            let key = (l.name, l.block_size, l.grid_size);
            let groups = &mut self.groups;
            let gi = *self.index.entry(key).or_insert_with_key(|k| {
                groups.push(GroupEntry {
                    name: k.0.clone(),
                    block_size: k.1,
                    grid_size: k.2,
                    launches: 0,
                    total_duration_ns: ExactSum::default(),
                    first_seen: [fi, li],
                    rep: LaunchRef { file: fi, index: li, id: l.id, duration_ns: -1.0 },
                    launch_refs: vec![],
                    analysis_key: None,
                    family: l.brief.family,
                    primary: None,
                    primary_gain_pct: None,
                });
                groups.len() - 1
            });
            let g = &mut self.groups[gi];
            g.launches += 1;
            g.total_duration_ns.add(l.duration_ns);
            g.launch_refs.push((fi, l.id));
            if l.duration_ns > g.rep.duration_ns {
                g.rep = LaunchRef { file: fi, index: li, id: l.id, duration_ns: l.duration_ns };
                g.family = l.brief.family;
                g.primary = l.brief.primary.map(|c| c.as_str().to_string());
                g.primary_gain_pct = l.brief.estimate_pct;
            }
        }
    }

    /// Rebuilds the lookup index (after deserialising).
    pub fn reindex(&mut self) {
        self.index = self.groups.iter().enumerate().map(|(i, g)| (g.key(), i)).collect();
    }

    /// The group with this identity.
    pub fn group(&self, key: &GroupKey) -> Option<&GroupEntry> {
        self.index.get(key).map(|&i| &self.groups[i])
    }

    /// Exact total time of every launch.
    pub fn total(&self) -> ExactSum {
        let mut t = ExactSum::default();
        for g in &self.groups {
            t.merge(&g.total_duration_ns);
        }
        t
    }

    /// Groups ranked by total time, longest first (ties: first seen first), as `(table index,
    /// total ns)`; with the total time of all launches.
    pub fn ranked(&self) -> (Vec<(usize, f64)>, f64) {
        let total = self.total().value();
        let mut order: Vec<usize> = (0..self.groups.len()).collect();
        order.sort_by_key(|&i| self.groups[i].first_seen);
        let mut out: Vec<(usize, f64)> = order.into_iter().map(|i| (i, self.groups[i].total_duration_ns.value())).collect();
        // Stable: equal times keep first-seen order.
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        (out, total)
    }

    /// Group `i` as the report shows it; `all_ns` is the total time of all launches.
    pub fn kernel_group(&self, i: usize, all_ns: f64) -> KernelGroup {
        let g = &self.groups[i];
        let t = g.total_duration_ns.value();
        let mut files: Vec<PathBuf> = Vec::new();
        let mut last = None;
        for &(f, _) in &g.launch_refs {
            if last != Some(f) {
                files.push(self.files[f as usize].clone());
                last = Some(f);
            }
        }
        KernelGroup {
            name: g.name.clone(),
            files,
            launch_ids: g.launch_refs.iter().map(|r| r.1).collect(),
            launches: g.launches,
            total_duration_ns: t,
            time_share_pct: if all_ns > 0.0 { 100.0 * t / all_ns } else { 0.0 },
        }
    }
}

/// The reading progress bar, on stderr only when asked and stderr is a terminal.
fn progress_bar(files: usize, progress: bool) -> Option<indicatif::ProgressBar> {
    (progress && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(files as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} reading profiles {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    })
}

/// A pool of `jobs` threads (0 = all cores); `None` runs on rayon's global pool.
fn thread_pool(jobs: usize) -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new().num_threads(jobs).build().ok()
}

/// The streaming first pass: reads `files` (a few at a time on `jobs` threads, 0 = all cores),
/// keeps each one's launches in the table and drops its metrics. Bad files become errors; the
/// others go on. A progress bar is drawn on stderr only when asked and stderr is a terminal.
/// What one pass over the files gives: the table, the files that could not be read, and (when
/// asked for) every file's set members, reduced while the file was parsed, so the sets need no
/// second pass.
pub struct Scan {
    pub table: BatchTable,
    pub errors: Vec<FileError>,
    pub members: Option<Vec<Member>>,
}

/// Reads `files` once, a few at a time (`jobs` threads, 0 = all cores), into the table; with
/// `members`, each file's set members too.
pub fn scan(files: &[PathBuf], jobs: usize, progress: bool, members: bool) -> Scan {
    let bar = progress_bar(files.len(), progress);
    let pool = thread_pool(jobs);
    let threads = pool.as_ref().map(|p| p.current_num_threads()).unwrap_or_else(rayon::current_num_threads);
    // Enough files in flight to keep every thread busy; no more, so memory stays flat.
    let chunk = (threads * 4).max(1);
    let mut table = BatchTable::default();
    let mut errors = Vec::new();
    let mut all_members = Vec::new();
    let mut names = crate::sets::members::Interner::default();
    let budget = Budget::default();
    for part in files.chunks(chunk) {
        let run = || -> Vec<FileSummary> {
            part.par_iter()
                .map(|p| {
                    let s = summarise(p, &budget, members);
                    if let Some(b) = &bar {
                        b.inc(1);
                    }
                    s
                })
                .collect()
        };
        let sums = match &pool {
            Some(pool) => pool.install(run),
            None => run(),
        };
        for (p, s) in part.iter().zip(sums) {
            match s {
                FileSummary::Launches(kind, launches, mut file_members, err) => {
                    table.add(p.clone(), kind, launches);
                    names.share(&mut file_members);
                    all_members.extend(file_members);
                    if let Some(message) = err {
                        errors.push(FileError { path: p.clone(), message });
                    }
                }
                FileSummary::Error(message) => errors.push(FileError { path: p.clone(), message }),
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Scan { table, errors, members: members.then_some(all_members) }
}

/// Parses every file whole, in parallel (`jobs` threads, 0 = all cores), for the commands that
/// need every launch's metrics at once (`keet compare`). Bad files become errors; the others go
/// on. The same progress bar as [`scan`].
pub fn read_all(files: &[PathBuf], jobs: usize, progress: bool) -> (Vec<Profile>, Vec<FileError>) {
    let bar = progress_bar(files.len(), progress);
    let run = || -> Vec<_> {
        files
            .par_iter()
            .map(|path| {
                let read = crate::profile::read_path(path);
                if let Some(bar) = &bar {
                    bar.inc(1);
                }
                read
            })
            .collect()
    };
    let results = match thread_pool(jobs) {
        Some(pool) => pool.install(run),
        None => run(),
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut profiles = Vec::new();
    let mut errors = Vec::new();
    for (path, read) in files.iter().zip(results) {
        // A file cut short keeps its complete launches and is still reported as an error.
        let (profile, error) = crate::profile::salvage(read);
        profiles.extend(profile);
        errors.extend(error.map(|e| FileError { path: path.clone(), message: e.to_string() }));
    }
    (profiles, errors)
}

/// One group of identical launches and its representative (the longest launch), over profiles
/// held in memory.
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

/// Groups identical launches across `profiles` with the batch table, ranked as `keet explain`
/// ranks a batch: longest total time first, ties first seen first.
pub fn group_kernels(profiles: &[Profile]) -> Vec<Group> {
    let mut table = BatchTable::default();
    for profile in profiles {
        // One table file per profile, so a table file index is a profile index.
        table.add_profile(profile);
    }
    let (ranked, all_ns) = table.ranked();
    ranked
        .into_iter()
        .map(|(i, _)| {
            let rep = &table.groups[i].rep;
            Group { group: table.kernel_group(i, all_ns), rep: (rep.file as usize, rep.index as usize) }
        })
        .collect()
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

#[derive(Debug, thiserror::Error)]
pub enum RepError {
    #[error("{}: cannot read it again for the chosen kernel {kernel:?}: {message}", path.display())]
    Reread { path: PathBuf, kernel: String, message: String },
    #[error("{}: changed since it was first read: launch {index} is no longer {kernel:?} (id {id}); run again", path.display())]
    Changed { path: PathBuf, kernel: String, index: u32, id: u64 },
}

/// Re-reads the files holding the representatives of the chosen groups (each file once) and
/// returns those launches, in the order of `entries`, with the source views of the batch's
/// `--page source` exports attached as the single-pass reader attached them.
/// A representative launch re-read for explaining, with the source files its report embeds for it.
#[derive(Debug, Clone, Default)]
pub struct Rep {
    pub launch: Launch,
    /// The source files the report embeds for this launch (`ncu --import-source yes`).
    pub code: Vec<crate::profile::SourceFile>,
}

pub fn load_reps(table: &BatchTable, entries: &[usize]) -> Result<Vec<Rep>, RepError> {
    let mut by_file: Vec<(u32, Vec<usize>)> = Vec::new();
    for (pos, &e) in entries.iter().enumerate() {
        let f = table.groups[e].rep.file;
        match by_file.iter_mut().find(|(ff, _)| *ff == f) {
            Some((_, v)) => v.push(pos),
            None => by_file.push((f, vec![pos])),
        }
    }
    let read = |fi: u32, kernel: &str| {
        let path = &table.files[fi as usize];
        match crate::profile::salvage(crate::profile::read_path(path)) {
            (Some(p), _) => Ok(p),
            (None, e) => Err(RepError::Reread {
                path: path.clone(),
                kernel: kernel.to_string(),
                message: e.map(|e| e.to_string()).unwrap_or_default(),
            }),
        }
    };
    let mut slots: Vec<Option<Rep>> = vec![None; entries.len()];
    for (fi, positions) in by_file {
        let first = &table.groups[entries[positions[0]]];
        let mut prof = read(fi, &first.name)?;
        for pos in positions {
            let g = &table.groups[entries[pos]];
            let idx = g.rep.index as usize;
            let ok = prof.launches.get(idx).is_some_and(|l| l.id == g.rep.id && l.name == g.name);
            if !ok {
                return Err(RepError::Changed { path: prof.path.clone(), kernel: g.name.clone(), index: g.rep.index, id: g.rep.id });
            }
            let code = prof.launches[idx].source_files.iter().filter_map(|&i| prof.source_files.get(i).cloned()).collect();
            slots[pos] = Some(Rep { launch: std::mem::take(&mut prof.launches[idx]), code });
        }
    }
    let reps: Vec<Rep> = slots.into_iter().map(|l| l.expect("every position filled above")).collect();
    let (mut launches, codes): (Vec<Launch>, Vec<_>) = reps.into_iter().map(|r| (r.launch, r.code)).unzip();
    attach_sources(table, &mut launches)?;
    Ok(launches.into_iter().zip(codes).map(|(launch, code)| Rep { launch, code }).collect())
}

/// Attaches source views to `reps` exactly as [`crate::explain::source::attach_source_views`] does
/// over the whole batch: of the views matching a launch only the first one and the first one with
/// line numbers can end up attached, so only those are kept while the source pages are re-read.
fn attach_sources(table: &BatchTable, reps: &mut Vec<Launch>) -> Result<(), RepError> {
    if table.source_pages.is_empty() || reps.is_empty() {
        return Ok(());
    }
    let strip = |n: &str| n.split('(').next().unwrap_or(n).trim().to_string();
    let wanted: std::collections::HashSet<String> = reps.iter().flat_map(|l| [l.name.clone(), strip(&l.name)]).collect();
    // Per view name: (first view, first view with line numbers), in batch order.
    let mut keep: Vec<Launch> = Vec::new();
    let mut seen: HashMap<String, (bool, bool)> = HashMap::new();
    for &fi in &table.source_pages {
        let path = &table.files[fi as usize];
        let prof = crate::profile::read_path(path).map_err(|e| RepError::Reread {
            path: path.clone(),
            kernel: "(source page)".into(),
            message: e.to_string(),
        })?;
        for l in prof.launches {
            if !wanted.contains(&l.name) {
                continue;
            }
            let Some(view) = &l.source else { continue };
            let lines = view.rows.iter().any(|r| r.line.is_some());
            let e = seen.entry(l.name.clone()).or_insert((false, false));
            let useful = !e.0 || (lines && !e.1);
            e.0 = true;
            e.1 |= lines;
            if useful {
                keep.push(l);
            }
        }
    }
    let mut profiles =
        vec![Profile { path: PathBuf::new(), kind: SourceKind::SourceCsv, launches: keep, notes: vec![], source_files: vec![] }];
    profiles.push(Profile {
        path: PathBuf::new(),
        kind: SourceKind::NcuRep,
        launches: std::mem::take(reps),
        notes: vec![],
        source_files: vec![],
    });
    let mut profiles = crate::explain::source::attach_source_views(profiles);
    *reps = profiles.pop().map(|p| p.launches).unwrap_or_default();
    Ok(())
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

    #[test]
    fn a_source_page_takes_a_profile_index_and_groups_nothing() {
        let page = Profile {
            path: "s.csv".into(),
            kind: SourceKind::SourceCsv,
            launches: vec![launch(7, "a", 1.0)],
            notes: vec![],
            source_files: vec![],
        };
        let metrics = Profile {
            path: "m.csv".into(),
            kind: SourceKind::MetricsCsv,
            launches: vec![launch(0, "a", 10.0)],
            notes: vec![],
            source_files: vec![],
        };
        let g = group_kernels(&[page, metrics]);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].rep, (1, 0), "the representative's profile index counts the source page");
        assert_eq!(g[0].group.files, vec![PathBuf::from("m.csv")]);
    }
}
