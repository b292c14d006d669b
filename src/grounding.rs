//! Grounding: the numbers and GPU terms a model may write about one launch.
//!
//! Every number in model text must be one of the profile's own values as keet renders them
//! ("64.5%", "19.81 µs", "96", "167"): the allowed list is taken from the facts block keet renders
//! for the launch (facts, estimates, headroom, launch shape, the diagnosis's own sentences), so the
//! grammar and the prompt agree by construction. GPU terms with capitals or digits ("DRAM", "L2",
//! "FP8", "cuBLAS", "__syncthreads") come from the glossary's canonical spellings and from the
//! kernel's own identifiers. Ordinary words are free (no length cap); sentence count and length are
//! bounded.
//!
//! [`Grounding::text_pattern`] compiles the lists into the regular expression the JSON Schema puts on
//! a text field, so an ungrounded number cannot be decoded at all; [`Grounding::ungrounded`] is the
//! validator's check of the same rule on any text.
//!
//! A grammar cannot bind a number to what it measures, so the validator does:
//! [`Grounding::misattributed`] finds numbers a sentence writes next to the wrong quantity ("8.99%
//! memory-bound" where 8.99% is the SM's throughput). Each rendered number's meaning is the words of
//! its own item in the facts block and of the line's label; the word lists are in
//! `prompts/meanings.toml`.

use std::ops::RangeInclusive;

/// GPU/CUDA terms (the prose gate's glossary); lines with a capital, a digit or a symbol are the
/// canonical spellings the grammar admits.
const GLOSSARY: &str = include_str!("../prompts/glossary.txt");

/// Units that may follow a number after one space ("19.81 µs", "48.0 KiB").
const SPACED_UNITS: &[&str] =
    &["µs", "ms", "ns", "s", "KiB", "MiB", "GiB", "KB", "MB", "GB", "B", "GB/s", "TB/s", "TFLOP/s", "GFLOP/s", "FLOP/byte"];

/// Stop words, qualifiers and synonyms for binding numbers to their meaning.
pub const MEANINGS: &str = include_str!("../prompts/meanings.toml");

/// Most kernel identifiers admitted as terms.
const MAX_IDENTIFIERS: usize = 24;

/// The numbers and terms a model may write about one launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grounding {
    /// Number strings exactly as keet renders them, with their unit where it is part of the number
    /// ("64.5%", "19.81 µs", "1,024").
    pub numbers: Vec<String>,
    /// Terms with capitals, digits or symbols: canonical glossary spellings and the kernel's identifiers.
    pub terms: Vec<String>,
    /// What each rendered number measures (a number rendered twice has two entries).
    pub meanings: Vec<NumberMeaning>,
    /// The words of the rendered facts block, lower case ("min/max", "l1/tex"): the model may
    /// use any word keet itself showed it.
    pub fact_words: Vec<String>,
}

/// What one rendered number measures, as the facts block says it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumberMeaning {
    /// The number as rendered, unit included ("64.5%").
    pub number: String,
    /// Stems of the words of its own item, nearer to it than to another number ("dram").
    pub item_words: Vec<String>,
    /// Stems of the line's label ("throughput").
    pub label_words: Vec<String>,
    /// The facts text it was read from, for a repair message ("Throughput (% of peak): DRAM 64.5%").
    pub source: String,
    /// Stems of what its line says something is a share "of" ("peak" in "(% of peak)", "sm" in
    /// "27.3% of the SMs"): a sentence may write "64.5% of peak" only where the facts do.
    pub of_words: Vec<String>,
    /// The facts block line it was read from (0-based).
    pub line: usize,
    /// Its item or label gives it a negative sense (idle, no work, wasted, excessive: see
    /// `negative` in `prompts/meanings.toml`): a sentence must not write it as working or used.
    pub negative: bool,
    /// Its item gives it as an upper bound ("a fix saves at most 30.8% of this kernel's time": see
    /// `bound_markers` in `prompts/meanings.toml`): a sentence must write it as one.
    pub upper_bound: bool,
}

/// The word lists of `prompts/meanings.toml`.
#[derive(Debug, serde::Deserialize)]
struct MeaningWords {
    stop: Vec<String>,
    qualifiers: Vec<String>,
    units: Vec<String>,
    /// Words that give a share the sense of idle, wasted or not working.
    negative: Vec<String>,
    /// Phrases that make a facts item an upper bound ("at most", "up to").
    bound_markers: Vec<String>,
    /// Words that keep a number an upper bound in model text ("up to", "at most", "could").
    bound: Vec<String>,
    synonyms: std::collections::BTreeMap<String, Vec<String>>,
}

