//! Direction: which way each knob turns to fix each problem category (`expert/directions.toml`), and
//! the check that refuses a model suggestion turning a knob of its finding the wrong way ("decrease
//! the number of blocks" for a grid that leaves SMs idle). Used by the prose gate ([`crate::prose`]).

use crate::rules::Category;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The table: verbs, knobs and the rules, as an expert reviews them.
pub const TABLE: &str = include_str!("../expert/directions.toml");

/// Words a verb may stand before its knob, at most ("reduce the number of blocks").
const MAX_GAP_WORDS: usize = 3;

#[derive(Debug, Deserialize)]
struct Verbs {
    up: Vec<String>,
    down: Vec<String>,
    negations: Vec<String>,
    size_words: Vec<String>,
    size_sensitive: Vec<String>,
}

/// Which way a knob turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    Up,
    Down,
}

/// One rule: turning `knob` the `way` way fixes `category`.
#[derive(Debug, Deserialize)]
pub struct Rule {
    pub category: String,
    pub knob: String,
    pub way: Way,
    pub why: String,
    pub source: String,
}

#[derive(Debug, Deserialize)]
struct Table {
    verbs: Verbs,
    knobs: BTreeMap<String, Vec<String>>,
    rule: Vec<Rule>,
}

/// The table failed to parse or names an unknown category or knob.
#[derive(Debug, thiserror::Error)]
pub enum DirectionError {
    #[error("expert/directions.toml: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("expert/directions.toml: unknown category {0:?}")]
    UnknownCategory(String),
    #[error("expert/directions.toml: rule names knob {0:?}, which [knobs] does not define")]
    UnknownKnob(String),
}

fn parse(source: &str) -> Result<Table, DirectionError> {
    let t: Table = toml::from_str(source)?;
    for r in &t.rule {
        Category::parse(&r.category).ok_or_else(|| DirectionError::UnknownCategory(r.category.clone()))?;
        if !t.knobs.contains_key(&r.knob) {
            return Err(DirectionError::UnknownKnob(r.knob.clone()));
        }
    }
    Ok(t)
}

/// The table with each knob's phrases split into words, longest first (so "number of blocks" is
/// read before "blocks"), once.
struct Loaded {
    table: Table,
    phrases: BTreeMap<String, Vec<Vec<String>>>,
}

fn table() -> &'static Loaded {
    static T: OnceLock<Loaded> = OnceLock::new();
    T.get_or_init(|| {
        let table = parse(TABLE).expect("expert/directions.toml parses (checked by a unit test)");
        let phrases = table
            .knobs
            .iter()
            .map(|(knob, list)| {
                let mut words: Vec<Vec<String>> = list.iter().map(|p| words_of(p)).collect();
                words.sort_by_key(|p| std::cmp::Reverse(p.len()));
                (knob.clone(), words)
            })
            .collect();
        Loaded { table, phrases }
    })
}

fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The way the words just before `at` turn the knob that starts there, if a verb does.
fn way_before(words: &[String], at: usize, phrase: &str, verbs: &Verbs) -> Option<(Way, String)> {
    let from = at.saturating_sub(MAX_GAP_WORDS + 1);
    for i in (from..at).rev() {
        let w = words[i].as_str();
        let way = if verbs.up.iter().any(|v| v == w) {
            Way::Up
        } else if verbs.down.iter().any(|v| v == w) {
            Way::Down
        } else {
            continue;
        };
        // "smaller blocks" is about each block's size, not how many there are.
        if verbs.size_words.iter().any(|s| s == w) && verbs.size_sensitive.iter().any(|s| s == phrase) {
            return None;
        }
        let negated = words[i.saturating_sub(2)..i].iter().any(|n| verbs.negations.contains(n));
        return (!negated).then(|| (way, w.to_string()));
    }
    None
}

