//! `keet eval`: what keet's report is worth to a model. Multiple-choice questions with known answers
//! are generated from each profile's raw metrics ([`questions`]); the local model answers each one
//! with one constrained letter ([`answer`]), once per context format (nothing but the kernel's name,
//! the raw metric table, generic advice as long as keet's context ([`generic`], the placebo), keet's
//! `--format context` report, keet's report with the model's own explanations, the full Markdown
//! report) and once per rotation of its options (circular evaluation: [`Question::options_in`]);
//! [`score`] tallies circular accuracy with 95% intervals per question kind and format, the share
//! right per rotation, and compares each format with the raw table on the same questions ([`stats`]).
//!
//! Data flow: inputs → (per file) the rule-layer explain report and the raw launches → questions
//! for each seed with their contexts ([`EvalSet`]) → answers ([`answer`], or a JSONL file made
//! elsewhere) → [`score::EvalReport`].

pub mod answer;
pub mod causes;
pub mod generic;
pub mod peers;
pub mod questions;
pub mod score;
pub mod set_score;
pub mod sets;
pub mod stats;
pub mod twins;

pub use answer::{answer, AnswerBy, AnswerRun, FormatCost};
pub use score::{EvalModel, EvalReport};

use crate::analysis::FileError;
use crate::explain::report::{ExplainReport, KernelExplanation};
use crate::explain::{self, ExplainOptions, ReportSettings, RunOptions};
use crate::profile::Launch;
use questions::{Basis, Draft, ProfileKernel, QuestionKind};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;

pub const EVAL_SCHEMA: &str = "keet.eval/3";
pub const LETTERS: [&str; 4] = ["A", "B", "C", "D"];
/// Rotations of a question's four options in circular evaluation: each option under each letter once.
pub const ROTATIONS: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("listing inputs: {0}")]
    Io(String),
    #[error(transparent)]
    Explain(#[from] explain::ExplainError),
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
    /// A bad line in an answers or questions file: `file:line: what`.
    #[error("{0}")]
    Input(String),
}

/// What the model sees before each question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    /// Nothing but the kernel's name (and the question): what the model knows without the profile.
    None,
    /// The raw metric table alone (names and values as the profile wrote them).
    Raw,
    /// The placebo: CUDA performance advice for no particular kernel, from keet's expert tables, as
    /// long in tokens as `context` ([`generic`]).
    Generic,
    /// keet's `--format context` report (rule layer only, no model text).
    Context,
    /// The second placebo: keet's `context` of another kernel of the run ([`add_swapped`]). The
    /// same words, layout and length as `context`, with another kernel's facts: if `context` beats
    /// it, the model takes the facts, not the vocabulary.
    Swapped,
    /// keet's report with the model's own explanations: the explain stage run with the same model,
    /// rendered as `--format context` followed by each finding's claim and explanation.
    Explained,
    /// keet's full Markdown report (`--format md`, rule layer only).
    Md,
    /// `keet eval --sets`: keet's `--format context` of each member of a set, one after another
    /// (the single-profile analysis).
    Profiles,
    /// `keet eval --sets`: keet's set context (`render::context::set_context`): the members with
    /// their varying value, time, regime and bound unit, the fastest, the changes, the version steps.
    Set,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::None => "none",
            Condition::Raw => "raw",
            Condition::Generic => "generic",
            Condition::Context => "context",
            Condition::Swapped => "swapped",
            Condition::Explained => "explained",
            Condition::Md => "md",
            Condition::Profiles => "profiles",
            Condition::Set => "set",
        }
    }
}

/// One context a question is asked in, in each format.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Contexts {
    pub none: String,
    pub raw: String,
    /// The placebo, sized to `context` ([`add_generic`]).
    #[serde(default)]
    pub generic: String,
    pub context: String,
    /// keet's context of another kernel ([`add_swapped`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub swapped: String,
    pub md: String,
    /// Only when the explain stage ran with a model ([`add_explained`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained: Option<String>,
    /// `keet eval --sets` only: each member's `--format context`, one after another.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profiles: String,
    /// `keet eval --sets` only: keet's set context.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub set: String,
}

