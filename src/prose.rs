//! The prose gate: every sentence the model writes (claim, explanation, each suggestion) passes it
//! before a reader sees it.
//!
//! A sentence passes when
//! 1. every word is an English word (the SCOWL size-35 list in `data/words/`, public domain / permissive,
//!    see `data/words/SCOWL-COPYRIGHT`) or a GPU/CUDA term (`prompts/glossary.txt`), or a number, a
//!    metric name or a fact key of the launch (the tokens the validator already checks); no word is
//!    stuttered ("urn urns");
//! 2. it is on its finding's topic: it shares a word with the category's topic vocabulary
//!    (`prompts/prose-gate.toml`), the rule layer's claim for that category, or the labels of the facts
//!    that category rests on;
//! 3. it does not talk about keet, the report or anyone's team ("rule layer", "this finding", "JSON",
//!    "our team", "the model");
//! 4. it does not repeat the claim or another sentence;
//! 5. it does not contradict the facts (the validator's contradiction checks, plus the regime phrases of
//!    `prompts/prose-gate.toml`, such as "not memory bound" on a memory-bound kernel).
//!
//! [`Gate::check_sentence`] returns every reason a sentence fails; the explain stage re-asks once
//! with those reasons and otherwise shows the expert text instead.

use crate::facts::BoundKind;
use crate::rules::Category;
use crate::validate::Context;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

/// English words, one per line, lower case (SCOWL size 35 via Debian's `wamerican-small`).
pub const WORDS: &str = include_str!("../data/words/scowl-35-en.txt");
/// GPU/CUDA terms, one per line (`#` comments).
pub const GLOSSARY: &str = include_str!("../prompts/glossary.txt");
/// Topic vocabulary, self-reference phrases and regime contradictions.
pub const CONFIG: &str = include_str!("../prompts/prose-gate.toml");

/// The gate's files failed to parse.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("prompts/prose-gate.toml: {0}")]
    Config(#[from] toml::de::Error),
    #[error("prompts/prose-gate.toml: unknown category {0:?} in [topics]")]
    UnknownCategory(String),
    #[error("prompts/prose-gate.toml: unknown regime {0:?}")]
    UnknownRegime(String),
}

/// Which sentence of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "field", content = "index")]
pub enum Field {
    Claim,
    Explanation,
    Suggestion(usize),
}

impl Field {
    pub fn label(self) -> String {
        match self {
            Field::Claim => "claim".into(),
            Field::Explanation => "explanation".into(),
            Field::Suggestion(i) => format!("suggestion {}", i + 1),
        }
    }

    /// The kind of field, without its position: "claim", "explanation" or "suggestion".
    pub fn kind(self) -> &'static str {
        match self {
            Field::Claim => "claim",
            Field::Explanation => "explanation",
            Field::Suggestion(_) => "suggestion",
        }
    }
}

#[derive(Deserialize)]
struct Contradiction {
    /// One phrase, or several under `phrases`.
    #[serde(default)]
    phrase: Option<String>,
    #[serde(default)]
    phrases: Vec<String>,
    regimes: Vec<String>,
}

/// Phrases that give a wrong picture of how a kernel runs, whatever its facts, and why.
#[derive(Deserialize)]
struct WrongPicture {
    phrases: Vec<String>,
    why: String,
}

#[derive(Deserialize)]
struct Config {
    generic: Vec<String>,
    self_reference: Vec<String>,
    number_words: Vec<String>,
    no_final_words: Vec<String>,
    #[serde(default)]
    no_final_phrases: Vec<String>,
    contradiction: Vec<Contradiction>,
    #[serde(default)]
    wrong_picture: Vec<WrongPicture>,
    topics: BTreeMap<String, Vec<String>>,
    suggestion_verbs: Vec<String>,
    not_actionable_for_others: Vec<String>,
    never_actionable: Vec<String>,
}

/// The loaded gate: word lists and vocabulary.
pub struct Gate {
    words: HashSet<&'static str>,
    glossary: HashSet<String>,
    generic: HashSet<String>,
    self_reference: Vec<Vec<String>>,
    number_words: HashSet<String>,
    no_final_words: HashSet<String>,
    /// Endings of two words or more that leave a sentence cut off ("at most").
    no_final_phrases: Vec<Vec<String>>,
    contradictions: Vec<(Vec<String>, Vec<BoundKind>)>,
    /// Phrases false of every kernel (the phrase's words, why it is false).
    wrong_pictures: Vec<(Vec<String>, String)>,
    topics: BTreeMap<Category, Vec<String>>,
    suggestion_verbs: HashSet<String>,
    /// Suggestion phrases refused for library, generated and framework kernels.
    not_actionable_for_others: Vec<Vec<String>>,
    /// Suggestion phrases refused for every kernel.
    never_actionable: Vec<Vec<String>>,
}

fn regime(s: &str) -> Result<BoundKind, GateError> {
    Ok(match s {
        "compute" => BoundKind::Compute,
        "memory" => BoundKind::Memory,
        "latency" => BoundKind::Latency,
        "grid_too_small" => BoundKind::GridTooSmall,
        "launch" => BoundKind::Launch,
        other => return Err(GateError::UnknownRegime(other.into())),
    })
}

