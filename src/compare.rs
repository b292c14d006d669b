//! Compare stage (`keet compare BEFORE AFTER`): matches kernel groups between two sets of
//! profiles, computes the deltas of the facts that matter, and (optionally) asks the model for a
//! short explanation of what changed, constrained by a JSON Schema and validated against both
//! profiles before it is shown.
//!
//! Matching, in order: (1) same name, block and grid; (2) same *normalised* name (no return type,
//! no namespaces before the kernel's own name, no `(int)`-style casts in template arguments: the
//! details CSV and the report spell the same kernel differently) and same shape; (3) same
//! normalised name with a different launch shape (reported as a shape change); (4) a pair the user
//! names (`--match OLD=NEW`); (5) a kernel renamed in a fix, paired by its role as sets pair
//! versions ([`crate::sets::group::pair_by_role`]: two of the same name stem, launch shape or
//! thread count, work, the most time on each side), shown with the reason. What is left is
//! listed as only-before / only-after.

use crate::analysis::{self, FileError, LaunchAnalysis};
use crate::batch::{self, Group};
use crate::explain::report::Citation;
use crate::explain::schema;
use crate::facts::{Fact, FactKey, Facts};
use crate::llm::engine::{Engine, EngineOptions, GenerateOptions};
use crate::llm::template::ChatMessage;
use crate::profile::{Launch, Profile};
use crate::rules::{self, Category};
use crate::validate::{self, Context};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Version of the JSON document `keet compare --format json` prints.
pub const COMPARE_SCHEMA: &str = "keet.compare/1";

/// A time change smaller than this (percent, either way) is "unchanged": run-to-run noise and the
/// rounding of CSV exports (a details page writes 4.06 us for 4064 ns).
pub const TIME_NOISE_PCT: f64 = 1.0;

/// Bounds of the explanation's free text (characters) and causes; citations are bounded as
/// explain's ([`schema::MAX_CITATIONS`]).
pub const SUMMARY_MAX_CHARS: usize = 160;
pub const CAUSE_MAX_CHARS: usize = 160;
pub const MAX_CAUSES: usize = 2;
/// At most this many metric constants per kernel in the schema (the largest changes first).
pub const MAX_CITABLE: usize = 10;
/// Constrained re-asks (with the validator's reasons) for an explanation that fails validation.
pub const REPAIR_ATTEMPTS: usize = 1;

/// The facts compared for every matched kernel, in display order.
pub const COMPARED_FACTS: &[FactKey] = &[
    FactKey::SmThroughputPct,
    FactKey::MemoryThroughputPct,
    FactKey::DramThroughputPct,
    FactKey::L1ThroughputPct,
    FactKey::L2ThroughputPct,
    FactKey::DramBytes,
    FactKey::AchievedOccupancyPct,
    FactKey::TheoreticalOccupancyPct,
    FactKey::RegistersPerThread,
    FactKey::SharedMemPerBlockBytes,
    FactKey::GlobalLoadBytesPerSector,
    FactKey::GlobalStoreBytesPerSector,
    FactKey::GlobalLoadSectorsPerRequest,
    FactKey::GlobalStoreSectorsPerRequest,
    FactKey::GlobalExcessiveSectorsPct,
    FactKey::SharedBankConflictPct,
    FactKey::ActiveThreadsPerWarp,
    FactKey::WarpCyclesPerIssue,
    FactKey::IssueSlotsBusyPct,
    FactKey::WavesPerSm,
    FactKey::TailIdlePct,
    FactKey::LocalMemorySectors,
    FactKey::SpillInstructions,
    FactKey::TensorPipePct,
];

/// How to compare.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Explain at most this many matched kernels (the largest time changes); 0 = none.
    pub top: usize,
    /// No model: deltas only.
    pub no_llm: bool,
    pub engine: EngineOptions,
    /// Parallel parse threads (0 = all cores).
    pub jobs: usize,
    /// `--match OLD=NEW`: pair the before kernel whose name contains OLD with the after kernel
    /// whose name contains NEW (when keet cannot tell a renamed kernel by its role).
    pub matches: Vec<(String, String)>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions { top: 3, no_llm: false, engine: EngineOptions::default(), jobs: 0, matches: vec![] }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("model: {0}")]
    // No `#[source]`: the message already carries the model error (a chain would print it twice).
    Llm(crate::llm::model::LlmError),
    #[error("prompt template: {0}")]
    Prompt(#[from] minijinja::Error),
    #[error("{0}")]
    Io(String),
}

impl From<crate::llm::model::LlmError> for CompareError {
    fn from(e: crate::llm::model::LlmError) -> Self {
        CompareError::Llm(e)
    }
}

/// before → after, with the change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    pub before: f64,
    pub after: f64,
    pub delta: f64,
    /// `None` when `before` is zero.
    pub delta_pct: Option<f64>,
}

impl Delta {
    pub fn new(before: f64, after: f64) -> Delta {
        let delta = after - before;
        let delta_pct = (before != 0.0).then(|| 100.0 * delta / before.abs());
        Delta { before, after, delta, delta_pct }
    }
}

/// Which way a kernel's time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Faster,
    Slower,
    Unchanged,
}

impl Direction {
    pub fn of(time: &Delta) -> Direction {
        match time.delta_pct {
            Some(p) if p < -TIME_NOISE_PCT => Direction::Faster,
            Some(p) if p > TIME_NOISE_PCT => Direction::Slower,
            Some(_) => Direction::Unchanged,
            None if time.after > time.before => Direction::Slower,
            None => Direction::Unchanged,
        }
    }
}

