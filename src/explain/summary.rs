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
pub struct SummaryAnswer {
    pub summary: String,
}

/// The facts block a summary is written from (a profile's, or a set's: [`super::set_summary`]), the
/// grounding it allows, the expert summary, and what each named kernel or member may be called.
pub struct SummaryFacts {
    pub facts: String,
    pub grounding: Grounding,
    pub expert: String,
    /// The kernels' identifiers (for the word check).
    identifiers: Vec<String>,
    /// Each kernel's short name (or set member's value) and the claims its facts give it: regimes
    /// and categories ([`REGIME_WORDS`]' claims), and for set members their bounding unit.
    kernel_diagnoses: Vec<(String, Vec<String>)>,
    /// Phrases that claim a regime or a bound, each with the claim it makes.
    claim_phrases: Vec<(String, String)>,
    /// A claim in a sentence that names no kernel must be one some kernel has ("every member is
    /// compute-bound" where none is): checked for sets, whose members are all in the block.
    unnamed_claims_held: bool,
    /// Words that belong to one name ("fastest", "v7_alter"): the name nearest to the word must be it.
    superlatives: Vec<(String, String)>,
    /// Pairs of names whose line lists the facts that changed between them (a version step, the
    /// fastest against the slowest), with those facts' labels: a sentence naming just the pair may
    /// name no other pair's facts.
    pair_facts: Vec<([String; 2], Vec<String>)>,
}

impl SummaryFacts {
    /// Facts for a summary written from `facts`, whose words and identifiers are those of `names`
    /// and `facts`; `diagnoses` are each name's claims, `claim_phrases` the phrases that make one.
    pub fn new(
        facts: String,
        names: &str,
        expert: String,
        diagnoses: Vec<(String, Vec<String>)>,
        claim_phrases: Vec<(String, String)>,
    ) -> Self {
        let identifiers = crate::grounding::identifiers(&format!("{names} {facts}"));
        let grounding = Grounding::new(&facts, &format!("{names} {facts}"));
        SummaryFacts {
            facts,
            grounding,
            expert: expert.trim().to_string(),
            identifiers,
            kernel_diagnoses: diagnoses,
            claim_phrases,
            unnamed_claims_held: false,
            superlatives: Vec::new(),
            pair_facts: Vec::new(),
        }
    }

    /// The same, where a sentence naming just one of `pair_facts`' pairs may name only its facts.
    pub fn with_pair_facts(self, pair_facts: Vec<([String; 2], Vec<String>)>) -> Self {
        SummaryFacts { pair_facts, ..self }
    }

    /// The same, where each of `superlatives` ("fastest", and the name it belongs to) may only be
    /// written nearest to its own name.
    pub fn with_superlatives(self, superlatives: Vec<(String, String)>) -> Self {
        SummaryFacts { superlatives, ..self }
    }

    /// The same, where a claim no named kernel carries must be one some kernel has.
    pub fn with_unnamed_claims_held(self) -> Self {
        SummaryFacts { unnamed_claims_held: true, ..self }
    }
}

/// The phrases of [`REGIME_WORDS`], each with its claim.
pub fn regime_phrases() -> Vec<(String, String)> {
    REGIME_WORDS.iter().map(|(phrase, claim)| (phrase.to_string(), claim.to_string())).collect()
}

/// Regime words a summary may only pin on a kernel the diagnosis gives them to.
const REGIME_WORDS: &[(&str, &str)] = &[
    ("grid-bound", "grid-bound"),
    ("grid bound", "grid-bound"),
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
    // Identifiers anywhere in the block (kernels named by the profile-level findings too).
    SummaryFacts::new(out, &names, expert, kernel_diagnoses(report), regime_phrases())
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
        reasons.extend(wrong_superlatives(facts, sentence));
        reasons.extend(wrong_pair_facts(facts, sentence));
    }
    reasons
}

