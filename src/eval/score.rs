//! Scoring of `keet eval`: answers (from the local model, or a JSONL file made elsewhere) against
//! the questions' keys. Per question kind and overall, per format: n, circular accuracy (right in
//! every rotation of the options asked, as MMBench's CircularEval) and its 95% Wilson interval, the
//! share right in each rotation; each format against `raw` on the same questions (discordant pairs
//! of circular correctness and the exact sign test); the distribution of the letters given over
//! all rotations, beside that of the keys; per seed, overall. Also reads the questions
//! (`--questions-out`) and answers files, naming the line of any error.

use super::questions::QuestionKind;
use super::stats::{sign_test_p, wilson_pct};
use super::{EvalError, Question, LETTERS, ROTATIONS};
use crate::analysis::FileError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The format each other format is compared with.
pub const BASELINE: &str = "raw";

/// The answers to one question: per format, the letter given in each rotation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answered {
    pub id: String,
    pub kind: QuestionKind,
    /// The correct letter in rotation 0 (rotation r: [`super::rotated_letter`]).
    pub answer: String,
    /// Per format, the letter given in each rotation asked, rotation 0 first.
    pub given: BTreeMap<String, Vec<String>>,
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
    /// Questions right in every rotation asked (circular; with one rotation, right in it).
    pub correct: usize,
    /// `correct` of the questions: the circular accuracy.
    pub accuracy_pct: f64,
    /// 95% Wilson interval.
    pub ci95_low_pct: f64,
    pub ci95_high_pct: f64,
    /// Share of the questions right in each rotation, rotation 0 (the options as drawn) first.
    pub rotation_pct: Vec<f64>,
    /// Share right over every rotation asked (the mean of `rotation_pct`).
    pub rotation_mean_pct: f64,
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

/// How often each letter was given (or is the key), over every rotation asked.
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
    /// Rotations of the options each question was asked in: 4 (circular evaluation) or 1.
    pub rotations: usize,
    /// How the local model gave its answers: a letter, or the option's text (absent for an
    /// answers file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_by: Option<super::AnswerBy>,
    pub by_kind: Vec<Row>,
    pub overall: Row,
    pub by_seed: Vec<Row>,
    /// The letters given per format, then the keys' letters (`of: "key"`).
    pub letters: Vec<Letters>,
    /// Circular accuracy of guessing among four options (25% for one rotation, 0.39% for four).
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
    /// `--twins` with the explained format: the model's own edits against the real fixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edits: Option<super::twins::EditScore>,
    /// Every question by how keet's `context` format states its keyed answer (`eval::causes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_states: Vec<CauseRow>,
    /// The questions the `context` format got wrong, by how the context states their key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_answer_causes: Vec<CauseRow>,
    /// `--sets` with both formats: `set` against `profiles` on the same questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_vs_profiles: Option<super::sets::AgainstProfiles>,
}

/// One row of a causes table: a question kind (or `overall`) and its counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CauseRow {
    pub kind: String,
    /// Questions counted (wrong answers for [`tally`], every question for [`states`]).
    pub questions: usize,
    pub option_words: usize,
    pub other_words: usize,
    pub not_stated: usize,
    pub contradicts: usize,
    /// Up to three question ids whose context contradicts the key (to look into).
    pub contradicting: Vec<String>,
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

/// Per rotation asked, whether format `f` gave the key (empty when it did not answer).
fn rights(f: &str, k: &Key, a: &Answered) -> Vec<bool> {
    let given = a.given.get(f).map(Vec::as_slice).unwrap_or_default();
    given.iter().enumerate().map(|(r, l)| l == super::rotated_letter(k.answer, r)).collect()
}

/// Right in every rotation asked (circular).
fn right(f: &str, k: &Key, a: &Answered) -> bool {
    let r = rights(f, k, a);
    !r.is_empty() && r.iter().all(|x| *x)
}