fn meaning_words() -> &'static MeaningWords {
    static WORDS: std::sync::OnceLock<MeaningWords> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| toml::from_str(MEANINGS).expect("prompts/meanings.toml is valid (checked by a unit test)"))
}

/// The shape of a text field: how many sentences, and how many tokens (words, numbers, terms) each.
#[derive(Debug, Clone)]
pub struct TextShape {
    pub sentences: RangeInclusive<usize>,
    pub words: RangeInclusive<usize>,
    /// The words a sentence may start with, lower case (a suggestion starts with what to do:
    /// "use", "batch", "fuse"); empty: any capitalised word or allowed term.
    pub openings: Vec<String>,
}

impl Grounding {
    /// The grounding of a launch: numbers from keet's rendered facts block, terms from the glossary
    /// and the identifiers in `kernel_name`.
    pub fn new(rendered_facts: &str, kernel_name: &str) -> Grounding {
        let mut numbers: Vec<String> = Vec::new();
        for n in numbers_in(rendered_facts) {
            if !numbers.contains(&n) {
                numbers.push(n);
            }
        }
        let mut terms: Vec<String> = glossary_terms();
        for id in identifiers(kernel_name) {
            if !terms.contains(&id) {
                terms.push(id);
            }
        }
        let meanings = number_meanings(rendered_facts);
        let mut fact_words: Vec<String> = rendered_facts
            .split_whitespace()
            .map(|t| t.trim_matches(|c: char| matches!(c, '.' | ',' | ';' | ':' | '(' | ')' | '"' | '`' | '[' | ']')).to_lowercase())
            .filter(|t| t.chars().any(|c| c.is_alphabetic()))
            .collect();
        fact_words.sort();
        fact_words.dedup();
        Grounding { numbers, terms, meanings, fact_words }
    }

    /// Numbers in `text` written next to a quantity they do not measure, each with the reason
    /// (for the re-ask): the sentence must name the number's quantity with one of its words, and a
    /// clause that names another number's item ("SM" beside the DRAM's 64.5%, "theoretical" beside
    /// the achieved occupancy) must also name this number's own. Numbers with a unit that names
    /// their quantity ("19.81 µs", "48.0 KiB") need only the second.
    pub fn misattributed(&self, text: &str) -> Vec<String> {
        let words = meaning_words();
        let vocabulary: Vec<&str> = self.meanings.iter().flat_map(|m| m.item_words.iter().map(String::as_str)).collect();
        let mut out = Vec::new();
        for sentence in sentences(text) {
            let sentence_stems: Vec<String> = tokens(sentence).into_iter().filter_map(|t| t.stem).collect();
            for clause in clauses(sentence) {
                let clause_tokens = tokens(clause);
                for token in &clause_tokens {
                    let Some(number) = &token.number else { continue };
                    let own: Vec<&NumberMeaning> = self.meanings.iter().filter(|m| &m.number == number).collect();
                    if own.is_empty() {
                        continue; // not a rendered number: `ungrounded` reports it
                    }
                    let names_itself = number.contains(' ');
                    let named =
                        names_itself || sentence_stems.iter().any(|stem| !words.qualifiers.contains(stem) && owns(&own, stem, true, words));
                    let clause_stems: Vec<&str> = clause_tokens.iter().filter_map(|t| t.stem.as_deref()).collect();
                    let misplaced = self.misplaced(number, &own, &clause_stems, &vocabulary);
                    if let Some(reason) = wrong_sense(number, &own, clause, words) {
                        out.push(reason);
                    } else if !named || misplaced {
                        let sources: Vec<&str> = own.iter().map(|m| m.source.as_str()).collect();
                        out.push(format!(
                            "{number} is not what the sentence says: in this kernel's facts it is \"{}\"",
                            sources.join("\" and \"")
                        ));
                    }
                }
            }
        }
        out
    }