/// One side of a matched kernel (or an unmatched kernel group).
#[derive(Debug, Clone, Serialize)]
pub struct KernelSide {
    pub name: String,
    pub block_size: Option<[u64; 3]>,
    pub grid_size: Option<[u64; 3]>,
    pub launches: usize,
    pub total_duration_ns: f64,
    pub per_launch_ns: f64,
    pub files: Vec<PathBuf>,
    pub launch_ids: Vec<u64>,
    /// Rule-layer categories of the representative (longest) launch.
    pub categories: Vec<Category>,
    /// Top stall reason of the representative launch (cycles per issued instruction).
    pub top_stall: Option<String>,
}

/// One compared fact: values on both sides and the raw metrics they rest on (provenance).
#[derive(Debug, Clone, Serialize)]
pub struct MetricDelta {
    pub key: String,
    pub label: String,
    pub unit: String,
    #[serde(flatten)]
    pub delta: Delta,
    /// Beyond rounding ([`validate::value_matches`] says the two values differ).
    pub changed: bool,
    pub metrics_before: Vec<String>,
    pub metrics_after: Vec<String>,
}

/// How two kernel groups were matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatchKind {
    /// Same name, block and grid.
    Exact,
    /// Same normalised name (see module docs), same block and grid.
    NormalizedName,
    /// Same normalised name, different launch shape.
    NameOnly,
    /// Named by the user (`--match OLD=NEW`).
    User,
    /// A renamed kernel, paired by its role (see `match_reason`).
    Role,
}

/// A citation of one side's metric in a model explanation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideCitation {
    pub metric: String,
    pub side: SideName,
    pub value: f64,
    pub unit: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SideName {
    Before,
    After,
}

/// The model's explanation of one kernel's change (the schema admits only this shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub summary: String,
    pub evidence: Vec<SideCitation>,
    pub causes: Vec<String>,
}

/// What happened to the model's explanation of one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExplanationStatus {
    /// Shown: it passed validation.
    Validated,
    /// Rejected by the validator (reasons given); never shown.
    Dropped,
    /// Not asked (`--no-llm`, beyond `--top`, or nothing changed).
    NotRequested,
}