/// Every knob of `category` that `text` turns the wrong way, each with the reason the model is
/// re-asked with. A comparison ("fewer blocks than SMs") describes, it does not turn anything.
pub fn wrong_turns(category: Category, text: &str) -> Vec<String> {
    let loaded = table();
    let t = &loaded.table;
    let words = words_of(&text.replace('-', " "));
    let mut out = Vec::new();
    for rule in t.rule.iter().filter(|r| r.category == category.as_str()) {
        'phrases: for phrase in &loaded.phrases[&rule.knob] {
            for at in (0..words.len()).filter(|&i| words[i..].starts_with(phrase)) {
                if words.get(at + phrase.len()).is_some_and(|w| w == "than") {
                    continue;
                }
                let Some((way, verb)) = way_before(&words, at, &phrase.join(" "), &t.verbs) else { continue };
                if way != rule.way {
                    out.push(format!(
                        "it turns the {} the wrong way (\"{verb} ... {}\"): {}",
                        rule.knob.replace('_', " "),
                        phrase.join(" "),
                        rule.why
                    ));
                    break 'phrases;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_and_names_real_categories_and_knobs() {
        let t = parse(TABLE).expect("expert/directions.toml");
        assert!(t.rule.len() >= 10);
        assert!(t.rule.iter().all(|r| !r.why.is_empty() && !r.source.is_empty()));
        assert!(matches!(parse("[verbs]\nup=[]\ndown=[]\nnegations=[]\nsize_words=[]\nsize_sensitive=[]\n[knobs]\n[[rule]]\ncategory=\"grid\"\nknob=\"x\"\nway=\"up\"\nwhy=\"\"\nsource=\"\""), Err(DirectionError::UnknownCategory(_))));
    }

    /// The default model's suggestion for a cuBLAS GEMM whose grid is too small (issue 36).
    #[test]
    fn fewer_blocks_for_a_small_grid_is_refused() {
        let text = "Increase batch size (M), decrease number of blocks (N), use cuBLASLt split-K configuration (if available).";
        let r = wrong_turns(Category::GridTooSmall, text);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("decrease ... number of blocks") && r[0].contains("more blocks, not fewer"), "{r:?}");
        // The right way, a size word, a comparison and a negation turn nothing wrong.
        for ok in [
            "Launch more blocks: split each row over several blocks.",
            "Split the work into smaller blocks so every SM gets one.",
            "Batch more requests per call so the grid has more blocks than SMs.",
            "Do not reduce the number of blocks; give each call more rows.",
            "The grid has fewer blocks than SMs.",
        ] {
            assert_eq!(wrong_turns(Category::GridTooSmall, ok), Vec::<String>::new(), "{ok}");
        }
    }

    /// Cases never seen: each category's knob turned the wrong way.
    #[test]
    fn each_category_knob_turned_the_wrong_way() {
        for (cat, text) in [
            (Category::OccupancyRegisters, "Increase the registers per thread so the compiler stops spilling."),
            (Category::OccupancySharedMemory, "Use more shared memory per block for larger tiles."),
            (Category::SharedBankConflicts, "Remove the padding from the shared tile."),
            (Category::AtomicsContention, "Add more atomic operations per thread."),
            (Category::Fp64, "Use higher precision for the accumulators."),
            (Category::MemoryCoalescing, "Increase the stride between consecutive threads."),
            (Category::OccupancyOther, "Lower the occupancy to give each warp more cache."),
        ] {
            assert_eq!(wrong_turns(cat, text).len(), 1, "{cat:?}: {text}");
        }
        for (cat, text) in [
            (Category::OccupancyRegisters, "Reduce registers per thread with __launch_bounds__."),
            (Category::OccupancySharedMemory, "Use less shared memory per block."),
            (Category::SharedBankConflicts, "Pad the shared array by one column."),
            (Category::AtomicsContention, "Aggregate in shared memory first, then issue fewer atomics."),
            (Category::MemoryCoalescing, "Make the stride between consecutive threads one element."),
        ] {
            assert_eq!(wrong_turns(cat, text), Vec::<String>::new(), "{cat:?}: {text}");
        }
    }
}
