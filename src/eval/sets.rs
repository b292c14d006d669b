//! `keet eval --sets PATH...`: set-level questions. keet finds the sets among the inputs
//! ([`crate::sets`]); each set asks which member is fastest, what bounds each member, at which
//! member along the set the busiest unit changes, which step of a version series saved the most
//! time, and which metric each version step changed the most. Every answer is computed from the
//! members' raw metrics (names and margins in `expert/eval-sets.toml` and `expert/eval.toml`),
//! never from keet's set analysis or its text: a question reads only the members' launches and how
//! the set names them (their varying value) and orders them.
//!
//! Formats: `raw` (every member's raw metric table, labelled by member), `profiles` (keet's
//! `--format context` of each member, one after another: the single-profile analysis), `set`
//! (keet's set context, [`crate::render::set_context`]); `none` and `generic` as in `keet eval`.
//! Scoring is `keet eval`'s, plus `set` against `profiles` on the same questions
//! ([`AgainstProfiles`], scored in `set_score.rs`).

use super::questions::{self, Basis, Draft, QuestionKind};
use super::{Condition, ContextSource, Contexts, EvalError, EvalOptions, EvalSet, Question, LETTERS};
use crate::analysis::FileError;
use crate::explain::report::{ExplainReport, KernelExplanation};
use crate::explain::{self, ExplainOptions, ReportSettings};
use crate::profile::{Launch, Profile};
use crate::sets::{KernelSet, Member, SetOptions};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const TABLE: &str = include_str!("../../expert/eval-sets.toml");

#[derive(Deserialize)]
struct Thresholds {
    fastest_margin_pct: f64,
    step_saving_min_pct: f64,
    step_lead_ratio: f64,
    metric_min_ratio: f64,
    metric_lead_ratio: f64,
    claim_min_points: f64,
    claim_max_p: f64,
}

#[derive(Deserialize)]
struct Stems {
    fastest: String,
    fastest_per_thread: String,
    bound: String,
    change: String,
    best_step: String,
    step_change: String,
}

#[derive(Deserialize)]
struct Options {
    no_change: String,
    no_saving: String,
}

/// A metric a version step may have changed: option text, raw names, and the denominator's names.
#[derive(Deserialize)]
struct StepMetric {
    text: String,
    metrics: Vec<String>,
    #[serde(default)]
    per: Vec<String>,
}

#[derive(Deserialize)]
struct Table {
    thresholds: Thresholds,
    stems: Stems,
    options: Options,
    step_metrics: BTreeMap<String, StepMetric>,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| toml::from_str(TABLE).unwrap_or_else(|e| panic!("expert/eval-sets.toml: {e}")))
}

/// The formats `keet eval --sets` asks in by default.
pub const DEFAULT_FORMATS: [Condition; 3] = [Condition::Raw, Condition::Profiles, Condition::Set];

/// The formats of a `--sets` run: `keet eval`'s default list (the user gave none) becomes
/// [`DEFAULT_FORMATS`]; formats that describe one profile (context, explained, md) are refused.
pub fn formats(asked: &[Condition], single_default: &[Condition]) -> Result<Vec<Condition>, EvalError> {
    if asked == single_default {
        return Ok(DEFAULT_FORMATS.to_vec());
    }
    let refused: Vec<&str> = asked
        .iter()
        .filter(|c| matches!(c, Condition::Context | Condition::Swapped | Condition::Explained | Condition::Md))
        .map(|c| c.name())
        .collect();
    if !refused.is_empty() {
        return Err(EvalError::Input(format!(
            "--sets asks in none, raw, generic, profiles and set; not {} (one profile's formats: `profiles` holds each member's context)",
            refused.join(", ")
        )));
    }
    Ok(asked.to_vec())
}

/// `profiles` and `set` outside `--sets` have no text: refused.
pub fn refuse_set_formats(asked: &[Condition]) -> Result<(), EvalError> {
    match asked.iter().find(|c| matches!(c, Condition::Profiles | Condition::Set)) {
        Some(c) => Err(EvalError::Input(format!("format {} is for `keet eval --sets` only", c.name()))),
        None => Ok(()),
    }
}

