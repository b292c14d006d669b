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

use std::ops::RangeInclusive;

/// GPU/CUDA terms (the prose gate's glossary); lines with a capital, a digit or a symbol are the
/// canonical spellings the grammar admits.
const GLOSSARY: &str = include_str!("../prompts/glossary.txt");

/// Units that may follow a number after one space ("19.81 µs", "48.0 KiB").
const SPACED_UNITS: &[&str] =
    &["µs", "ms", "ns", "s", "KiB", "MiB", "GiB", "KB", "MB", "GB", "B", "GB/s", "TB/s", "TFLOP/s", "GFLOP/s", "FLOP/byte"];

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
}

/// The shape of a text field: how many sentences, and how many tokens (words, numbers, terms) each.
#[derive(Debug, Clone)]
pub struct TextShape {
    pub sentences: RangeInclusive<usize>,
    pub words: RangeInclusive<usize>,
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
        Grounding { numbers, terms }
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
        let first = format!("(?:{first_word}{grounded})");
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

    #[test]
    fn identifiers_are_those_words_cannot_spell() {
        assert_eq!(identifiers("void at::native::vectorized_elementwise_kernel<4, Func>(int)"), vec!["vectorized_elementwise_kernel"]);
        assert_eq!(identifiers("sgemm_128x64_nn flashAttnFwd kernel"), vec!["sgemm_128x64_nn", "flashAttnFwd"]);
    }
}