    /// Upper bounds written as shares, each with the reason (issue 36): the facts give "a fix saves
    /// at most 30.8% of this kernel's time", and "bank conflicts, resulting in 30.8% of this kernel's
    /// time" reads the bound as the share the conflicts take. A number that the facts give only as an
    /// upper bound keeps a bound word (`bound` in `prompts/meanings.toml`) in the clause that writes it.
    pub fn bounds_as_shares(&self, text: &str) -> Vec<String> {
        let words = meaning_words();
        let mut out = Vec::new();
        for clause in sentences(text).into_iter().flat_map(clauses) {
            for number in tokens(clause).into_iter().filter_map(|t| t.number) {
                let own: Vec<&NumberMeaning> = self.meanings.iter().filter(|m| m.number == number).collect();
                if own.is_empty() || !own.iter().all(|m| m.upper_bound) || has_word(clause, &words.bound) {
                    continue;
                }
                let sources: Vec<&str> = own.iter().map(|m| m.source.as_str()).collect();
                out.push(format!(
                    "{number} is an upper bound, written as a measured share: in this kernel's facts it is \"{}\"; write it as what a fix saves at most",
                    sources.join("\" and \"")
                ));
            }
        }
        out
    }

    /// Whether the clause names the item of another number ("SM" beside the DRAM's 64.5%) and
    /// then neither one of `number`'s own item words nor a label word those other numbers do not
    /// share; `own` are `number`'s meanings, `vocabulary` every meaning's item words.
    fn misplaced(&self, number: &str, own: &[&NumberMeaning], clause_stems: &[&str], vocabulary: &[&str]) -> bool {
        let words = meaning_words();
        let competitors: Vec<&NumberMeaning> = clause_stems
            .iter()
            .filter(|stem| !owns(own, stem, false, words) && vocabulary.contains(stem))
            .flat_map(|stem| {
                self.meanings.iter().filter(move |m| {
                    m.number != number
                        && m.item_words.iter().any(|w| w == stem)
                        // Within one line, only a unit's name or a qualifier tells
                        // items apart ("1 thread" and "a multiple of 32" are both
                        // about the block size).
                        && (own.iter().all(|o| o.line != m.line)
                            || words.qualifiers.iter().any(|q| q == stem)
                            || words.units.iter().any(|u| u == stem))
                })
            })
            .collect();
        !competitors.is_empty()
            && !clause_stems.iter().any(|stem| {
                owns(own, stem, false, words)
                    || own.iter().any(|m| {
                        m.label_words.iter().any(|w| same_meaning(w, stem, words) && !competitors.iter().any(|c| c.label_words.contains(w)))
                    })
            })
    }

    /// Numbers written in `text` that are not allowed (compared as written, unit included).
    pub fn ungrounded(&self, text: &str) -> Vec<String> {
        numbers_in(text).into_iter().filter(|n| !self.numbers.contains(n)).collect()
    }

    /// The regular expression (anchored) for a text field of `shape`: sentences of words, allowed
    /// numbers and terms, each starting with a capital letter (or a number or term) and ending with
    /// a period.
    pub fn text_pattern(&self, shape: &TextShape) -> String {
        let word = "[A-Za-z][a-z]*(?:['-][a-z]+)*";
        let first_word = "[A-Z][a-z]*(?:['-][a-z]+)*";
        let mut literals: Vec<&String> = self.numbers.iter().chain(&self.terms).collect();
        // Longest first, so a longer literal is never cut by a shorter prefix of it.
        literals.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let alts: Vec<String> = literals.iter().map(|s| escape(s)).collect();
        let grounded = if alts.is_empty() { String::new() } else { format!("|{}", alts.join("|")) };
        let token = format!("\\(?(?:{word}{grounded})\\)?");
        let first = if shape.openings.is_empty() {
            format!("(?:{first_word}{grounded})")
        } else {
            let mut openings: Vec<String> = shape.openings.iter().map(|w| escape(&capitalised(w))).collect();
            openings.sort_by_key(|s| std::cmp::Reverse(s.len()));
            format!("(?:{})", openings.join("|"))
        };
        let sep = "(?:[,;:]? |/|-)";
        let (w0, w1) = (shape.words.start().max(&1) - 1, shape.words.end().max(&1) - 1);
        let sentence = format!("{first}(?:{sep}{token}){{{w0},{w1}}}[.]");
        let (s0, s1) = (shape.sentences.start().max(&1) - 1, shape.sentences.end().max(&1) - 1);
        format!("^{sentence}(?: {sentence}){{{s0},{s1}}}$")
    }
}