/// How a question names a member: its value of what varies.
fn named(m: &Member) -> String {
    format!("`{}`", m.value)
}

fn with_member(b: Basis, m: &Member) -> Basis {
    Basis { kernel: m.value.clone(), ..b }
}

/// The correct option and three distractors drawn from `others` (fewer than three: no question).
fn draw(correct: String, mut others: Vec<String>, rng: &mut StdRng) -> Option<(String, Vec<String>)> {
    others.retain(|o| *o != correct);
    others.dedup();
    others.shuffle(rng);
    if others.len() < 3 {
        return None;
    }
    others.truncate(3);
    Some((correct, others))
}

fn draft(kind: QuestionKind, question: String, key: String, options: (String, Vec<String>), basis: Vec<Basis>) -> Draft {
    Draft { kind, question, answer_key: key, correct: options.0, distractors: options.1, basis }
}

/// Which member is fastest: the least `gpu__time_duration`, or per thread (grid x block threads
/// from the launch's own metrics) when the problem size varies; the lead must pass the margin.
fn fastest(set: &KernelSet, launches: &[&Launch], rng: &mut StdRng) -> Option<Draft> {
    let per_thread = set.varies.iter().any(|v| v == "problem size");
    let mut timed: Vec<(usize, f64, Vec<Basis>)> = Vec::new();
    for (i, (m, launch)) in set.members.iter().zip(launches).enumerate() {
        let Some((time, b)) = questions::raw_metric(launch, "duration") else { continue };
        let mut basis = vec![with_member(b, m)];
        let mut cost = time;
        if per_thread {
            let Some((blocks, bb)) = questions::raw_metric(launch, "grid_blocks") else { continue };
            let Some((threads, tb)) = questions::raw_named(launch, &["launch__block_size".to_string()]) else { continue };
            if blocks * threads <= 0.0 {
                continue;
            }
            cost = time / (blocks * threads);
            basis.extend([with_member(bb, m), with_member(tb, m)]);
        }
        timed.push((i, cost, basis));
    }
    if timed.len() < 4 {
        return None;
    }
    timed.sort_by(|a, b| a.1.total_cmp(&b.1));
    if timed[1].1 <= 0.0 || 100.0 * (timed[1].1 - timed[0].1) / timed[1].1 < table().thresholds.fastest_margin_pct {
        return None;
    }
    let values: Vec<String> = timed.iter().map(|t| named(&set.members[t.0])).collect();
    let options = draw(values[0].clone(), values[1..].to_vec(), rng)?;
    let stem = if per_thread { &table().stems.fastest_per_thread } else { &table().stems.fastest };
    let key = set.members[timed[0].0].value.clone();
    let basis = timed.into_iter().flat_map(|t| t.2).collect();
    Some(draft(QuestionKind::SetFastest, stem.replace("{kernel}", &set.name), key, options, basis))
}

/// What bounds one member: the single-profile bound-unit question's rule and options.
fn bound(set: &KernelSet, m: &Member, launch: &Launch) -> Option<Draft> {
    let d = questions::bound_unit(launch, &named(m))?;
    let question = table().stems.bound.replace("{kernel}", &set.name).replace("{member}", &named(m));
    Some(Draft { kind: QuestionKind::SetBound, question, basis: d.basis.into_iter().map(|b| with_member(b, m)).collect(), ..d })
}

