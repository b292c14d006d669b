//! `keet merge`: combines the JSON reports of the shards of one batch (`keet explain --shard K/N
//! --format json`) into the report an unsharded run over the same inputs gives.
//!
//! Each part carries its settings and its [`BatchTable`] (every group of identical launches in its
//! files, with launch ids, exact times and representatives). The merge
//! 1. refuses parts that cannot belong together: another schema or keet version, other settings
//!    or model, a part given twice (same file, or the same shard under two names), overlapping
//!    files, or a missing shard;
//! 2. merges the tables (files in the batch's sorted order, groups deduplicated by identity, exact
//!    sums, the longest launch as representative, first-seen order for ties);
//! 3. hands the merged table to the explain stage's own second half
//!    ([`crate::explain::explain_table`]): the same ranking, the same per-kernel assembly and the
//!    same report-level aggregates as an unsharded run. A kernel some shard explained with the
//!    same representative keeps that shard's findings; one no shard chose (it only ranks high over
//!    the whole batch) is explained here, from the cache, the model or the rule layer.
//!
//! The representatives are re-read from the profiles (the facts are recomputed, which is cheap),
//! so the profile paths in the parts must resolve where the merge runs.

use crate::analysis::FileError;
use crate::batch::{BatchTable, GroupEntry, ReportSettings};
use crate::explain::report::{CachedFindings, ExplainReport, ModelInfo, EXPLAIN_SCHEMA};
use crate::explain::run::Batch;
use crate::explain::{ExplainError, ExplainOptions, KnownFindings, KnownKernel, ModelSource, RunOptions, RunStats};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("no parts to merge")]
    NoParts,
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a keet explain JSON report ({source}); expected the output of `keet explain --format json`", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: schema {found:?}, expected {EXPLAIN_SCHEMA:?}", path.display())]
    Schema { path: PathBuf, found: String },
    #[error("{}: has no `{field}` section (written by an older keet?); explain the shard again with this keet", path.display())]
    Incomplete { path: PathBuf, field: &'static str },
    #[error("{}: listed twice (as {} too)", path.display(), other.display())]
    Duplicate { path: PathBuf, other: PathBuf },
    #[error("{} and {} are both shard {k}/{n}: the same part listed twice?", a.display(), b.display())]
    SameShard { a: PathBuf, b: PathBuf, k: usize, n: usize },
    #[error("{}: {what} {b}, but {} has {a}; parts of one batch must come from one keet explain command", path.display(), first.display())]
    Mismatch { path: PathBuf, first: PathBuf, what: &'static str, a: String, b: String },
    #[error("{}: not a shard (made without --shard); merge the reports of one `--shard K/N` batch", path.display())]
    NotAShard { path: PathBuf },
    #[error("shard {missing} of {n} is missing (given: {given}); merge all N parts of the batch")]
    MissingShard { missing: String, n: usize, given: String },
    #[error("profile {} is in both {} and {}", file.display(), a.display(), b.display())]
    Overlap { file: PathBuf, a: PathBuf, b: PathBuf },
    #[error("{}: {detail}", path.display())]
    Inconsistent { path: PathBuf, detail: String },
    #[error(transparent)]
    Explain(#[from] ExplainError),
}

/// The part of a report the merge reads (other fields are recomputed).
#[derive(Debug, Deserialize)]
struct PartDoc {
    schema: String,
    keet_version: String,
    model: Option<ModelInfo>,
    inputs: Vec<PathBuf>,
    kernels: Vec<PartKernel>,
    errors: Vec<PartError>,
    settings: Option<ReportSettings>,
    batch: Option<BatchTable>,
}

#[derive(Debug, Deserialize)]
struct PartKernel {
    kernel: PartGroup,
    analysis: PartAnalysis,
    cached: bool,
    /// The validated findings, as the cache keeps them (the same field names).
    #[serde(flatten)]
    found: CachedFindings,
}

#[derive(Debug, Deserialize)]
struct PartGroup {
    name: String,
}

#[derive(Debug, Deserialize)]
struct PartAnalysis {
    id: u64,
    block_size: Option<[u64; 3]>,
    grid_size: Option<[u64; 3]>,
}

#[derive(Debug, Deserialize)]
struct PartError {
    path: PathBuf,
    message: String,
}

/// One part, read and checked on its own.
struct Part {
    path: PathBuf,
    doc: PartDoc,
    settings: ReportSettings,
    table: BatchTable,
}

fn read_part(path: &Path) -> Result<Part, MergeError> {
    let bytes = std::fs::read(path).map_err(|source| MergeError::Read { path: path.to_owned(), source })?;
    let mut doc: PartDoc = serde_json::from_slice(&bytes).map_err(|source| MergeError::Json { path: path.to_owned(), source })?;
    if doc.schema != EXPLAIN_SCHEMA {
        return Err(MergeError::Schema { path: path.to_owned(), found: doc.schema });
    }
    let settings = doc.settings.take().ok_or(MergeError::Incomplete { path: path.to_owned(), field: "settings" })?;
    let mut table = doc.batch.take().ok_or(MergeError::Incomplete { path: path.to_owned(), field: "batch" })?;
    // Every index must point into the part's own file list.
    let nf = table.files.len();
    let bad = |what: String| MergeError::Inconsistent { path: path.to_owned(), detail: what };
    for g in &table.groups {
        if g.rep.file as usize >= nf || g.first_seen[0] as usize >= nf || g.launch_refs.iter().any(|r| r.0 as usize >= nf) {
            return Err(bad(format!("group {:?} refers to a file past the part's {nf} files", g.name)));
        }
        if g.launch_refs.len() != g.launches {
            return Err(bad(format!("group {:?} lists {} launches but {} launch ids", g.name, g.launches, g.launch_refs.len())));
        }
    }
    if table.source_pages.iter().any(|&f| f as usize >= nf) {
        return Err(bad("a source page refers to a file past the part's file list".into()));
    }
    let before = table.groups.len();
    table.reindex();
    if table.groups.iter().map(|g| g.key()).collect::<std::collections::HashSet<_>>().len() != before {
        return Err(bad("the same kernel group is listed twice".into()));
    }
    Ok(Part { path: path.to_owned(), doc, settings, table })
}

/// Checks the parts belong to one batch (see the module docs).
fn check_parts(parts: &[Part]) -> Result<(), MergeError> {
    let first = &parts[0];
    // The same file twice.
    let mut seen: HashMap<PathBuf, &Path> = HashMap::new();
    for p in parts {
        let canon = std::fs::canonicalize(&p.path).unwrap_or_else(|_| p.path.clone());
        if let Some(other) = seen.insert(canon, &p.path) {
            return Err(MergeError::Duplicate { path: p.path.clone(), other: other.to_owned() });
        }
    }
    let mismatch = |p: &Part, what: &'static str, a: String, b: String| MergeError::Mismatch {
        path: p.path.clone(),
        first: first.path.clone(),
        what,
        a,
        b,
    };
    let mut shards: HashMap<usize, &Path> = HashMap::new();
    for p in parts {
        if p.doc.keet_version != first.doc.keet_version {
            return Err(mismatch(p, "keet version", first.doc.keet_version.clone(), p.doc.keet_version.clone()));
        }
        let sha = |d: &PartDoc| d.model.as_ref().map(|m| format!("{} (SHA-256 {})", m.name, m.sha256)).unwrap_or_else(|| "no model".into());
        if first.doc.model.as_ref().map(|m| &m.sha256) != p.doc.model.as_ref().map(|m| &m.sha256) {
            return Err(mismatch(p, "model", sha(&first.doc), sha(&p.doc)));
        }
        if p.doc.inputs != first.doc.inputs {
            return Err(mismatch(p, "inputs", format!("{:?}", first.doc.inputs), format!("{:?}", p.doc.inputs)));
        }
        let Some([k, n]) = p.settings.shard else {
            return Err(MergeError::NotAShard { path: p.path.clone() });
        };
        let unsharded = |s: &ReportSettings| ReportSettings { shard: None, ..s.clone() };
        if unsharded(&p.settings) != unsharded(&first.settings) {
            let show = |s: &ReportSettings| serde_json::to_string(&unsharded(s)).unwrap_or_default();
            return Err(mismatch(p, "settings", show(&first.settings), show(&p.settings)));
        }
        let n0 = first.settings.shard.map(|s| s[1]).unwrap_or(n);
        if n != n0 {
            return Err(mismatch(p, "shard count", n0.to_string(), n.to_string()));
        }
        if let Some(other) = shards.insert(k, &p.path) {
            return Err(MergeError::SameShard { a: other.to_owned(), b: p.path.clone(), k, n });
        }
    }
    let n = first.settings.shard.map(|s| s[1]).unwrap_or(1);
    let missing: Vec<String> = (0..n).filter(|k| !shards.contains_key(k)).map(|k| k.to_string()).collect();
    if !missing.is_empty() {
        let mut given: Vec<usize> = shards.keys().copied().collect();
        given.sort_unstable();
        return Err(MergeError::MissingShard {
            missing: missing.join(", "),
            n,
            given: given.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", "),
        });
    }
    Ok(())
}

