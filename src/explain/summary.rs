//! The per-profile summary: where the time goes and what to do first, in two or three sentences.
//!
//! The model writes it from a facts block of the whole report (time by family, the profile-level
//! findings, and each explained kernel's share, verdict and bound on saved time), under the grounded
//! grammar of that block. Its sentences are held to the same checks as a kernel's: every number one
//! of the block's values and next to what it measures, every word English or a GPU term, nothing
//! about keet. A summary that fails after one re-ask is replaced by the expert summary, built from
//! the same block.

use serde::Deserialize;
use serde_json::json;

use super::prompt::{self, fmt_value};
use super::report::{ExplainReport, ProfileSummary, Writer};
use crate::grounding::Grounding;
use crate::llm::engine::Engine;
use crate::llm::template::ChatMessage;

pub const SUMMARY: &str = include_str!("../../prompts/summary.jinja");

/// Sentences a summary has.
const SUMMARY_SENTENCES: std::ops::RangeInclusive<usize> = 1..=3;
/// Words (tokens) per sentence.
const SUMMARY_WORDS: std::ops::RangeInclusive<usize> = 5..=40;

/// What the model answers.
#[derive(Deserialize)]
struct SummaryAnswer {
    summary: String,
}

/// The facts block the summary is written from, the grounding it allows, and the expert summary.
pub struct SummaryFacts {
    pub facts: String,
    pub grounding: Grounding,
    pub expert: String,
    /// The kernels' identifiers (for the word check).
    identifiers: Vec<String>,
}

/// The summary's facts block for `report` (its kernels explained, its profile view filled).
pub fn summary_facts(report: &ExplainReport) -> SummaryFacts {
    use std::fmt::Write;
    let mut out = String::new();
    let total = report.total_duration_ns;
    let _ = writeln!(out, "Profiled time: {}", prompt::duration(total));
    let families: Vec<String> = report
        .profile
        .families
        .iter()
        .filter(|f| f.share_pct >= 1.0)
        .map(|f| format!("{} {}", f.label, fmt_value(f.share_pct, "%")))
        .collect();
    if !families.is_empty() {
        let _ = writeln!(out, "Time by kernel family: {}", families.join(", "));
    }
    for p in &report.profile.findings {
        let _ = writeln!(out, "Whole profile, {}: {} {}", p.category.as_str(), p.claim, p.suggestion);
    }
    let _ = writeln!(out, "Kernels explained, largest share of time first:");
    let mut expert = String::new();
    let mut names = String::new();
    for k in &report.kernels {
        let short = crate::rules::kind::short_kernel_name(&k.kernel.name);
        names.push_str(&k.kernel.name);
        names.push(' ');
        let share = fmt_value(k.kernel.time_share_pct, "%");
        let mut line = format!("{}. {short}: {share} of the profiled time; {}", k.rank, k.verdict);
        if !line.ends_with('.') {
            line.push('.');
        }
        let gain_pct = k.estimated_gain_ns.filter(|_| total > 0.0).map(|g| 100.0 * g / total);
        if let Some(g) = gain_pct {
            let _ = write!(line, " Fixing it saves at most {} of the profiled time.", fmt_value(g, "%"));
        }
        if let Some(first) = k.analysis.findings.first() {
            let _ = write!(line, " Fix: {}", first.suggestion);
        }
        let _ = writeln!(out, "{line}");
        if k.rank == 1 {
            expert = match k.analysis.findings.first() {
                Some(f) => format!(
                    "{short} takes {share} of the profiled time and is {}{}. Start there: {}",
                    f.category.as_str(),
                    gain_pct.map(|g| format!("; fixing it saves at most {} of the profiled time", fmt_value(g, "%"))).unwrap_or_default(),
                    first_sentence(&f.suggestion)
                ),
                None => format!("{short} takes {share} of the profiled time; keet found no problem it can bound."),
            };
        }
    }
    if let Some(p) = report.profile.findings.first() {
        expert = format!("{} {expert}", p.claim);
    }
    // Identifiers anywhere in the block (kernels named by the profile-level findings too).
    let identifiers = crate::grounding::identifiers(&format!("{names} {out}"));
    let grounding = Grounding::new(&out, &format!("{names} {out}"));
    SummaryFacts { facts: out, grounding, expert: expert.trim().to_string(), identifiers }
}

/// The first sentence of an expert text, ending with a period.
fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map(|i| i + 1).unwrap_or(text.len());
    let mut s = text[..end].trim().to_string();
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

/// Why `text` may not stand as the summary (empty when it may).
pub fn check(facts: &SummaryFacts, text: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    for n in facts.grounding.ungrounded(text) {
        reasons.push(format!("number {n} is not one of the profile's values"));
    }
    reasons.extend(facts.grounding.misattributed(text));
    for sentence in text.split_inclusive(". ").map(str::trim).filter(|s| !s.is_empty()) {
        for r in crate::prose::gate().check_profile_sentence(sentence, &facts.identifiers) {
            reasons.push(format!("\"{}\": {r}", sentence.chars().take(60).collect::<String>()));
        }
    }
    reasons
}

/// The JSON Schema of the answer: one grounded text field.
fn schema(grounding: &Grounding) -> serde_json::Value {
    let shape = crate::grounding::TextShape { sentences: SUMMARY_SENTENCES, words: SUMMARY_WORDS };
    json!({
        "type": "object",
        "properties": { "summary": { "type": "string", "pattern": grounding.text_pattern(&shape) } },
        "required": ["summary"],
        "additionalProperties": false
    })
}

/// The user message asking for the summary.
pub fn question(facts: &SummaryFacts) -> Result<String, minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.render_str(SUMMARY, json!({ "facts": facts.facts }))
}

/// Asks the model for the summary (one re-ask with the reasons), else the expert summary.
pub fn summarize(engine: &mut Engine, facts: &SummaryFacts, system: String, reasks: usize) -> Result<ProfileSummary, super::ExplainError> {
    let schema = schema(&facts.grounding);
    let mut options = super::decoding();
    options.max_tokens = 60 * SUMMARY_SENTENCES.end() + 16;
    let messages = vec![ChatMessage::system(system), ChatMessage::user(question(facts)?)];
    let outcome = crate::llm::ask::ask(
        engine,
        crate::llm::ask::Ask { messages, schema: &schema, options, reasks },
        |answer: &mut SummaryAnswer| {
            answer.summary = answer.summary.trim().to_string();
            let reasons = check(facts, &answer.summary);
            if reasons.is_empty() {
                Ok(())
            } else {
                Err(reasons)
            }
        },
        |reasons| {
            Ok::<String, super::ExplainError>(format!(
                "That summary was refused because:\n{}\nWrite it again as JSON: {{\"summary\": \"...\"}}.",
                reasons.iter().map(|r| format!("- {r}")).collect::<Vec<_>>().join("\n")
            ))
        },
    )?;
    let repaired = outcome.repaired();
    Ok(match outcome.accepted {
        Some(answer) => ProfileSummary { text: answer.summary, writer: Writer::Model, repaired, refused: Vec::new() },
        None => ProfileSummary {
            text: facts.expert.clone(),
            writer: Writer::Expert,
            repaired: false,
            refused: {
                let mut all: Vec<String> = Vec::new();
                for r in outcome.refusals.into_iter().flatten() {
                    if !all.contains(&r) {
                        all.push(r);
                    }
                }
                all
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentence_ends_with_a_period() {
        assert_eq!(first_sentence("Batch more tokens. Then fuse."), "Batch more tokens.");
        assert_eq!(first_sentence("Use CUDA Graphs"), "Use CUDA Graphs.");
    }
}