/// The glossary's canonical spellings: terms the grammar must spell for the model (a capital, a digit
/// or a symbol), with a plural `s` for those that are all capitals ("SMs", "GEMMs").
pub fn glossary_terms() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in GLOSSARY.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if !line.chars().any(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || !c.is_ascii_alphanumeric()) {
            continue;
        }
        if line.chars().any(char::is_whitespace) {
            continue;
        }
        let mut add = |t: String| {
            if !out.contains(&t) {
                out.push(t);
            }
        };
        if line.len() >= 2
            && line.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && line.chars().any(|c| c.is_ascii_alphabetic())
        {
            add(format!("{line}s"));
        }
        add(line.to_string());
    }
    out
}

/// Identifiers in a kernel's (demangled) name that plain words cannot spell: with an underscore, a
/// digit or an inner capital ("fused_moe_kernel", "sgemm_128x64", "flashAttn").
pub fn identifiers(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in name.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if id.len() < 3 || id.len() > 64 || id.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let special = id.contains('_') || id.chars().any(|c| c.is_ascii_digit()) || id.chars().skip(1).any(|c| c.is_ascii_uppercase());
        if special && !out.iter().any(|o| o == id) {
            out.push(id.to_string());
        }
        if out.len() >= MAX_IDENTIFIERS {
            break;
        }
    }
    out
}

/// Numbers in `text` as written, each with its unit when the unit is part of it: "%" or "x" glued
/// on, or one space and a unit of [`SPACED_UNITS`]. Digits inside identifiers ("float4", "sm_90")
/// are not numbers.
pub fn numbers_in(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit() && !(i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit() || (matches!(chars[i], '.' | ',') && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit())))
        {
            i += 1;
        }
        let boundary = |j: usize| chars.get(j).is_none_or(|c| !(c.is_alphanumeric() || *c == '_'));
        let mut end = i;
        if matches!(chars.get(i), Some('%')) || (matches!(chars.get(i), Some('x')) && boundary(i + 1)) {
            end = i + 1;
        } else if matches!(chars.get(i), Some(' ')) {
            let rest: String = chars[i + 1..chars.len().min(i + 12)].iter().collect();
            let unit = SPACED_UNITS.iter().filter(|u| rest.starts_with(**u) && boundary(i + 1 + u.chars().count())).max_by_key(|u| u.len());
            if let Some(u) = unit {
                end = i + 1 + u.chars().count();
            }
        } else if chars.get(i).is_some_and(|c| c.is_alphabetic() || *c == '_') {
            // Part of an identifier or a glued unit that is not a number's ("3rd", "4B"): skip it.
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        out.push(chars[start..end].iter().collect());
        i = end;
    }
    out
}

/// A word's stem for meaning: lower case, a plural "s" dropped ("SMs" → "sm", "stalls" → "stall").
fn stem(word: &str) -> String {
    let lower = word.to_lowercase();
    match lower.strip_suffix('s') {
        Some(base) if base.len() >= 2 && !base.ends_with('s') => base.to_string(),
        _ => lower,
    }
}

/// Whether one of `own` (a number's meanings) has a word of the same meaning as `stem` among its
/// item words, or with `include_labels` its label words.
fn owns(own: &[&NumberMeaning], stem: &str, include_labels: bool, words: &MeaningWords) -> bool {
    own.iter()
        .any(|m| m.item_words.iter().chain(if include_labels { &m.label_words[..] } else { &[] }).any(|w| same_meaning(w, stem, words)))
}

/// A number written with the wrong sense, with the reason: as a share "of" something it is not a
/// share of in the facts ("7.19% of these SMs" where the facts say "SM 7.19%", the SMs'
/// throughput), or without the negative word its facts line has ("only 3.03% of the SMs have
/// work" where the facts say "3.03% of the SMs have no work": inverted).
fn wrong_sense(number: &str, own: &[&NumberMeaning], clause: &str, words: &MeaningWords) -> Option<String> {
    let sources = || own.iter().map(|m| m.source.as_str()).collect::<Vec<&str>>().join("\" and \"");
    if let Some(whole) = share_of(clause, number) {
        if !own.iter().any(|m| m.of_words.iter().any(|w| whole.iter().any(|x| same_meaning(w, x, words)))) {
            return Some(format!("{number} is not a share of \"{}\" in this kernel's facts: it is \"{}\"", whole.join(" "), sources()));
        }
    }
    if own.iter().all(|m| m.negative) && !has_negative_word(clause, words) {
        return Some(format!(
            "{number} is written as its opposite: in this kernel's facts it is \"{}\" (idle, wasted or with no work), and the sentence does not say so",
            sources()
        ));
    }
    None
}