impl Contexts {
    pub fn get(&self, c: Condition) -> &str {
        match c {
            Condition::None => &self.none,
            Condition::Raw => &self.raw,
            Condition::Generic => &self.generic,
            Condition::Context => &self.context,
            Condition::Swapped => &self.swapped,
            Condition::Explained => self.explained.as_deref().unwrap_or(""),
            Condition::Md => &self.md,
            Condition::Profiles => &self.profiles,
            Condition::Set => &self.set,
        }
    }
}

/// A question with its options in shuffled order and the letter of the correct one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Question {
    /// `s<seed>-q<number>`: unique across the seeds of a run.
    pub id: String,
    /// The seed that drew this question's distractors and shuffled its options.
    #[serde(default)]
    pub seed: u64,
    pub kind: QuestionKind,
    pub file: PathBuf,
    /// The kernel asked about (empty for a question about the whole profile).
    pub kernel: String,
    pub question: String,
    pub options: Vec<String>,
    /// "A".."D".
    pub answer: String,
    /// The option key the answer stands for (`dram`, `registers`, a stall reason, a kernel).
    pub answer_key: String,
    /// The raw metrics the answer follows from.
    pub basis: Vec<Basis>,
    /// Index into [`EvalSet::contexts`].
    #[serde(skip)]
    pub context: usize,
}

impl Question {
    /// The options as rotation `rotation` shows them: option `(i + rotation) % 4` under letter `i`
    /// (rotation 0: as drawn). Over the four rotations each option stands under each letter once.
    pub fn options_in(&self, rotation: usize) -> Vec<&str> {
        let n = self.options.len();
        (0..n).map(|i| self.options[(i + rotation) % n].as_str()).collect()
    }

    /// Where option `option` (its index in rotation 0) stands in rotation `rotation`.
    pub fn position_in(&self, option: usize, rotation: usize) -> usize {
        let n = self.options.len().max(1);
        (option + n - rotation % n) % n
    }

    /// The correct letter in rotation `rotation`.
    pub fn answer_in(&self, rotation: usize) -> &'static str {
        rotated_letter(&self.answer, rotation)
    }
}

/// Where the option under `letter` in rotation 0 stands in rotation `rotation` (letter `(i - r) mod 4`).
pub fn rotated_letter(letter: &str, rotation: usize) -> &'static str {
    let at = LETTERS.iter().position(|l| *l == letter).unwrap_or(0);
    LETTERS[(at + ROTATIONS - rotation % ROTATIONS) % ROTATIONS]
}

/// Which kernel of which profile a context describes (for the explained format).
#[derive(Debug, Clone)]
pub struct ContextSource {
    pub file: PathBuf,
    /// The kernel's rank in the profile's report; `None` for the whole-profile context.
    pub rank: Option<usize>,
}

/// The questions of a run and the contexts they are asked in.
#[derive(Debug, Clone, Default)]
pub struct EvalSet {
    pub questions: Vec<Question>,
    pub contexts: Vec<Contexts>,
    pub sources: Vec<ContextSource>,
    pub files: Vec<PathBuf>,
    pub seeds: Vec<u64>,
    pub errors: Vec<FileError>,
    /// Profiles that read but gave no question (their metrics answer no kind clearly).
    pub without_questions: Vec<PathBuf>,
    /// Other tools' contexts, one format each (`--context NAME=FILE.jsonl`).
    pub peers: Vec<peers::PeerContexts>,
}

#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Kernels per profile asked about (the ones that take the most time).
    pub top: usize,
    /// One question set per seed (distractors and option order); contexts are shared.
    pub seeds: Vec<u64>,
    pub jobs: usize,
    /// Kernels the model explains at once in the explained format (decoded together, each answer
    /// what it is alone; see `keet explain --concurrency`).
    pub concurrency: usize,
}