/// At which member (in the set's order) the busiest unit first differs from the member before,
/// by the bound-unit rule; every member must have a clear busiest unit.
fn change(set: &KernelSet, launches: &[&Launch], rng: &mut StdRng) -> Option<Draft> {
    if set.members.len() < 4 {
        return None;
    }
    let mut keys = Vec::new();
    let mut basis = Vec::new();
    for (m, launch) in set.members.iter().zip(launches) {
        let d = questions::bound_unit(launch, "")?;
        keys.push(d.answer_key);
        basis.extend(d.basis.into_iter().map(|b| with_member(b, m)));
    }
    let values: Vec<String> = set.members.iter().map(named).collect();
    let no_change = table().options.no_change.clone();
    let at = (1..keys.len()).find(|&i| keys[i] != keys[i - 1]);
    let (key, correct) = match at {
        Some(i) => (set.members[i].value.clone(), values[i].clone()),
        None => ("no-change".to_string(), no_change.clone()),
    };
    let candidates: Vec<String> = values[1..].iter().cloned().chain([no_change]).collect();
    let options = draw(correct, candidates, rng)?;
    let question = table()
        .stems
        .change
        .replace("{kernel}", &set.name)
        .replace("{members}", &values.join(", "))
        .replace("{idle_pct}", &crate::rules::fmt_num(questions::idle_all_below_pct()));
    Some(draft(QuestionKind::SetChange, question, key, options, basis))
}

/// The members' raw times in the set's order (all of them, or none).
fn times(set: &KernelSet, launches: &[&Launch]) -> Option<Vec<(f64, Basis)>> {
    set.members.iter().zip(launches).map(|(m, l)| questions::raw_metric(l, "duration").map(|(t, b)| (t, with_member(b, m)))).collect()
}

/// A version series whose steps (neighbouring members) each differ in the version alone; in a set
/// whose versions repeat across files, neighbours differ in the version and the launch too.
fn is_series(set: &KernelSet) -> bool {
    set.varies.iter().any(|v| v == "version") && set.pairs.iter().filter(|p| p.b == p.a + 1).all(|p| p.used)
}

fn step_name(a: &Member, b: &Member) -> String {
    format!("{} -> {}", named(a), named(b))
}

/// Which step of a version series saved the most time (or none beyond noise).
fn best_step(set: &KernelSet, launches: &[&Launch], rng: &mut StdRng) -> Option<Draft> {
    if !is_series(set) || set.members.len() < 4 {
        return None;
    }
    let th = &table().thresholds;
    let timed = times(set, launches)?;
    let mut savings: Vec<(usize, f64)> =
        (1..timed.len()).filter(|&i| timed[i - 1].0 > 0.0).map(|i| (i, 100.0 * (timed[i - 1].0 - timed[i].0) / timed[i - 1].0)).collect();
    if savings.len() + 1 != timed.len() {
        return None;
    }
    savings.sort_by(|a, b| b.1.total_cmp(&a.1));
    let steps: Vec<String> = (1..set.members.len()).map(|i| step_name(&set.members[i - 1], &set.members[i])).collect();
    let no_saving = table().options.no_saving.replace("{pct}", &crate::rules::fmt_num(th.step_saving_min_pct));
    let (best, saved) = savings[0];
    let second = savings.get(1).map_or(0.0, |s| s.1.max(0.0));
    let (key, correct) = if saved < th.step_saving_min_pct {
        ("no-saving".to_string(), no_saving.clone())
    } else if saved >= th.step_lead_ratio * second {
        (steps[best - 1].replace('`', ""), steps[best - 1].clone())
    } else {
        return None;
    };
    let candidates: Vec<String> = steps.iter().cloned().chain([no_saving]).collect();
    let options = draw(correct, candidates, rng)?;
    let values: Vec<String> = set.members.iter().map(named).collect();
    let question = table().stems.best_step.replace("{kernel}", &set.name).replace("{members}", &values.join(", "));
    Some(draft(QuestionKind::SetBestStep, question, key, options, timed.into_iter().map(|t| t.1).collect()))
}

/// A step metric's value in one launch (a ratio when it has a denominator), with its basis.
fn step_metric(metric: &StepMetric, launch: &Launch, m: &Member) -> Option<(f64, Vec<Basis>)> {
    let (value, b) = questions::raw_named(launch, &metric.metrics)?;
    if metric.per.is_empty() {
        return Some((value, vec![with_member(b, m)]));
    }
    let (per, pb) = questions::raw_named(launch, &metric.per)?;
    (per > 0.0).then(|| (value / per, vec![with_member(b, m), with_member(pb, m)]))
}