/// One matched kernel.
#[derive(Debug, Clone, Serialize)]
pub struct KernelDelta {
    pub name: String,
    pub match_kind: MatchKind,
    /// Why a user or role match paired these two kernels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_reason: Option<String>,
    /// "block (a, b, c) -> (d, e, f); grid ..." when the launch shape changed.
    pub shape_change: Option<String>,
    pub direction: Direction,
    pub before: KernelSide,
    pub after: KernelSide,
    pub total_time: Delta,
    pub per_launch_time: Delta,
    /// Every compared fact present on both sides (see `changed`).
    pub metrics: Vec<MetricDelta>,
    /// Facts present on one side only (keys), e.g. when the exports collected different sections.
    pub one_sided: Vec<String>,
    pub categories_appeared: Vec<Category>,
    pub categories_disappeared: Vec<Category>,
    pub explanation_status: ExplanationStatus,
    pub explanation: Option<Explanation>,
    /// The shown explanation came from the re-ask (its first answer failed: see `dropped_reasons`).
    pub explanation_repaired: bool,
    /// Why the model's explanation was dropped (or, when repaired, why its first answer was).
    pub dropped_reasons: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SideSummary {
    pub inputs: Vec<PathBuf>,
    pub files: Vec<PathBuf>,
    pub kernel_groups: usize,
    pub launches: usize,
    pub total_duration_ns: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelUsed {
    pub name: String,
    pub path: String,
    pub device: String,
}

/// A matched kernel whose total time grew beyond `--fail-on-regression`.
#[derive(Debug, Clone, Serialize)]
pub struct Regression {
    pub name: String,
    pub before_ns: f64,
    pub after_ns: f64,
    pub delta_pct: f64,
}

/// The whole `keet compare --format json` document.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    pub schema: &'static str,
    pub keet_version: &'static str,
    pub before: SideSummary,
    pub after: SideSummary,
    pub total_time: Delta,
    pub model: Option<ModelUsed>,
    /// Largest absolute change in total time first.
    pub matched: Vec<KernelDelta>,
    pub only_before: Vec<KernelSide>,
    pub only_after: Vec<KernelSide>,
    pub explanations_validated: usize,
    pub explanations_dropped: usize,
    /// `--fail-on-regression` threshold (percent), when given.
    pub regression_threshold_pct: Option<f64>,
    pub regressions: Vec<Regression>,
    pub errors: Vec<FileError>,
}

impl CompareReport {
    /// Marks the matched kernels whose total time grew by more than `pct` percent.
    pub fn check_regressions(&mut self, pct: f64) {
        self.regression_threshold_pct = Some(pct);
        self.regressions = self
            .matched
            .iter()
            .filter_map(|k| {
                let p = match k.total_time.delta_pct {
                    Some(p) => p,
                    None if k.total_time.after > 0.0 => f64::INFINITY,
                    None => return None,
                };
                (p > pct).then(|| Regression {
                    name: k.name.clone(),
                    before_ns: k.total_time.before,
                    after_ns: k.total_time.after,
                    delta_pct: p,
                })
            })
            .collect();
    }
}

/// The kernel name without return type, leading namespaces or casts in template arguments:
/// `void flashinfer::norm::RMSNormKernel<(unsigned int)8, bf16>(T2 *)` → `RMSNormKernel<8, bf16>(T2 *)`.
pub fn normalize_name(name: &str) -> String {
    let mut s = name.trim();
    s = s.strip_prefix("void ").unwrap_or(s).trim_start();
    // Drop casts "(type)" directly followed by a literal (digit, '-' or letter of true/false).
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '(' {
            if let Some(close) = chars[i + 1..].iter().position(|&c| c == ')').map(|p| p + i + 1) {
                let inner: String = chars[i + 1..close].iter().collect();
                let is_type = !inner.is_empty() && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '_');
                let next = chars.get(close + 1);
                let followed_by_literal = next.is_some_and(|c| c.is_ascii_digit() || *c == '-');
                if is_type && followed_by_literal && !inner.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                    i = close + 1;
                    continue;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    // Namespaces before the kernel's own name (which ends at its first bracket).
    let end = out.find(['<', '(']).unwrap_or(out.len());
    let cut = out[..end].rfind("::").map(|p| p + 2).unwrap_or(0);
    out[cut..].to_string()
}

fn side_of(g: &Group, profiles: &[Profile], la: &LaunchAnalysis) -> KernelSide {
    let l = g.launch(profiles);
    let mut categories: Vec<Category> = Vec::new();
    for f in &la.findings {
        if !categories.contains(&f.category) {
            categories.push(f.category);
        }
    }
    KernelSide {
        name: g.group.name.clone(),
        block_size: l.block_size,
        grid_size: l.grid_size,
        launches: g.group.launches,
        total_duration_ns: g.group.total_duration_ns,
        per_launch_ns: if g.group.launches > 0 { g.group.total_duration_ns / g.group.launches as f64 } else { 0.0 },
        files: g.group.files.clone(),
        launch_ids: g.group.launch_ids.clone(),
        categories,
        top_stall: la.facts.stalls.first().map(|s| s.reason.clone()),
    }
}

fn dims(d: Option<[u64; 3]>) -> String {
    d.map(|d| format!("({}, {}, {})", d[0], d[1], d[2])).unwrap_or_else(|| "?".into())
}

fn raw_metrics(f: &Fact) -> Vec<String> {
    f.evidence.iter().map(|e| e.metric.clone()).collect()
}

fn stall_fact(facts: &Facts, launch: &Launch, reason: &str) -> Option<Fact> {
    if let Some(s) = facts.stalls.iter().find(|s| s.reason == reason) {
        return Some(s.cycles_per_issue.clone());
    }
    // Not among the top three: read the raw metric.
    let name = format!("smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio");
    let m = launch.metrics.get(&name)?;
    let v = m.as_f64()?;
    Some(Fact {
        key: crate::facts::stall_key(reason),
        label: "Stall cycles per issued instruction",
        value: v,
        unit: "cycle",
        evidence: vec![crate::facts::Evidence {
            metric: name,
            value: v,
            unit: m.unit.symbol(),
            raw_value: m.raw_value.to_string(),
            raw_unit: m.raw_unit.to_string(),
            origin: m.origin.to_string(),
        }],
    })
}

fn metric_deltas(b: &LaunchAnalysis, bl: &Launch, a: &LaunchAnalysis, al: &Launch) -> (Vec<MetricDelta>, Vec<String>) {
    let mut out = Vec::new();
    let mut one_sided = Vec::new();
    let mut push = |key: String, fb: Option<Fact>, fa: Option<Fact>, label: Option<String>| match (fb, fa) {
        (Some(x), Some(y)) => out.push(MetricDelta {
            key,
            label: label.unwrap_or_else(|| x.label.to_string()),
            unit: x.unit.to_string(),
            delta: Delta::new(x.value, y.value),
            changed: !validate::value_matches(y.value, x.value),
            metrics_before: raw_metrics(&x),
            metrics_after: raw_metrics(&y),
        }),
        (None, None) => {}
        _ => one_sided.push(key),
    };
    for key in COMPARED_FACTS {
        push(key.to_string(), b.facts.get(*key).cloned(), a.facts.get(*key).cloned(), None);
    }
    // The top stall reason of either side, compared on both.
    let mut reasons: Vec<String> = Vec::new();
    for s in [b.facts.stalls.first(), a.facts.stalls.first()].into_iter().flatten() {
        if !reasons.contains(&s.reason) {
            reasons.push(s.reason.clone());
        }
    }
    for r in reasons {
        push(
            format!("stall_{r}"),
            stall_fact(&b.facts, bl, &r),
            stall_fact(&a.facts, al, &r),
            Some(format!("Stall: {r} (cycles per issued instruction)")),
        );
    }
    (out, one_sided)
}

fn kernel_delta(kind: MatchKind, bg: &Group, bp: &[Profile], ag: &Group, ap: &[Profile]) -> (KernelDelta, LaunchAnalysis, LaunchAnalysis) {
    let bl = bg.launch(bp);
    let al = ag.launch(ap);
    let ba = analysis::analyse_launch(bl);
    let aa = analysis::analyse_launch(al);
    let before = side_of(bg, bp, &ba);
    let after = side_of(ag, ap, &aa);
    let shape_change = (before.block_size != after.block_size || before.grid_size != after.grid_size).then(|| {
        let mut parts = Vec::new();
        if before.block_size != after.block_size {
            parts.push(format!("block {} -> {}", dims(before.block_size), dims(after.block_size)));
        }
        if before.grid_size != after.grid_size {
            parts.push(format!("grid {} -> {}", dims(before.grid_size), dims(after.grid_size)));
        }
        parts.join("; ")
    });
    let (metrics, one_sided) = metric_deltas(&ba, bl, &aa, al);
    let total_time = Delta::new(before.total_duration_ns, after.total_duration_ns);
    let per_launch_time = Delta::new(before.per_launch_ns, after.per_launch_ns);
    let categories_appeared = after.categories.iter().copied().filter(|c| !before.categories.contains(c)).collect();
    let categories_disappeared = before.categories.iter().copied().filter(|c| !after.categories.contains(c)).collect();
    let name = if before.name == after.name { before.name.clone() } else { normalize_name(&before.name) };
    let k = KernelDelta {
        name,
        match_kind: kind,
        match_reason: None,
        shape_change,
        direction: Direction::of(&total_time),
        before,
        after,
        total_time,
        per_launch_time,
        metrics,
        one_sided,
        categories_appeared,
        categories_disappeared,
        explanation_status: ExplanationStatus::NotRequested,
        explanation: None,
        explanation_repaired: false,
        dropped_reasons: vec![],
    };
    (k, ba, aa)
}

// A kernel group's identity (name, block and grid): the batch table's one key.
pub use crate::report::batch::GroupKey;

/// Matched pairs (before index, after index, how) and the unmatched indices of each side.
pub type Matching = (Vec<(usize, usize, MatchKind)>, Vec<usize>, Vec<usize>);

/// One side's inputs: the files, what was read, and what could not be.
type SideRead = (Vec<PathBuf>, Vec<Profile>, Vec<FileError>);

/// Matches kernel groups in the tiers of the module docs (largest time first within a tier).
pub fn match_groups(before: &[GroupKey], after: &[GroupKey]) -> Matching {
    let mut used_b = vec![false; before.len()];
    let mut used_a = vec![false; after.len()];
    let mut pairs = Vec::new();
    let norm_b: Vec<String> = before.iter().map(|k| normalize_name(&k.0)).collect();
    let norm_a: Vec<String> = after.iter().map(|k| normalize_name(&k.0)).collect();
    type Pred<'a> = Box<dyn Fn(usize, usize) -> bool + 'a>;
    let tiers: [(MatchKind, Pred); 3] = [
        (MatchKind::Exact, Box::new(|i, j| before[i] == after[j])),
        (MatchKind::NormalizedName, Box::new(|i, j| norm_b[i] == norm_a[j] && before[i].1 == after[j].1 && before[i].2 == after[j].2)),
        (MatchKind::NameOnly, Box::new(|i, j| norm_b[i] == norm_a[j])),
    ];
    for (kind, pred) in tiers.iter() {
        for (i, used) in used_b.iter_mut().enumerate() {
            if *used {
                continue;
            }
            // Groups come sorted by time, so equal names pair largest with largest.
            if let Some(j) = (0..after.len()).find(|&j| !used_a[j] && pred(i, j)) {
                *used = true;
                used_a[j] = true;
                pairs.push((i, j, *kind));
            }
        }
    }
    let ob = (0..before.len()).filter(|&i| !used_b[i]).collect();
    let oa = (0..after.len()).filter(|&j| !used_a[j]).collect();
    (pairs, ob, oa)
}

fn read_side(input: &Path, jobs: usize) -> Result<SideRead, CompareError> {
    let files =
        crate::profile::expand_inputs(&[input.to_path_buf()]).map_err(|e| CompareError::Io(format!("listing {}: {e}", input.display())))?;
    let mut errors = Vec::new();
    if files.is_empty() {
        errors.push(FileError { path: input.to_path_buf(), message: format!("{}: no .ncu-rep or .csv files found", input.display()) });
    }
    let (profiles, errs) = batch::read_all(&files, jobs, false);
    errors.extend(errs);
    Ok((files, profiles, errors))
}

fn key_of(g: &Group, profiles: &[Profile]) -> GroupKey {
    let l = g.launch(profiles);
    (l.name.clone(), l.block_size, l.grid_size)
}

/// What pairing by role knows of one kernel group: identity, total time and work (FLOPs).
fn role_of(g: &Group, profiles: &[Profile]) -> crate::sets::group::Role {
    let l = g.launch(profiles);
    let facts = crate::rules::derive_facts(l);
    let roof = &facts.roofline;
    let flops: Vec<f64> = [&roof.fp16_flop, &roof.fp32_flop, &roof.fp64_flop].into_iter().flatten().map(|f| f.value).collect();
    crate::sets::group::Role {
        name: l.name.clone(),
        block_size: l.block_size,
        grid_size: l.grid_size,
        total_ns: g.group.total_duration_ns,
        flops: (!flops.is_empty()).then(|| flops.iter().sum()),
    }
}

/// One pair made after the name tiers: before index, after index, how, and why.
type Renamed = (usize, usize, MatchKind, Option<String>);

/// Pairs what the name tiers left: first the user's `--match OLD=NEW` pairs (names containing
/// OLD and NEW), then renamed kernels by role. Paired indices leave `ob` / `oa`.
fn match_renamed(
    before: &[GroupKey],
    after: &[GroupKey],
    ob: &mut Vec<usize>,
    oa: &mut Vec<usize>,
    user: &[(String, String)],
    role_b: impl Fn(usize) -> crate::sets::group::Role,
    role_a: impl Fn(usize) -> crate::sets::group::Role,
) -> Vec<Renamed> {
    let mut out = Vec::new();
    for (old, new) in user {
        let i = ob.iter().position(|&i| before[i].0.contains(old.as_str()));
        let j = oa.iter().position(|&j| after[j].0.contains(new.as_str()));
        if let (Some(i), Some(j)) = (i, j) {
            let (bi, aj) = (ob.remove(i), oa.remove(j));
            out.push((bi, aj, MatchKind::User, Some(format!("--match {old}={new}"))));
        }
    }
    let rb: Vec<_> = ob.iter().map(|&i| role_b(i)).collect();
    let ra: Vec<_> = oa.iter().map(|&j| role_a(j)).collect();
    let pairs = crate::sets::group::pair_by_role(&rb, &ra);
    let (mut gone_b, mut gone_a) = (Vec::new(), Vec::new());
    for (i, j, reason) in pairs {
        out.push((ob[i], oa[j], MatchKind::Role, Some(format!("renamed: {reason}"))));
        gone_b.push(ob[i]);
        gone_a.push(oa[j]);
    }
    ob.retain(|i| !gone_b.contains(i));
    oa.retain(|j| !gone_a.contains(j));
    out
}

/// A matched pair: its delta, the analyses of both representative launches, and the indices of
/// its kernel groups before and after.
type Matched = (KernelDelta, LaunchAnalysis, LaunchAnalysis, usize, usize);

/// Runs `keet compare BEFORE AFTER`.
pub fn compare(before: &Path, after: &Path, opts: &CompareOptions) -> Result<CompareReport, CompareError> {
    if !opts.no_llm {
        crate::llm::device::check_device(opts.engine.device.as_deref())?;
    }
    let (bfiles, bprof, mut errors) = read_side(before, opts.jobs)?;
    let (afiles, aprof, aerr) = read_side(after, opts.jobs)?;
    errors.extend(aerr);
    let bg = batch::group_kernels(&bprof);
    let ag = batch::group_kernels(&aprof);
    let (mut matched, ob, oa) = match_sides(&bg, &bprof, &ag, &aprof, opts);
    let asked = if opts.no_llm { ModelRun::default() } else { explain_changes(&mut matched, (&bg, &bprof), (&ag, &aprof), opts)? };

    let side_summary = |input: &Path, files: Vec<PathBuf>, groups: &[Group]| SideSummary {
        inputs: vec![input.to_path_buf()],
        files,
        kernel_groups: groups.len(),
        launches: groups.iter().map(|g| g.group.launches).sum(),
        total_duration_ns: groups.iter().map(|g| g.group.total_duration_ns).sum(),
    };
    let only = |idx: &[usize], groups: &[Group], profiles: &[Profile]| -> Vec<KernelSide> {
        idx.iter()
            .map(|&i| {
                let la = analysis::analyse_launch(groups[i].launch(profiles));
                side_of(&groups[i], profiles, &la)
            })
            .collect()
    };
    let before_s = side_summary(before, bfiles, &bg);
    let after_s = side_summary(after, afiles, &ag);
    Ok(CompareReport {
        schema: COMPARE_SCHEMA,
        keet_version: env!("CARGO_PKG_VERSION"),
        total_time: Delta::new(before_s.total_duration_ns, after_s.total_duration_ns),
        before: before_s,
        after: after_s,
        model: asked.model.map(|m| m.1),
        only_before: only(&ob, &bg, &bprof),
        only_after: only(&oa, &ag, &aprof),
        matched: matched.into_iter().map(|m| m.0).collect(),
        explanations_validated: asked.validated,
        explanations_dropped: asked.dropped,
        regression_threshold_pct: None,
        regressions: vec![],
        errors,
    })
}

/// Matches the two sides' kernel groups (the tiers of the module docs, then by role), each pair
/// with its delta, the largest time change first; and the groups left unmatched on each side.
fn match_sides(
    bg: &[Group],
    bprof: &[Profile],
    ag: &[Group],
    aprof: &[Profile],
    opts: &CompareOptions,
) -> (Vec<Matched>, Vec<usize>, Vec<usize>) {
    let bkeys: Vec<_> = bg.iter().map(|g| key_of(g, bprof)).collect();
    let akeys: Vec<_> = ag.iter().map(|g| key_of(g, aprof)).collect();
    let (pairs, mut ob, mut oa) = match_groups(&bkeys, &akeys);
    let renamed = match_renamed(&bkeys, &akeys, &mut ob, &mut oa, &opts.matches, |i| role_of(&bg[i], bprof), |j| role_of(&ag[j], aprof));

    let mut matched: Vec<Matched> = pairs
        .iter()
        .map(|&(i, j, kind)| (i, j, kind, None))
        .chain(renamed)
        .map(|(i, j, kind, reason)| {
            let (mut k, ba, aa) = kernel_delta(kind, &bg[i], bprof, &ag[j], aprof);
            k.match_reason = reason;
            (k, ba, aa, i, j)
        })
        .collect();
    matched.sort_by(|x, y| y.0.total_time.delta.abs().total_cmp(&x.0.total_time.delta.abs()));
    (matched, ob, oa)
}

/// What asking the model came to: the engine (loaded at the first question) with what the report
/// says of it, and how many explanations were validated and dropped.
#[derive(Default)]
struct ModelRun {
    model: Option<(Engine, ModelUsed)>,
    validated: usize,
    dropped: usize,
}

/// Asks the model about the matched kernels that changed and have something to cite, in
/// `matched` order (largest time change first), at most `opts.top` of them.
fn explain_changes(
    matched: &mut [Matched],
    (bg, bprof): (&[Group], &[Profile]),
    (ag, aprof): (&[Group], &[Profile]),
    opts: &CompareOptions,
) -> Result<ModelRun, CompareError> {
    let mut run = ModelRun::default();
    let mut asked = 0;
    for (k, ba, aa, i, j) in matched.iter_mut() {
        if asked >= opts.top {
            break;
        }
        let changed = k.direction != Direction::Unchanged || k.metrics.iter().any(|m| m.changed);
        if !changed {
            continue;
        }
        let bl = bg[*i].launch(bprof);
        let al = ag[*j].launch(aprof);
        let bctx = Context { launch: bl, facts: &ba.facts, rules: &ba.findings };
        let actx = Context { launch: al, facts: &aa.facts, rules: &aa.findings };
        let cites = citables(k, &bctx, &actx);
        if cites.is_empty() {
            continue;
        }
        asked += 1;
        if run.model.is_none() {
            let engine = Engine::load(&opts.engine)?;
            let used = ModelUsed {
                name: engine.info.name.clone(),
                path: engine.info.path.display().to_string(),
                device: engine.info.device.clone(),
            };
            run.model = Some((engine, used));
        }
        let engine = &mut run.model.as_mut().expect("loaded above").0;
        if explain_kernel(engine, k, &cites, &bctx, &actx)? {
            run.validated += 1;
        } else {
            run.dropped += 1;
        }
    }
    Ok(run)
}

/// Asks for one kernel's explanation (one constrained attempt, then at most one re-ask with the
/// validator's reasons) and records it on `k`, validated or dropped with the reasons; true when
/// one was validated.
fn explain_kernel(
    engine: &mut Engine,
    k: &mut KernelDelta,
    cites: &[Citable],
    bctx: &Context,
    actx: &Context,
) -> Result<bool, CompareError> {
    let schema = explanation_schema(cites);
    let mut gen = GenerateOptions { repeat_penalty: 1.15, ..GenerateOptions::default() };
    gen.max_tokens = token_budget(&schema);
    let messages: Vec<ChatMessage> =
        vec![ChatMessage::system(prompt("system", &json!({}))?), ChatMessage::user(prompt("user", &prompt_data(k, cites))?)];
    let question = crate::llm::ask::Ask { messages, schema: &schema, options: gen, reasks: REPAIR_ATTEMPTS };
    let direction = k.direction;
    let outcome = crate::llm::ask::ask(
        engine,
        question,
        |e: &mut Explanation| {
            // Runs of spaces collapse; the text is validated as shown.
            let tidy = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
            e.summary = tidy(&e.summary);
            e.causes = e.causes.iter().map(|c| tidy(c)).collect();
            let mut seen = std::collections::HashSet::new();
            e.evidence.retain(|c| seen.insert((c.metric.clone(), c.side)));
            validate_explanation(e, bctx, actx, direction)
        },
        |reasons| prompt("repair", &json!({ "reasons": reasons })).map_err(CompareError::from),
    )?;
    let repaired = outcome.repaired();
    let mut refusals = outcome.refusals.into_iter();
    let first = refusals.next().unwrap_or_default();
    match outcome.accepted {
        Some(e) => {
            k.explanation = Some(e);
            k.explanation_status = ExplanationStatus::Validated;
            k.explanation_repaired = repaired;
            k.dropped_reasons = first;
            Ok(true)
        }
        None => {
            k.dropped_reasons = first;
            for later in refusals {
                k.dropped_reasons.extend(later.iter().map(|r| format!("after the re-ask: {r}")));
            }
            k.explanation_status = ExplanationStatus::Dropped;
            Ok(false)
        }
    }
}

/// A metric the model may cite: explain's citable metric (raw metric, value, unit, label) and
/// the side it is read on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Citable {
    pub side: SideName,
    #[serde(flatten)]
    pub cite: schema::Citable,
}

fn push_citable(out: &mut Vec<Citable>, ctx: &Context, side: SideName, metric: &str, label: &str) {
    let Some(m) = ctx.launch.metrics.get(metric) else { return };
    let Some(v) = m.as_f64() else { return };
    if out.iter().any(|c| c.cite.metric == metric && c.side == side) {
        return;
    }
    let cite = schema::Citable { metric: metric.to_string(), value: v, unit: m.unit.symbol(), label: label.to_string() };
    out.push(Citable { side, cite });
}

/// The citable metrics of one matched kernel: the duration, then the raw metrics of the changed
/// facts (largest relative change first), each on both sides, at most [`MAX_CITABLE`].
pub fn citables(k: &KernelDelta, before: &Context, after: &Context) -> Vec<Citable> {
    let mut out = Vec::new();
    for (ctx, side) in [(before, SideName::Before), (after, SideName::After)] {
        if let Some(d) = &ctx.facts.duration_ns {
            for e in &d.evidence {
                push_citable(&mut out, ctx, side, &e.metric, d.label);
            }
        }
    }
    let mut changed: Vec<&MetricDelta> = k.metrics.iter().filter(|m| m.changed).collect();
    changed.sort_by(|a, b| {
        b.delta.delta_pct.map(f64::abs).unwrap_or(f64::MAX).total_cmp(&a.delta.delta_pct.map(f64::abs).unwrap_or(f64::MAX))
    });
    for m in changed {
        if out.len() + 2 > MAX_CITABLE {
            break;
        }
        // Only single-metric facts: a derived fact's inputs are not the number the reader sees.
        if m.metrics_before.len() != 1 || m.metrics_after.len() != 1 {
            continue;
        }
        push_citable(&mut out, before, SideName::Before, &m.metrics_before[0], &m.label);
        push_citable(&mut out, after, SideName::After, &m.metrics_after[0], &m.label);
    }
    out
}

/// A digit-free sentence (explain's word shape: a capital, words separated by single spaces,
/// commas or semicolons, a final period) of at least `min_words` words and at most `max_chars` characters.
fn text(min_words: usize, max_chars: usize) -> Value {
    json!({
        "type": "string",
        "pattern": schema::sentence_pattern(min_words, max_chars / 2 + 1),
        "maxLength": max_chars,
    })
}

/// The schema of one kernel's explanation: digit-free text and exact citations.
pub fn explanation_schema(cites: &[Citable]) -> Value {
    let items: Vec<Value> = cites.iter().map(|c| schema::citation_schema(&c.cite, Some(json!(c.side)))).collect();
    json!({
        "type": "object",
        "properties": {
            "summary": text(4, SUMMARY_MAX_CHARS),
            "evidence": schema::evidence_schema(items),
            "causes": { "type": "array", "items": text(3, CAUSE_MAX_CHARS), "minItems": 1, "maxItems": MAX_CAUSES },
        },
        "required": ["summary", "evidence", "causes"],
        "additionalProperties": false
    })
}

/// Tokens that always suffice for the largest output the schema admits (every character a token).
pub fn token_budget(explanation: &Value) -> usize {
    let longest = schema::longest_citation([&explanation["properties"]["evidence"]]);
    32 + schema::text_and_citation_tokens(SUMMARY_MAX_CHARS + MAX_CAUSES * CAUSE_MAX_CHARS, longest)
}

const PROMPT: &str = include_str!("../prompts/compare.jinja");

fn prompt(part: &str, data: &Value) -> Result<String, minijinja::Error> {
    let env = crate::templating::prompt_environment();
    let mut ctx = data.clone();
    ctx["part"] = json!(part);
    Ok(env.render_str(PROMPT, ctx)?.trim().to_string())
}

fn prompt_data(k: &KernelDelta, cites: &[Citable]) -> Value {
    let changed: Vec<Value> = k
        .metrics
        .iter()
        .filter(|m| m.changed)
        .take(8)
        .map(|m| json!({ "label": m.label, "before": rules::fmt_num(m.delta.before), "after": rules::fmt_num(m.delta.after), "unit": m.unit }))
        .collect();
    let cats = |v: &[Category]| v.iter().map(|c| c.as_str()).collect::<Vec<_>>();
    // The changes in words, so that a small model can say them without numbers.
    let mut words: Vec<String> = vec![match k.direction {
        Direction::Faster => "the kernel got faster".into(),
        Direction::Slower => "the kernel got slower".into(),
        Direction::Unchanged => "the kernel's time did not change".into(),
    }];
    for m in k.metrics.iter().filter(|m| m.changed).take(3) {
        let label = m.label.split(" (").next().unwrap_or(&m.label).to_lowercase();
        words.push(format!("{label} went {}", if m.delta.delta > 0.0 { "up" } else { "down" }));
    }
    json!({
        "name": k.name,
        "shape_change": k.shape_change,
        "before_time": crate::format::duration(k.total_time.before),
        "after_time": crate::format::duration(k.total_time.after),
        "before_launches": k.before.launches,
        "after_launches": k.after.launches,
        "change_pct": k.total_time.delta_pct.map(|p| format!("{}{}%", if p > 0.0 { "+" } else { "" }, rules::fmt_num(p))),
        "direction": k.direction,
        "changed": changed,
        "appeared": cats(&k.categories_appeared),
        "disappeared": cats(&k.categories_disappeared),
        "in_words": words.join("; "),
        "cites": cites.iter().map(|c| json!({ "metric": c.cite.metric, "side": c.side, "value": Value::from(c.cite.value).to_string(), "unit": c.cite.unit })).collect::<Vec<_>>(),
    })
}

/// Direction words and what they claim.
const FASTER_WORDS: &[&str] = &["faster", "improvement", "improved", "improves", "speedup", "quicker"];
const SLOWER_WORDS: &[&str] = &["slower", "regression", "regressed", "regresses", "slowdown"];

/// Checks a model explanation against both sides; `Err` holds every reason it fails.
pub fn validate_explanation(e: &Explanation, before: &Context, after: &Context, direction: Direction) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    if e.evidence.is_empty() {
        reasons.push("the explanation cites no evidence".to_string());
    }
    for c in &e.evidence {
        let ctx = match c.side {
            SideName::Before => before,
            SideName::After => after,
        };
        let side = match c.side {
            SideName::Before => "before",
            SideName::After => "after",
        };
        if let Some(r) = validate::check_citation(ctx, &Citation { metric: c.metric.clone(), value: c.value, unit: c.unit.clone() }) {
            reasons.push(format!("{side}: {r}"));
        }
    }
    let mut texts: Vec<(&str, &str)> = vec![("summary", e.summary.as_str())];
    texts.extend(e.causes.iter().map(|c| ("cause", c.as_str())));
    for (field, t) in &texts {
        let max = if *field == "summary" { SUMMARY_MAX_CHARS } else { CAUSE_MAX_CHARS };
        if t.chars().count() > max {
            reasons.push(format!("the {field} is longer than {max} characters"));
        }
        for (s, _) in validate::numbers_in_text(t) {
            reasons.push(format!("the {field} writes the number {s}; numbers belong in the evidence"));
        }
        let words: Vec<String> =
            t.split(|c: char| !c.is_ascii_alphabetic()).map(|w| w.to_ascii_lowercase()).filter(|w| !w.is_empty()).collect();
        let says_faster = words.iter().find(|w| FASTER_WORDS.contains(&w.as_str()));
        let says_slower = words.iter().find(|w| SLOWER_WORDS.contains(&w.as_str()));
        let measured = match direction {
            Direction::Faster => "the kernel got faster",
            Direction::Slower => "the kernel got slower",
            Direction::Unchanged => "the kernel's time did not change beyond noise",
        };
        if let Some(w) = says_faster {
            if direction != Direction::Faster {
                reasons.push(format!("the {field} says \"{w}\", but {measured}"));
            }
        }
        if let Some(w) = says_slower {
            if direction != Direction::Slower {
                reasons.push(format!("the {field} says \"{w}\", but {measured}"));
            }
        }
    }
    if e.summary.trim().is_empty() {
        reasons.push("the summary is empty".into());
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Metric, MetricValue, Unit};

