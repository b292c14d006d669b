//! The per-kernel JSON Schema the model's output is constrained to.
//!
//! It is built from the launch's own facts so that the grammar itself only admits:
//! - categories the rule layer found for this launch (each as its own alternative),
//! - for each category, citations of the metrics that category rests on, each an exact constant
//!   `{metric, value, unit}` triple taken from the profile (an `anyOf` of constants), and
//! - free text (claim, explanation paragraph, suggestions) whose numbers can only be the launch's own
//!   values as keet renders them, and whose GPU terms come from the glossary and the kernel's
//!   identifiers ([`crate::grounding`]); `guided` and `choose` keep their digit-free openings and
//!   expert choices for small models.
//!
//! Strings and arrays are bounded, and [`token_budget`] covers the largest output the schema admits.

use crate::validate::Context;
use serde_json::{json, Value};

/// Bounds of the free-text fields (words).
pub const CLAIM_MAX_WORDS: usize = 20;
pub const EXPLANATION_MAX_WORDS: usize = 32;
pub const SUGGESTION_MAX_WORDS: usize = 18;
pub const CLAIM_MAX_CHARS: usize = max_chars(CLAIM_MAX_WORDS);
pub const EXPLANATION_MAX_CHARS: usize = max_chars(EXPLANATION_MAX_WORDS);
pub const SUGGESTION_MAX_CHARS: usize = max_chars(SUGGESTION_MAX_WORDS);
pub const MAX_SUGGESTIONS: usize = 3;
/// Sentences in an explanation paragraph (free prose).
pub const EXPLANATION_MAX_SENTENCES: usize = 3;
/// Words a grounded sentence may run past its field's length. A sentence that reaches the grammar's
/// word limit cannot take another space, and the model glues its last words together ("to
/// movebytes", "leading to aime", "streamsitsweights"), which the gate then refuses; with 8 and 12
/// words of slack, 6 of the 30 sentences replaced in a corpus run were glued at the limit. The
/// sentence checks, not the grammar, keep sentences short.
pub const GROUNDED_SLACK_WORDS: usize = 20;
pub const MAX_CITATIONS: usize = 3;

/// A metric the model may cite: name, normalised value and unit symbol, and its display label.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Citable {
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub label: String,
}

/// The citable metrics of one category, in the order the rule layer's facts list them.
pub fn citables(ctx: &Context, category: crate::rules::Category) -> Vec<Citable> {
    let mut out: Vec<Citable> = Vec::new();
    for r in ctx.rules.iter().filter(|r| r.category == category) {
        for key in &r.facts {
            let Some(f) = ctx.facts.get(*key) else { continue };
            for e in &f.evidence {
                let Some(m) = ctx.launch.metrics.get(&e.metric) else { continue };
                let Some(v) = m.as_f64() else { continue };
                if out.iter().any(|c| c.metric == e.metric) {
                    continue;
                }
                out.push(Citable { metric: e.metric.clone(), value: v, unit: m.unit.symbol(), label: f.label.to_string() });
            }
        }
    }
    out
}

/// Free text is English-like sentences of plain words: a capital letter, then words of ASCII
/// letters (a hyphen or apostrophe inside a word is fine) separated by single spaces, with commas or
/// semicolons, ending with a period. No digits (numbers come only from citations), no unicode look-alikes
/// of digits, no underscores or slashes (metric names, paths and URLs belong nowhere in prose).
/// Characters of free text (for schemas that bound text by length instead of words).
pub const TEXT_CHARS: &str = "A-Za-z ,.;'-";

/// One word: letters, with at most one inner hyphen or apostrophe ("warp-level", "kernel's"); metric
/// names spelled with hyphens ("avg-pct-of-peak") do not fit.
pub const WORD: &str = "[A-Za-z][a-z]{0,13}([-'][a-z]{1,10})?";

/// A bounded sentence pattern: `min_words..=max_words` words.
pub fn sentence_pattern(min_words: usize, max_words: usize) -> String {
    format!("^[A-Z][a-z]{{0,13}}( {WORD}[,;]?){{{},{}}}[.]$", min_words.saturating_sub(1), max_words.saturating_sub(1))
}