/// Claims pinned on a kernel its facts do not give it ("RMSNormKernel is memory-bound" where it is
/// grid-too-small): in a sentence that names one kernel, or in each clause of a sentence that names
/// several. A claim written as the state before a change ("from memory-bound to grid-bound at
/// v1_alter_1") is not pinned on the kernel named. With [`SummaryFacts::unnamed_claims_held`], a
/// claim not pinned on a kernel must be one some kernel has.
fn wrong_regimes(facts: &SummaryFacts, sentence: &str) -> Vec<String> {
    let named =
        |text: &str| -> Vec<&(String, Vec<String>)> { facts.kernel_diagnoses.iter().filter(|(name, _)| has_phrase(text, name)).collect() };
    let mut out = Vec::new();
    let mut unpinned: Vec<String> = Vec::new();
    let parts = match named(sentence).len() {
        0 => vec![],
        1 => vec![sentence],
        _ => crate::grounding::clauses(sentence),
    };
    for part in &parts {
        let [(name, said)] = named(part).as_slice() else { continue };
        let (pinned, before) = claims_in(facts, part);
        unpinned.extend(before);
        for claim in pinned {
            let reason = format!("it calls {name} {claim}, but its facts say {}", said.join(", "));
            if !said.contains(&claim) && !out.contains(&reason) {
                out.push(reason);
            }
        }
    }
    if parts.is_empty() {
        let (pinned, before) = claims_in(facts, sentence);
        unpinned.extend(pinned.into_iter().chain(before));
    }
    for claim in unpinned {
        let reason = format!("it says {claim}, but the facts call nothing {claim}");
        if facts.unnamed_claims_held && !facts.kernel_diagnoses.iter().any(|(_, said)| said.contains(&claim)) && !out.contains(&reason) {
            out.push(reason);
        }
    }
    out
}

/// Superlatives written nearest to a name they do not belong to ("the fastest member, v9_alter"
/// where v7_alter is the fastest).
fn wrong_superlatives(facts: &SummaryFacts, sentence: &str) -> Vec<String> {
    let lower = sentence.to_lowercase();
    let mut out = Vec::new();
    for (word, owner) in &facts.superlatives {
        for at in phrase_positions(&lower, word) {
            let word_end = at + word.len();
            let nearest = facts
                .kernel_diagnoses
                .iter()
                .flat_map(|(name, _)| {
                    phrase_positions(&lower, &name.to_lowercase()).into_iter().map(move |start| {
                        let end = start + name.len();
                        (name, if end <= at { at - end } else { start.saturating_sub(word_end) })
                    })
                })
                .min_by_key(|(_, gap)| *gap);
            let reason = match nearest {
                Some((name, _)) if name != owner => format!("it calls {name} the {word}, but the {word} is {owner}"),
                _ => continue,
            };
            if !out.contains(&reason) {
                out.push(reason);
            }
        }
    }
    out
}

/// Facts a sentence says changed between two names that their line does not list ("the step from
/// v1_alter_1 to v7_alter changed the L2 cache throughput" where another step did).
fn wrong_pair_facts(facts: &SummaryFacts, sentence: &str) -> Vec<String> {
    let named: Vec<&String> = facts.kernel_diagnoses.iter().map(|(name, _)| name).filter(|name| has_phrase(sentence, name)).collect();
    let [first, second] = named.as_slice() else { return Vec::new() };
    let is_pair = |pair: &[String; 2]| (&pair[0] == *first && &pair[1] == *second) || (&pair[0] == *second && &pair[1] == *first);
    let own: Vec<&String> = facts.pair_facts.iter().filter(|(pair, _)| is_pair(pair)).flat_map(|(_, labels)| labels).collect();
    if own.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for label in facts.pair_facts.iter().flat_map(|(_, labels)| labels) {
        let short: String =
            label.split(['(', ')']).step_by(2).collect::<Vec<_>>().join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
        let reason = format!("it says the {label} changed between {first} and {second}, but their line names only {}", join(&own));
        if !own.contains(&label) && (has_phrase(sentence, label) || has_phrase(sentence, &short)) && !out.contains(&reason) {
            out.push(reason);
        }
    }
    out
}

/// Labels joined for a reason: "a, b and c".
fn join(labels: &[&String]) -> String {
    match labels.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", ")),
        None => String::new(),
    }
}

/// The claims `text` makes with the phrases of `facts`, each once: those it pins on what it names,
/// and those it gives only as the state before a change ("from memory-bound").
fn claims_in(facts: &SummaryFacts, text: &str) -> (Vec<String>, Vec<String>) {
    let lower = text.to_lowercase();
    let (mut pinned, mut before): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for (phrase, claim) in &facts.claim_phrases {
        for at in phrase_positions(&lower, &phrase.to_lowercase()) {
            let earlier = lower[..at].trim_end().strip_suffix("the").unwrap_or(lower[..at].trim_end()).trim_end().ends_with("from");
            let list = if earlier { &mut before } else { &mut pinned };
            if !list.contains(claim) {
                list.push(claim.clone());
            }
        }
    }
    before.retain(|claim| !pinned.contains(claim));
    (pinned, before)
}