/// Merges the parts' tables into the table of the whole batch, as [`crate::batch::scan`] would
/// have built it over all the files.
fn merge_tables(parts: &[Part]) -> Result<BatchTable, MergeError> {
    // All files, in the batch's (sorted) order; each in exactly one part.
    let mut owner: HashMap<&Path, &Path> = HashMap::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for p in parts {
        for f in &p.table.files {
            if let Some(other) = owner.insert(f, &p.path) {
                return Err(MergeError::Overlap { file: f.clone(), a: other.to_owned(), b: p.path.clone() });
            }
            files.push(f.clone());
        }
    }
    files.sort();
    let pos: HashMap<&Path, u32> = files.iter().enumerate().map(|(i, f)| (f.as_path(), i as u32)).collect();
    let mut out = BatchTable { files: files.clone(), ..Default::default() };
    let mut index: HashMap<crate::batch::GroupKey, usize> = HashMap::new();
    for p in parts {
        let map = |fi: u32| pos[p.table.files[fi as usize].as_path()];
        out.source_pages.extend(p.table.source_pages.iter().map(|&f| map(f)));
        for g in &p.table.groups {
            let mut g2 = g.clone();
            // Set again for the groups the merged report explains.
            g2.analysis_key = None;
            g2.first_seen[0] = map(g.first_seen[0]);
            g2.rep.file = map(g.rep.file);
            for r in &mut g2.launch_refs {
                r.0 = map(r.0);
            }
            match index.get(&g.key()) {
                None => {
                    index.insert(g.key(), out.groups.len());
                    out.groups.push(g2);
                }
                Some(&i) => combine(&mut out.groups[i], g2),
            }
        }
    }
    out.source_pages.sort_unstable();
    for g in &mut out.groups {
        // Stable: launch order within a file is kept.
        g.launch_refs.sort_by_key(|r| r.0);
    }
    // First-seen order, as one pass over all the files would have created them.
    out.groups.sort_by_key(|g| g.first_seen);
    out.reindex();
    Ok(out)
}