fn row(kind: String, rows: &[(&Key, &Answered)], formats: &[String], rotations: usize) -> Row {
    let n = rows.len();
    let has_baseline = formats.iter().any(|f| f == BASELINE);
    let baseline_correct = rows.iter().filter(|(k, a)| right(BASELINE, k, a)).count();
    let pct = |c: usize| if n == 0 { 0.0 } else { 100.0 * c as f64 / n as f64 };
    let cells = formats
        .iter()
        .map(|f| {
            let correct = rows.iter().filter(|(k, a)| right(f, k, a)).count();
            let (lo, hi) = wilson_pct(correct, n);
            let mut per_rotation = vec![0usize; rotations];
            for (k, a) in rows {
                for (r, ok) in rights(f, k, a).into_iter().enumerate().take(rotations) {
                    per_rotation[r] += usize::from(ok);
                }
            }
            let rotation_pct: Vec<f64> = per_rotation.iter().map(|&c| pct(c)).collect();
            let rotation_mean_pct = rotation_pct.iter().sum::<f64>() / rotations.max(1) as f64;
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
            Cell {
                format: f.clone(),
                correct,
                accuracy_pct: pct(correct),
                ci95_low_pct: lo,
                ci95_high_pct: hi,
                rotation_pct,
                rotation_mean_pct,
                vs_raw,
            }
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
    /// Rotations of the options asked (1 or [`super::ROTATIONS`]).
    pub rotations: usize,
    /// How the local model answered; `None` for an answers file.
    pub answer_by: Option<super::AnswerBy>,
    pub truncated_contexts: usize,
    pub cost: Vec<super::FormatCost>,
    pub wall_s: Option<f64>,
    pub errors: Vec<FileError>,
}

/// Scores `answers` (one per key, same order) in `formats`.
pub fn report(keys: &[Key], answers: Vec<Answered>, formats: &[String], meta: ReportMeta) -> EvalReport {
    let pairs: Vec<(&Key, &Answered)> = keys.iter().zip(&answers).collect();
    let rotations = meta.rotations.max(1);
    let subset = |keep: &dyn Fn(&Key) -> bool| pairs.iter().filter(|(k, _)| keep(k)).copied().collect::<Vec<_>>();
    let by_kind =
        QuestionKind::ALL.iter().map(|kind| row(kind.name().to_string(), &subset(&|k| k.kind == *kind), formats, rotations)).collect();
    let overall = row("overall".into(), &pairs, formats, rotations);
    let by_seed = meta.seeds.iter().map(|s| row(format!("seed {s}"), &subset(&|k| k.seed == *s), formats, rotations)).collect();
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
                for letter in a.given.get(f).map(Vec::as_slice).unwrap_or_default() {
                    count(Some(letter), &mut counts);
                }
            }
            Letters { of: f.clone(), counts }
        })
        .collect();
    let mut key_counts = [0; 4];
    for k in keys {
        for r in 0..rotations {
            count(Some(super::rotated_letter(k.answer, r)), &mut key_counts);
        }
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
        rotations,
        answer_by: meta.answer_by,
        by_kind,
        overall,
        by_seed,
        letters,
        chance_pct: 100.0 * 0.25f64.powi(rotations as i32),
        truncated_contexts: meta.truncated_contexts,
        cost: meta.cost,
        wall_s: meta.wall_s,
        answers,
        errors: meta.errors,
        edits: None,
        context_states: Vec::new(),
        wrong_answer_causes: Vec::new(),
        set_vs_profiles: None,
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

/// One line of an answers file: `{"id": "s0-q0001", "format": "raw", "answer": "B"}`, with
/// `"rotation": 0-3` for an answer to a rotation of the options (default 0; other keys, such as the
/// model's name, are ignored).
#[derive(Debug, Deserialize)]
struct AnswerLine {
    id: String,
    format: String,
    answer: String,
    #[serde(default)]
    rotation: usize,
}

/// The answers of an answers file, per question (in the questions' order), format and rotation.
type Given = Vec<BTreeMap<String, BTreeMap<usize, String>>>;

/// Reads every line of an answers file: a known question, a letter A-D, a rotation 0-3, at most one
/// answer per question, format and rotation. Returns the answers and the formats in the order
/// they first appear.
fn read_answer_lines(path: &Path, questions: &[Question]) -> Result<(Given, Vec<String>), EvalError> {
    let text = read_lines(path)?;
    let index: HashMap<&str, usize> = questions.iter().enumerate().map(|(i, q)| (q.id.as_str(), i)).collect();
    let mut given: Given = vec![BTreeMap::new(); questions.len()];
    let mut first_line: HashMap<(usize, String, usize), usize> = HashMap::new();
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
        if a.rotation >= ROTATIONS {
            return Err(EvalError::Input(format!("{at}: rotation {} of {} is not one of 0-3", a.rotation, a.id)));
        }
        if let Some(first) = first_line.insert((q, a.format.clone(), a.rotation), i + 1) {
            let rot = if a.rotation > 0 { format!(" rotation {}", a.rotation) } else { String::new() };
            return Err(EvalError::Input(format!("{at}: second answer to {}{rot} in format {} (first on line {first})", a.id, a.format)));
        }
        if !formats.contains(&a.format) {
            formats.push(a.format.clone());
        }
        given[q].entry(a.format).or_default().insert(a.rotation, letter);
    }
    if formats.is_empty() {
        return Err(EvalError::Input(format!("{}: no answers", path.display())));
    }
    Ok((given, formats))
}

