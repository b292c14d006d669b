//! Scoring of `keet eval`: answers (from the local model, or a JSONL file made elsewhere) against
//! the questions' keys. Per question kind and overall, per format: n, accuracy and its 95% Wilson
//! interval; each format against `raw` on the same questions (discordant pairs and the exact sign
//! test); the distribution of the letters given, beside that of the keys; per seed, overall.
//! Also reads the questions (`--questions-out`) and answers files, naming the line of any error.

use super::questions::QuestionKind;
use super::stats::{sign_test_p, wilson_pct};
use super::{EvalError, Question, LETTERS};
use crate::analysis::FileError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The format each other format is compared with.
pub const BASELINE: &str = "raw";

/// The answers to one question: per format, the letter given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answered {
    pub id: String,
    pub kind: QuestionKind,
    /// The correct letter.
    pub answer: String,
    pub given: BTreeMap<String, String>,
}

/// A format against the baseline on the same questions.
#[derive(Debug, Clone, Serialize)]
pub struct Paired {
    pub against: String,
    /// Questions this format got right and the baseline wrong.
    pub wins: usize,
    /// Questions the baseline got right and this format wrong.
    pub losses: usize,
    /// Accuracy difference, percentage points.
    pub delta_pts: f64,
    /// Exact two-sided sign test on the discordant pairs.
    pub p_value: f64,
}

/// One format's score on a set of questions.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub format: String,
    pub correct: usize,
    pub accuracy_pct: f64,
    /// 95% Wilson interval.
    pub ci95_low_pct: f64,
    pub ci95_high_pct: f64,
    /// Against the baseline (absent for the baseline itself, or when it was not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_raw: Option<Paired>,
}

/// The scores of one question kind (or all, or one seed).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub kind: String,
    pub questions: usize,
    /// In [`EvalReport::formats`] order.
    pub cells: Vec<Cell>,
}

/// How often each letter was given (or is the key).
#[derive(Debug, Clone, Serialize)]
pub struct Letters {
    /// A format's name, or `key` for the correct answers.
    pub of: String,
    /// Counts of A, B, C, D.
    pub counts: [usize; 4],
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
    /// The model that answered; `None` when the answers came from a file.
    pub model: Option<EvalModel>,
    /// The answers file scored (`--answers`), when not the local model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answers_file: Option<PathBuf>,
    pub seeds: Vec<u64>,
    pub files: Vec<PathBuf>,
    /// Profiles that gave no question (listed, not dropped).
    pub profiles_without_questions: Vec<PathBuf>,
    /// Questions over all seeds.
    pub questions: usize,
    pub formats: Vec<String>,
    pub by_kind: Vec<Row>,
    pub overall: Row,
    pub by_seed: Vec<Row>,
    /// The letters given per format, then the keys' letters (`of: "key"`).
    pub letters: Vec<Letters>,
    /// Accuracy of guessing among four options.
    pub chance_pct: f64,
    /// Contexts cut to fit the model's window (per format and context).
    pub truncated_contexts: usize,
    /// Per format: prompt tokens, reused tokens and time (empty for an answers file).
    pub cost: Vec<super::FormatCost>,
    /// Seconds from start to the report, everything included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    pub answers: Vec<Answered>,
    pub errors: Vec<FileError>,
}

/// What a question needs for scoring.
pub struct Key<'a> {
    pub id: &'a str,
    pub seed: u64,
    pub kind: QuestionKind,
    pub answer: &'a str,
}

impl<'a> From<&'a Question> for Key<'a> {
    fn from(q: &'a Question) -> Self {
        Key { id: &q.id, seed: q.seed, kind: q.kind, answer: &q.answer }
    }
}

fn row(kind: String, rows: &[(&Key, &Answered)], formats: &[String]) -> Row {
    let n = rows.len();
    let right = |f: &str, k: &Key, a: &Answered| a.given.get(f).map(String::as_str) == Some(k.answer);
    let has_baseline = formats.iter().any(|f| f == BASELINE);
    let baseline_correct = rows.iter().filter(|(k, a)| right(BASELINE, k, a)).count();
    let pct = |c: usize| if n == 0 { 0.0 } else { 100.0 * c as f64 / n as f64 };
    let cells = formats
        .iter()
        .map(|f| {
            let correct = rows.iter().filter(|(k, a)| right(f, k, a)).count();
            let (lo, hi) = wilson_pct(correct, n);
            let vs_raw = (has_baseline && f != BASELINE).then(|| {
                let wins = rows.iter().filter(|(k, a)| right(f, k, a) && !right(BASELINE, k, a)).count();
                let losses = rows.iter().filter(|(k, a)| !right(f, k, a) && right(BASELINE, k, a)).count();
                Paired {
                    against: BASELINE.into(),
                    wins,
                    losses,
                    delta_pts: pct(correct) - pct(baseline_correct),
                    p_value: sign_test_p(wins, losses),
                }
            });
            Cell { format: f.clone(), correct, accuracy_pct: pct(correct), ci95_low_pct: lo, ci95_high_pct: hi, vs_raw }
        })
        .collect();
    Row { kind, questions: n, cells }
}

