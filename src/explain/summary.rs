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
    /// Each kernel's short name and the regimes and categories the diagnosis gives it.
    kernel_diagnoses: Vec<(String, Vec<String>)>,
}

/// Regime words a summary may only pin on a kernel the diagnosis gives them to.
const REGIME_WORDS: &[(&str, &str)] = &[
    ("memory-bound", "memory-bound"),
    ("memory bound", "memory-bound"),
    ("compute-bound", "compute-bound"),
    ("compute bound", "compute-bound"),
    ("latency-bound", "latency-bound"),
    ("latency bound", "latency-bound"),
    ("grid-too-small", "grid-too-small"),
    ("grid too small", "grid-too-small"),
    ("launch-bound", "launch-bound"),
    ("launch bound", "launch-bound"),
];

/// The summary's facts block for `report` (its kernels explained, its profile view filled).
pub fn summary_facts(report: &ExplainReport) -> SummaryFacts {
    use std::fmt::Write;
    let mut out = String::new();
    write_profile_lines(&mut out, report);
    let _ = writeln!(out, "Kernels explained, largest share of time first:");
    let (names, mut expert) = write_kernel_lines(&mut out, report);
    if let Some(first) = write_first_bound(&mut out, report) {
        expert = first;
    }
    if let Some(p) = report.profile.findings.first() {
        expert = format!("{} {expert}", p.claim);
    }
    let kernel_diagnoses = kernel_diagnoses(report);
    // Identifiers anywhere in the block (kernels named by the profile-level findings too).
    let identifiers = crate::grounding::identifiers(&format!("{names} {out}"));
    let grounding = Grounding::new(&out, &format!("{names} {out}"));
    SummaryFacts { facts: out, grounding, expert: expert.trim().to_string(), identifiers, kernel_diagnoses }
}

/// The profiled time, the time by kernel family, and the whole profile's findings.
fn write_profile_lines(out: &mut String, report: &ExplainReport) {
    use std::fmt::Write;
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
}

/// One line per explained kernel: its share, verdict, bound and fix. The kernels' names, and the
/// expert's summary (where to start: the first kernel).
fn write_kernel_lines(out: &mut String, report: &ExplainReport) -> (String, String) {
    use std::fmt::Write;
    let total = report.total_duration_ns;
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
    (names, expert)
}

/// The largest bound on saved time over every kernel of the report (explained or not), so
/// neither the model nor the reader has to find the maximum; the expert's summary that starts there.
fn write_first_bound(out: &mut String, report: &ExplainReport) -> Option<String> {
    use std::fmt::Write;
    let total = report.total_duration_ns;
    let best = report.batch.as_ref().map(super::assemble::kernel_times).and_then(|times| {
        times
            .into_iter()
            .filter(|k| k.gain_ns.is_some_and(|g| g > 0.0))
            .max_by(|a, b| a.gain_ns.unwrap_or(0.0).total_cmp(&b.gain_ns.unwrap_or(0.0)))
    });
    let (Some(first), true) = (&best, total > 0.0) else { return None };
    let short = crate::rules::kind::short_kernel_name(&first.name);
    let gain_ns = first.gain_ns.unwrap_or(0.0);
    let pct = fmt_value(100.0 * gain_ns / total, "%");
    let primary = first.primary.as_deref().unwrap_or("its primary problem");
    // The bound in µs as the profile-level findings render it, so both name one number.
    let _ = writeln!(
        out,
        "First, the largest bound on saved time: {short}, {primary}: fixing it saves at most {} µs ({pct} of the profiled time).",
        crate::rules::fmt_num(gain_ns / 1000.0)
    );
    let fix = report
        .kernels
        .iter()
        .find(|k| k.kernel.name == first.name)
        .and_then(|k| k.analysis.findings.first())
        .map(|f| format!(" {}", first_sentence(&f.suggestion)))
        .unwrap_or_default();
    Some(format!("Start with {short} ({primary}): fixing it saves at most {pct} of the profiled time.{fix}"))
}