    fn launch(ns: f64, dram: f64) -> Launch {
        let mut l = Launch { name: "k".into(), block_size: Some([256, 1, 1]), grid_size: Some([64, 1, 1]), ..Default::default() };
        for (n, v, u, ru) in [
            ("gpu__time_duration.sum", ns, Unit::Nanoseconds, "nsecond"),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", dram, Unit::Percent, "%"),
        ] {
            l.metrics.insert(
                n,
                Metric {
                    value: MetricValue::Number(v),
                    unit: &u,
                    raw_value: &v.to_string(),
                    raw_unit: ru,
                    label: None,
                    section: None,
                    origin: Default::default(),
                },
            );
        }
        l
    }

    fn explanation(summary: &str, value: f64) -> Explanation {
        Explanation {
            summary: summary.into(),
            evidence: vec![
                SideCitation { metric: "gpu__time_duration.sum".into(), side: SideName::Before, value: 1000.0, unit: "ns".into() },
                SideCitation { metric: "gpu__time_duration.sum".into(), side: SideName::After, value, unit: "ns".into() },
            ],
            causes: vec!["DRAM throughput dropped, so the kernel waits on memory longer.".into()],
        }
    }

    #[test]
    fn validator_rejects_wrong_values_and_directions() {
        let (bl, al) = (launch(1000.0, 80.0), launch(1300.0, 40.0));
        let (bf, af) = (crate::rules::derive_facts(&bl), crate::rules::derive_facts(&al));
        let (br, ar) = (rules::evaluate(&bf), rules::evaluate(&af));
        let b = Context { launch: &bl, facts: &bf, rules: &br };
        let a = Context { launch: &al, facts: &af, rules: &ar };
        let dir = Direction::of(&Delta::new(1000.0, 1300.0));
        assert_eq!(dir, Direction::Slower);
        // Correct: accepted.
        validate_explanation(&explanation("The kernel is slower because DRAM throughput fell.", 1300.0), &b, &a, dir).unwrap();
        // Wrong value on the after side.
        let r = validate_explanation(&explanation("The kernel is slower because DRAM throughput fell.", 900.0), &b, &a, dir).unwrap_err();
        assert!(r.iter().any(|r| r.starts_with("after: metric gpu__time_duration.sum")), "{r:?}");
        // Wrong direction word.
        let r = validate_explanation(&explanation("A clear improvement: the kernel is faster now.", 1300.0), &b, &a, dir).unwrap_err();
        assert!(r.iter().any(|r| r.contains("\"improvement\"")), "{r:?}");
        assert!(r.iter().any(|r| r.contains("\"faster\"") || r.contains("\"improvement\"")));
        // A metric cited on a side that lacks it, and a number in the text.
        let mut e = explanation("The kernel is slower by thirty percent.", 1300.0);
        e.evidence.push(SideCitation { metric: "no__such_metric".into(), side: SideName::Before, value: 1.0, unit: "".into() });
        e.causes = vec!["DRAM fell to 40 percent.".into()];
        let r = validate_explanation(&e, &b, &a, dir).unwrap_err();
        assert!(r.iter().any(|r| r.contains("no__such_metric")), "{r:?}");
        assert!(r.iter().any(|r| r.contains("number 40")), "{r:?}");
        // Unchanged time: no direction words allowed.
        let r = validate_explanation(&explanation("The kernel regressed.", 1300.0), &b, &a, Direction::Unchanged).unwrap_err();
        assert!(r.iter().any(|r| r.contains("\"regressed\"")), "{r:?}");
    }

