//! `keet eval`: what keet's report is worth to a model. Multiple-choice questions with known answers
//! are generated from each profile's raw metrics ([`questions`]); the local model answers each one
//! under a grammar that admits one of four letters, once per context format (the raw metric table
//! alone, keet's `--format context` report, the full Markdown report); accuracy is tallied per
//! question kind and format.
//!
//! Data flow: inputs → (per file) the rule-layer explain report and the raw launches → questions
//! with their contexts ([`EvalSet`]) → answers ([`answer`]) → [`EvalReport`].

pub mod questions;

use crate::analysis::FileError;
use crate::explain::report::{ExplainReport, KernelExplanation};
use crate::explain::{self, ExplainOptions};
use crate::llm::{ChatMessage, Engine, GenerateOptions};
use crate::profile::Launch;
use questions::{Basis, Draft, ProfileKernel, QuestionKind};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

pub const EVAL_SCHEMA: &str = "keet.eval/1";
pub const LETTERS: [&str; 4] = ["A", "B", "C", "D"];

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("listing inputs: {0}")]
    Io(String),
    #[error(transparent)]
    Explain(#[from] explain::ExplainError),
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
}

/// What the model sees before each question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    /// The raw metric table alone (names and values as the profile wrote them).
    Raw,
    /// keet's `--format context` report.
    Context,
    /// keet's full Markdown report (`--format md`).
    Md,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Raw => "raw",
            Condition::Context => "context",
            Condition::Md => "md",
        }
    }
}

/// One context a question is asked in, in each format.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Contexts {
    pub raw: String,
    pub context: String,
    pub md: String,
}

impl Contexts {
    pub fn get(&self, c: Condition) -> &str {
        match c {
            Condition::Raw => &self.raw,
            Condition::Context => &self.context,
            Condition::Md => &self.md,
        }
    }
}

/// A question with its options in shuffled order and the letter of the correct one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
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

/// The questions of a run and the contexts they are asked in.
#[derive(Debug, Clone, Default)]
pub struct EvalSet {
    pub questions: Vec<Question>,
    pub contexts: Vec<Contexts>,
    pub files: Vec<PathBuf>,
    pub errors: Vec<FileError>,
}

#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Kernels per profile asked about (the ones that take the most time).
    pub top: usize,
    pub seed: u64,
    pub jobs: usize,
}

