//! Where `keet eval`'s wrong answers come from: for a question and keet's `context` text, whether
//! the context states the keyed answer in the option's own words, in other words, not at all, or
//! states another option (it contradicts the key). The lines that state each question kind and the
//! phrases that state each option are in `expert/eval.toml` (`[statements.*]`), so an expert can
//! review them beside the questions.
//!
//! [`tally`] counts the questions a format got wrong by cause, per question kind; [`states`] counts
//! every question the same way without a model (how plainly the context answers: the measure the
//! context is improved by).

use super::questions::QuestionKind;
use super::score::{Answered, CauseRow};
use super::Question;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// How a context states a question's keyed answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stated {
    /// The line names the keyed option first, in the option's own words.
    OptionWords,
    /// The line names the keyed option first, in other words.
    OtherWords,
    /// No line of the kind names any option.
    NotStated,
    /// The line names another option first: keet's rule layer and the question's key disagree.
    Contradicts,
}

/// Counts one question in `row`.
fn count(row: &mut CauseRow, stated: Stated, id: &str) {
    row.questions += 1;
    match stated {
        Stated::OptionWords => row.option_words += 1,
        Stated::OtherWords => row.other_words += 1,
        Stated::NotStated => row.not_stated += 1,
        Stated::Contradicts => {
            row.contradicts += 1;
            if row.contradicting.len() < 3 {
                row.contradicting.push(id.to_string());
            }
        }
    }
}

#[derive(Deserialize)]
struct Says {
    words: Vec<String>,
    #[serde(default)]
    other: Vec<String>,
}

#[derive(Deserialize)]
struct KindStatement {
    lines: Vec<String>,
    #[serde(default)]
    says: BTreeMap<String, Says>,
    /// `stall` or `kernel`: the phrases are the options' own (the reason, the kernel's name).
    #[serde(default)]
    from_options: Option<String>,
}

#[derive(Deserialize)]
struct Table {
    statements: BTreeMap<String, KindStatement>,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| toml::from_str(super::questions::TABLE).unwrap_or_else(|e| panic!("expert/eval.toml [statements]: {e}")))
}

/// The table key of a question kind (`bound_unit`).
fn table_key(kind: QuestionKind) -> String {
    kind.name().replace('-', "_")
}