    #[test]
    fn names_normalise_across_exports() {
        assert_eq!(
            normalize_name("void flashinfer::norm::RMSNormKernel<(unsigned int)8, __nv_bfloat16>(T2 *, T2 *, unsigned int)"),
            normalize_name("void norm::RMSNormKernel<8, __nv_bfloat16>(T2 *, T2 *, unsigned int)")
        );
        assert_eq!(
            normalize_name("void causal_conv1d_update_kernel<Causal_conv1d_update_kernel_traits<(int)64, (int)3, c10::BFloat16>, (bool)0>(ConvParamsBase)"),
            "causal_conv1d_update_kernel<Causal_conv1d_update_kernel_traits<64, 3, c10::BFloat16>, 0>(ConvParamsBase)"
        );
        assert_eq!(normalize_name("nvjet_tst_64x8"), "nvjet_tst_64x8");
        assert_eq!(normalize_name("ns::k(float *, int)"), "k(float *, int)");
    }

    #[test]
    fn matching_tiers_and_schema() {
        let k = |n: &str, b: u64| (n.to_string(), Some([b, 1, 1]), Some([1, 1, 1]));
        let before = vec![k("a", 128), k("void x::b<(int)1>(int)", 64), k("c", 32), k("gone", 32)];
        let after = vec![k("c", 64), k("a", 128), k("void b<1>(int)", 64), k("new", 32)];
        let (pairs, ob, oa) = match_groups(&before, &after);
        assert!(pairs.contains(&(0, 1, MatchKind::Exact)));
        assert!(pairs.contains(&(1, 2, MatchKind::NormalizedName)));
        assert!(pairs.contains(&(2, 0, MatchKind::NameOnly)));
        assert_eq!((ob, oa), (vec![3], vec![3]));
        let cite = schema::Citable { metric: "m".into(), value: 2.5, unit: "%".into(), label: "M".into() };
        let cites = vec![Citable { side: SideName::After, cite }];
        let s = explanation_schema(&cites);
        assert_eq!(s["properties"]["evidence"]["items"]["anyOf"][0]["properties"]["side"]["const"], "after");
        let b = token_budget(&s);
        assert!(b > SUMMARY_MAX_CHARS + MAX_CAUSES * CAUSE_MAX_CHARS && b < 1200, "{b}");
    }
}