/// Lower-case words of `s` (letters, digits, `_`, `'`, `-` kept inside a word).
fn words_of(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '\'' | '-')))
        .map(|w| w.trim_matches(|c: char| matches!(c, '\'' | '-')).to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Letters-only words (hyphenated words split), lower case.
fn plain_words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

impl Gate {
    /// Builds a gate from the texts of the word list, the glossary and the configuration.
    pub fn from_sources(words: &'static str, glossary: &str, config: &str) -> Result<Gate, GateError> {
        let cfg: Config = toml::from_str(config)?;
        let mut topics = BTreeMap::new();
        for (k, v) in cfg.topics {
            let c = Category::parse(&k).ok_or_else(|| GateError::UnknownCategory(k.clone()))?;
            topics.insert(c, v);
        }
        let mut contradictions = Vec::new();
        for c in cfg.contradiction {
            let regimes = c.regimes.iter().map(|r| regime(r)).collect::<Result<Vec<_>, _>>()?;
            for phrase in c.phrase.iter().chain(&c.phrases) {
                contradictions.push((words_of(phrase), regimes.clone()));
            }
        }
        Ok(Gate {
            words: words.lines().map(str::trim).filter(|l| !l.is_empty()).collect(),
            glossary: glossary.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_lowercase).collect(),
            generic: cfg.generic.into_iter().collect(),
            number_words: cfg.number_words.into_iter().collect(),
            no_final_words: cfg.no_final_words.into_iter().collect(),
            no_final_phrases: cfg.no_final_phrases.iter().map(|p| plain_words(p)).collect(),
            self_reference: cfg.self_reference.iter().map(|p| words_of(p)).collect(),
            contradictions,
            wrong_pictures: cfg
                .wrong_picture
                .into_iter()
                .flat_map(|w| w.phrases.into_iter().map(move |p| (words_of(&p), w.why.clone())))
                .collect(),
            topics,
            suggestion_verbs: cfg.suggestion_verbs.into_iter().collect(),
            not_actionable_for_others: cfg.not_actionable_for_others.iter().map(|p| words_of(p)).collect(),
            never_actionable: cfg.never_actionable.iter().map(|p| words_of(p)).collect(),
        })
    }

    fn is_term(&self, w: &str) -> bool {
        if self.glossary.contains(w) {
            return true;
        }
        // Plural and verb forms of glossary terms.
        ["s", "es", "ed", "d", "ing"].iter().any(|suf| w.strip_suffix(suf).is_some_and(|b| b.len() >= 2 && self.glossary.contains(b)))
    }

    fn is_word(&self, w: &str) -> bool {
        self.words.contains(w) || self.is_term(w)
    }

    /// Is `token` (one whitespace-separated token, punctuation stripped, original case) acceptable?
    fn token_ok(&self, ctx: &Context, token: &str) -> bool {
        if ctx.launch.metrics.contains_key(token) || ctx.facts.get_named(token).is_some() {
            return true;
        }
        self.token_ok_in(&crate::grounding::identifiers(&ctx.launch.name), token)
    }

    /// [`Gate::token_ok`] without a launch: `identifiers` are the kernel identifiers admitted.
    fn token_ok_in(&self, identifiers: &[String], token: &str) -> bool {
        // The kernel's own identifiers ("fused_moe_kernel"), which the grounded grammar admits.
        if token.contains(|c: char| c == '_' || c.is_ascii_digit() || c.is_ascii_uppercase()) && identifiers.iter().any(|id| id == token) {
            return true;
        }
        let lower = token.to_lowercase();
        if self.is_term(lower.trim_end_matches("()")) {
            return true;
        }
        // A number, possibly with a unit or suffix glued to it ("4x", "32B", "12.5%", "1,024") or
        // joined by a hyphen ("32-byte", as the expert text writes a sector).
        if lower.starts_with(|c: char| c.is_ascii_digit()) {
            let unit = lower.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | ','));
            let unit = unit.strip_prefix('-').filter(|u| !u.is_empty()).unwrap_or(unit);
            return unit.is_empty() || self.is_word(unit) || is_unit(unit);
        }
        // Contractions and possessives.
        let base = ["n't", "'s", "s'", "'re", "'ll", "'ve", "'d"]
            .iter()
            .find_map(|s| lower.strip_suffix(s))
            .map(|b| {
                if lower.ends_with("n't") && b == "ca" {
                    "can"
                } else if lower.ends_with("n't") && b == "wo" {
                    "will"
                } else {
                    b
                }
            })
            .unwrap_or(&lower);
        if base.contains('\'') {
            return false;
        }
        // Hyphenated compounds: each part is a word.
        base.split('-').all(|p| !p.is_empty() && (self.is_word(p) || p.chars().all(|c| c.is_ascii_digit())))
    }

    /// The topic vocabulary of `category` for this launch: the table's words, the content words of the
    /// rule layer's claim for that category, and the labels of the facts it rests on.
    pub fn topic_words(&self, ctx: &Context, category: Category) -> Vec<String> {
        let mut v: Vec<String> = self.topics.get(&category).cloned().unwrap_or_default();
        for r in ctx.rules.iter().filter(|r| r.category == category) {
            let mut text = r.claim.clone();
            for key in &r.facts {
                if let Some(f) = ctx.facts.get(*key) {
                    text.push(' ');
                    text.push_str(f.label);
                }
            }
            for w in plain_words(&text) {
                if w.len() >= 4 && !self.generic.contains(&w) && !v.contains(&w) {
                    v.push(w);
                }
            }
        }
        v
    }

    fn on_topic(&self, topic: &[String], text: &str) -> bool {
        plain_words(text).iter().filter(|w| !self.generic.contains(*w)).any(|w| {
            topic.iter().any(|t| match t.len() {
                0 => false,
                1..=3 => w == t || w.strip_suffix('s') == Some(t.as_str()),
                4 => w.starts_with(t.as_str()),
                n => {
                    // A rule-claim word matches its inflections ("loads" ~ "load"); a table stem anywhere ("coalesc" in "uncoalesced").
                    w.contains(t.as_str()) || (n >= 6 && w.starts_with(&t[..n - 2]))
                }
            })
        })
    }

    /// Every reason `text` (one sentence of a finding of `category`) fails the gate; empty when it passes.
    /// `others` are the sentences it may not repeat (the claim, the other sentences of its kernel).
    pub fn check_sentence(&self, ctx: &Context, category: Category, text: &str, others: &[&str]) -> Vec<String> {
        self.check_sentence_with(ctx, category, text, others, &[])
    }

    /// [`Gate::check_sentence`] that also admits `fact_words`: the words of the facts block the
    /// model was shown, lower case ("min/max" where keet's facts name the ALU pipe's work).
    pub fn check_sentence_with(
        &self,
        ctx: &Context,
        category: Category,
        text: &str,
        others: &[&str],
        fact_words: &[String],
    ) -> Vec<String> {
        let mut reasons = self.check_words(text, |t| self.token_ok(ctx, t) || fact_words.iter().any(|w| w.eq_ignore_ascii_case(t)));
        if !self.on_topic(&self.topic_words(ctx, category), text) {
            let table = self.topics.get(&category).map(|t| t.iter().take(6).cloned().collect::<Vec<_>>().join(", ")).unwrap_or_default();
            reasons.push(format!("it is not about {} (use words like: {table})", category.as_str()));
        }
        let own = content_set(text);
        let mut repeated = false;
        for o in others {
            let other = content_set(o);
            if !own.is_empty() && jaccard(&own, &other) >= 0.7 {
                reasons.push(format!("it repeats another sentence (\"{}\")", trunc(o, 60)));
                repeated = true;
                break;
            }
        }
        if let Some(earlier) = restated_sentence(text, others).filter(|_| !repeated) {
            reasons.push(format!("it restates a sentence already written (\"{}\"): say what it causes instead", trunc(earlier, 60)));
        }
        reasons.extend(crate::validate::contradicting_words(ctx, text));
        reasons.extend(crate::sense::wrong_definitions(text));
        reasons.extend(crate::sense::invented_lines(ctx.launch, text));
        reasons.extend(crate::sense::false_comparisons(text));
        reasons.extend(crate::mechanism::non_sequiturs(text));
        reasons.extend(crate::mechanism::wrong_roles(text));
        reasons.extend(crate::mechanism::wrong_regimes(ctx.facts, text));
        let words = words_of(&text.replace('-', " "));
        for (phrase, why) in &self.wrong_pictures {
            if contains_phrase(&words, phrase) {
                reasons.push(format!("it says \"{}\": {why}", phrase.join(" ")));
            }
        }
        if let Some(b) = ctx.facts.bound.as_ref().map(|b| b.kind) {
            for (phrase, regimes) in &self.contradictions {
                if regimes.contains(&b) && contains_phrase(&words_of(&text.replace('-', " ")), phrase) {
                    reasons.push(format!(
                        "it says \"{}\", but the facts say the kernel is {}",
                        phrase.join(" "),
                        crate::validate::bound_name(Some(b))
                    ));
                }
            }
        }
        reasons
    }

    /// The checks of a sentence about a whole profile (no one launch to hold it to): English or GPU
    /// terms or the `identifiers` of its kernels, no numbers in words, not cut off, no stutter, not
    /// about keet or its readers.
    pub fn check_profile_sentence(&self, text: &str, identifiers: &[String]) -> Vec<String> {
        self.check_words(text, |t| self.token_ok_in(identifiers, t))
    }

    /// The checks of a sentence that need no launch; `token_ok` says which tokens are words.
    fn check_words(&self, text: &str, token_ok: impl Fn(&str) -> bool) -> Vec<String> {
        let mut reasons = Vec::new();
        let tokens: Vec<&str> = text
            .split_whitespace()
            .map(|t| t.trim_matches(|c: char| matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | '(' | ')' | '"' | '`' | '[' | ']')))
            .filter(|t| !t.is_empty())
            .collect();
        if tokens.len() < 3 {
            reasons.push("it is not a sentence (fewer than three words)".into());
        }
        // "FP8/INT8/INT4", "loads/stores": each part on its own.
        let unknown: Vec<&str> = tokens
            .iter()
            .copied()
            .filter(|t| !(token_ok(t) || (t.contains('/') && t.split('/').all(|p| !p.is_empty() && token_ok(p)))))
            .collect();
        if !unknown.is_empty() {
            reasons.push(format!("it uses words that are not English or GPU terms: {}", unknown.join(", ")));
        }
        let plain = plain_words(text);
        let spelled: Vec<&str> = plain.iter().map(String::as_str).filter(|w| self.number_words.contains(*w)).collect();
        if !spelled.is_empty() {
            reasons.push(format!("it writes numbers in words ({}); numbers belong in the evidence", spelled.join(", ")));
        }
        // A sentence that ends with a number ("fell from 66.6% to 5.56%.") ends there, not at the
        // word before it.
        let ends_with_number = text
            .trim_end()
            .trim_end_matches(['.', '!', '?'])
            .split_whitespace()
            .last()
            .is_some_and(|t| t.contains(|c: char| c.is_ascii_digit()));
        let cut_at_a_word = plain.last().is_some_and(|w| self.no_final_words.contains(w))
            || self.no_final_phrases.iter().any(|p| !p.is_empty() && plain.ends_with(p));
        if (cut_at_a_word && !ends_with_number) || text.contains(",.") || text.contains(";.") || text.contains(", .") {
            reasons.push("it ends mid-sentence".into());
        }
        if let Some(bracket) = unbalanced_bracket(text) {
            reasons.push(format!("it has an unbalanced '{bracket}' (cut off or garbled)"));
        } else if bracket_pile(text) {
            reasons.push("it piles up bracketed fragments (labels copied from the instructions); write one plain sentence".into());
        }
        // Stutters are judged on whole tokens ("FP8/INT8" is two terms, not "int int") within one
        // clause: "diverge within a warp: warps split" repeats a word across a colon on purpose.
        let stutter = text.split([':', ';', ',', '.', '!', '?', '(', ')']).find_map(|clause| {
            let whole: Vec<String> = clause
                .split(|c: char| c.is_whitespace() || c == '/')
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
                .filter(|w| !w.is_empty() && w.chars().all(char::is_alphabetic))
                .collect();
            whole.windows(2).find_map(|pair| {
                let (a, b) = (&pair[0], &pair[1]);
                let repeated = a.len() >= 3 && b.len() >= 3 && (a == b || b.strip_suffix('s') == Some(a) || a.strip_suffix('s') == Some(b));
                repeated.then(|| format!("it stutters (\"{a} {b}\")"))
            })
        });
        reasons.extend(stutter);
        let words = words_of(text);
        for phrase in &self.self_reference {
            if contains_phrase(&words, phrase) {
                reasons.push(format!("it talks about keet or its readers (\"{}\") instead of the kernel", phrase.join(" ")));
            }
        }
        reasons
    }

    /// The verbs a suggestion may open with, lower case, sorted.
    pub fn suggestion_verbs(&self) -> Vec<String> {
        let mut verbs: Vec<String> = self.suggestion_verbs.iter().cloned().collect();
        verbs.sort();
        verbs
    }

    /// [`Gate::check_sentence`] plus what the field itself asks: a suggestion says what to do, so it
    /// starts with an imperative verb.
    pub fn check_field(&self, ctx: &Context, category: Category, field: Field, text: &str, others: &[&str]) -> Vec<String> {
        self.check_field_with(ctx, category, field, text, others, &[])
    }

    /// [`Gate::check_field`] that also admits `fact_words` (see [`Gate::check_sentence_with`]).
    pub fn check_field_with(
        &self,
        ctx: &Context,
        category: Category,
        field: Field,
        text: &str,
        others: &[&str],
        fact_words: &[String],
    ) -> Vec<String> {
        let mut r = self.check_sentence_with(ctx, category, text, others, fact_words);
        let first = plain_words(text).into_iter().next().unwrap_or_default();
        let imperative = self.suggestion_verbs.contains(&first);
        if matches!(field, Field::Suggestion(_)) && !imperative {
            r.push(format!("a suggestion must start with what to do (a verb such as use, batch, fuse), not {first:?}"));
        }
        // Advice is held to the suggestion's checks in whichever field it stands (issue 36: "Increase
        // the number of threads per block (unroll) ..." as a CUTLASS kernel's explanation).
        if matches!(field, Field::Suggestion(_)) || imperative {
            r.extend(self.advice_reasons(ctx, category, text));
        }
        r
    }

    /// What no advice may say: a knob turned the wrong way for the category, something nobody can
    /// change, or, for a kernel the user does not write, the library's or generator's own choices.
    fn advice_reasons(&self, ctx: &Context, category: Category, text: &str) -> Vec<String> {
        let mut r = crate::direction::wrong_turns(category, text);
        let words = words_of(&text.replace('-', " "));
        for phrase in &self.never_actionable {
            if contains_phrase(&words, phrase) {
                r.push(format!("it asks for \"{}\", which nobody can change in their code", phrase.join(" ")));
            }
        }
        let kind = crate::rules::kind::recognise(&ctx.launch.name, ctx.facts);
        if kind.origin != crate::rules::kind::Origin::User {
            for phrase in &self.not_actionable_for_others {
                if contains_phrase(&words, phrase) {
                    r.push(format!(
                        "\"{}\" is the {} kernel's own choice; suggest shapes, dtype, batching, fusion, library configuration or CUDA Graphs",
                        phrase.join(" "),
                        kind.library.as_deref().unwrap_or(kind.origin.as_str())
                    ));
                }
            }
        }
        r
    }
}