fn text(min_words: usize, max_words: usize) -> Value {
    // One regex bounds the length and the alphabet (llguidance compiles it into the grammar).
    json!({ "type": "string", "pattern": sentence_pattern(min_words, max_words) })
}

/// Longest text (characters) a sentence of `words` words may have.
const fn max_chars(words: usize) -> usize {
    words * 27 + 1
}

/// Which free-text field of a finding a text schema is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextField {
    Claim,
    Explanation,
    Suggestion,
}

/// The default text schema of a field: a free sentence of bounded length.
pub fn free_text(field: TextField) -> Value {
    match field {
        TextField::Claim => text(4, CLAIM_MAX_WORDS),
        TextField::Explanation => text(6, EXPLANATION_MAX_WORDS),
        TextField::Suggestion => text(4, SUGGESTION_MAX_WORDS),
    }
}

/// The shape of each free-text field under the grounded grammar: the claim one sentence, the
/// explanation a paragraph of up to [`EXPLANATION_MAX_SENTENCES`], each suggestion one sentence.
pub fn grounded_shape(field: TextField) -> crate::grounding::TextShape {
    use crate::grounding::TextShape;
    match field {
        TextField::Claim => TextShape { sentences: 1..=1, words: 4..=CLAIM_MAX_WORDS + GROUNDED_SLACK_WORDS, openings: vec![] },
        TextField::Explanation => TextShape {
            sentences: 1..=EXPLANATION_MAX_SENTENCES,
            words: 4..=EXPLANATION_MAX_WORDS + GROUNDED_SLACK_WORDS,
            openings: vec![],
        },
        TextField::Suggestion => TextShape { sentences: 1..=1, words: 3..=SUGGESTION_MAX_WORDS + GROUNDED_SLACK_WORDS, openings: vec![] },
    }
}

/// A free-text field under the grounded grammar: numbers only from `grounding`, terms from the
/// glossary and the kernel's identifiers, ordinary words free.
pub fn grounded_text(field: TextField, grounding: &crate::grounding::Grounding) -> Value {
    grounded_text_shaped(&grounded_shape(field), grounding)
}

/// [`grounded_text`] of a given shape (a suggestion that must open with a verb of the gate's list).
pub fn grounded_text_shaped(shape: &crate::grounding::TextShape, grounding: &crate::grounding::Grounding) -> Value {
    json!({ "type": "string", "pattern": grounding.text_pattern(shape) })
}

/// A sentence that starts with `opening` (plain words, already capitalised) and goes on for
/// `min_words..=max_words` more words.
pub fn opening_text(opening: &str, min_words: usize, max_words: usize) -> Value {
    let words: Vec<&str> = opening.split_whitespace().collect();
    if words.is_empty() || !words.iter().all(|w| w.chars().all(|c| c.is_ascii_alphabetic())) {
        return text(min_words.max(1) + 1, max_words + 1);
    }
    json!({ "type": "string", "pattern": format!("^{}( {WORD}[,;]?){{{},{}}}[.]$", words.join(" "), min_words, max_words) })
}

/// One of the given sentences.
pub fn choice_text(options: &[String]) -> Value {
    json!({ "type": "string", "enum": options })
}

/// The schema for one launch; `None` when the rule layer found nothing citable to explain.
pub fn findings_schema(ctx: &Context, max_findings: usize) -> Option<Value> {
    findings_schema_with(ctx, max_findings, |_, f| free_text(f))
}