/// How much a metric changed: the log of the larger value over the smaller (infinite from zero).
fn log_change(a: f64, b: f64) -> f64 {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    if hi <= 0.0 || lo < 0.0 {
        0.0
    } else if lo == 0.0 {
        f64::INFINITY
    } else {
        (hi / lo).ln()
    }
}

/// Which metric a version step (members `i - 1` to `i`) changed the most, for a step whose time
/// moved beyond noise; the largest change must lead the next one.
fn step_change(set: &KernelSet, launches: &[&Launch], i: usize, rng: &mut StdRng) -> Option<Draft> {
    let th = &table().thresholds;
    let (a, b) = (&set.members[i - 1], &set.members[i]);
    let (ta, tb) = (questions::raw_metric(launches[i - 1], "duration")?, questions::raw_metric(launches[i], "duration")?);
    if ta.0 <= 0.0 || 100.0 * (tb.0 - ta.0).abs() / ta.0 < th.step_saving_min_pct {
        return None;
    }
    let mut moved: Vec<(f64, &str, Vec<Basis>)> = Vec::new();
    for (key, metric) in &table().step_metrics {
        let (Some((x, bx)), Some((y, by))) = (step_metric(metric, launches[i - 1], a), step_metric(metric, launches[i], b)) else {
            continue;
        };
        moved.push((log_change(x, y), key, bx.into_iter().chain(by).collect()));
    }
    if moved.len() < 4 {
        return None;
    }
    moved.sort_by(|p, q| q.0.total_cmp(&p.0).then(p.1.cmp(q.1)));
    let (top, next) = (moved[0].0, moved[1].0);
    if top < th.metric_min_ratio.ln() || next.is_infinite() || top < th.metric_lead_ratio * next {
        return None;
    }
    let text = |key: &str| table().step_metrics[key].text.clone();
    let key = moved[0].1.to_string();
    let options = draw(text(&key), moved[1..].iter().map(|m| text(m.1)).collect(), rng)?;
    let question = table().stems.step_change.replace("{kernel}", &set.name).replace("{from}", &named(a)).replace("{to}", &named(b));
    let basis = [(ta.1, a), (tb.1, b)].into_iter().map(|(x, m)| with_member(x, m)).chain(moved.into_iter().flat_map(|m| m.2)).collect();
    Some(draft(QuestionKind::SetStepChange, question, key, options, basis))
}

/// Every question of one set (the members' launches in the set's order). `asked` holds the
/// members (file, launch) already asked about in another set: each is asked about once.
pub fn set_questions(set: &KernelSet, launches: &[&Launch], asked: &mut HashSet<(PathBuf, u32)>, rng: &mut StdRng) -> Vec<Draft> {
    let mut out: Vec<Draft> = Vec::new();
    out.extend(fastest(set, launches, rng));
    for (m, launch) in set.members.iter().zip(launches) {
        if asked.insert((m.file.to_path_buf(), m.launch)) {
            out.extend(bound(set, m, launch));
        }
    }
    out.extend(change(set, launches, rng));
    if is_series(set) {
        out.extend(best_step(set, launches, rng));
        for i in 1..set.members.len() {
            out.extend(step_change(set, launches, i, rng));
        }
    }
    out
}

/// The profiles and rule-layer reports of a run, each read once.
#[derive(Default)]
struct Loaded {
    profiles: HashMap<PathBuf, Profile>,
    reports: HashMap<PathBuf, ExplainReport>,
}

impl Loaded {
    /// Reads `file` and its rule-layer report (every kernel) unless already read.
    fn load(&mut self, file: &Path, opts: &EvalOptions) -> Result<(), String> {
        if self.reports.contains_key(file) {
            return Ok(());
        }
        let profile = crate::profile::read_path(file).map_err(|e| e.to_string())?;
        let base = super::rules_report_options(opts);
        let eopts = ExplainOptions { settings: ReportSettings { top: 10_000, ..base.settings }, ..base };
        let (report, _) = explain::explain(&[file.to_path_buf()], &eopts).map_err(|e| e.to_string())?;
        self.profiles.insert(file.to_path_buf(), profile);
        self.reports.insert(file.to_path_buf(), report);
        Ok(())
    }