/// Builds the questions for every profile in `inputs` (directories searched recursively), one set
/// per seed. The contexts do not depend on the seed and are built once.
pub fn build(inputs: &[PathBuf], opts: &EvalOptions) -> Result<EvalSet, EvalError> {
    let files = crate::profile::expand_inputs(inputs).map_err(|e| EvalError::Io(e.to_string()))?;
    let seeds: Vec<u64> = if opts.seeds.is_empty() { vec![0] } else { opts.seeds.clone() };
    let mut rngs: Vec<StdRng> = seeds.iter().map(|&s| StdRng::seed_from_u64(s)).collect();
    let mut set = EvalSet { files: files.clone(), seeds: seeds.clone(), ..Default::default() };
    // Per seed: (draft, file, kernel label, context index).
    let mut drafts: Vec<Vec<(Draft, PathBuf, String, usize)>> = vec![Vec::new(); seeds.len()];
    for file in &files {
        let profile = match crate::profile::read_path(file) {
            Ok(p) => p,
            Err(e) => {
                set.errors.push(FileError { path: file.clone(), message: e.to_string() });
                continue;
            }
        };
        let eopts = rules_report_options(opts);
        let (report, _) = explain::explain(std::slice::from_ref(file), &eopts)?;
        set.errors.extend(report.errors.iter().cloned());
        let by_id: HashMap<u64, &Launch> = profile.launches.iter().map(|l| (l.id, l)).collect();
        let mut kernels: Vec<&KernelExplanation> = report.kernels.iter().collect();
        kernels.sort_by_key(|k| k.rank);
        let (mut profile_kernels, mut profile_explained) = (Vec::new(), Vec::new());
        let mut asked = 0usize;
        for k in &kernels {
            let Some(launch) = by_id.get(&k.analysis.id) else { continue };
            let label = kernel_label(k);
            let ctx = set.contexts.len();
            set.contexts.push(kernel_contexts(&report, k, launch));
            set.sources.push(ContextSource { file: file.clone(), rank: Some(k.rank) });
            for (per_seed, rng) in drafts.iter_mut().zip(rngs.iter_mut()) {
                for d in questions::kernel_questions(launch, &format!("`{label}`"), rng) {
                    per_seed.push((d, file.clone(), label.clone(), ctx));
                    asked += 1;
                }
            }
            profile_kernels.push(ProfileKernel { label: reader_label(k), total_ns: k.kernel.total_duration_ns, launch });
            profile_explained.push(*k);
        }
        tell_apart(&mut profile_kernels, &profile_explained);
        if let Some(d) = questions::most_gain(&profile_kernels) {
            let ctx = set.contexts.len();
            let launches: Vec<(&KernelExplanation, &Launch)> =
                kernels.iter().filter_map(|k| Some((*k, *by_id.get(&k.analysis.id)?))).collect();
            set.contexts.push(profile_contexts(&report, &launches, file));
            set.sources.push(ContextSource { file: file.clone(), rank: None });
            for per_seed in drafts.iter_mut() {
                per_seed.push((d.clone(), file.clone(), String::new(), ctx));
                asked += 1;
            }
        }
        if asked == 0 {
            set.without_questions.push(file.clone());
        }
    }
    add_generic(&mut set, &generic::approx_tokens);
    add_swapped(&mut set);
    for ((seed, mut per_seed), rng) in seeds.iter().zip(drafts).zip(rngs.iter_mut()) {
        per_seed.shuffle(rng);
        for (i, (d, file, kernel, context)) in per_seed.into_iter().enumerate() {
            let mut options: Vec<(String, bool)> =
                std::iter::once((d.correct, true)).chain(d.distractors.into_iter().map(|x| (x, false))).collect();
            options.shuffle(rng);
            let at = options.iter().position(|o| o.1).expect("the correct option is among the options");
            set.questions.push(Question {
                id: format!("s{seed}-q{:04}", i + 1),
                seed: *seed,
                kind: d.kind,
                file,
                kernel,
                question: d.question,
                options: options.into_iter().map(|o| o.0).collect(),
                answer: LETTERS[at].to_string(),
                answer_key: d.answer_key,
                basis: d.basis,
                context,
            });
        }
    }
    Ok(set)
}