/// What the diagnosis calls each kernel: explained ones by their findings and regime, the
/// others by their primary finding.
fn kernel_diagnoses(report: &ExplainReport) -> Vec<(String, Vec<String>)> {
    let mut kernel_diagnoses: Vec<(String, Vec<String>)> = Vec::new();
    for k in &report.kernels {
        let mut said: Vec<String> = k.analysis.findings.iter().map(|f| f.category.as_str().to_string()).collect();
        said.push(k.analysis.diagnosis.regime.to_string());
        if k.analysis.diagnosis.regime == "grid-bound" {
            said.push("grid-too-small".into());
        }
        kernel_diagnoses.push((crate::rules::kind::short_kernel_name(&k.kernel.name), said));
    }
    if let Some(batch) = &report.batch {
        for k in super::assemble::kernel_times(batch) {
            let short = crate::rules::kind::short_kernel_name(&k.name);
            if let (false, Some(p)) = (kernel_diagnoses.iter().any(|(n, _)| *n == short), k.primary) {
                kernel_diagnoses.push((short, vec![p]));
            }
        }
    }
    kernel_diagnoses
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
    reasons.extend(facts.grounding.bounds_as_shares(text));
    for sentence in text.split_inclusive(". ").map(str::trim).filter(|s| !s.is_empty()) {
        for r in crate::prose::gate().check_profile_sentence(sentence, &facts.identifiers) {
            reasons.push(format!("\"{}\": {r}", sentence.chars().take(60).collect::<String>()));
        }
        reasons.extend(wrong_regimes(facts, sentence));
    }
    reasons
}

/// A sentence that names one kernel and pins a regime on it the diagnosis does not give it
/// ("RMSNormKernel is memory-bound" where it is grid-too-small).
fn wrong_regimes(facts: &SummaryFacts, sentence: &str) -> Vec<String> {
    let named: Vec<&(String, Vec<String>)> = facts.kernel_diagnoses.iter().filter(|(name, _)| sentence.contains(name.as_str())).collect();
    let [(name, said)] = named.as_slice() else { return Vec::new() };
    let lower = sentence.to_lowercase();
    let mut out = Vec::new();
    for (phrase, regime) in REGIME_WORDS {
        if lower.contains(phrase) && !said.iter().any(|s| s == regime) && !out.iter().any(|o: &String| o.contains(regime)) {
            out.push(format!("it calls {name} {regime}, but the diagnosis says {}", said.join(", ")));
        }
    }
    out
}

/// The JSON Schema of the answer: one grounded text field.
fn schema(grounding: &Grounding) -> serde_json::Value {
    let shape = crate::grounding::TextShape { sentences: SUMMARY_SENTENCES, words: SUMMARY_WORDS, openings: vec![] };
    json!({
        "type": "object",
        "properties": { "summary": { "type": "string", "pattern": grounding.text_pattern(&shape) } },
        "required": ["summary"],
        "additionalProperties": false
    })
}

/// The user message asking for the summary.
pub fn question(facts: &SummaryFacts) -> Result<String, minijinja::Error> {
    let env = crate::templating::prompt_environment();
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
                // The model's last text first, then each distinct reason.
                let mut all: Vec<String> =
                    outcome.last_refused.map(|a| format!("the model wrote: \"{}\"", a.summary)).into_iter().collect();
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
    fn a_summary_may_not_pin_a_wrong_regime_on_a_kernel() {
        let block = "First, the largest bound on saved time: RMSNormKernel, grid-too-small: fixing it saves at most 12.3 µs (7.93% of the profiled time).\n";
        let facts = SummaryFacts {
            facts: block.into(),
            grounding: Grounding::new(block, "RMSNormKernel"),
            expert: String::new(),
            identifiers: crate::grounding::identifiers("RMSNormKernel"),
            kernel_diagnoses: vec![("RMSNormKernel".into(), vec!["grid-too-small".into()])],
        };
        let wrong = check(&facts, "The RMSNormKernel is memory-bound at small batch sizes, and fixing it saves 12.3 µs.");
        assert!(wrong.iter().any(|r| r.contains("calls RMSNormKernel memory-bound")), "{wrong:?}");
        let right = check(
            &facts,
            "Start with RMSNormKernel, whose grid is too small: fixing it saves at most 12.3 µs, 7.93% of the profiled time.",
        );
        assert!(right.is_empty(), "{right:?}");
        // GEMM dimensions are words.
        assert!(check(&facts, "Give the library a larger M or N, or let it split K.").is_empty());
    }

    #[test]
    fn first_sentence_ends_with_a_period() {
        assert_eq!(first_sentence("Batch more tokens. Then fuse."), "Batch more tokens.");
        assert_eq!(first_sentence("Use CUDA Graphs"), "Use CUDA Graphs.");
    }
}
