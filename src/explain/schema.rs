//! The per-kernel JSON Schema the model's output is constrained to.
//!
//! It is built from the launch's own facts so that the grammar itself only admits:
//! - categories the rule layer found for this launch (each as its own alternative),
//! - for each category, citations of the metrics that category rests on, each an exact constant
//!   `{metric, value, unit}` triple taken from the profile (an `anyOf` of constants), and
//! - free text (claim, explanation, suggestions) with no digits, so every number a reader sees
//!   comes from cited evidence.
//!
//! Strings and arrays are bounded, and [`token_budget`] covers the largest output the schema admits.

use crate::validate::Context;
use serde_json::{json, Value};

/// Bounds of the free-text fields (characters).
pub const CLAIM_MAX_CHARS: usize = 140;
pub const EXPLANATION_MAX_CHARS: usize = 220;
pub const SUGGESTION_MAX_CHARS: usize = 120;
pub const MAX_SUGGESTIONS: usize = 2;
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
            let Some(f) = ctx.facts.get(key) else { continue };
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

/// Characters free text may use: ASCII letters, space and plain punctuation. No digits (numbers
/// come only from citations), no unicode look-alikes of digits (superscripts), no underscores
/// (metric names belong in citations), no quotes or escapes.
pub const TEXT_CHARS: &str = "A-Za-z ,.;:()'/-";

fn text(min: usize, max: usize) -> Value {
    // One regex bounds the length and the alphabet (llguidance compiles it into the grammar).
    json!({ "type": "string", "pattern": format!("^[{TEXT_CHARS}]{{{min},{max}}}$") })
}

/// The schema for one launch; `None` when the rule layer found nothing citable to explain.
pub fn findings_schema(ctx: &Context, max_findings: usize) -> Option<Value> {
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
        let items: Vec<Value> = cites
            .iter()
            .map(|c| {
                json!({
                    "type": "object",
                    "properties": {
                        "metric": { "const": c.metric },
                        "value": { "const": c.value },
                        "unit": { "const": c.unit },
                    },
                    "required": ["metric", "value", "unit"],
                    "additionalProperties": false
                })
            })
            .collect();
        alternatives.push(json!({
            "type": "object",
            "properties": {
                "category": { "const": r.category.as_str() },
                "severity": { "const": serde_json::to_value(r.severity).expect("severity serialises") },
                "claim": text(8, CLAIM_MAX_CHARS),
                "evidence": { "type": "array", "items": { "anyOf": items }, "minItems": 1, "maxItems": MAX_CITATIONS.min(cites.len()) },
                "explanation": text(8, EXPLANATION_MAX_CHARS),
                "suggestions": { "type": "array", "items": text(8, SUGGESTION_MAX_CHARS), "minItems": 1, "maxItems": MAX_SUGGESTIONS },
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
    let longest_citation = schema["properties"]["findings"]["items"]["anyOf"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|alt| alt["properties"]["evidence"]["items"]["anyOf"].as_array().cloned().unwrap_or_default())
        .map(|c| c.to_string().len())
        .max()
        .unwrap_or(64);
    let per_finding = CLAIM_MAX_CHARS + EXPLANATION_MAX_CHARS + MAX_SUGGESTIONS * SUGGESTION_MAX_CHARS + MAX_CITATIONS * longest_citation + 120;
    16 + max_findings * per_finding
}