/// Reads an answers file against `questions`: every line one answer, to a known question, at most
/// one per question, format and rotation, a letter A-D; every format answers every question, in
/// rotation 0 only or in all four. Returns the answers in `questions` order, the formats in the
/// order keet asks them, and the rotations answered.
pub fn read_answers(path: &Path, questions: &[Question]) -> Result<(Vec<Answered>, Vec<String>, usize), EvalError> {
    let (given, mut formats) = read_answer_lines(path, questions)?;
    let rotations = given.iter().flat_map(|g| g.values()).flat_map(|r| r.keys()).max().map_or(1, |r| r + 1);
    if rotations != 1 && rotations != ROTATIONS {
        return Err(EvalError::Input(format!(
            "{}: answers go to rotation {}: answer rotation 0 only, or all four rotations (0-3)",
            path.display(),
            rotations - 1
        )));
    }
    for f in &formats {
        let missing: Vec<String> = questions
            .iter()
            .zip(&given)
            .flat_map(|(q, g)| (0..rotations).filter(move |r| !g.get(f).is_some_and(|m| m.contains_key(r))).map(move |r| (q, r)))
            .map(|(q, r)| if rotations == 1 { q.id.clone() } else { format!("{} rotation {r}", q.id) })
            .collect();
        if !missing.is_empty() {
            let asked = questions.len() * rotations;
            return Err(EvalError::Input(format!(
                "{}: format {f} answers {} of {asked} {}; missing {} (first: {}); every format must answer every question{}",
                path.display(),
                asked - missing.len(),
                if rotations == 1 { "questions" } else { "question rotations" },
                missing.len(),
                missing[0],
                if rotations == 1 { "" } else { " in every rotation" }
            )));
        }
    }
    formats.sort_by_key(|f| format_order(f));
    let answers = questions
        .iter()
        .zip(given)
        .map(|(q, g)| Answered {
            id: q.id.clone(),
            kind: q.kind,
            answer: q.answer.clone(),
            given: g.into_iter().map(|(f, by_rotation)| (f, by_rotation.into_values().collect())).collect(),
        })
        .collect();
    Ok((answers, formats, rotations))
}

/// The baseline first, then the formats in the order keet asks them, then any other.
fn format_order(format: &str) -> usize {
    ["none", "raw", "generic", "swapped", "context", "explained", "md", "profiles", "set"].iter().position(|f| *f == format).unwrap_or(9)
}