/// closed by the other kind or never closed ("... configurations) (The library picked.").
fn unbalanced_bracket(text: &str) -> Option<char> {
    let mut open: Vec<char> = Vec::new();
    for c in text.chars() {
        match c {
            '(' | '[' => open.push(c),
            ')' | ']' => {
                let partner = if c == ')' { '(' } else { '[' };
                if open.pop() != Some(partner) {
                    return Some(c);
                }
            }
            _ => {}
        }
    }
    open.first().copied()
}

/// Bracketed groups that read as pasted labels rather than a sentence: two groups in a row
/// ("(library setting) (code)") or more than [`MAX_BRACKET_GROUPS`] in one field.
fn bracket_pile(text: &str) -> bool {
    let mut groups = 0;
    let mut depth = 0usize;
    let mut since_close: Option<String> = None;
    let mut adjacent = false;
    for c in text.chars() {
        match c {
            '(' | '[' => {
                if depth == 0 {
                    groups += 1;
                    adjacent |= since_close.as_deref().is_some_and(|between| between.trim().is_empty());
                }
                depth += 1;
            }
            ')' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    since_close = Some(String::new());
                }
            }
            other => {
                if let (0, Some(between)) = (depth, since_close.as_mut()) {
                    between.push(other);
                }
            }
        }
    }
    adjacent || groups > MAX_BRACKET_GROUPS
}