/// Byte offset of the first whole-word, case-insensitive match of `phrase` in `text`.
fn find_word(text: &str, phrase: &str) -> Option<usize> {
    let (hay, needle) = (text.to_lowercase(), phrase.to_lowercase());
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut from = 0;
    while let Some(at) = hay[from..].find(&needle).map(|i| i + from) {
        let before = hay[..at].chars().next_back();
        let after = hay[at + needle.len()..].chars().next();
        let edge_ok = |c: Option<char>, inner: Option<char>| !(is_word(c) && is_word(inner));
        if edge_ok(before, needle.chars().next()) && edge_ok(after, needle.chars().next_back()) {
            return Some(at);
        }
        from = at + needle.chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// The text of the first line with each label, in the kind's order, joined (labels cut off).
fn statement_text(context: &str, labels: &[String]) -> String {
    let mut parts = Vec::new();
    for label in labels {
        let found = context.lines().map(|l| l.trim_start().trim_start_matches("- ")).find_map(|l| l.strip_prefix(label.as_str()));
        parts.extend(found.map(str::trim));
    }
    parts.join(" | ")
}

/// The phrases of each option the question offers: `(option key, own words, other words)`. An
/// option the question does not offer (a problem its metrics also show) is not looked for.
fn phrases(kind_key: &str, kind: &KindStatement, q: &Question) -> Vec<(String, Vec<String>, Vec<String>)> {
    let questions = super::questions::table();
    let offered = |key: &str| questions.option_text(kind_key, key).is_none_or(|text| q.options.contains(&text));
    match kind.from_options.as_deref() {
        Some(source) => q.options.iter().map(|o| (o.clone(), vec![option_phrase(o, source)], Vec::new())).collect(),
        None => kind.says.iter().filter(|(key, _)| offered(key)).map(|(key, s)| (key.clone(), s.words.clone(), s.other.clone())).collect(),
    }
}

/// The phrase an option's text is named by: the stall reason before its hint, or the kernel's name
/// before its parameters and launch shape.
fn option_phrase(option: &str, source: &str) -> String {
    if source != "kernel" {
        return option[..option.find(" (").unwrap_or(option.len())].trim().to_string();
    }
    // "void ns::name<T>(float *) grid (..) block (..)" → "name", as keet's context names it
    let head = &option[..option.find(" grid (").unwrap_or(option.len())];
    crate::rules::kind::short_kernel_name(head)
}

/// How `context` states the keyed answer of `q`.
pub fn stated(q: &Question, context: &str) -> Stated {
    let kind_key = table_key(q.kind);
    let Some(kind) = table().statements.get(&kind_key) else { return Stated::NotStated };
    let text = statement_text(context, &kind.lines);
    if text.is_empty() {
        return Stated::NotStated;
    }
    let options = phrases(&kind_key, kind, q);
    let first = options
        .iter()
        .flat_map(|(key, words, other)| words.iter().chain(other).filter_map(|p| find_word(&text, p)).map(move |at| (at, key)))
        .min_by_key(|(at, _)| *at);
    let key = match kind.from_options {
        Some(_) => q.options.get(super::LETTERS.iter().position(|l| *l == q.answer).unwrap_or(0)).cloned().unwrap_or_default(),
        None => q.answer_key.clone(),
    };
    match first {
        None => Stated::NotStated,
        Some((_, named)) if *named != key => Stated::Contradicts,
        Some(_) => {
            let own = options.iter().find(|(k, _, _)| *k == key).map(|(_, words, _)| words.as_slice()).unwrap_or_default();
            if own.iter().any(|p| find_word(&text, p).is_some()) {
                Stated::OptionWords
            } else {
                Stated::OtherWords
            }
        }
    }
}

/// Rows per question kind that has questions, then `overall`.
fn rows(items: impl Iterator<Item = (QuestionKind, Stated, String)>) -> Vec<CauseRow> {
    let mut by_kind: BTreeMap<QuestionKind, CauseRow> = BTreeMap::new();
    let mut overall = CauseRow { kind: "overall".into(), ..Default::default() };
    for (kind, stated, id) in items {
        count(by_kind.entry(kind).or_insert_with(|| CauseRow { kind: kind.name().into(), ..Default::default() }), stated, &id);
        count(&mut overall, stated, &id);
    }
    by_kind.into_values().chain(std::iter::once(overall)).collect()
}

/// How the context states every question's key (no model needed), per kind.
pub fn states(questions: &[Question], context_of: &dyn Fn(&Question) -> String) -> Vec<CauseRow> {
    rows(questions.iter().map(|q| (q.kind, stated(q, &context_of(q)), q.id.clone())))
}

/// The questions `format` got wrong (in any rotation asked), by how the context states their key.
pub fn tally(questions: &[Question], answers: &[Answered], format: &str, context_of: &dyn Fn(&Question) -> String) -> Vec<CauseRow> {
    let wrong = questions.iter().zip(answers).filter(|(q, a)| {
        let given = a.given.get(format).map(Vec::as_slice).unwrap_or_default();
        !given.is_empty() && given.iter().enumerate().any(|(r, l)| l != q.answer_in(r))
    });
    rows(wrong.map(|(q, _)| (q.kind, stated(q, &context_of(q)), q.id.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(kind: QuestionKind, key: &str, options: &[&str], answer: &str) -> Question {
        Question {
            id: "s0-q0001".into(),
            seed: 0,
            kind,
            file: "p.ncu-rep".into(),
            kernel: "k".into(),
            question: "?".into(),
            options: options.iter().map(|s| s.to_string()).collect(),
            answer: answer.into(),
            answer_key: key.into(),
            basis: vec![],
            context: 0,
        }
    }

    #[test]
    fn the_option_named_first_on_the_kinds_line_is_what_the_context_states() {
        let text = |key: &str| super::super::questions::table().option_text("bound_unit", key).unwrap();
        let options = [text("dram"), text("sm"), text("l2"), text("none")];
        let q = question(QuestionKind::BoundUnit, "dram", &options.each_ref().map(String::as_str), "A");
        let ctx = "## K1 `k`\n- Regime: latency-bound on SM\n- Units: busiest DRAM at 85% of peak, then SM 40%\n";
        assert_eq!(stated(&q, ctx), Stated::OptionWords);
        let other = "- Units: busiest device memory at 85% of peak, then SM 40%\n";
        assert_eq!(stated(&q, other), Stated::OtherWords);
        let contra = "- Units: busiest SM at 85% of peak, then DRAM 40%\n";
        assert_eq!(stated(&q, contra), Stated::Contradicts);
        // An option the question does not offer is not looked for.
        let l1 = "- Units: busiest L1/TEX at 90% of peak, then DRAM 85%\n";
        assert_eq!(stated(&q, l1), Stated::OptionWords);
        assert_eq!(stated(&q, "- Grid: 4 blocks for 132 SMs\n"), Stated::NotStated);
    }

    #[test]
    fn phrases_match_whole_words_only() {
        assert_eq!(find_word("busiest SM at 80%", "SM"), Some(8));
        assert_eq!(find_word("132 SMs", "SM"), None);
        assert_eq!(find_word("L1/TEX 20%", "L1"), Some(0));
        assert_eq!(find_word("fewer blocks than SMs", "fewer blocks than"), Some(0));
    }

    #[test]
    fn stall_and_kernel_questions_take_their_phrases_from_the_options() {
        let q = question(
            QuestionKind::TopStall,
            "long_scoreboard",
            &[
                "barrier (waiting at __syncthreads)",
                "long_scoreboard (waiting for L1TEX)",
                "wait (fixed latency)",
                "math_pipe_throttle (a pipe is busy)",
            ],
            "B",
        );
        assert_eq!(stated(&q, "- Top stalls: long_scoreboard 12.3 (45%), barrier 4.1 (15%)\n"), Stated::OptionWords);
        assert_eq!(
            stated(&q, "- Top stalls (cycles per issued instruction): barrier 12.3 (45%), long_scoreboard 4.1\n"),
            Stated::Contradicts
        );
        let g = question(
            QuestionKind::MostGain,
            "k2",
            &[
                "gemm(float*) grid (1,1,1) block (1,1,1)",
                "void cutlass::device_kernel<flash::Fwd<128>>(Params) grid (132,1,1) block (512,1,1)",
            ],
            "B",
        );
        let ctx = "- Profile, top-opportunities: The largest estimated gains: Fwd up to 3 µs; gemm up to 1 µs\n";
        assert_eq!(stated(&g, ctx), Stated::OptionWords);
        assert_eq!(option_phrase("reduce grid (4,1,1) block (32,1,1)", "kernel"), "reduce");
    }

    #[test]
    fn every_statement_table_names_only_options_the_questions_have() {
        let t = super::super::questions::table();
        let options = |kind: &str| t.options_of(kind).map(|o| o.keys().cloned().collect::<Vec<_>>());
        for (kind, statement) in &table().statements {
            if statement.from_options.is_some() {
                continue;
            }
            let known = options(kind).unwrap_or_else(|| panic!("[statements.{kind}]: no such question kind"));
            for key in statement.says.keys() {
                assert!(known.contains(key), "[statements.{kind}.says] {key}: not an option of {kind} ({known:?})");
            }
            for key in &known {
                assert!(statement.says.contains_key(key), "[statements.{kind}.says]: option {key} has no phrases");
            }
        }
    }
}