    fn launch(&self, m: &Member) -> Option<&Launch> {
        self.profiles.get(&*m.file)?.launches.get(m.launch as usize)
    }

    /// The report's kernel the member is (same name and launch shape).
    fn kernel(&self, m: &Member) -> Option<(&ExplainReport, &KernelExplanation)> {
        let report = self.reports.get(&*m.file)?;
        let k = report
            .kernels
            .iter()
            .find(|k| *k.analysis.name == *m.kernel && k.analysis.block_size == m.block_size && k.analysis.grid_size == m.grid_size)?;
        Some((report, k))
    }
}

/// How a context introduces a member.
fn member_heading(m: &Member) -> String {
    let file = m.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let launches = if m.launches > 1 { format!(", the median of its {} launches", m.launches) } else { String::new() };
    format!("### Member `{}`: kernel `{}` in {file} (launch {}{launches})\n\n", m.value, m.kernel, m.launch)
}

/// The raw format: each member's raw metric table (the metrics `keet eval`'s raw table shows and
/// those the set questions read), labelled by member.
fn raw_context(set: &KernelSet, loaded: &Loaded) -> Option<String> {
    let extra: Vec<&String> = table().step_metrics.values().flat_map(|m| m.metrics.iter().chain(&m.per)).collect();
    let mut out = format!("Raw metrics of the {} members of the set of `{}`.\n\n", set.members.len(), set.name);
    for m in &set.members {
        let launch = loaded.launch(m)?;
        let (_, k) = loaded.kernel(m)?;
        let mut rows: BTreeMap<String, String> = super::raw_rows(k, launch).into_iter().collect();
        for name in &extra {
            if let Some(metric) = launch.metrics.get(name) {
                let v = if metric.raw_unit.is_empty() {
                    metric.raw_value.to_string()
                } else {
                    format!("{} {}", metric.raw_value, metric.raw_unit)
                };
                rows.insert(name.to_string(), v);
            }
        }
        out.push_str(&member_heading(m));
        out.push_str("| metric | value |\n|---|---|\n");
        for (name, value) in rows {
            out.push_str(&format!("| {name} | {value} |\n"));
        }
        out.push('\n');
    }
    Some(out)
}

/// The profiles format: keet's `--format context` of each member's kernel, one after another.
fn profiles_context(set: &KernelSet, loaded: &Loaded) -> Option<String> {
    let mut out =
        format!("keet's analysis of each of the {} members of the set of `{}`, one profile at a time.\n\n", set.members.len(), set.name);
    for m in &set.members {
        let (report, k) = loaded.kernel(m)?;
        let mut one = super::report_with(report, &[k]);
        one.sets.clear();
        out.push_str(&member_heading(m));
        out.push_str(&crate::render::context::explain_context(&one, None).ok()?);
        out.push('\n');
    }
    Some(out)
}

fn set_contexts(set: &KernelSet, loaded: &Loaded) -> Option<Contexts> {
    let values: Vec<String> = set.members.iter().map(named).collect();
    Some(Contexts {
        none: format!("A set of {} profiles of `{}`: members {}.\n", set.members.len(), set.name, values.join(", ")),
        raw: raw_context(set, loaded)?,
        profiles: profiles_context(set, loaded)?,
        set: crate::render::set_context::set_context(set),
        ..Default::default()
    })
}