/// Builds the questions for every profile in `inputs` (directories searched recursively).
pub fn build(inputs: &[PathBuf], opts: &EvalOptions) -> Result<EvalSet, EvalError> {
    let files = crate::profile::expand_inputs(inputs).map_err(|e| EvalError::Io(e.to_string()))?;
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let mut set = EvalSet { files: files.clone(), ..Default::default() };
    let mut drafts: Vec<(Draft, PathBuf, String, usize)> = Vec::new();
    for file in &files {
        let profile = match crate::profile::read_path(file) {
            Ok(p) => p,
            Err(e) => {
                set.errors.push(FileError { path: file.clone(), message: e.to_string() });
                continue;
            }
        };
        let eopts = ExplainOptions { top: opts.top.max(1), coverage_pct: 100.0, no_llm: true, cache: None, jobs: opts.jobs, progress: false, ..Default::default() };
        let (report, _) = explain::explain(std::slice::from_ref(file), &eopts)?;
        set.errors.extend(report.errors.iter().cloned());
        let by_id: HashMap<u64, &Launch> = profile.launches.iter().map(|l| (l.id, l)).collect();
        let mut kernels: Vec<&KernelExplanation> = report.kernels.iter().collect();
        kernels.sort_by_key(|k| k.rank);
        let mut profile_kernels = Vec::new();
        for k in &kernels {
            let Some(launch) = by_id.get(&k.analysis.id) else { continue };
            let label = kernel_label(k);
            let ctx = set.contexts.len();
            set.contexts.push(kernel_contexts(&report, k, launch));
            for d in questions::kernel_questions(launch, &format!("`{label}`"), &mut rng) {
                drafts.push((d, file.clone(), label.clone(), ctx));
            }
            profile_kernels.push(ProfileKernel { label, total_ns: k.kernel.total_duration_ns, launch });
        }
        if let Some(d) = questions::most_gain(&profile_kernels) {
            let ctx = set.contexts.len();
            let launches: Vec<(&KernelExplanation, &Launch)> = kernels.iter().filter_map(|k| Some((*k, *by_id.get(&k.analysis.id)?))).collect();
            set.contexts.push(profile_contexts(&report, &launches));
            drafts.push((d, file.clone(), String::new(), ctx));
        }
    }
    drafts.shuffle(&mut rng);
    for (i, (d, file, kernel, context)) in drafts.into_iter().enumerate() {
        let mut options: Vec<(String, bool)> = std::iter::once((d.correct, true)).chain(d.distractors.into_iter().map(|x| (x, false))).collect();
        options.shuffle(&mut rng);
        let at = options.iter().position(|o| o.1).expect("the correct option is among the options");
        set.questions.push(Question {
            id: format!("q{:04}", i + 1),
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
    Ok(set)
}

/// How questions and options name a kernel: its name and launch shape (two kernels of one name
/// differ in their shape).
fn kernel_label(k: &KernelExplanation) -> String {
    let a = &k.analysis;
    let name: String = if a.name.chars().count() > 80 { format!("{}...", a.name.chars().take(80).collect::<String>()) } else { a.name.clone() };
    let shape = |s: Option<[u64; 3]>| s.map(|v| format!("({},{},{})", v[0], v[1], v[2])).unwrap_or_else(|| "?".into());
    format!("{name} grid {} block {}", shape(a.grid_size), shape(a.block_size))
}

/// The report cut down to the kernels in `keep` (rank order kept).
fn report_with(report: &ExplainReport, keep: &[&KernelExplanation]) -> ExplainReport {
    let mut r = report.clone();
    r.kernels.retain(|k| keep.iter().any(|x| x.rank == k.rank));
    r
}

fn kernel_contexts(report: &ExplainReport, k: &KernelExplanation, launch: &Launch) -> Contexts {
    let one = report_with(report, &[k]);
    Contexts {
        raw: raw_table(&[(k, launch)]),
        context: crate::render::context::explain_context(&one, None).unwrap_or_default(),
        md: crate::render::explain::render_explain(&one, crate::render::Format::Md).unwrap_or_default(),
    }
}

fn profile_contexts(report: &ExplainReport, kernels: &[(&KernelExplanation, &Launch)]) -> Contexts {
    Contexts {
        raw: raw_table(kernels),
        context: crate::render::context::explain_context(report, None).unwrap_or_default(),
        md: crate::render::explain::render_explain(report, crate::render::Format::Md).unwrap_or_default(),
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
fn raw_rows(k: &KernelExplanation, launch: &Launch) -> Vec<(String, String)> {
    let t = questions::table();
    let mut names: std::collections::BTreeSet<String> = k.analysis.facts.all().iter().flat_map(|f| f.evidence.iter().map(|e| e.metric.clone())).collect();
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

/// The model's answers: per question, per condition, the letter it chose.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answered {
    pub id: String,
    pub kind: QuestionKind,
    pub answer: String,
    pub given: BTreeMap<Condition, String>,
}

/// Progress callback: questions answered so far, of how many.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize);

/// Answers every question in every condition. Questions are asked grouped by context, so the
/// context's tokens are computed once and reused (the answers do not depend on the order).
/// A context longer than the model's window keeps its first lines; `truncated` counts those.
pub fn answer(set: &EvalSet, engine: &mut Engine, conditions: &[Condition], progress: Progress) -> Result<(Vec<Answered>, usize), EvalError> {
    let schema = serde_json::json!({ "enum": LETTERS });
    let gen = GenerateOptions { max_tokens: 8, repeat_penalty: 1.0, ..Default::default() };
    let mut given: Vec<BTreeMap<Condition, String>> = vec![BTreeMap::new(); set.questions.len()];
    let mut order: Vec<usize> = (0..set.questions.len()).collect();
    order.sort_by_key(|&i| set.questions[i].context);
    let total = order.len() * conditions.len();
    let mut done = 0;
    let mut truncated = 0;
    // Room for the question, its options and the chat template around them.
    let reserve = 768usize;
    let window = engine.info.context_length.saturating_sub(reserve).max(256);
    for &c in conditions {
        let mut fitted: HashMap<usize, String> = HashMap::new();
        for &i in &order {
            let q = &set.questions[i];
            let ctx = fitted.entry(q.context).or_insert_with(|| {
                let (text, cut) = fit_lines(set.contexts[q.context].get(c), window, &|s| engine.tokenizer().encode(s).map(|v| v.len()).unwrap_or(usize::MAX));
                truncated += cut as usize;
                text
            });
            let messages = [ChatMessage::system(questions::system_prompt()), ChatMessage::user(prompt(ctx, q))];
            let g = engine.generate(&messages, &gen, Some(&schema))?;
            let letter = g.text.trim().trim_matches('"').to_string();
            given[i].insert(c, letter);
            done += 1;
            progress(done, total);
        }
    }
    let answered = set
        .questions
        .iter()
        .zip(given)
        .map(|(q, given)| Answered { id: q.id.clone(), kind: q.kind, answer: q.answer.clone(), given })
        .collect();
    Ok((answered, truncated))
}

/// The user message: the context, then the question and its lettered options.
pub fn prompt(context: &str, q: &Question) -> String {
    let mut s = format!("{}\n\n---\nQuestion: {}\n", context.trim_end(), q.question);
    for (l, o) in LETTERS.iter().zip(&q.options) {
        s.push_str(&format!("{l}. {o}\n"));
    }
    s.push_str("Answer with the letter of the correct option.");
    s
}

/// The first lines of `text` that fit in `max_tokens`; true when lines were cut.
fn fit_lines(text: &str, max_tokens: usize, count: &dyn Fn(&str) -> usize) -> (String, bool) {
    if count(text) <= max_tokens {
        return (text.to_string(), false);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (mut lo, mut hi) = (0usize, lines.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if count(&lines[..mid].concat()) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut s = lines[..lo].concat();
    s.push_str("\n(cut to fit the model's context window)\n");
    (s, true)
}

/// Accuracy of one question kind (or all), per condition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub kind: String,
    pub questions: usize,
    /// Correct answers per condition, in [`EvalReport::conditions`] order.
    pub correct: Vec<usize>,
    pub accuracy_pct: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalModel {
    pub name: String,
    pub device: String,
}

/// The whole `keet eval` output.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub schema: String,
    pub keet_version: String,
    pub model: Option<EvalModel>,
    pub seed: u64,
    pub files: Vec<PathBuf>,
    pub questions: usize,
    pub conditions: Vec<Condition>,
    pub by_kind: Vec<Row>,
    pub overall: Row,
    /// Accuracy of guessing among four options.
    pub chance_pct: f64,
    /// Contexts cut to fit the model's window (per condition and context).
    pub truncated_contexts: usize,
    pub answers: Vec<Answered>,
    pub errors: Vec<FileError>,
}

/// Tallies `answers` into the report.
pub fn report(set: &EvalSet, answers: Vec<Answered>, conditions: &[Condition], model: Option<EvalModel>, seed: u64, truncated: usize) -> EvalReport {
    let row = |kind: String, rows: &[&Answered]| {
        let correct: Vec<usize> = conditions.iter().map(|c| rows.iter().filter(|a| a.given.get(c) == Some(&a.answer)).count()).collect();
        let accuracy_pct = correct.iter().map(|&n| if rows.is_empty() { 0.0 } else { 100.0 * n as f64 / rows.len() as f64 }).collect();
        Row { kind, questions: rows.len(), correct, accuracy_pct }
    };
    let by_kind = QuestionKind::ALL
        .iter()
        .map(|k| row(k.name().to_string(), &answers.iter().filter(|a| a.kind == *k).collect::<Vec<_>>()))
        .collect();
    let overall = row("overall".into(), &answers.iter().collect::<Vec<_>>());
    EvalReport {
        schema: EVAL_SCHEMA.into(),
        keet_version: env!("CARGO_PKG_VERSION").into(),
        model,
        seed,
        files: set.files.clone(),
        questions: set.questions.len(),
        conditions: conditions.to_vec(),
        by_kind,
        overall,
        chance_pct: 25.0,
        truncated_contexts: truncated,
        answers,
        errors: set.errors.clone(),
    }
}

/// One JSON line per question, self-contained (its contexts included) so other models and tools
/// can be scored on the same questions.
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

    #[test]
    fn fitting_keeps_whole_first_lines() {
        let words = |s: &str| s.split_whitespace().count();
        let text = "a b\nc d\ne f\n";
        assert_eq!(fit_lines(text, 10, &words), (text.to_string(), false));
        let (s, cut) = fit_lines(text, 4, &words);
        assert!(cut);
        assert!(s.starts_with("a b\nc d\n") && !s.contains("e f"), "{s}");
    }
}