/// Where `phrase` (lower case) starts in `text` (lower case) as whole words: not inside an
/// identifier ("v1_alter" is not in "v1_alter_1").
fn phrase_positions(text: &str, phrase: &str) -> Vec<usize> {
    let inner = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(phrase)
        .map(|(at, _)| at)
        .filter(|&at| !text[..at].chars().next_back().is_some_and(inner) && !text[at + phrase.len()..].chars().next().is_some_and(inner))
        .collect()
}

/// Whether `text` holds `phrase` (case-insensitive) as whole words.
fn has_phrase(text: &str, phrase: &str) -> bool {
    !phrase_positions(&text.to_lowercase(), &phrase.to_lowercase()).is_empty()
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

/// Asks the model for the profile summary (one re-ask with the reasons), else the expert summary.
pub fn summarize(engine: &mut Engine, facts: &SummaryFacts, system: String, reasks: usize) -> Result<ProfileSummary, super::ExplainError> {
    ask_summary(engine, facts, question(facts)?, system, reasks)
}

/// Asks the model `question` about `facts` under their grounded grammar and checks the answer
/// ([`check`]; one re-ask with the reasons), else the expert summary stands, marked as the expert's.
pub fn ask_summary(
    engine: &mut Engine,
    facts: &SummaryFacts,
    question: String,
    system: String,
    reasks: usize,
) -> Result<ProfileSummary, super::ExplainError> {
    let schema = schema(&facts.grounding);
    let mut options = super::decoding();
    options.max_tokens = 60 * SUMMARY_SENTENCES.end() + 16;
    let messages = vec![ChatMessage::system(system), ChatMessage::user(question)];
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
    Ok(standing(facts, outcome))
}

/// What stands after the ask: the model's accepted text, else the expert summary, marked as the
/// expert's, with the model's last text and each distinct reason it was refused.
pub fn standing(facts: &SummaryFacts, outcome: crate::llm::ask::AskOutcome<SummaryAnswer>) -> ProfileSummary {
    let repaired = outcome.repaired();
    match outcome.accepted {
        Some(answer) => ProfileSummary { text: answer.summary, writer: Writer::Model, repaired, refused: Vec::new() },
        None => {
            let mut refused: Vec<String> =
                outcome.last_refused.map(|a| format!("the model wrote: \"{}\"", a.summary)).into_iter().collect();
            for reason in outcome.refusals.into_iter().flatten() {
                if !refused.contains(&reason) {
                    refused.push(reason);
                }
            }
            ProfileSummary { text: facts.expert.clone(), writer: Writer::Expert, repaired: false, refused }
        }
    }
}

/// The cache key of a summary written from `facts` (the profile's or a set's): the facts block,
/// the model, the prompts (`template`, the summary's own, and the shared ones) and the decoding,
/// tagged with what kind of summary it is (`"summary-v1"`, `"set-summary-v1"`).
pub fn cache_key(
    facts: &SummaryFacts,
    kind: &str,
    template: &str,
    model_sha256: &str,
    opts: &super::ExplainOptions,
) -> crate::cache::CacheKey {
    let decoding_json = serde_json::to_string(&(super::decoding(), kind, opts.settings.prose)).expect("options serialise");
    let templates = format!("{}\0{}", prompt::templates_sha256(), crate::cache::sha256_hex(template.as_bytes()));
    crate::cache::CacheKey::new(&crate::cache::KeyParts {
        facts_json: &facts.facts,
        model_sha256,
        prompt_templates_sha256: &templates,
        decoding_json: &decoding_json,
        keet_version: env!("CARGO_PKG_VERSION"),
    })
}

/// The summary the cache holds under `key` (none with `--refresh`, or without a cache).
pub fn cached(
    cache: Option<&crate::cache::Cache>,
    key: &crate::cache::CacheKey,
    opts: &super::ExplainOptions,
) -> Result<Option<ProfileSummary>, super::ExplainError> {
    let (Some(c), false) = (cache, opts.run.refresh) else { return Ok(None) };
    Ok(c.get(key)?.and_then(|e| serde_json::from_str::<ProfileSummary>(&e.findings_json).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_may_not_pin_a_wrong_regime_on_a_kernel() {
        let block = "First, the largest bound on saved time: RMSNormKernel, grid-too-small: fixing it saves at most 12.3 µs (7.93% of the profiled time).\n";
        let diagnoses = vec![("RMSNormKernel".into(), vec!["grid-too-small".into()])];
        let facts = SummaryFacts::new(block.into(), "RMSNormKernel", String::new(), diagnoses, regime_phrases());
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