/// Builds the set questions for every set among `inputs` (directories searched recursively), one
/// question set per seed; the contexts are built once per set.
pub fn build(inputs: &[PathBuf], opts: &EvalOptions) -> Result<EvalSet, EvalError> {
    let files = crate::profile::expand_inputs(inputs).map_err(|e| EvalError::Io(e.to_string()))?;
    let seeds: Vec<u64> = if opts.seeds.is_empty() { vec![0] } else { opts.seeds.clone() };
    let (sets, broken) = crate::sets::find(&files, &SetOptions { jobs: opts.jobs, ..Default::default() });
    let mut out = EvalSet { files: files.clone(), seeds: seeds.clone(), ..Default::default() };
    out.errors.extend(broken.into_iter().map(|b| FileError { path: b.file, message: b.message }));
    let mut loaded = Loaded::default();
    let mut drafts: Vec<Vec<(Draft, PathBuf, String, usize)>> = vec![Vec::new(); seeds.len()];
    let mut asked: Vec<HashSet<(PathBuf, u32)>> = vec![HashSet::new(); seeds.len()];
    let mut in_asked_set: HashSet<PathBuf> = HashSet::new();
    for (index, set) in sets.iter().enumerate() {
        for m in &set.members {
            if let Err(message) = loaded.load(&m.file, opts) {
                out.errors.push(FileError { path: m.file.to_path_buf(), message });
            }
        }
        let Some(launches) = set.members.iter().map(|m| loaded.launch(m)).collect::<Option<Vec<&Launch>>>() else { continue };
        let Some(contexts) = set_contexts(set, &loaded) else { continue };
        let context = out.contexts.len();
        let mut any = false;
        for (s, seed) in seeds.iter().enumerate() {
            let mut rng = StdRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9E37_79B9));
            for d in set_questions(set, &launches, &mut asked[s], &mut rng) {
                drafts[s].push((d, set.members[0].file.to_path_buf(), set.name.clone(), context));
                any = true;
            }
        }
        if any {
            out.contexts.push(contexts);
            out.sources.push(ContextSource { file: set.members[0].file.to_path_buf(), rank: None });
            in_asked_set.extend(set.members.iter().map(|m| m.file.to_path_buf()));
        }
    }
    out.without_questions = files.iter().filter(|f| !in_asked_set.contains(*f)).cloned().collect();
    super::add_generic(&mut out, &super::generic::approx_tokens);
    for (seed, per_seed) in seeds.iter().zip(drafts) {
        let mut rng = StdRng::seed_from_u64(*seed);
        for (d, file, kernel, context) in per_seed {
            let number = out.questions.len();
            out.questions.push(question(d, *seed, number, file, kernel, context, &mut rng));
        }
    }
    Ok(out)
}

/// A draft with its options shuffled.
fn question(d: Draft, seed: u64, number: usize, file: PathBuf, kernel: String, context: usize, rng: &mut StdRng) -> Question {
    let mut options: Vec<(String, bool)> =
        std::iter::once((d.correct, true)).chain(d.distractors.into_iter().map(|x| (x, false))).collect();
    options.shuffle(rng);
    let at = options.iter().position(|o| o.1).expect("the correct option is among the options");
    Question {
        id: format!("s{seed}-g{:04}", number + 1),
        seed,
        kind: d.kind,
        file,
        kernel,
        question: d.question,
        options: options.into_iter().map(|o| o.0).collect(),
        answer: LETTERS[at].to_string(),
        answer_key: d.answer_key,
        basis: d.basis,
        context,
    }
}

/// `set` against `profiles` on the same questions: the paper's claim that a set's analysis
/// answers set questions better than each profile's analysis alone (scored in `set_score.rs`).
#[derive(Debug, Clone, Serialize)]
pub struct AgainstProfiles {
    pub format: String,
    pub against: String,
    /// Per question kind with questions, then overall.
    pub rows: Vec<PairedRow>,
    pub overall: PairedRow,
    /// `set` beats `profiles` overall by at least `claim_min_points` with p under `claim_max_p`.
    pub claim_holds: bool,
    pub claim_min_points: f64,
    pub claim_max_p: f64,
}

/// One kind's (or all questions') pairing of `set` with `profiles`.
#[derive(Debug, Clone, Serialize)]
pub struct PairedRow {
    pub kind: String,
    pub questions: usize,
    pub paired: SetPaired,
}

