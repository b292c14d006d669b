//! Sense: model sentences that define a GPU term must agree with its definition
//! (`expert/definitions.toml`), a sentence may name only the source lines the profile holds, and a
//! comparison between two of its numbers ("20.6 ... more than the 32") must hold. All are prose-gate
//! checks ([`crate::prose`]) that need no grammar: what a term means, which lines exist, arithmetic.

use crate::profile::Launch;
use serde::Deserialize;
use std::sync::OnceLock;

/// The definitions table, as an expert reviews it.
pub const TABLE: &str = include_str!("../expert/definitions.toml");

#[derive(Debug, Deserialize)]
pub struct Term {
    pub names: Vec<String>,
    pub must: Vec<String>,
    pub why: String,
    pub source: String,
}

#[derive(Debug, Deserialize)]
struct Table {
    markers: Vec<String>,
    term: Vec<Term>,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| toml::from_str(TABLE).expect("expert/definitions.toml parses (checked by a unit test)"))
}

/// Lower-case words, joined by single spaces and padded, so a phrase matches on word boundaries.
fn padded_words(text: &str) -> String {
    let words: Vec<String> =
        text.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    format!(" {} ", words.join(" "))
}

fn has(haystack: &str, phrase: &str) -> bool {
    haystack.contains(&format!(" {} ", phrase.trim()))
}

/// Each term that `text` defines ("bank conflicts occur when ...") without what its definition
/// requires, with the reason for the re-ask.
pub fn wrong_definitions(text: &str) -> Vec<String> {
    let t = table();
    let words = padded_words(text);
    let mut out = Vec::new();
    for term in &t.term {
        // The term, then a definition marker after it; the definition is what follows the marker.
        let body = term.names.iter().find_map(|name| {
            let at = words.find(&format!(" {name} "))?;
            let rest = &words[at + name.len() + 1..];
            t.markers.iter().find_map(|m| rest.find(&format!(" {} ", m.trim())).map(|i| rest[i + m.len() + 1..].to_string()))
        });
        if let Some(body) = body {
            if !term.must.iter().any(|m| has(&format!(" {}", body.trim_start()), m)) {
                out.push(format!("it defines {} wrongly: {}", term.names[0], term.why));
            }
        }
    }
    out
}

/// Source lines that `text` names ("line 128", "lines 40 and 42") which the profile does not hold,
/// with the reason.
pub fn invented_lines(launch: &Launch, text: &str) -> Vec<String> {
    let known: Vec<u64> = launch.source.iter().flat_map(|s| s.rows.iter().filter_map(|r| r.line)).collect();
    let words: Vec<String> = padded_words(text).split_whitespace().map(str::to_string).collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w != "line" && w != "lines" {
            continue;
        }
        // The numbers that follow, joined by "and", "to", "or".
        for next in words[i + 1..].iter().take_while(|x| x.parse::<u64>().is_ok() || matches!(x.as_str(), "and" | "to" | "or")) {
            let Ok(n) = next.parse::<u64>() else { continue };
            if !known.contains(&n) {
                out.push(if known.is_empty() {
                    format!("it names source line {n}, but this profile holds no source lines (collect them with --section SourceCounters and -lineinfo)")
                } else {
                    format!("it names source line {n}, which is not among this profile's source lines")
                });
            }
        }
    }
    out
}

/// Phrases that say the number before them is larger (`true`) or smaller (`false`) than the one after.
const COMPARATORS: &[(&str, bool)] = &[
    ("more than", true),
    ("greater than", true),
    ("higher than", true),
    ("larger than", true),
    ("bigger than", true),
    ("above", true),
    ("exceeds", true),
    ("less than", false),
    ("fewer than", false),
    ("lower than", false),
    ("smaller than", false),
    ("below", false),
];

/// A rendered number's value and the kind of its unit ("%", "µs", "" for a count).
fn value_and_unit(number: &str) -> Option<(f64, String)> {
    let digits: String = number.chars().take_while(|c| c.is_ascii_digit() || matches!(c, '.' | ',')).collect();
    let value = digits.replace(',', "").parse::<f64>().ok()?;
    Some((value, number[digits.len()..].trim().to_string()))
}