/// Scores an answers file against a questions file.
pub fn score_files(questions_path: &Path, answers_path: &Path) -> Result<EvalReport, EvalError> {
    let questions = read_questions(questions_path)?;
    let (answers, formats, rotations) = read_answers(answers_path, &questions)?;
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
        rotations,
        answer_by: None,
        truncated_contexts: 0,
        cost: vec![],
        wall_s: None,
        errors: vec![],
    };
    Ok(report(&keys, answers, &formats, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, answer: &'static str) -> Key<'static> {
        let id: &'static str = Box::leak(id.to_string().into_boxed_str());
        Key { id, seed: 0, kind: QuestionKind::BoundUnit, answer }
    }

    fn meta(rotations: usize) -> ReportMeta {
        ReportMeta {
            model: None,
            answers_file: None,
            seeds: vec![0],
            files: vec![],
            profiles_without_questions: vec![],
            rotations,
            answer_by: None,
            truncated_contexts: 0,
            cost: vec![],
            wall_s: None,
            errors: vec![],
        }
    }

    /// A planted answerer that always says B, on questions keyed A, B, C, D twice over: 25% in
    /// every rotation (the key stands under B in exactly one rotation of each question) and 0%
    /// circular; one that always gives the key (its rotation's letter) is 100% throughout.
    #[test]
    fn always_b_scores_a_quarter_per_rotation_and_nothing_circular() {
        let letters = ["A", "B", "C", "D", "A", "B", "C", "D"];
        let keys: Vec<Key> = letters.iter().enumerate().map(|(i, l)| key(&format!("q{i}"), l)).collect();
        let answers: Vec<Answered> = keys
            .iter()
            .map(|k| {
                let always_b = vec!["B".to_string(); ROTATIONS];
                let perfect = (0..ROTATIONS).map(|r| super::super::rotated_letter(k.answer, r).to_string()).collect();
                Answered {
                    id: k.id.into(),
                    kind: k.kind,
                    answer: k.answer.into(),
                    given: [("raw".to_string(), always_b), ("context".to_string(), perfect)].into(),
                }
            })
            .collect();
        let formats = ["raw".to_string(), "context".to_string()];
        let r = report(&keys, answers, &formats, meta(ROTATIONS));
        let (b, perfect) = (&r.overall.cells[0], &r.overall.cells[1]);
        assert_eq!(b.rotation_pct, vec![25.0; ROTATIONS]);
        assert_eq!(b.rotation_mean_pct, 25.0);
        assert_eq!((b.correct, b.accuracy_pct), (0, 0.0), "right in one rotation of four is not right");
        assert_eq!(perfect.rotation_pct, vec![100.0; ROTATIONS]);
        assert_eq!((perfect.correct, perfect.accuracy_pct), (8, 100.0));
        let vs = perfect.vs_raw.as_ref().unwrap();
        assert_eq!((vs.wins, vs.losses, vs.delta_pts), (8, 0, 100.0));
        assert_eq!(r.letters[0].counts, [0, 8 * ROTATIONS, 0, 0]);
        assert_eq!(r.letters[2].of, "key");
        assert_eq!(r.letters[2].counts, [8; 4], "over the rotations each letter is the key equally often");
        assert!((r.chance_pct - 100.0 / 256.0).abs() < 1e-12);
    }

    /// One rotation: the score is the plain accuracy of the options as drawn.
    #[test]
    fn one_rotation_scores_the_options_as_drawn() {
        let keys = vec![key("a", "B"), key("b", "C")];
        let answers: Vec<Answered> = keys
            .iter()
            .map(|k| Answered {
                id: k.id.into(),
                kind: k.kind,
                answer: k.answer.into(),
                given: [("raw".to_string(), vec!["B".to_string()])].into(),
            })
            .collect();
        let r = report(&keys, answers, &["raw".to_string()], meta(1));
        let c = &r.overall.cells[0];
        assert_eq!((c.correct, c.accuracy_pct, c.rotation_pct.clone()), (1, 50.0, vec![50.0]));
        assert_eq!(r.chance_pct, 25.0);
    }
}