/// `keet eval`'s paired comparison (the fields of score's `Paired`), `set` against `profiles`.
#[derive(Debug, Clone, Serialize)]
pub struct SetPaired {
    pub against: String,
    /// Questions right with `set` and wrong with `profiles`.
    pub wins: usize,
    /// Questions right with `profiles` and wrong with `set`.
    pub losses: usize,
    /// Circular accuracy difference, points.
    pub delta_pts: f64,
    /// Exact two-sided sign test on the discordant pairs.
    pub p_value: f64,
}

/// The claim's thresholds: (points, p) from `expert/eval-sets.toml`.
pub(crate) fn claim_thresholds() -> (f64, f64) {
    (table().thresholds.claim_min_points, table().thresholds.claim_max_p)
}

/// "raw 904-6357 (mean 2500) tokens, ...": each format's context sizes over the sets asked, as
/// `count` (the answering model's tokenizer) counts them.
pub fn context_tokens(set: &EvalSet, formats: &[Condition], count: &dyn Fn(&str) -> usize) -> String {
    let parts: Vec<String> = formats
        .iter()
        .map(|&f| {
            let sizes: Vec<usize> = set.contexts.iter().map(|c| count(c.get(f))).collect();
            let (lo, hi) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
            let mean = sizes.iter().sum::<usize>() / sizes.len().max(1);
            format!("{} {lo}-{hi} tokens (mean {mean})", f.name())
        })
        .collect();
    format!("context sizes over {} sets: {}", set.contexts.len(), parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_every_stem_names_its_set() {
        let t = table();
        for stem in
            [&t.stems.fastest, &t.stems.fastest_per_thread, &t.stems.bound, &t.stems.change, &t.stems.best_step, &t.stems.step_change]
        {
            assert!(stem.contains("{kernel}"), "{stem}");
        }
        assert!(t.step_metrics.len() >= 4 && t.step_metrics.values().all(|m| !m.metrics.is_empty() && !m.text.is_empty()));
        assert!(t.thresholds.metric_lead_ratio > 1.0 && t.thresholds.step_lead_ratio > 1.0);
    }

    /// Three distractors, none equal to the key, none twice; too few candidates: no question.
    #[test]
    fn drawing_keeps_the_key_out_of_the_distractors() {
        let mut rng = StdRng::seed_from_u64(3);
        let others: Vec<String> = ["a", "b", "key", "c", "d"].map(String::from).to_vec();
        let (key, distractors) = draw("key".into(), others, &mut rng).expect("enough candidates");
        assert_eq!(key, "key");
        assert_eq!(distractors.len(), 3);
        assert!(!distractors.contains(&key));
        let unique: HashSet<&String> = distractors.iter().collect();
        assert_eq!(unique.len(), 3);
        assert!(draw("key".into(), ["a", "key", "b"].map(String::from).to_vec(), &mut rng).is_none());
    }

    #[test]
    fn a_change_from_zero_outweighs_any_ratio_and_no_change_is_zero() {
        assert_eq!(log_change(0.0, 5.0), f64::INFINITY);
        assert_eq!(log_change(0.0, 0.0), 0.0);
        assert!((log_change(4.0, 1.0) - 4f64.ln()).abs() < 1e-12);
        assert_eq!(log_change(2.0, 8.0), log_change(8.0, 2.0));
    }

    #[test]
    fn the_single_profile_default_becomes_the_set_formats() {
        let single = [Condition::None, Condition::Raw, Condition::Generic, Condition::Context, Condition::Explained];
        assert_eq!(formats(&single, &single).unwrap(), DEFAULT_FORMATS.to_vec());
        assert_eq!(formats(&[Condition::None, Condition::Set], &single).unwrap(), vec![Condition::None, Condition::Set]);
        let err = formats(&[Condition::Raw, Condition::Explained], &single).unwrap_err().to_string();
        assert!(err.contains("explained"), "{err}");
        assert!(refuse_set_formats(&[Condition::Raw, Condition::Profiles]).is_err());
        assert!(refuse_set_formats(&single).is_ok());
    }
}