/// Comparisons in `text` between two of its numbers that are false ("an average of 20.6 threads ...,
/// which is more than the 32 possible"), each with the reason. The numbers compared are the last one
/// before the comparison and the first after it, in the same unit; anything else is not checked.
pub fn false_comparisons(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    for (phrase, larger) in COMPARATORS {
        let needle = format!(" {phrase} ");
        let mut from = 0;
        while let Some(i) = lower[from..].find(&needle).map(|i| i + from) {
            from = i + needle.len();
            let before = crate::grounding::numbers_in(&text[..i]);
            let after = crate::grounding::numbers_in(&text[i + needle.len()..]);
            let (Some(a), Some(b)) = (before.last(), after.first()) else { continue };
            let (Some((x, ux)), Some((y, uy))) = (value_and_unit(a), value_and_unit(b)) else { continue };
            if ux != uy {
                continue;
            }
            let holds = if *larger { x > y } else { x < y };
            if !holds {
                out.push(format!("it says {a} is {phrase} {b}, which is false"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{SourceRow, SourceView};

    #[test]
    fn table_parses_with_reasons_and_sources() {
        let t: Table = toml::from_str(TABLE).expect("expert/definitions.toml");
        assert!(t.term.len() >= 5 && t.term.iter().all(|x| !x.must.is_empty() && !x.why.is_empty() && !x.source.is_empty()));
    }

    /// The default model's definition (issue 36): every warp access touches different locations.
    #[test]
    fn a_wrong_definition_is_refused_and_a_right_one_kept() {
        let r = wrong_definitions("Bank conflicts occur when threads in a warp access different memory locations.");
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("same shared-memory bank"), "{r:?}");
        assert!(wrong_definitions("Bank conflicts occur when threads of a warp access different words in the same bank.").is_empty());
        // A term used, not defined, is not checked.
        assert!(wrong_definitions("Bank conflicts replay each shared load 32 times here.").is_empty());
        // Cases never seen.
        assert_eq!(wrong_definitions("Divergence occurs when the kernel runs too many branches.").len(), 1);
        assert!(wrong_definitions("Divergence occurs when threads in a warp take different paths.").is_empty());
        assert_eq!(wrong_definitions("The tail effect happens when the kernel uses too much memory.").len(), 1);
        assert_eq!(wrong_definitions("Register spilling occurs when the cache is full.").len(), 1);
    }

    /// The default model's arithmetic on an A10 GEMV (issue 36), and cases never seen.
    #[test]
    fn false_comparisons_are_refused() {
        let r = false_comparisons(
            "The kernel runs with an average of 20.6 threads active on each warp, which is more than the 32 possible threads per warp.",
        );
        assert_eq!(r, vec!["it says 20.6 is more than 32, which is false".to_string()]);
        assert_eq!(false_comparisons("DRAM at 8.99% is higher than the SM at 64.5%.").len(), 1);
        assert_eq!(false_comparisons("The grid has 132 blocks, fewer than the 96 SMs.").len(), 1);
        for ok in [
            "The grid has 96 blocks, fewer than the 132 SMs.",
            "DRAM at 64.5% is higher than the SM at 8.99%.",
            // Different units are not compared, nor a comparison with one number.
            "19.81 µs is more than 45.2% of the time.",
            "The grid has more than 96 blocks.",
        ] {
            assert_eq!(false_comparisons(ok), Vec::<String>::new(), "{ok}");
        }
    }

    /// "line 128" for a profile with no source lines (the default model, issue 36): 128 was the grid.
    #[test]
    fn invented_source_lines_are_refused() {
        let none = Launch::default();
        let r = invented_lines(&none, "Use cuBLASLt split-K configuration (line 128).");
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("holds no source lines"), "{r:?}");
        let with = Launch {
            source: Some(SourceView {
                view: "cuda".into(),
                columns: vec![],
                rows: [40, 42].iter().map(|l| SourceRow { line: Some(*l), ..Default::default() }).collect(),
            }),
            ..Default::default()
        };
        assert!(invented_lines(&with, "The loads on lines 40 and 42 are strided.").is_empty());
        assert_eq!(invented_lines(&with, "Line 43 holds the store.").len(), 1);
        // "line" as an ordinary word, and a cache line, name no source line.
        assert!(invented_lines(&with, "Each cache line holds 4 sectors.").is_empty());
    }
}