/// Bracketed asides one field may hold ("batch size (M)", "split K (cuBLASLt split-K)").
const MAX_BRACKET_GROUPS: usize = 3;

fn is_unit(u: &str) -> bool {
    matches!(
        u,
        "%" | "x"
            | "b"
            | "kb"
            | "mb"
            | "gb"
            | "tb"
            | "kib"
            | "mib"
            | "gib"
            | "ns"
            | "us"
            | "µs"
            | "ms"
            | "s"
            | "k"
            | "m"
            | "g"
            | "th"
            | "st"
            | "nd"
            | "rd"
    ) || u.ends_with("/s")
}

fn contains_phrase(words: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty() && words.windows(phrase.len()).any(|w| w == phrase)
}

/// Content words of a sentence (three letters or more), for repetition.
/// Whether `text` copies one of `sources` nearly word for word (70% of their content words shared,
/// the threshold of a repeated sentence).
pub fn copies_any(text: &str, sources: &[&str]) -> bool {
    let own = content_set(text);
    !own.is_empty() && sources.iter().any(|s| jaccard(&own, &content_set(s)) >= 0.7)
}

/// Content words a sentence must have before it can count as restating another: shorter ones
/// ("DRAM bandwidth is saturated by the loads") are left to the whole-field repeat check.
const RESTATE_MIN_WORDS: usize = 5;
/// The share of a sentence's content words (plural and "-ing" endings dropped) found in one
/// earlier sentence that makes it a restatement.
const RESTATE_CONTAINED: f64 = 0.75;

