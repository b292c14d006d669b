//! `keet eval --twins FILE.toml`: real before/after fixes as questions with the slow kernel's
//! source in every prompt. Each twin (a slow kernel, its fixed version, the source and the kind of
//! fix that was made) asks "which change makes this kernel fastest?": the kind of change that was
//! made and measured, against three changes for problems the raw metrics say the kernel does not
//! have. The formats are those of `keet eval`, each with the source before it: `none` (source
//! only), `raw`, `generic`, `context`, and `explained` (keet's context, the model's own
//! explanation and its checked code edit). The model's edit is also scored on its own: does it fix
//! the category of the real fix, and does it change lines the real fix changed?

use super::questions::{self, Basis, QuestionKind};
use super::{ContextSource, Contexts, EvalError, EvalOptions, EvalSet, Question, LETTERS};
use crate::analysis::FileError;
use crate::explain::report::{CodeEdit, ExplainReport, KernelExplanation};
use crate::explain::{self, ExplainOptions, ReportSettings, RunOptions};
use crate::profile::{Launch, Profile};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One `[[twin]]` of the file, paths relative to the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TwinEntry {
    /// The slow kernel's profile.
    pub profile: PathBuf,
    /// A substring of the slow kernel's name.
    pub kernel: String,
    /// The fixed kernel's profile; absent: the same file.
    #[serde(default)]
    pub good_profile: Option<PathBuf>,
    /// A substring of the fixed kernel's name.
    pub good_kernel: String,
    /// The slow kernel's source; absent: embedded in the profile.
    #[serde(default)]
    pub source: Option<PathBuf>,
    /// The kind of change that was made (a finding category: `shared-bank-conflicts`, ...).
    pub category: String,
    #[serde(default)]
    pub why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TwinFile {
    twin: Vec<TwinEntry>,
}

/// A twin as read: the slow kernel's launch and code, the measured saving, the real fix's lines.
#[derive(Debug, Clone)]
pub struct Twin {
    pub entry: TwinEntry,
    pub profile: PathBuf,
    /// The `--source` file, resolved.
    pub source: Option<PathBuf>,
    pub kernel_name: String,
    pub bad_ns: f64,
    pub good_ns: f64,
    /// The slow kernel's definition, numbered, as every format shows it.
    pub code_block: String,
    /// Lines of the slow kernel (trimmed) that the fixed kernel does not have: what the real fix changed.
    pub fixed_lines: Vec<String>,
    /// The context index of its question.
    pub context: usize,
}

impl Twin {
    /// (t_bad - t_good) / t_bad, percent.
    pub fn saved_pct(&self) -> f64 {
        if self.bad_ns > 0.0 {
            100.0 * (self.bad_ns - self.good_ns) / self.bad_ns
        } else {
            0.0
        }
    }
}

/// The twins of a run and their questions.
#[derive(Debug, Clone, Default)]
pub struct TwinSet {
    pub set: EvalSet,
    pub twins: Vec<Twin>,
}

/// Reads the twin file: a clear error naming the file and what was expected.
pub fn read(path: &Path) -> Result<Vec<TwinEntry>, EvalError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| EvalError::Input(format!("{}: cannot read the twin file: {e}", path.display())))?;
    let file: TwinFile = toml::from_str(&text).map_err(|e| {
        EvalError::Input(format!(
            "{}: not a twin file ([[twin]] tables with profile, kernel, good_kernel, category; optional good_profile, source, why): {e}",
            path.display()
        ))
    })?;
    for (index, twin) in file.twin.iter().enumerate() {
        if crate::rules::Category::ALL.iter().all(|c| c.as_str() != twin.category) {
            let known: Vec<&str> = crate::rules::Category::ALL.iter().map(|c| c.as_str()).collect();
            return Err(EvalError::Input(format!(
                "{}: twin {}: category {:?} is not one of {}",
                path.display(),
                index + 1,
                twin.category,
                known.join(", ")
            )));
        }
    }
    Ok(file.twin)
}

/// The first launch whose name contains `needle`.
fn find_launch<'a>(profile: &'a Profile, needle: &str) -> Option<&'a Launch> {
    profile.launches.iter().find(|l| l.name.contains(needle))
}

fn read_profile(path: &Path) -> Result<Profile, String> {
    crate::profile::read_path(path).map_err(|e| e.to_string())
}