/// Fills every context's `swapped` text: keet's context of another kernel, the one half the run
/// away in the order the contexts were read (a fixed derangement of the kernels, so that a run
/// with two or more kernels gives each another's facts; files in a directory are read in name
/// order, so the other kernel is mostly another profile's). A run of one context has nothing to
/// swap, and the format is then empty.
pub fn add_swapped(set: &mut EvalSet) {
    let kernels: Vec<usize> = (0..set.contexts.len()).filter(|&i| !set.contexts[i].context.is_empty()).collect();
    let count = kernels.len();
    for (at, &i) in kernels.iter().enumerate() {
        let other = kernels[(at + count / 2) % count];
        set.contexts[i].swapped = if other == i { String::new() } else { set.contexts[other].context.clone() };
    }
}

/// Fills every context's placebo ([`generic::advice`]) with as many tokens as its `context` text
/// (a set's: its `set` text), counted by `count` (the answering model's tokenizer; [`build`] sizes
/// it with [`generic::approx_tokens`] until this is called).
pub fn add_generic(set: &mut EvalSet, count: &dyn Fn(&str) -> usize) {
    let mut by_length: HashMap<usize, String> = HashMap::new();
    for ctx in &mut set.contexts {
        let target = count(if ctx.context.is_empty() { &ctx.set } else { &ctx.context });
        ctx.generic = by_length.entry(target).or_insert_with(|| generic::advice(target, count)).clone();
    }
}

/// The explain options of the rule-layer report the questions' contexts come from.
pub(crate) fn rules_report_options(opts: &EvalOptions) -> ExplainOptions {
    ExplainOptions {
        settings: ReportSettings {
            top: opts.top.max(1),
            coverage_pct: 100.0,
            no_llm: true,
            // The questions are about the profile; code edits are scored by `keet eval --twins`.
            edit: false,
            ..ReportSettings::default()
        },
        // The explained context is the kernels' explanations, as measured before the summary existed.
        summary: false,
        run: RunOptions { cache: None, jobs: opts.jobs, progress: false, ..RunOptions::default() },
        ..Default::default()
    }
}