/// The earlier sentence (of `others`, each split into sentences) that one sentence of `text`
/// restates: most of its content words are that sentence's (issue 36: the explanation "This means
/// that warps are waiting on loads from memory rather than performing arithmetic operations" under
/// a claim that already said so; a grid sentence repeated under the bank-conflict finding).
fn restated_sentence<'a>(text: &str, others: &[&'a str]) -> Option<&'a str> {
    let earlier: Vec<(&str, HashSet<String>)> = others.iter().flat_map(|o| sentences_of(o)).map(|s| (s, stemmed_content(s))).collect();
    sentences_of(text).into_iter().map(stemmed_content).filter(|own| own.len() >= RESTATE_MIN_WORDS).find_map(|own| {
        earlier.iter().find(|(_, other)| own.intersection(other).count() as f64 >= RESTATE_CONTAINED * own.len() as f64).map(|(s, _)| *s)
    })
}

/// The sentences of a text (split after ".", "!" or "?" and a space).
fn sentences_of(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if matches!(c, '.' | '!' | '?') && text[i + 1..].starts_with(' ') {
            out.push(text[start..=i].trim());
            start = i + 1;
        }
    }
    out.push(text[start..].trim());
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

/// [`content_set`] without connectives, with plural and "-ing" endings dropped ("waiting" and
/// "wait", "loads" and "load" are one word).
fn stemmed_content(s: &str) -> HashSet<String> {
    const CONNECTIVES: &[&str] = &["from", "than", "with", "into", "which", "means", "mean", "because", "since", "while", "have", "has"];
    content_set(s)
        .into_iter()
        .filter(|w| !CONNECTIVES.contains(&w.as_str()))
        .map(|w| {
            let w = w.strip_suffix("ing").filter(|b| b.len() >= 3).map(str::to_string).unwrap_or(w);
            w.strip_suffix('s').filter(|b| b.len() >= 3 && !b.ends_with('s')).map(str::to_string).unwrap_or(w)
        })
        .collect()
}

fn content_set(s: &str) -> HashSet<String> {
    plain_words(s)
        .into_iter()
        .filter(|w| w.len() >= 3 && !matches!(w.as_str(), "the" | "and" | "for" | "are" | "was" | "its" | "this" | "that"))
        .collect()
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let inter = a.intersection(b).count() as f64;
    let union = a.union(b).count() as f64;
    if union == 0.0 {
        0.0
    } else {
        inter / union
    }
}

fn trunc(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

/// The gate built from the files bundled with keet.
pub fn gate() -> &'static Gate {
    static G: OnceLock<Gate> = OnceLock::new();
    G.get_or_init(|| Gate::from_sources(WORDS, GLOSSARY, CONFIG).expect("the bundled prose-gate files parse (checked by a unit test)"))
}