/// The slow kernel's code: from the twin's `source` file, else the sources its report embeds.
fn kernel_code(
    profile: &Profile,
    launch: &Launch,
    source: Option<&Path>,
) -> Result<(keet_code::KernelCode, Vec<keet_code::CodeFile>), String> {
    let files: Vec<keet_code::CodeFile> = match source {
        Some(path) => {
            let (files, warnings) = keet_code::read_user_sources(path);
            if files.is_empty() {
                return Err(format!("{}: no readable source ({})", path.display(), warnings.join("; ")));
            }
            files
        }
        None => launch
            .source_files
            .iter()
            .filter_map(|&i| profile.source_files.get(i))
            .map(|f| keet_code::CodeFile { path: f.path.clone(), text: f.text.clone() })
            .collect(),
    };
    if files.is_empty() {
        return Err(
            "the report embeds no source for this kernel (profile with `ncu --import-source yes`) and the twin names no source".into()
        );
    }
    keet_code::locate(&files, &launch.name).map(|k| (k, files)).map_err(|e| e.to_string())
}

/// The kernel's definition as every format shows it.
pub fn code_block(kernel: &keet_code::KernelCode) -> String {
    let numbered: String = kernel.text.lines().enumerate().map(|(i, line)| format!("{:>4}  {line}\n", kernel.start_line + i)).collect();
    format!("The kernel's source ({}, lines {} to {}):\n```\n{numbered}```\n\n", kernel.path, kernel.start_line, kernel.end_line)
}

/// Lines of `bad` (trimmed, non-blank) that `good` does not have.
fn changed_lines(bad: &str, good: &str) -> Vec<String> {
    let good_lines: std::collections::HashSet<&str> = good.lines().map(str::trim).collect();
    let mut out: Vec<String> = Vec::new();
    for line in bad.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")) {
        if !good_lines.contains(line) && !out.iter().any(|o| o == line) {
            out.push(line.to_string());
        }
    }
    out
}

/// The fixed kernel's definition, for the lines of the real fix (empty when its code is not found).
fn good_code(profile: &Profile, launch: &Launch) -> String {
    kernel_code(profile, launch, None).map(|(k, _)| k.text).unwrap_or_default()
}

/// One twin read and checked; `Err` names the twin and what is wrong.
fn load_twin(dir: &Path, entry: &TwinEntry) -> Result<(Twin, Profile), String> {
    let profile_path = dir.join(&entry.profile);
    let profile = read_profile(&profile_path)?;
    let bad = find_launch(&profile, &entry.kernel).ok_or_else(|| format!("no kernel whose name contains {:?}", entry.kernel))?;
    let good_path = entry.good_profile.as_ref().map(|p| dir.join(p));
    let good_profile = match &good_path {
        Some(p) => read_profile(p)?,
        None => profile.clone(),
    };
    let good = find_launch(&good_profile, &entry.good_kernel)
        .ok_or_else(|| format!("no fixed kernel whose name contains {:?}", entry.good_kernel))?;
    let source = entry.source.as_ref().map(|s| dir.join(s));
    let (kernel, _) = kernel_code(&profile, bad, source.as_deref())?;
    let twin = Twin {
        entry: entry.clone(),
        profile: profile_path,
        source,
        kernel_name: bad.name.clone(),
        bad_ns: crate::analysis::duration_ns(bad),
        good_ns: crate::analysis::duration_ns(good),
        code_block: code_block(&kernel),
        fixed_lines: changed_lines(&kernel.text, &good_code(&good_profile, good)),
        context: 0,
    };
    Ok((twin, profile))
}

/// Builds the twins' questions, one per twin and seed, and their contexts (the source first).
pub fn build(path: &Path, opts: &EvalOptions) -> Result<TwinSet, EvalError> {
    let entries = read(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let seeds: Vec<u64> = if opts.seeds.is_empty() { vec![0] } else { opts.seeds.clone() };
    let mut out = TwinSet { set: EvalSet { seeds: seeds.clone(), ..Default::default() }, twins: Vec::new() };
    for (index, entry) in entries.iter().enumerate() {
        let (mut twin, profile) = match load_twin(dir, entry) {
            Ok(loaded) => loaded,
            Err(why) => {
                out.set.errors.push(FileError { path: dir.join(&entry.profile), message: format!("twin {}: {why}", index + 1) });
                continue;
            }
        };
        let (report, _) = explain::explain(std::slice::from_ref(&twin.profile), &report_options(opts, twin.source.as_ref()))?;
        let Some(k) = report.kernels.iter().find(|k| k.analysis.name == twin.kernel_name) else {
            out.set
                .errors
                .push(FileError { path: twin.profile.clone(), message: format!("twin {}: the kernel was not explained", index + 1) });
            continue;
        };
        let Some(launch) = profile.launches.iter().find(|l| l.id == k.analysis.id) else { continue };
        twin.context = out.set.contexts.len();
        out.set.contexts.push(with_code(super::kernel_contexts(&report, k, launch), &twin.code_block));
        out.set.sources.push(ContextSource { file: twin.profile.clone(), rank: Some(k.rank) });
        if !out.set.files.contains(&twin.profile) {
            out.set.files.push(twin.profile.clone());
        }
        for &seed in &seeds {
            let mut rng = StdRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9E37_79B9));
            if let Some(q) = question(&twin, launch, k, seed, out.set.questions.len(), &mut rng) {
                out.set.questions.push(q);
            }
        }
        out.twins.push(twin);
    }
    Ok(out)
}