/// The schema for one launch with the text of each category's fields given by `text_of`.
pub fn findings_schema_with(
    ctx: &Context,
    max_findings: usize,
    text_of: impl Fn(crate::rules::Category, TextField) -> Value,
) -> Option<Value> {
    let mut alternatives = Vec::new();
    let mut seen = Vec::new();
    for r in ctx.rules {
        if seen.contains(&r.category) {
            continue;
        }
        seen.push(r.category);
        let cites = citables(ctx, r.category);
        if cites.is_empty() {
            continue;
        }
        let items: Vec<Value> = cites.iter().map(|c| citation_schema(c, None)).collect();
        alternatives.push(json!({
            "type": "object",
            "properties": {
                "category": { "const": r.category.as_str() },
                "severity": { "const": serde_json::to_value(r.severity).expect("severity serialises") },
                "claim": text_of(r.category, TextField::Claim),
                "evidence": evidence_schema(items),
                "explanation": text_of(r.category, TextField::Explanation),
                "suggestions": { "type": "array", "items": text_of(r.category, TextField::Suggestion), "minItems": 1, "maxItems": MAX_SUGGESTIONS },
            },
            "required": ["category", "severity", "claim", "evidence", "explanation", "suggestions"],
            "additionalProperties": false
        }));
    }
    if alternatives.is_empty() {
        return None;
    }
    let max = max_findings.min(alternatives.len()).max(1);
    Some(json!({
        "type": "object",
        "properties": {
            "findings": { "type": "array", "items": { "anyOf": alternatives }, "minItems": 1, "maxItems": max }
        },
        "required": ["findings"],
        "additionalProperties": false
    }))
}

/// Tokens that always suffice for the largest output the schema admits: every character of every
/// bounded string as its own token, plus the JSON structure and the longest citation per item.
pub fn token_budget(schema: &Value) -> usize {
    let max_findings = schema["properties"]["findings"]["maxItems"].as_u64().unwrap_or(1) as usize;
    let alternatives = schema["properties"]["findings"]["items"]["anyOf"].as_array().into_iter().flatten();
    let longest = longest_citation(alternatives.map(|alt| &alt["properties"]["evidence"]));
    // A paragraph explanation and longer suggestions under the grounded grammar; the budget only
    // stops a runaway (generation ends when the grammar completes).
    let text_chars = 2 * CLAIM_MAX_CHARS + EXPLANATION_MAX_SENTENCES * EXPLANATION_MAX_CHARS + MAX_SUGGESTIONS * 2 * SUGGESTION_MAX_CHARS;
    16 + max_findings * (text_and_citation_tokens(text_chars, longest) + 120)
}

/// The schema of one citation: `cite`'s metric, value and unit as constants, and `side` (compare's
/// `before` / `after`) after the metric when given.
pub fn citation_schema(cite: &Citable, side: Option<Value>) -> Value {
    let mut properties = json!({
        "metric": { "const": cite.metric },
        "value": { "const": cite.value },
        "unit": { "const": cite.unit },
    });
    let mut required = vec!["metric", "value", "unit"];
    if let Some(side) = side {
        properties["side"] = json!({ "const": side });
        required.insert(1, "side");
    }
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// An answer's evidence: one to [`MAX_CITATIONS`] of the given citation schemas (at most as many
/// as there are).
pub fn evidence_schema(citations: Vec<Value>) -> Value {
    let max_items = MAX_CITATIONS.min(citations.len().max(1));
    json!({ "type": "array", "items": { "anyOf": citations }, "minItems": 1, "maxItems": max_items })
}

/// The longest citation (characters of its JSON) the given evidence schemas admit; 64 when they
/// admit none.
pub fn longest_citation<'a>(evidence: impl IntoIterator<Item = &'a Value>) -> usize {
    evidence.into_iter().flat_map(|e| e["items"]["anyOf"].as_array().into_iter().flatten()).map(|c| c.to_string().len()).max().unwrap_or(64)
}

/// Tokens for `text_chars` characters of bounded text and [`MAX_CITATIONS`] citations of
/// `longest_citation` characters, every character a token (the JSON structure around them is the
/// caller's to add).
pub fn text_and_citation_tokens(text_chars: usize, longest_citation: usize) -> usize {
    text_chars + MAX_CITATIONS * longest_citation
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentence_pattern_shape() {
        assert_eq!(sentence_pattern(4, 20), "^[A-Z][a-z]{0,13}( [A-Za-z][a-z]{0,13}([-'][a-z]{1,10})?[,;]?){3,19}[.]$");
    }
}