/// Whether a facts stem and a text stem mean the same (equal, or a synonym in `prompts/meanings.toml`).
fn same_meaning(facts_stem: &str, text_stem: &str, words: &MeaningWords) -> bool {
    facts_stem == text_stem || words.synonyms.get(facts_stem).is_some_and(|list| list.iter().any(|s| s == text_stem))
}

/// One token of text for meaning: a rendered number, or a word's stem (None for stop words).
#[derive(Debug)]
struct MeaningToken {
    number: Option<String>,
    stem: Option<String>,
}

/// The tokens of `text`: numbers as [`numbers_in`] reads them, words split at anything that is not a
/// letter or digit ("memory-bound" → "memory", "bound"; "L1/TEX" → "l1", "tex"), stop words kept as
/// positions without a stem.
fn tokens(text: &str) -> Vec<MeaningToken> {
    let words = meaning_words();
    let mut numbers = numbers_in(text).into_iter();
    let mut next_number = numbers.next();
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(n) = &next_number {
            if rest.starts_with(n.as_str()) && starts_number(text, rest) {
                out.push(MeaningToken { number: Some(n.clone()), stem: None });
                rest = &rest[n.len()..];
                next_number = numbers.next();
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c.is_alphanumeric() {
            let end = rest.find(|ch: char| !ch.is_alphanumeric()).unwrap_or(rest.len());
            let word = &rest[..end];
            let stem = stem(word);
            let is_stop =
                words.stop.contains(&stem) || words.stop.contains(&word.to_lowercase()) || word.chars().all(|ch| ch.is_ascii_digit());
            out.push(MeaningToken { number: None, stem: (!is_stop && stem.len() >= 2).then_some(stem) });
            rest = &rest[end..];
        } else {
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Words between "of" and the noun it governs ("of the SMs", "of its peak").
const DETERMINERS: &[&str] = &["the", "these", "those", "its", "their", "all", "a", "an", "this", "each", "every"];

/// The stems of the first three words (determiners skipped) of `phrase`, up to its first punctuation:
/// "the profiled time, ..." → ["profiled", "time"].
fn head_stems(phrase: &str) -> Vec<String> {
    let phrase = phrase.split([',', ';', ':', '(', ')', '.', '!', '?']).next().unwrap_or("");
    phrase
        .split(|c: char| !(c.is_alphanumeric() || c == '/'))
        .filter(|w| !w.is_empty() && !DETERMINERS.contains(w))
        .take(3)
        .map(stem)
        .collect()
}

/// What `number` is said to be a share of in `clause` ("7.19% of these SMs" → ["sm", "are"]), or
/// what it is said to make up ("the SM contributes only 1.30% to this throughput" → ["throughput"]:
/// a unit's % of peak is how busy that unit is, not its part of anything).
fn share_of(clause: &str, number: &str) -> Option<Vec<String>> {
    const CONTRIBUTES: &[&str] = &["contribute", "contributes", "contributed", "contributing"];
    let at = clause.find(number)?;
    let before = clause[..at].to_lowercase();
    let rest = clause[at + number.len()..].trim_start().to_lowercase();
    let whole = match rest.strip_prefix("of ") {
        Some(whole) => whole,
        None if before.split(|c: char| !c.is_alphanumeric()).any(|w| CONTRIBUTES.contains(&w)) => rest.strip_prefix("to ")?,
        None => return None,
    };
    let heads = head_stems(whole);
    (!heads.is_empty()).then_some(heads)
}

/// What a facts line calls something a share "of" (see [`share_of`]).
fn of_words(line: &str) -> Vec<String> {
    let lower = line.to_lowercase();
    lower
        .match_indices("of ")
        .filter(|(i, _)| *i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphanumeric())
        .flat_map(|(i, _)| head_stems(&lower[i + 3..]))
        .collect()
}

/// Whether `text` holds one of the negative-sense words of `prompts/meanings.toml` (whole words).
fn has_negative_word(text: &str, words: &MeaningWords) -> bool {
    has_word(text, &words.negative)
}

/// Whether `text` holds one of `list` as a whole word (lower case).
fn has_word(text: &str, list: &[String]) -> bool {
    text.to_lowercase().split(|c: char| !c.is_alphanumeric()).any(|w| list.iter().any(|n| n == w))
}

/// Whether a facts item gives its number as an upper bound (a phrase of `bound_markers`).
fn is_upper_bound(item: &str, words: &MeaningWords) -> bool {
    let padded = format!(" {} ", item.to_lowercase().split(|c: char| !c.is_alphanumeric()).collect::<Vec<_>>().join(" "));
    words.bound_markers.iter().any(|phrase| padded.contains(&format!(" {phrase} ")))
}

/// Whether `rest` (a suffix of `text`) starts where a number may start: not inside a word.
fn starts_number(text: &str, rest: &str) -> bool {
    let before = &text[..text.len() - rest.len()];
    before.chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
}

/// The sentences of model text (split after a period, question or exclamation mark and a space).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| *n == b' ') {
            out.push(&text[start..=i]);
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// The clauses of a sentence: split at `,;:()` and at the conjunctions that join two statements.
pub fn clauses(sentence: &str) -> Vec<&str> {
    const JOINS: &[&str] = &[" and ", " but ", " while ", " whereas ", " which ", " so ", " because ", " than "];
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    for (i, c) in sentence.char_indices() {
        // A comma between digits is a thousands separator ("1,024"), not a cut.
        let thousands = c == ',' && sentence[i + 1..].starts_with(|d: char| d.is_ascii_digit());
        if matches!(c, ',' | ';' | ':' | '(' | ')') && !thousands {
            cuts.push((i, i + 1));
        }
    }
    let lower = sentence.to_lowercase();
    for join in JOINS {
        let mut from = 0;
        while let Some(at) = lower[from..].find(join) {
            cuts.push((from + at, from + at + join.len()));
            from += at + join.len();
        }
    }
    cuts.sort();
    let mut out = Vec::new();
    let mut start = 0;
    for (cut_start, cut_end) in cuts {
        if cut_start >= start {
            out.push(&sentence[start..cut_start]);
            start = cut_end;
        }
    }
    out.push(&sentence[start..]);
    out.into_iter().filter(|c| !c.trim().is_empty()).collect()
}

/// What each number in a rendered facts block measures: each line is cut into items at `,;:()`;
/// a number's item words are the words of its item nearer to it than to another number there; the
/// label is the line's first item when it holds no number ("Throughput", "Warp stalls").
fn number_meanings(rendered_facts: &str) -> Vec<NumberMeaning> {
    let mut out = Vec::new();
    for (line_index, raw_line) in rendered_facts.lines().enumerate() {
        let line = raw_line.trim().trim_start_matches("- ");
        // "1. memory-bound (...)": a list number is not a value.
        let line = match line.split_once(". ") {
            Some((head, rest)) if !head.is_empty() && head.chars().all(|c| c.is_ascii_digit()) => rest,
            _ => line,
        };
        let items = clauses(line);
        let Some(first) = items.first() else { continue };
        let first_tokens = tokens(first);
        let label_words: Vec<String> = if first_tokens.iter().any(|t| t.number.is_some()) {
            Vec::new()
        } else {
            first_tokens.into_iter().filter_map(|t| t.stem).collect()
        };
        for item in &items {
            let item_tokens = tokens(item);
            let positions: Vec<usize> = item_tokens.iter().enumerate().filter(|(_, t)| t.number.is_some()).map(|(i, _)| i).collect();
            for &at in &positions {
                let distance = |i: usize| i.abs_diff(at);
                let item_words: Vec<String> = item_tokens
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| positions.iter().all(|&other| distance(*i) <= other.abs_diff(*i)))
                    .filter_map(|(_, t)| t.stem.clone())
                    .filter(|w| !label_words.contains(w))
                    .collect();
                // A number alone in its item ("- Achieved occupancy: 14.5%") is named by its label.
                let alone = item_words.is_empty();
                let item_words = if alone { label_words.clone() } else { item_words };
                let number = item_tokens[at].number.clone().unwrap_or_default();
                let source = format!("{}: {}", first.trim(), item.trim());
                let words = meaning_words();
                // The item's own text, or the label when the number stands alone in its item.
                let negative = has_negative_word(item, words) || (alone && has_negative_word(first, words));
                out.push(NumberMeaning {
                    number,
                    item_words,
                    label_words: label_words.clone(),
                    source,
                    line: line_index,
                    of_words: of_words(line),
                    negative,
                    upper_bound: is_upper_bound(item, words),
                });
            }
        }
    }
    out
}

/// `word` with its first letter a capital.
fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `s` as a regular-expression literal.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~/%\"".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_units_and_skip_identifiers() {
        let text = "DRAM is at 64.5% of peak; 19.81 µs per launch, 96 blocks on 132 SMs, 48.0 KiB, 1,024 threads, 3.2x, float4 and sm_90, 12 sectors.";
        assert_eq!(numbers_in(text), vec!["64.5%", "19.81 µs", "96", "132", "48.0 KiB", "1,024", "3.2x", "12"]);
        // A sentence's closing period is not a decimal point.
        assert_eq!(numbers_in("It has 96."), vec!["96"]);
    }

    #[test]
    fn allowed_list_holds_the_rendered_values() {
        let g = Grounding::new(
            "Time: 19.81 µs per launch, 45.2% of the profiled time\nLaunch: 96 blocks of 128 threads on 132 SMs",
            "void fused_moe_kernel<float, 128>(float*)",
        );
        for n in ["19.81 µs", "45.2%", "96", "128", "132"] {
            assert!(g.numbers.contains(&n.to_string()), "{n} missing from {:?}", g.numbers);
        }
        assert!(g.terms.contains(&"fused_moe_kernel".to_string()));
        assert!(g.terms.contains(&"DRAM".to_string()) && g.terms.contains(&"SMs".to_string()) && g.terms.contains(&"cuBLAS".to_string()));
        assert_eq!(g.ungrounded("The grid has 96 blocks for 132 SMs and takes 19.81 µs."), Vec::<String>::new());
        assert_eq!(g.ungrounded("The grid has 97 blocks and takes 19.8 µs at 45%."), vec!["97", "19.8 µs", "45%"]);
    }

    /// A facts block as `explain::prompt::kernel_facts` renders it (the H200 decode GEMM).
    const FACTS: &str = "Kernel: nvjet_tst_64x8_64x16_2x1_v_bz_TNT
Launch: grid of 66 blocks of 384 threads, 132 SMs, 0.5 waves
Time: 19.81 µs per launch, 45.2% of the profiled time
Regime: memory-bound; busiest unit DRAM at 64.5% of peak, headroom 35.5%
Throughput (% of peak): SM 8.99%, memory 64.5%, DRAM 64.5%, L1/TEX 20.1%, L2 30.3%
Occupancy: achieved 14.5%, theoretical 25%, limited by registers, 168 registers per thread
Warp stalls (share of stall cycles): long scoreboard 63.9% (waiting on global memory)
Source line moe.cu:42: 12.5% of samples
1. block-size (info): Blocks have 1 thread, not a multiple of 32, so every block wastes 31 lanes of its last warp.";

    #[test]
    fn numbers_are_bound_to_what_they_measure() {
        let g = Grounding::new(FACTS, "nvjet_tst_64x8_64x16_2x1_v_bz_TNT");
        let accepted = [
            "The DRAM is at 64.5% of peak and the SM at 8.99%, which sets the time for this kernel.",
            "The DRAM is the primary memory resource for this kernel, and it is at 64.5% of peak usage.",
            "Achieved occupancy is 14.5% against a theoretical 25%, limited by 168 registers per thread.",
            "The grid has 66 blocks for 132 SMs, so only 0.5 waves run.",
            "Each launch takes 19.81 µs, 45.2% of the profiled time.",
            "Long scoreboard stalls take 63.9% of stall cycles, waiting on global memory.",
            "Line 42 holds 12.5% of the samples.",
            "Memory bandwidth is at 64.5% of peak while compute sits at 8.99%.",
            "Use a block size that is a multiple of 32 threads.",
            "Increase the block size to 32 threads.",
            "The SM runs at 8.99% of the SM's peak.",
            "Each launch takes 45.2% of the total time.",
        ];
        for text in accepted {
            assert_eq!(g.misattributed(text), Vec::<String>::new(), "{text}");
        }
        // SmolLM2's sentence: every number grounded, none where it belongs.
        let refused = g.misattributed("14.5% of peak throughput is achieved by the GPU, 8.99% memory-bound, 63.9% DRAM.");
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused[1].starts_with("8.99% is not what the sentence says") && refused[1].contains("SM 8.99%"), "{refused:?}");
        for wrong in [
            "The SM is at 64.5% of peak.",
            "Theoretical occupancy is 14.5%.",
            "The grid has 384 blocks.",
            "The kernel is at 8.99% of its peak.",
            // A throughput written as a share of the SMs, a stall share as a share of the time.
            "Only 8.99% of the SMs are in use.",
            "Long scoreboard stalls take 63.9% of the time.",
        ] {
            assert!(!g.misattributed(wrong).is_empty(), "{wrong} should be refused");
        }
    }

    /// Issue 36, polarity: a share the facts give as idle or with no work keeps that sense.
    #[test]
    fn a_negative_share_is_not_written_as_its_opposite() {
        let facts = "Launch: grid of 128 blocks of 256 threads, 132 SMs, 0.12 waves
1. grid-too-small (high): The grid has 128 blocks for 132 SMs: 3.03% of the SMs have no work.
2. tail-effect (low): The grid runs 2.37 waves; the last one leaves 21.0% of the GPU's block slots idle (tail effect).
Throughput (% of peak): SM 8.99%, DRAM 64.5%";
        let g = Grounding::new(facts, "k");
        // The default model's sentence on an H200 decode profile (issue 36).
        let inverted = "The grid has 128 blocks for 132 SMs, which means that the kernel is using more than one SM. However, only 3.03% of the SMs have work.";
        let refused = g.misattributed(inverted);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].starts_with("3.03% is written as its opposite") && refused[0].contains("have no work"), "{refused:?}");
        // A case never seen: an idle share written as filled.
        assert!(!g.misattributed("The last wave fills 21.0% of the GPU's block slots.").is_empty());
        // A unit's % of peak is not its part of something (the default model on the corpus).
        let part = g.misattributed("The SM contributes only 8.99% to this throughput, suggesting that most of the load comes from DRAM.");
        assert!(part.iter().any(|r| r.starts_with("8.99% is not a share of")), "{part:?}");
        for kept in [
            "Only 128 blocks run on 132 SMs, so 3.03% of the SMs have no work.",
            "3.03% of the SMs sit idle for the whole launch.",
            "The last wave leaves 21.0% of the block slots idle.",
            "21.0% of the block slots stay empty in the last wave.",
            // A positive share needs no negative word.
            "DRAM is at 64.5% of peak.",
        ] {
            assert_eq!(g.misattributed(kept), Vec::<String>::new(), "{kept}");
        }
    }

    /// Issue 36: an upper bound on a saving is not the share of time a problem takes.
    #[test]
    fn an_upper_bound_is_not_written_as_a_share() {
        let facts = "Problems the diagnosis found, largest share of time first:
1. grid-too-small (high; a fix saves at most 41.4% of this kernel's time): A 2.56 µs launch of 1 block for 128 SMs.
2. shared-bank-conflicts (info; a fix saves at most 30.8% of this kernel's time): Shared-memory accesses have bank conflicts: 93.9% of all shared wavefronts.
Throughput (% of peak): SM 30.8%, DRAM 12.0%";
        let g = Grounding::new(facts, "setColReadCol");
        // The default model's sentence on smemSquare (stop 46): the bound read as the conflicts' share.
        let read_as_share = "The shared-memory accesses have bank conflicts, resulting in 41.4% of this kernel's time.";
        let refused = g.bounds_as_shares(read_as_share);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].starts_with("41.4% is an upper bound") && refused[0].contains("saves at most 41.4%"), "{refused:?}");
        // Never seen: the bound given as the time a cause takes.
        assert!(!g.bounds_as_shares("The launch overhead takes 41.4% of the time.").is_empty());
        for kept in [
            "Padding the shared tile could save up to 41.4% of this kernel's time.",
            "Removing the conflicts saves at most 41.4% of the time.",
            "A larger grid would recover as much as 41.4% of the time, which is an upper bound.",
            // 30.8% is also the SM's throughput: a number with a measured meaning is not only a bound.
            "The SM is at 30.8% of peak.",
            "Bank conflicts take 93.9% of all shared wavefronts.",
        ] {
            assert_eq!(g.bounds_as_shares(kept), Vec::<String>::new(), "{kept}");
        }
    }

    #[test]
    fn meaning_words_parse() {
        let words = meaning_words();
        assert!(words.stop.contains(&"the".to_string()) && words.qualifiers.contains(&"achieved".to_string()));
    }

    #[test]
    fn identifiers_are_those_words_cannot_spell() {
        assert_eq!(identifiers("void at::native::vectorized_elementwise_kernel<4, Func>(int)"), vec!["vectorized_elementwise_kernel"]);
        assert_eq!(identifiers("sgemm_128x64_nn flashAttnFwd kernel"), vec!["sgemm_128x64_nn", "flashAttnFwd"]);
    }
}