/// The rule-layer report of a twin's profile: every kernel, with the twin's source for its lines.
fn report_options(opts: &EvalOptions, source: Option<&PathBuf>) -> ExplainOptions {
    let base = super::rules_report_options(opts);
    let settings = ReportSettings { top: 10_000, source_files: source.cloned().into_iter().collect(), ..base.settings };
    ExplainOptions { settings, ..base }
}

/// Every format with the kernel's source before it; `none` is the source alone.
fn with_code(mut contexts: Contexts, code: &str) -> Contexts {
    contexts.none = format!("{}{code}", contexts.none);
    contexts.raw = format!("{code}{}", contexts.raw);
    contexts.context = format!("{code}{}", contexts.context);
    contexts.md = format!("{code}{}", contexts.md);
    contexts
}

/// The twin's question: the change that was made against three for problems the raw metrics say
/// the kernel does not have.
fn question(twin: &Twin, launch: &Launch, k: &KernelExplanation, seed: u64, number: usize, rng: &mut StdRng) -> Option<Question> {
    let (stem, options) = questions::twin_fix_options();
    let answer_key = questions::twin_fix_key(&twin.entry.category)?;
    // Problems the raw metrics show, and those keet's diagnosis found: neither is a distractor.
    let mut present = questions::problems_of(launch);
    present
        .extend(k.analysis.findings.iter().filter_map(|f| questions::twin_fix_key(f.category.as_str())).filter(|key| *key != answer_key));
    let mut others: Vec<&String> = options.keys().filter(|key| *key != answer_key && !present.contains(&key.as_str())).collect();
    others.shuffle(rng);
    if others.len() < 3 {
        return None;
    }
    let mut drawn: Vec<(String, bool)> = std::iter::once((options[answer_key].clone(), true))
        .chain(others[..3].iter().map(|key| (options[key.as_str()].clone(), false)))
        .collect();
    drawn.shuffle(rng);
    let at = drawn.iter().position(|o| o.1)?;
    let label = super::kernel_label(k);
    Some(Question {
        id: format!("s{seed}-t{:04}", number + 1),
        seed,
        kind: QuestionKind::TwinFix,
        file: twin.profile.clone(),
        kernel: label.clone(),
        question: stem.replace("{kernel}", &format!("`{label}`")),
        options: drawn.into_iter().map(|o| o.0).collect(),
        answer: LETTERS[at].to_string(),
        answer_key: answer_key.to_string(),
        basis: vec![
            Basis {
                metric: "gpu__time_duration.sum".into(),
                value: twin.bad_ns,
                raw: format!("{} ns (slow)", twin.bad_ns),
                kernel: String::new(),
            },
            Basis {
                metric: "gpu__time_duration.sum".into(),
                value: twin.good_ns,
                raw: format!("{} ns (fixed)", twin.good_ns),
                kernel: String::new(),
            },
        ],
        context: twin.context,
    })
}

/// How the model's own edits compare with the real fixes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EditScore {
    /// Twins the model was asked about.
    pub twins: usize,
    /// Twins with a checked edit shown.
    pub edits_shown: usize,
    /// Edits for the category of the real fix.
    pub category_match: usize,
    /// Edits that change at least one line the real fix changed.
    pub lines_match: usize,
    /// Per twin: kernel, category, the edit's category and kinds (empty: none shown), whether its lines match, why none.
    pub rows: Vec<EditRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EditRow {
    pub kernel: String,
    pub category: String,
    pub saved_pct: f64,
    pub edit_category: String,
    pub edit_kinds: Vec<String>,
    pub lines_match: bool,
    pub no_edit: String,
}

