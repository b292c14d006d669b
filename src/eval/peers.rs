//! Contexts made by other tools (`keet eval --context NAME=FILE.jsonl`): one `{"id": ...,
//! "context": ...}` object per line, for the questions of the run (`--questions-out` lists their
//! ids, files and kernels). Each file becomes a format beside keet's own, answered with the same
//! model, prompt, rotations and statistics, so a peer tool's digest is scored exactly as keet's
//! context is. `scripts/perfdigest-contexts.sh` writes such a file with PerfDigest-MCP.

use super::{Condition, EvalError, Question};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A format the model answers in: one of keet's, or a peer's contexts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    Keet(Condition),
    /// Index into [`super::EvalSet::peers`], and the format's name.
    Peer(usize, String),
}

impl Format {
    pub fn name(&self) -> &str {
        match self {
            Format::Keet(c) => c.name(),
            Format::Peer(_, name) => name,
        }
    }
}

/// One peer format: its name and a context per question (in [`super::EvalSet::questions`] order).
#[derive(Debug, Clone)]
pub struct PeerContexts {
    pub name: String,
    pub file: PathBuf,
    pub by_question: Vec<String>,
}

#[derive(Deserialize)]
struct Line {
    id: String,
    context: String,
}

/// Parses `NAME=FILE.jsonl` (the `--context` argument).
pub fn parse_arg(arg: &str) -> Result<(String, PathBuf), String> {
    let (name, file) = arg.split_once('=').ok_or_else(|| format!("{arg:?}: expected NAME=FILE.jsonl"))?;
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(format!("{name:?}: a format name is letters, digits, '-' and '_'"));
    }
    let taken =
        [Condition::None, Condition::Raw, Condition::Generic, Condition::Context, Condition::Swapped, Condition::Explained, Condition::Md];
    if taken.iter().any(|c| c.name() == name) {
        return Err(format!("{name:?} is one of keet's own formats: give the peer's contexts another name"));
    }
    if file.is_empty() {
        return Err(format!("{arg:?}: no file after '='"));
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

/// Reads a peer's contexts for `questions`: every question needs exactly one line; a line for a
/// question this run does not ask is an error too (the file was made for other questions).
pub fn read(name: &str, path: &Path, questions: &[Question]) -> Result<PeerContexts, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::Input(format!("{}: cannot read: {e}", path.display())))?;
    let index: HashMap<&str, usize> = questions.iter().enumerate().map(|(i, q)| (q.id.as_str(), i)).collect();
    let mut by_question: Vec<Option<String>> = vec![None; questions.len()];
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = |what: String| EvalError::Input(format!("{}:{}: {what}", path.display(), n + 1));
        let line: Line =
            serde_json::from_str(line).map_err(|e| at(format!("{e} (expected {{\"id\": \"s0-q0001\", \"context\": \"...\"}})")))?;
        let i = *index.get(line.id.as_str()).ok_or_else(|| {
            at(format!("question {:?} is not one of this run's questions (make the file from this run's --questions-out)", line.id))
        })?;
        if by_question[i].replace(line.context).is_some() {
            return Err(at(format!("a second context for question {:?}", questions[i].id)));
        }
    }
    let missing: Vec<&str> = questions.iter().zip(&by_question).filter(|(_, c)| c.is_none()).map(|(q, _)| q.id.as_str()).collect();
    if let Some(first) = missing.first() {
        return Err(EvalError::Input(format!(
            "{}: no context for {} of the {} questions (the first: {first}); write one line per question of --questions-out",
            path.display(),
            missing.len(),
            questions.len()
        )));
    }
    Ok(PeerContexts { name: name.to_string(), file: path.to_path_buf(), by_question: by_question.into_iter().flatten().collect() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::questions::QuestionKind;

    fn question(id: &str) -> Question {
        Question {
            id: id.into(),
            seed: 0,
            kind: QuestionKind::BoundUnit,
            file: "p.ncu-rep".into(),
            kernel: "k".into(),
            question: "?".into(),
            options: vec![],
            answer: "A".into(),
            answer_key: "dram".into(),
            basis: vec![],
            context: 0,
        }
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn a_peer_file_gives_one_context_per_question_in_question_order() {
        let qs = [question("s0-q0001"), question("s0-q0002")];
        let f = write("{\"id\": \"s0-q0002\", \"context\": \"two\"}\n\n{\"id\": \"s0-q0001\", \"context\": \"one\"}\n");
        let p = read("peer", f.path(), &qs).unwrap();
        assert_eq!(p.by_question, ["one", "two"]);
    }

    #[test]
    fn missing_unknown_and_repeated_questions_are_errors_that_name_the_line() {
        let qs = [question("s0-q0001"), question("s0-q0002")];
        let f = write("{\"id\": \"s0-q0001\", \"context\": \"one\"}\n");
        let e = read("peer", f.path(), &qs).unwrap_err().to_string();
        assert!(e.contains("no context for 1 of the 2 questions (the first: s0-q0002)"), "{e}");
        let f = write("{\"id\": \"s9-q0001\", \"context\": \"x\"}\n");
        let e = read("peer", f.path(), &qs).unwrap_err().to_string();
        assert!(e.contains(":1: question \"s9-q0001\" is not one of this run's questions"), "{e}");
        let f = write("{\"id\": \"s0-q0001\", \"context\": \"a\"}\n{\"id\": \"s0-q0001\", \"context\": \"b\"}\n");
        let e = read("peer", f.path(), &qs).unwrap_err().to_string();
        assert!(e.contains(":2: a second context"), "{e}");
        let f = write("{\"id\": 3}\n");
        let e = read("peer", f.path(), &qs).unwrap_err().to_string();
        assert!(e.contains(":1: ") && e.contains("expected {\"id\""), "{e}");
    }

    #[test]
    fn a_format_name_is_plain_and_not_one_of_keets() {
        assert_eq!(parse_arg("perfdigest=ctx.jsonl").unwrap(), ("perfdigest".to_string(), PathBuf::from("ctx.jsonl")));
        assert!(parse_arg("context=x.jsonl").unwrap_err().contains("one of keet's own formats"));
        assert!(parse_arg("x.jsonl").unwrap_err().contains("NAME=FILE.jsonl"));
        assert!(parse_arg("a b=x.jsonl").is_err());
        assert!(parse_arg("peer=").is_err());
    }
}