/// sha256 of the gate's files (part of the cache key: a changed gate recomputes analyses).
pub fn files_sha256() -> String {
    crate::cache::sha256_hex(
        format!("{GLOSSARY}\0{CONFIG}\0{}\0{}\0{}\0{}", WORDS.len(), crate::direction::TABLE, crate::sense::TABLE, crate::mechanism::TABLE)
            .as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::validate::tests::launch;

    fn with_ctx(f: impl FnOnce(&Context)) {
        let l = launch();
        let facts = crate::rules::derive_facts(&l);
        let rules = crate::rules::evaluate(&facts);
        f(&Context { launch: &l, facts: &facts, rules: &rules });
    }

    fn reasons(cat: Category, s: &str) -> Vec<String> {
        let mut out = vec![];
        with_ctx(|ctx| out = gate().check_sentence(ctx, cat, s, &[]));
        out
    }

    #[test]
    fn bundled_files_parse() {
        let g = Gate::from_sources(WORDS, GLOSSARY, CONFIG).unwrap();
        assert!(g.words.len() > 30_000);
        for c in Category::ALL {
            assert!(g.topics.contains_key(&c), "no topic words for {}", c.as_str());
        }
    }

    #[test]
    fn good_sentences_pass() {
        for (c, s) in [
            (Category::MemoryCoalescing, "Global loads use a small part of each sector, so most bytes moved are wasted."),
            (Category::MemoryCoalescing, "Make consecutive threads read consecutive addresses, for example with float4 loads."),
            (Category::MemoryBound, "DRAM bandwidth is nearly saturated, so the kernel waits on memory traffic."),
            (Category::MemoryBound, "The kernel's loads can't be served faster than the DRAM allows."),
            (Category::MemoryBound, "Memory throughput is 88.1% of peak."),
        ] {
            assert_eq!(reasons(c, s), Vec::<String>::new(), "{s}");
        }
        // A number joined to its unit by a hyphen, as the expert text writes a sector (the default
        // model's sentence on a reduction, refused before as "not English").
        let g = gate();
        assert_eq!(g.check_profile_sentence("Each 32-byte sector a warp loads carries few useful bytes.", &[]), Vec::<String>::new());
        assert!(!g.check_profile_sentence("The loads move 32-bytex sectors.", &[]).is_empty());
    }

    #[test]
    fn nonsense_is_caught() {
        let r = reasons(Category::MemoryBound, "Memory throughput is iax.");
        assert!(r.iter().any(|r| r.contains("iax")), "{r:?}");
        let r = reasons(Category::OccupancyOther, "Theoretical occupancy is urn urns of memory.");
        assert!(r.iter().any(|r| r.contains("stutters")), "{r:?}");
        // A word repeated across a colon or comma is a new clause, not a stutter.
        let r = reasons(Category::Divergence, "9.68% of branch targets diverge within a warp: warps split and run both paths.");
        assert!(!r.iter().any(|r| r.contains("stutters")), "{r:?}");
        let r = reasons(Category::Divergence, "Branch targets diverge within a warp warps split and run both paths.");
        assert!(r.iter().any(|r| r.contains("stutters")), "{r:?}");
        let r = reasons(Category::GridTooSmall, "The grid has nine blocks for thirteen million bytes per square block, so it is,.");
        assert!(r.iter().any(|r| r.contains("numbers in words")), "{r:?}");
        assert!(r.iter().any(|r| r.contains("mid-sentence")), "{r:?}");
    }

    /// Sentences of the default model that passed the gate before (the eval's explained contexts
    /// and the README's first command on 4c579d9).
    #[test]
    fn cut_off_brackets_and_blocks_without_work_are_caught() {
        let cut = reasons(
            Category::GridTooSmall,
            "Use split K to give every SM a block (cuBLASLt split-K/stream-K configurations) (The library picked.",
        );
        assert!(cut.iter().any(|r| r.contains("unbalanced '('")), "{cut:?}");
        let closes_nothing = reasons(Category::GridTooSmall, "The grid has 32 blocks) for 132 SMs.");
        assert!(closes_nothing.iter().any(|r| r.contains("unbalanced ')'")), "{closes_nothing:?}");
        let balanced = reasons(Category::GridTooSmall, "The grid has 32 blocks (one per tile) for 132 SMs, so most SMs get no block.");
        assert!(!balanced.iter().any(|r| r.contains("unbalanced")), "{balanced:?}");
        let no_work = reasons(Category::GridTooSmall, "The grid has 32 blocks for 132 SMs, so each block will have no work to do.");
        assert!(no_work.iter().any(|r| r.contains("SMs that get no block")), "{no_work:?}");
        // The default model's sentences on decode_c1 (cuBLAS, 96 blocks) and a GTX 1650 kernel.
        let idle = reasons(Category::GridTooSmall, "This means that each block will be idle, wasting resources.");
        assert!(idle.iter().any(|r| r.contains("SMs that sit idle, not blocks")), "{idle:?}");
        let over = reasons(
            Category::OccupancyOther,
            "The kernel is using more warps than the theoretical maximum, which can lead to reduced performance.",
        );
        assert!(over.iter().any(|r| r.contains("can never exceed the theoretical")), "{over:?}");
        let none = reasons(
            Category::LatencyBound,
            "The kernel is not using any units, which means that the time spent on this kernel is due to latency.",
        );
        assert!(none.iter().any(|r| r.contains("every running kernel uses its units")), "{none:?}");
    }

    /// The default model's suggestion for a cuBLAS GEMM (issue 36): the prompt's labels pasted in
    /// brackets; and a case never seen.
    #[test]
    fn a_pile_of_bracketed_labels_is_refused() {
        let pile = "Increase batch size (M), decrease number of blocks (N), use cuBLASLt split-K configuration (if available) (line 128) (library setting) (code) (change shape, dtype, fusion, library configuration) (not its code).";
        assert!(bracket_pile(pile));
        assert!(bracket_pile("Use a 32x33 tile (padding) (shared memory) to spread the banks."));
        assert!(!bracket_pile("Increase the batch size (M) or split K (cuBLASLt split-K configuration)."));
        assert!(!bracket_pile("Pad the tile (a [32][33] array instead of [32][32]) so a warp's threads hit different banks."));
        let r = reasons(Category::GridTooSmall, pile);
        assert!(r.iter().any(|r| r.contains("piles up bracketed fragments")), "{r:?}");
    }

    /// The test launch with these percent metrics set.
    fn launch_with_percents(metrics: &[(&'static str, f64)]) -> crate::profile::Launch {
        let mut l = launch();
        for &(name, value) in metrics {
            let metric = crate::profile::Metric {
                value: crate::profile::MetricValue::Number(value),
                unit: &crate::profile::Unit::Percent,
                raw_value: "",
                raw_unit: "%",
                label: None,
                section: None,
                origin: Default::default(),
            };
            l.metrics.insert(name, metric);
        }
        l
    }

    /// The default model on the H200 decode GEMMs (issue 36): idle SMs do not take time, and large
    /// batches do not make a GEMM memory-bound.
    #[test]
    fn idle_sms_take_no_time_and_large_batches_do_not_make_memory_bound() {
        let r = reasons(Category::GridTooSmall, "This causes a significant amount of time to be spent on idle units.");
        assert!(r.iter().any(|r| r.contains("idle SMs take no time")), "{r:?}");
        let l = launch_with_percents(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 8.99),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 64.5),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 64.5),
        ]);
        let facts = crate::rules::derive_facts(&l);
        assert_eq!(facts.bound.as_ref().map(|b| b.kind), Some(BoundKind::Memory));
        let ctx = Context { launch: &l, facts: &facts, rules: &[] };
        let r = gate().check_sentence(
            &ctx,
            Category::MemoryBound,
            "This can be caused by large batch sizes or inefficient access patterns in memory.",
            &[],
        );
        assert!(r.iter().any(|r| r.contains("large batch sizes")), "{r:?}");
    }

    /// Cut off after "at most" (the default model on a corpus kernel, issue 36).
    #[test]
    fn a_sentence_ending_at_most_is_cut_off() {
        let r = reasons(Category::GridTooSmall, "Fusing this kernel with its neighbours would save at most.");
        assert!(r.iter().any(|r| r.contains("mid-sentence")), "{r:?}");
        let whole = reasons(Category::GridTooSmall, "Fusing this kernel with its neighbours would save at most 23.2% of its time.");
        assert!(!whole.iter().any(|r| r.contains("mid-sentence")), "{whole:?}");
        // A sentence that ends with a number ends there (the default model on a set of profiles).
        let number = reasons(Category::MemoryCoalescing, "Excessive global sectors fell from 66.6% to 5.56%.");
        assert!(!number.iter().any(|r| r.contains("mid-sentence")), "{number:?}");
        let cut = reasons(Category::MemoryCoalescing, "Excessive global sectors fell from 66.6% to.");
        assert!(cut.iter().any(|r| r.contains("mid-sentence")), "{cut:?}");
    }

    /// Said of register spills by the default model on a held-out report (issue 36).
    #[test]
    fn spills_are_not_called_uncoalesced() {
        let r = reasons(Category::RegisterSpilling, "Local memory accesses are not coalesced, so spills cost bandwidth.");
        assert!(r.iter().any(|r| r.contains("interleaved across a warp's threads")), "{r:?}");
        assert!(!reasons(Category::RegisterSpilling, "Spills add local loads and stores that travel through L1 and L2.")
            .iter()
            .any(|r| r.contains("interleaved")));
    }

    /// The fa2_fwd profile's top kernel (compute-bound, memory at 18.7%) with the default model:
    /// "The memory throughput is low, indicating that there is not enough bandwidth".
    #[test]
    fn short_bandwidth_is_refused_unless_memory_bound() {
        let l = launch_with_percents(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 88.1),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 12.5),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 12.5),
        ]);
        let facts = crate::rules::derive_facts(&l);
        assert_eq!(facts.bound.as_ref().map(|b| b.kind), Some(BoundKind::Compute));
        let rules = crate::rules::evaluate(&facts);
        let ctx = Context { launch: &l, facts: &facts, rules: &rules };
        let sentence = "The memory throughput is low, indicating that there is not enough bandwidth to handle the data.";
        let r = gate().check_sentence(&ctx, Category::ComputeBound, sentence, &[]);
        assert!(r.iter().any(|r| r.contains("not enough bandwidth")), "{r:?}");
        // On the memory-bound test launch it is what the facts say.
        let r = reasons(Category::MemoryBound, "DRAM is at 88.1% of peak: there is not enough bandwidth for the loads.");
        assert!(!r.iter().any(|r| r.contains("not enough bandwidth")), "{r:?}");
    }

    #[test]
    fn off_topic_and_self_reference_are_caught() {
        let r =
            reasons(Category::MemoryCoalescing, "Moviegoers are more likely to use the internet than people who don't have a smartphone.");
        assert!(r.iter().any(|r| r.contains("not English")), "{r:?}");
        assert!(r.iter().any(|r| r.contains("not about memory-coalescing")), "{r:?}");
        let r = reasons(Category::GridTooSmall, "This affects our team.");
        assert!(r.iter().any(|r| r.contains("talks about")), "{r:?}");
        let r = reasons(Category::GridTooSmall, "Lets talk about the kernel that was found to be too small.");
        assert!(r.iter().any(|r| r.contains("talks about")), "{r:?}");
        let r = reasons(Category::MemoryBound, "The rule layer says memory bandwidth is the limit in this finding.");
        assert!(r.iter().any(|r| r.contains("rule layer")), "{r:?}");
    }

    /// The gate's reasons for `text` in `field` of a launch named `name`.
    fn field_reasons(name: &str, category: Category, field: Field, text: &str) -> Vec<String> {
        let mut l = launch();
        l.name = name.into();
        let facts = crate::rules::derive_facts(&l);
        let rules = crate::rules::evaluate(&facts);
        gate().check_field(&Context { launch: &l, facts: &facts, rules: &rules }, category, field, text, &[])
    }

    #[test]
    fn advice_is_checked_as_advice_in_any_field() {
        let cutlass = "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<float>>(Params)";
        let own_choice = |r: &[String]| r.iter().any(|x| x.contains("kernel's own choice"));
        // Issue 36, the default model on a CUTLASS GEMM's explanation: CUTLASS picks its block.
        let seen =
            "Increase the number of threads per block (unroll), use multiple loads in flight, and reduce dependencies between steps.";
        let r = field_reasons(cutlass, Category::LatencyBound, Field::Explanation, seen);
        assert!(own_choice(&r), "{r:?}");
        // Never seen: register advice for a cuBLAS kernel, in the claim.
        let regs = "Reduce the registers per thread so that more warps fit on each SM.";
        assert!(own_choice(&field_reasons("ampere_sgemm_128x64_nn", Category::OccupancyRegisters, Field::Claim, regs)));
        // The same advice for the user's own kernel is theirs to take.
        assert!(!own_choice(&field_reasons("my_kernel", Category::OccupancyRegisters, Field::Explanation, regs)));
        // A statement about the library's choice is not advice.
        let said = "The library chose 256 threads per block for this shape.";
        assert!(!own_choice(&field_reasons(cutlass, Category::LatencyBound, Field::Explanation, said)));
        // A knob turned the wrong way is refused in an explanation too.
        let r = field_reasons("my_kernel", Category::GridTooSmall, Field::Explanation, "Decrease the number of blocks to fill the GPU.");
        assert!(r.iter().any(|x| x.contains("more blocks, not fewer")), "{r:?}");
        let r = field_reasons("my_kernel", Category::GridTooSmall, Field::Explanation, "Launch more blocks so every SM gets one.");
        assert!(!r.iter().any(|x| x.contains("not fewer") || x.contains("own choice")), "{r:?}");
    }

    #[test]
    fn suggestions_must_say_what_to_do() {
        with_ctx(|ctx| {
            let check = |s: &str| gate().check_field(ctx, Category::MemoryCoalescing, Field::Suggestion(0), s, &[]);
            let bad = check("A GEMM that is designed to optimize memory access patterns.");
            assert!(bad.iter().any(|x| x.contains("what to do")), "{bad:?}");
            let good = check("Make consecutive threads read consecutive addresses.");
            assert!(good.is_empty(), "{good:?}");
        });
    }

    #[test]
    fn repeats_and_contradictions_are_caught() {
        with_ctx(|ctx| {
            let r = gate().check_sentence(
                ctx,
                Category::MemoryBound,
                "DRAM bandwidth is saturated by the loads.",
                &["The loads saturate DRAM bandwidth."],
            );
            assert!(r.is_empty(), "a paraphrase is not a repeat: {r:?}");
            let r = gate().check_sentence(
                ctx,
                Category::MemoryBound,
                "DRAM bandwidth is saturated by loads.",
                &["DRAM bandwidth is saturated by the loads."],
            );
            assert!(r.iter().any(|r| r.contains("repeats")), "{r:?}");
            // Issue 36: a sentence that restates one already written, within a longer paragraph.
            let claim = "The DRAM is at 64.5% of peak and the SM is at 8.99%, which means that warps wait on loads from memory rather than on arithmetic.";
            let explanation = "This means that warps are waiting on loads from memory rather than performing arithmetic operations.";
            let r = gate().check_sentence(ctx, Category::MemoryBound, explanation, &[claim]);
            assert!(r.iter().any(|r| r.contains("restates a sentence already written")), "{r:?}");
            let grid = "A 2.56 µs launch of 1 block for 128 SMs: launch overhead and latency take the time, not throughput. The time spent on this kernel is dominated by the overhead and latency associated with launching a single block.";
            let again = "Each warp reading a column hits the same bank. The time spent on this kernel is dominated by the overhead and latency associated with launching a single block.";
            let r = gate().check_sentence(ctx, Category::MemoryBound, again, &[grid]);
            assert!(r.iter().any(|r| r.contains("restates")), "{r:?}");
            // Never seen: a new effect of the same facts is not a restatement.
            let linked = "Since the loads wait on memory, more warps per SM would hide that latency and raise DRAM throughput.";
            let r = gate().check_sentence(ctx, Category::MemoryBound, linked, &[claim]);
            assert!(!r.iter().any(|r| r.contains("restates")), "{r:?}");
            let r = gate().check_sentence(ctx, Category::MemoryBound, "The kernel is not memory bound, its DRAM traffic is fine.", &[]);
            assert!(r.iter().any(|r| r.contains("not memory bound")), "{r:?}");
            let r = gate().check_sentence(ctx, Category::MemoryBound, "The kernel is compute bound, not limited by memory.", &[]);
            assert!(r.iter().any(|r| r.contains("compute bound")), "{r:?}");
            // A unit is the bottleneck only in its own regime (this launch is memory-bound).
            let r = gate().check_sentence(ctx, Category::MemoryBound, "The SM is the bottleneck, not the loads.", &[]);
            assert!(r.iter().any(|r| r.contains("sm is the bottleneck")), "{r:?}");
            assert!(gate().check_sentence(ctx, Category::MemoryBound, "DRAM is the bottleneck of this kernel.", &[]).is_empty());
            // A wrong picture of the machine, in any regime: DRAM is the GPU's own memory.
            let r = gate().check_sentence(ctx, Category::MemoryBound, "Most time goes to moving data between memory and the GPU.", &[]);
            assert!(r.iter().any(|r| r.contains("GPU's own memory")), "{r:?}");
            let r = gate().check_sentence(ctx, Category::MemoryBound, "Warps wait for the L2 cache to become available.", &[]);
            assert!(r.iter().any(|r| r.contains("request's latency")), "{r:?}");
            let r = gate().check_sentence(ctx, Category::MemoryBound, "Each launch has to set up the grid and allocate memory.", &[]);
            assert!(r.iter().any(|r| r.contains("allocates no memory")), "{r:?}");
            let shared = "The SM allocates shared memory to each block.";
            assert!(gate().check_sentence(ctx, Category::MemoryBound, shared, &[]).is_empty(), "{shared}");
        });
    }
}