/// What a report holds besides the scores.
pub struct ReportMeta {
    pub model: Option<EvalModel>,
    pub answers_file: Option<PathBuf>,
    pub seeds: Vec<u64>,
    pub files: Vec<PathBuf>,
    pub profiles_without_questions: Vec<PathBuf>,
    pub truncated_contexts: usize,
    pub cost: Vec<super::FormatCost>,
    pub wall_s: Option<f64>,
    pub errors: Vec<FileError>,
}

/// Scores `answers` (one per key, same order) in `formats`.
pub fn report(keys: &[Key], answers: Vec<Answered>, formats: &[String], meta: ReportMeta) -> EvalReport {
    let pairs: Vec<(&Key, &Answered)> = keys.iter().zip(&answers).collect();
    let by_kind = QuestionKind::ALL
        .iter()
        .map(|kind| row(kind.name().to_string(), &pairs.iter().filter(|(k, _)| k.kind == *kind).copied().collect::<Vec<_>>(), formats))
        .collect();
    let overall = row("overall".into(), &pairs, formats);
    let by_seed = meta
        .seeds
        .iter()
        .map(|s| row(format!("seed {s}"), &pairs.iter().filter(|(k, _)| k.seed == *s).copied().collect::<Vec<_>>(), formats))
        .collect();
    let count = |letter: Option<&str>, counts: &mut [usize; 4]| {
        if let Some(i) = letter.and_then(|l| LETTERS.iter().position(|x| *x == l)) {
            counts[i] += 1;
        }
    };
    let mut letters: Vec<Letters> = formats
        .iter()
        .map(|f| {
            let mut counts = [0; 4];
            for (_, a) in &pairs {
                count(a.given.get(f).map(String::as_str), &mut counts);
            }
            Letters { of: f.clone(), counts }
        })
        .collect();
    let mut key_counts = [0; 4];
    for k in keys {
        count(Some(k.answer), &mut key_counts);
    }
    letters.push(Letters { of: "key".into(), counts: key_counts });
    EvalReport {
        schema: super::EVAL_SCHEMA.into(),
        keet_version: env!("CARGO_PKG_VERSION").into(),
        model: meta.model,
        answers_file: meta.answers_file,
        seeds: meta.seeds,
        files: meta.files,
        profiles_without_questions: meta.profiles_without_questions,
        questions: keys.len(),
        formats: formats.to_vec(),
        by_kind,
        overall,
        by_seed,
        letters,
        chance_pct: 25.0,
        truncated_contexts: meta.truncated_contexts,
        cost: meta.cost,
        wall_s: meta.wall_s,
        answers,
        errors: meta.errors,
    }
}

fn read_lines(path: &Path) -> Result<String, EvalError> {
    std::fs::read_to_string(path).map_err(|e| EvalError::Input(format!("{}: cannot read: {e}", path.display())))
}

/// Reads a questions file written by `--questions-out`.
pub fn read_questions(path: &Path) -> Result<Vec<Question>, EvalError> {
    let text = read_lines(path)?;
    let mut out: Vec<Question> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{}:{}", path.display(), i + 1);
        if line.trim().is_empty() {
            continue;
        }
        let q: Question = serde_json::from_str(line)
            .map_err(|e| EvalError::Input(format!("{at}: not a question as `keet eval --questions-out` writes it: {e}")))?;
        if !LETTERS.contains(&q.answer.as_str()) {
            return Err(EvalError::Input(format!("{at}: question {}: answer {:?} is not one of A, B, C, D", q.id, q.answer)));
        }
        if let Some(first) = seen.insert(q.id.clone(), i + 1) {
            return Err(EvalError::Input(format!("{at}: question id {} again (first on line {first})", q.id)));
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(EvalError::Input(format!("{}: no questions", path.display())));
    }
    Ok(out)
}