/// The explained format for twins: keet explain with the model and code edits on each twin's
/// kernel; the context gets the source, keet's context, the model's explanations and its edit.
/// Returns how the model's edits compare with the real fixes.
pub fn add_explained(
    set: &mut EvalSet,
    twins: &[Twin],
    opts: &EvalOptions,
    engine: &crate::llm::EngineOptions,
    cache: Option<PathBuf>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<EditScore, EvalError> {
    let mut score = EditScore::default();
    let total = twins.len();
    for (done, twin) in twins.iter().enumerate() {
        let rank = set.sources[twin.context].rank;
        let base = report_options(opts, twin.source.as_ref());
        let eopts = ExplainOptions {
            settings: ReportSettings { no_llm: false, edit: true, ..base.settings },
            model_ranks: rank.map(|r| vec![r]),
            run: RunOptions { engine: engine.clone(), cache: cache.clone(), concurrency: opts.concurrency.max(1), ..base.run },
            ..base
        };
        let (report, _) = explain::explain(std::slice::from_ref(&twin.profile), &eopts)?;
        let k = report.kernels.iter().find(|k| Some(k.rank) == rank);
        let text = k.map(|k| explained_with_edit(&report, k)).unwrap_or_default();
        set.contexts[twin.context].explained = Some(format!("{}{text}", twin.code_block));
        score.rows.push(edit_row(twin, k));
        progress(done + 1, total);
    }
    score.twins = score.rows.len();
    score.edits_shown = score.rows.iter().filter(|r| !r.edit_kinds.is_empty()).count();
    score.category_match = score.rows.iter().filter(|r| r.edit_category == r.category).count();
    score.lines_match = score.rows.iter().filter(|r| r.lines_match).count();
    Ok(score)
}

/// keet's explained text for one kernel, then the model's edit (its explanation and diff).
fn explained_with_edit(report: &ExplainReport, k: &KernelExplanation) -> String {
    let mut text = super::explained_text(&super::report_with(report, &[k]));
    if let Some(edit) = k.code.as_ref().and_then(|c| c.edit.as_ref()) {
        text.push_str(&format!(
            "\n## Proposed edit ({})\n{}\n```diff\n{}```\n",
            edit.category.as_str(),
            edit.explanation,
            edit.unified_diff
        ));
    }
    text
}

fn edit_row(twin: &Twin, k: Option<&KernelExplanation>) -> EditRow {
    let code = k.and_then(|k| k.code.as_ref());
    let edit: Option<&CodeEdit> = code.and_then(|c| c.edit.as_ref());
    let no_edit = match (code, edit) {
        (_, Some(_)) => String::new(),
        (Some(c), None) => c.no_edit.clone().or_else(|| c.missing.clone()).unwrap_or_default(),
        (None, None) => "the kernel was not explained with its code".into(),
    };
    EditRow {
        kernel: twin.entry.kernel.clone(),
        category: twin.entry.category.clone(),
        saved_pct: twin.saved_pct(),
        edit_category: edit.map(|e| e.category.as_str().to_string()).unwrap_or_default(),
        edit_kinds: edit.map(|e| e.kinds.clone()).unwrap_or_default(),
        lines_match: edit.is_some_and(|e| e.before.iter().any(|line| twin.fixed_lines.iter().any(|f| f == line.trim()))),
        no_edit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_of_a_fix_are_those_the_fixed_kernel_lacks() {
        let bad = "__shared__ int tile[32][32];\ntile[threadIdx.x][threadIdx.y] = 1;\n__syncthreads();";
        let good = "__shared__ int tile[32][33];\ntile[threadIdx.x][threadIdx.y] = 1;\n__syncthreads();";
        assert_eq!(changed_lines(bad, good), vec!["__shared__ int tile[32][32];".to_string()]);
    }

    #[test]
    fn a_twin_file_with_an_unknown_category_is_refused_with_its_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("twins.toml");
        std::fs::write(&path, "[[twin]]\nprofile = \"a.ncu-rep\"\nkernel = \"k\"\ngood_kernel = \"g\"\ncategory = \"faster\"\n")
            .expect("write");
        let err = read(&path).expect_err("unknown category").to_string();
        assert!(err.contains("twin 1") && err.contains("\"faster\"") && err.contains("shared-bank-conflicts"), "{err}");
    }

    #[test]
    fn the_repository_twin_file_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/twins.toml");
        let twins = read(&path).expect("tests/data/twins.toml");
        assert!(twins.len() >= 4);
    }
}