/// Runs keet's explain stage with the model for every profile of `set` (the same kernels as the
/// rule-layer report) and fills each context's `explained` text: that report as `--format
/// context`, followed by the model's explanations. `progress(done, total)` per profile.
pub fn add_explained(
    set: &mut EvalSet,
    opts: &EvalOptions,
    engine: &crate::llm::EngineOptions,
    cache: Option<PathBuf>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(), EvalError> {
    let plan = explained_plan(set);
    let total = plan.len();
    for (i, (file, ranks)) in plan.iter().enumerate() {
        let base = rules_report_options(opts);
        let eopts = ExplainOptions {
            settings: ReportSettings { no_llm: false, ..base.settings },
            model_ranks: ranks.clone(),
            run: RunOptions { engine: engine.clone(), cache: cache.clone(), concurrency: opts.concurrency.max(1), ..base.run },
            ..base
        };
        let (report, _) = explain::explain(std::slice::from_ref(file), &eopts)?;
        for (ctx, source) in set.contexts.iter_mut().zip(&set.sources) {
            if &source.file != file {
                continue;
            }
            let text = match source.rank {
                Some(rank) => match report.kernels.iter().find(|k| k.rank == rank) {
                    Some(k) => explained_text(&report_with(&report, &[k])),
                    None => String::new(),
                },
                None => explained_text(&report),
            };
            ctx.explained = Some(text);
        }
        progress(i + 1, total);
    }
    Ok(())
}

/// What the explained format needs the model to explain: per profile with at least one question,
/// the ranks of the kernels asked about, or `None` (every kernel) when a question is about the
/// whole profile, whose context holds every kernel's explanations. Kernels no question is about
/// are not explained (their context is never shown).
pub fn explained_plan(set: &EvalSet) -> Vec<(PathBuf, Option<Vec<usize>>)> {
    let asked: std::collections::BTreeSet<usize> = set.questions.iter().map(|q| q.context).collect();
    let mut plan: Vec<(PathBuf, Option<Vec<usize>>)> = Vec::new();
    for &ctx in &asked {
        let source = &set.sources[ctx];
        let entry = match plan.iter().position(|(f, _)| f == &source.file) {
            Some(i) => &mut plan[i],
            None => {
                plan.push((source.file.clone(), Some(Vec::new())));
                plan.last_mut().expect("just pushed")
            }
        };
        match (source.rank, &mut entry.1) {
            (None, ranks) => *ranks = None,
            (Some(rank), Some(ranks)) => ranks.push(rank),
            (Some(_), None) => {}
        }
    }
    for (_, ranks) in &mut plan {
        if let Some(r) = ranks {
            r.sort_unstable();
            r.dedup();
        }
    }
    plan.sort_by(|a, b| a.0.cmp(&b.0));
    plan
}

/// The explained format: the report as `--format context`, then each shown finding's claim and
/// explanation (the model's where it wrote them and they passed validation, the expert text else).
pub fn explained_text(report: &ExplainReport) -> String {
    let mut out = crate::render::context::explain_context(report, None).unwrap_or_default();
    let mut lines = Vec::new();
    for k in &report.kernels {
        for f in &k.findings {
            let claim = f.finding.claim.split_whitespace().collect::<Vec<_>>().join(" ");
            let why = f.finding.explanation.split_whitespace().collect::<Vec<_>>().join(" ");
            lines.push(format!("- K{} {}: {claim} {why}", k.rank, f.finding.category.as_str()));
        }
    }
    if !lines.is_empty() {
        out.push_str("\n## Explanations\n");
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

/// How questions and options name a kernel: its name and launch shape (two kernels of one name
/// differ in their shape).
pub(crate) fn kernel_label(k: &KernelExplanation) -> String {
    let a = &k.analysis;
    let name: String =
        if a.name.chars().count() > 80 { format!("{}...", a.name.chars().take(80).collect::<String>()) } else { a.name.clone() };
    format!("{name} {}", launch_shape(a.grid_size, a.block_size))
}

/// How the profile question's options name a kernel: as a reader does, by the name under its
/// templates and wrappers ([`crate::rules::kind::short_kernel_name`]: `FlashAttnFwdSm90`, not
/// `void cutlass::device_kernel<flash::enable_sm90_or_later<...`), with its launch shape.
fn reader_label(k: &KernelExplanation) -> String {
    let a = &k.analysis;
    format!("{} {}", crate::rules::kind::short_kernel_name(&a.name), launch_shape(a.grid_size, a.block_size))
}

/// Kernels whose reader's labels ([`reader_label`]) coincide take their full labels
/// ([`kernel_label`]; `explained[i]` is `kernels[i]`'s), so no two options read alike.
fn tell_apart(kernels: &mut [ProfileKernel], explained: &[&KernelExplanation]) {
    let labels: Vec<String> = kernels.iter().map(|k| k.label.clone()).collect();
    for (k, e) in kernels.iter_mut().zip(explained) {
        if labels.iter().filter(|l| **l == k.label).count() > 1 {
            k.label = kernel_label(e);
        }
    }
}

/// `grid (x,y,z) block (x,y,z)`, `?` for a size the profile lacks.
fn launch_shape(grid: Option<[u64; 3]>, block: Option<[u64; 3]>) -> String {
    let shape = |s: Option<[u64; 3]>| s.map(|v| format!("({},{},{})", v[0], v[1], v[2])).unwrap_or_else(|| "?".into());
    format!("grid {} block {}", shape(grid), shape(block))
}

/// The report cut down to the kernels in `keep` (rank order kept).
pub(crate) fn report_with(report: &ExplainReport, keep: &[&KernelExplanation]) -> ExplainReport {
    let mut r = report.clone();
    r.kernels.retain(|k| keep.iter().any(|x| x.rank == k.rank));
    r
}

pub(crate) fn kernel_contexts(report: &ExplainReport, k: &KernelExplanation, launch: &Launch) -> Contexts {
    let one = report_with(report, &[k]);
    Contexts {
        none: format!("Kernel `{}`.\n", kernel_label(k)),
        raw: raw_table(&[(k, launch)]),
        generic: String::new(),
        context: crate::render::context::explain_context(&one, None).unwrap_or_default(),
        md: crate::render::explain::render_explain(&one, crate::render::Format::Md).unwrap_or_default(),
        ..Default::default()
    }
}

fn profile_contexts(report: &ExplainReport, kernels: &[(&KernelExplanation, &Launch)], file: &std::path::Path) -> Contexts {
    Contexts {
        none: format!("Profile `{}`.\n", file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()),
        raw: raw_table(kernels),
        generic: String::new(),
        context: crate::render::context::explain_context(report, None).unwrap_or_default(),
        md: crate::render::explain::render_explain(report, crate::render::Format::Md).unwrap_or_default(),
        ..Default::default()
    }
}

/// The raw metric table: per kernel its identity, launch count and total time, then every metric
/// keet's facts or the questions read, by name, with the value and unit as the profile wrote them.
/// No interpretation: this is what a model gets without keet.
pub fn raw_table(kernels: &[(&KernelExplanation, &Launch)]) -> String {
    let mut out = String::new();
    for (k, launch) in kernels {
        out.push_str(&format!(
            "Kernel `{}`: {} launch{}, total gpu__time_duration.sum {} ns\n\n| metric | value |\n|---|---|\n",
            kernel_label(k),
            k.kernel.launches,
            if k.kernel.launches == 1 { "" } else { "es" },
            crate::rules::fmt_num(k.kernel.total_duration_ns)
        ));
        for (name, value) in raw_rows(k, launch) {
            out.push_str(&format!("| {name} | {value} |\n"));
        }
        out.push('\n');
    }
    out
}

/// The metrics of the raw table for one launch, sorted by name.
pub(crate) fn raw_rows(k: &KernelExplanation, launch: &Launch) -> Vec<(String, String)> {
    let t = questions::table();
    let mut names: std::collections::BTreeSet<String> =
        k.analysis.facts.all().iter().flat_map(|f| f.evidence.iter().map(|e| e.metric.clone())).collect();
    for v in t.metrics.values() {
        if let Some(a) = v.as_array() {
            names.extend(a.iter().filter_map(|x| x.as_str()).map(str::to_string));
        }
    }
    let prefix = t.metrics.get("stall_prefix").and_then(|v| v.as_str()).unwrap_or_default();
    let suffix = t.metrics.get("stall_suffix").and_then(|v| v.as_str()).unwrap_or_default();
    for (name, _) in launch.metrics.iter() {
        if name.starts_with(prefix) && name.ends_with(suffix) {
            names.insert(name.to_string());
        }
    }
    names
        .into_iter()
        .filter_map(|n| {
            let m = launch.metrics.get(&n)?;
            let v = if m.raw_unit.is_empty() { m.raw_value.to_string() } else { format!("{} {}", m.raw_value, m.raw_unit) };
            Some((n, v))
        })
        .collect()
}

/// One JSON line per question, self-contained (its contexts included) so other models and tools
/// can be scored on the same questions (`keet eval --answers`).
pub fn jsonl(set: &EvalSet) -> String {
    let mut out = String::new();
    for q in &set.questions {
        let mut v = serde_json::to_value(q).expect("questions serialise");
        v["contexts"] = serde_json::to_value(&set.contexts[q.context]).expect("contexts serialise");
        out.push_str(&serde_json::to_string(&v).expect("questions serialise"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(context: usize) -> Question {
        Question {
            id: format!("q{context}"),
            seed: 0,
            kind: QuestionKind::BoundUnit,
            file: PathBuf::new(),
            kernel: String::new(),
            question: String::new(),
            options: vec![],
            answer: "A".into(),
            answer_key: String::new(),
            basis: vec![],
            context,
        }
    }

    #[test]
    fn the_swapped_placebo_gives_each_kernel_another_kernels_context() {
        let mut set = EvalSet::default();
        for name in ["a", "b", "c"] {
            set.contexts.push(Contexts { context: format!("kernel {name}"), ..Default::default() });
        }
        add_swapped(&mut set);
        let swapped: Vec<&str> = set.contexts.iter().map(|c| c.swapped.as_str()).collect();
        assert_eq!(swapped, ["kernel b", "kernel c", "kernel a"]);
        set.contexts.truncate(1);
        add_swapped(&mut set);
        assert_eq!(set.contexts[0].swapped, "", "one kernel has no other to swap with");
    }

    /// The profile question names kernels as a reader does: FlashAttention 3 by its own name, not
    /// by the CUTLASS wrapper's `void cutlass::device_kernel<...`, and two launches of one kernel
    /// by their shapes (a real H200 profile with both).
    #[test]
    fn the_profile_question_names_kernels_as_a_reader_does() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/h200-moe/sglang_short_decode_raw.csv");
        let set = build(&[path], &EvalOptions { top: 5, seeds: vec![0], jobs: 1, concurrency: 1 }).unwrap();
        let q = set.questions.iter().find(|q| q.kind == QuestionKind::MostGain).expect("a most-gain question");
        let mut options = q.options.clone();
        options.sort();
        assert_eq!(
            options,
            [
                "FlashAttnFwdSm90 grid (132,1,1) block (384,1,1)",
                "fused_moe_kernel grid (192,1,1) block (128,1,1)",
                "fused_moe_kernel grid (256,1,1) block (128,1,1)",
                "nvjet_tst_64x8_64x16_4x1_v_bz_TNT grid (4,20,1) block (384,1,1)",
            ]
        );
        assert_eq!(q.options[LETTERS.iter().position(|l| *l == q.answer).unwrap()], options[0], "FlashAttention gains the most");
    }

    /// `position_in` finds an option under its letter in every rotation (the cloze answer's letter).
    #[test]
    fn an_option_keeps_its_text_in_every_rotation() {
        let mut q = question(0);
        q.options = ["w", "x", "y", "z"].map(String::from).to_vec();
        for rotation in 0..ROTATIONS {
            for option in 0..4 {
                assert_eq!(q.options_in(rotation)[q.position_in(option, rotation)], q.options[option]);
            }
        }
    }

    /// Over the four rotations each option stands under each letter once, and the key follows its option.
    #[test]
    fn rotations_move_every_option_under_every_letter() {
        let mut q = question(0);
        q.options = ["w", "x", "y", "z"].map(String::from).to_vec();
        q.answer = "C".into();
        let mut seen: Vec<Vec<&str>> = vec![Vec::new(); 4];
        for r in 0..ROTATIONS {
            let shown = q.options_in(r);
            let at = LETTERS.iter().position(|l| *l == q.answer_in(r)).unwrap();
            assert_eq!(shown[at], "y", "rotation {r}: the key names the option it named in rotation 0");
            for (i, o) in shown.iter().enumerate() {
                seen[i].push(o);
            }
        }
        assert_eq!(q.options_in(0), ["w", "x", "y", "z"]);
        assert_eq!(q.options_in(1), ["x", "y", "z", "w"]);
        for mut under_letter in seen {
            under_letter.sort();
            assert_eq!(under_letter, ["w", "x", "y", "z"]);
        }
        let keys: Vec<&str> = (0..ROTATIONS).map(|r| q.answer_in(r)).collect();
        assert_eq!(keys, ["C", "B", "A", "D"]);
    }

    /// Only the kernels a question is about are explained; a question about the whole profile
    /// needs every kernel's explanation; a profile without questions is not explained at all.
    #[test]
    fn the_explained_plan_asks_only_about_kernels_with_questions() {
        let source = |file: &str, rank: Option<usize>| ContextSource { file: file.into(), rank };
        let set = EvalSet {
            sources: vec![
                source("a.ncu-rep", Some(1)),
                source("a.ncu-rep", Some(2)),
                source("a.ncu-rep", Some(3)),
                source("b.ncu-rep", Some(1)),
                source("b.ncu-rep", Some(2)),
                source("b.ncu-rep", None),
                source("c.ncu-rep", Some(1)),
            ],
            questions: vec![question(2), question(0), question(2), question(4), question(5)],
            ..Default::default()
        };
        let plan = explained_plan(&set);
        assert_eq!(plan, vec![(PathBuf::from("a.ncu-rep"), Some(vec![1, 3])), (PathBuf::from("b.ncu-rep"), None)]);
    }
}