/// Folds `b` (the same group, from another part, indices already global) into `a`.
fn combine(a: &mut GroupEntry, b: GroupEntry) {
    a.launches += b.launches;
    a.total_duration_ns.merge(&b.total_duration_ns);
    a.first_seen = a.first_seen.min(b.first_seen);
    // The first of the longest: one pass keeps a later launch only when strictly longer.
    // The representative's diagnosis in brief goes with it.
    let b_first = [b.rep.file, b.rep.index] < [a.rep.file, a.rep.index];
    let (early, late) = if b_first { (b.rep, a.rep) } else { (a.rep, b.rep) };
    let take_b = if late.duration_ns > early.duration_ns { !b_first } else { b_first };
    if take_b {
        a.rep = b.rep;
        a.family = b.family;
        a.primary = b.primary;
        a.primary_gain_pct = b.primary_gain_pct;
    }
    a.launch_refs.extend(b.launch_refs);
}

/// What the merge was asked to do besides the parts.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// Model engine options, for kernels that no shard explained (LLM batches only).
    pub engine: crate::llm::engine::EngineOptions,
    /// Cache to consult (and fill) for kernels no shard explained.
    pub cache: Option<PathBuf>,
}

/// Merges the shard reports at `paths` into one report (see the module docs).
pub fn merge(paths: &[PathBuf], mopts: &MergeOptions) -> Result<(ExplainReport, RunStats), MergeError> {
    let t0 = std::time::Instant::now();
    if paths.is_empty() {
        return Err(MergeError::NoParts);
    }
    let parts: Vec<Part> = paths.iter().map(|p| read_part(p)).collect::<Result<_, _>>()?;
    check_parts(&parts)?;
    let table = merge_tables(&parts)?;

    // Findings each shard made, keyed by its representative (valid only if it is the batch's too).
    let mut known = KnownFindings::new();
    for p in &parts {
        for k in &p.doc.kernels {
            let key = (k.kernel.name.clone(), k.analysis.block_size, k.analysis.grid_size);
            let Some(g) = p.table.group(&key) else {
                return Err(MergeError::Inconsistent {
                    path: p.path.clone(),
                    detail: format!("kernel {:?} is explained but not in the part's batch table", k.kernel.name),
                });
            };
            if g.rep.id != k.analysis.id {
                return Err(MergeError::Inconsistent {
                    path: p.path.clone(),
                    detail: format!(
                        "kernel {:?}: explained launch {} is not the group's representative {}",
                        k.kernel.name, k.analysis.id, g.rep.id
                    ),
                });
            }
            let Some(key) = g.analysis_key.clone() else {
                return Err(MergeError::Inconsistent {
                    path: p.path.clone(),
                    detail: format!("kernel {:?} is explained but its group has no analysis_key", k.kernel.name),
                });
            };
            known.insert(
                (p.table.files[g.rep.file as usize].clone(), g.rep.index),
                KnownKernel { found: k.found.clone(), cached: k.cached, key },
            );
        }
    }
    let mut errors: Vec<FileError> =
        parts.iter().flat_map(|p| p.doc.errors.iter().map(|e| FileError { path: e.path.clone(), message: e.message.clone() })).collect();
    errors.sort_by(|a, b| a.path.cmp(&b.path));

    let first = &parts[0];
    let s = &first.settings;
    let opts = ExplainOptions {
        // The parts' settings, as one report over the whole batch.
        settings: ReportSettings { shard: None, ..s.clone() },
        // Shard reports carry no summary, and a merge need not load the model for one.
        summary: false,
        // The sets of the whole batch, as an unsharded run finds them (shards look for none), with
        // their expert summaries (no summary asked).
        sets: Some(crate::sets::SetOptions::default()),
        model_ranks: None,
        run: RunOptions {
            engine: mopts.engine.clone(),
            cache: mopts.cache.clone(),
            refresh: false,
            jobs: 0,
            progress: false,
            concurrency: 1,
            ..RunOptions::default()
        },
    };
    let model = match (&first.doc.model, s.no_llm) {
        (Some(info), false) => ModelSource::Recorded(info.clone()),
        _ => ModelSource::None,
    };
    if !matches!(model, ModelSource::None) {
        crate::llm::device::check_device(opts.run.engine.device.as_deref()).map_err(crate::explain::ExplainError::from)?;
    }
    let inputs = first.doc.inputs.clone();
    let batch = Batch { inputs: &inputs, table, errors, members: None, model, known: &known, started: t0 };
    Ok(crate::explain::explain_table(batch, &opts)?)
}