/// One line of an answers file: `{"id": "s0-q0001", "format": "raw", "answer": "B"}` (other keys,
/// such as the model's name, are ignored).
#[derive(Debug, Deserialize)]
struct AnswerLine {
    id: String,
    format: String,
    answer: String,
}

/// Reads an answers file against `questions`: every line one answer, to a known question, at most
/// one per question and format, a letter A-D; every format answers every question. Returns the
/// answers in `questions` order and the formats in the order they first appear.
pub fn read_answers(path: &Path, questions: &[Question]) -> Result<(Vec<Answered>, Vec<String>), EvalError> {
    let text = read_lines(path)?;
    let index: HashMap<&str, usize> = questions.iter().enumerate().map(|(i, q)| (q.id.as_str(), i)).collect();
    let mut given: Vec<BTreeMap<String, String>> = vec![BTreeMap::new(); questions.len()];
    let mut first_line: HashMap<(usize, String), usize> = HashMap::new();
    let mut formats: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{}:{}", path.display(), i + 1);
        if line.trim().is_empty() {
            continue;
        }
        let a: AnswerLine = serde_json::from_str(line).map_err(|e| {
            EvalError::Input(format!("{at}: expected a JSON object {{\"id\": ..., \"format\": ..., \"answer\": \"A\"-\"D\"}}: {e}"))
        })?;
        let Some(&q) = index.get(a.id.as_str()) else {
            return Err(EvalError::Input(format!("{at}: unknown question id {:?} (not in the questions file)", a.id)));
        };
        let letter = a.answer.trim().trim_matches('"').to_ascii_uppercase();
        if !LETTERS.contains(&letter.as_str()) {
            return Err(EvalError::Input(format!("{at}: answer {:?} to {} is not one of A, B, C, D", a.answer, a.id)));
        }
        if a.format.trim().is_empty() {
            return Err(EvalError::Input(format!("{at}: empty format name")));
        }
        if let Some(first) = first_line.insert((q, a.format.clone()), i + 1) {
            return Err(EvalError::Input(format!("{at}: second answer to {} in format {} (first on line {first})", a.id, a.format)));
        }
        if !formats.contains(&a.format) {
            formats.push(a.format.clone());
        }
        given[q].insert(a.format, letter);
    }
    if formats.is_empty() {
        return Err(EvalError::Input(format!("{}: no answers", path.display())));
    }
    for f in &formats {
        let missing: Vec<&str> = questions.iter().zip(&given).filter(|(_, g)| !g.contains_key(f)).map(|(q, _)| q.id.as_str()).collect();
        if !missing.is_empty() {
            return Err(EvalError::Input(format!(
                "{}: format {f} answers {} of {} questions; missing {} (first: {}); every format must answer every question",
                path.display(),
                questions.len() - missing.len(),
                questions.len(),
                missing.len(),
                missing[0]
            )));
        }
    }
    // The baseline first, then the formats in the order keet asks them.
    let order = |f: &String| match f.as_str() {
        "none" => 0,
        "raw" => 1,
        "context" => 2,
        "explained" => 3,
        "md" => 4,
        _ => 5,
    };
    formats.sort_by_key(order);
    let answers = questions
        .iter()
        .zip(given)
        .map(|(q, given)| Answered { id: q.id.clone(), kind: q.kind, answer: q.answer.clone(), given })
        .collect();
    Ok((answers, formats))
}

/// Scores an answers file against a questions file.
pub fn score_files(questions_path: &Path, answers_path: &Path) -> Result<EvalReport, EvalError> {
    let questions = read_questions(questions_path)?;
    let (answers, formats) = read_answers(answers_path, &questions)?;
    let mut seeds: Vec<u64> = questions.iter().map(|q| q.seed).collect();
    seeds.sort();
    seeds.dedup();
    let mut files: Vec<PathBuf> = questions.iter().map(|q| q.file.clone()).collect();
    files.sort();
    files.dedup();
    let keys: Vec<Key> = questions.iter().map(Key::from).collect();
    let meta = ReportMeta {
        model: None,
        answers_file: Some(answers_path.to_path_buf()),
        seeds,
        files,
        profiles_without_questions: vec![],
        truncated_contexts: 0,
        cost: vec![],
        wall_s: None,
        errors: vec![],
    };
    Ok(report(&keys, answers, &formats, meta))
}
