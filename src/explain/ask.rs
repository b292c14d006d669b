//! Asking the model about one kernel: the per-kernel JSON Schema (each field's text schema under
//! the prose mode), the prompt, the shared ask loop ([`crate::llm::ask`]) with the structure check,
//! the re-ask of sentences the gate refused (through the same loop), and the question for one
//! checked code edit.

use super::prompt::{self, KernelFacts};
use super::report::*;
use super::{code, decoding, schema, ExplainError, ExplainOptions, ProseMode, RunStats};
use crate::analysis::LaunchAnalysis;
use crate::llm::ask::{ask, Ask, AskOutcome};
use crate::llm::engine::GenerateOptions;
use crate::llm::template::ChatMessage;
use crate::llm::Generate;
use crate::profile::Launch;
use crate::prose::Field;
use crate::rules;
use crate::validate::{self, Context};
use std::time::Instant;

/// One kernel the model is asked about: the engine, the kernel, the options and the counts.
pub struct Asking<'a> {
    pub engine: &'a mut dyn Generate,
    pub launch: &'a Launch,
    pub la: &'a LaunchAnalysis,
    pub group: &'a KernelGroup,
    pub lines: &'a [SourceLine],
    pub opts: &'a ExplainOptions,
    pub stats: &'a mut RunStats,
}

impl<'a> Asking<'a> {
    /// What the model's answers are checked against: the launch's metrics, facts and rule findings.
    pub fn ctx(&self) -> Context<'a> {
        Context { launch: self.launch, facts: &self.la.facts, rules: &self.la.findings }
    }
}

/// The model's answer as the schema shapes it.
#[derive(serde::Deserialize)]
pub struct ModelOutput {
    pub findings: Vec<Finding>,
}

/// The question about one kernel's findings: its facts (with their grounding), schema, decoding
/// and conversation.
pub struct Question {
    pub facts: KernelFacts,
    pub schema: serde_json::Value,
    pub options: GenerateOptions,
    /// The system prompt and the kernel's prompt.
    pub messages: Vec<ChatMessage>,
}

/// What the ask loop accepted and what it refused.
pub struct Answer {
    /// The accepted findings, each marked repaired when it took a re-ask.
    pub accepted: Vec<(Finding, Origin)>,
    pub dropped: Vec<DroppedFinding>,
    /// Sentences re-asked and replaced so far.
    pub counts: ProseCounts,
}

/// The question about the kernel; `None` when the schema admits no finding (nothing the rule
/// layer can support for the model to cite).
pub fn question(asking: &Asking) -> Result<Option<Question>, ExplainError> {
    let ctx = asking.ctx();
    let (la, settings) = (asking.la, &asking.opts.settings);
    let kernel_facts = prompt::kernel_facts(&ctx, la, asking.group, asking.lines);
    let grounding = &kernel_facts.grounding;
    let mut texts = std::collections::BTreeMap::new();
    for r in &la.findings {
        for f in [schema::TextField::Claim, schema::TextField::Explanation, schema::TextField::Suggestion] {
            texts.insert((r.category.as_str(), f as u8), text_schema(&ctx, settings.prose, r.category, f, grounding)?);
        }
    }
    let Some(schema) = schema::findings_schema_with(&ctx, settings.max_findings, |c, f| {
        texts.get(&(c.as_str(), f as u8)).cloned().unwrap_or_else(|| schema::free_text(f))
    }) else {
        return Ok(None);
    };
    let mut gen = decoding();
    gen.max_tokens = schema::token_budget(&schema);
    let system = prompt::system(settings.prose.as_str())?;
    let user = prompt::kernel(&ctx, &kernel_facts, settings.max_findings)?;
    if asking.opts.run.trace {
        eprintln!("--- prompt for {}\n{user}", asking.launch.name);
    }
    let messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
    Ok(Some(Question { facts: kernel_facts, schema, options: gen, messages }))
}

/// The shared ask loop: the findings that pass the structure check are kept; while none does, the
/// model is re-asked (still under the schema) with the validator's reasons. Findings refused
/// beside an accepted one are reported as dropped.
pub fn ask_findings(asking: &mut Asking, q: &Question) -> Result<Answer, ExplainError> {
    let ctx = asking.ctx();
    let trace = asking.opts.run.trace;
    let mut refused_beside: Vec<(Finding, Vec<String>)> = Vec::new();
    let question =
        Ask { messages: q.messages.clone(), schema: &q.schema, options: q.options.clone(), reasks: asking.opts.settings.repair_attempts };
    let outcome = ask(
        &mut *asking.engine,
        question,
        |out: &mut ModelOutput| structure_check(&ctx, out, &mut refused_beside, trace),
        |reasons| prompt::repair(reasons).map_err(ExplainError::from),
    )?;
    Ok(answer_of(outcome, refused_beside, asking.stats))
}

/// Tidies an answer (repeated citations and categories out) and keeps the findings whose whole
/// holds; the refused ones go to `refused_beside` with their reasons. Fails when none is kept.
fn structure_check(
    ctx: &Context,
    out: &mut ModelOutput,
    refused_beside: &mut Vec<(Finding, Vec<String>)>,
    trace: bool,
) -> Result<(), Vec<String>> {
    refused_beside.clear();
    if trace {
        eprintln!("--- answer\n{}", serde_json::to_string_pretty(&out.findings).unwrap_or_default());
    }
    let mut kept: Vec<Finding> = Vec::new();
    let mut reasons_all: Vec<String> = Vec::new();
    for mut f in std::mem::take(&mut out.findings) {
        // The grammar cannot express uniqueness: drop repeated citations and categories.
        let mut seen = std::collections::HashSet::new();
        f.evidence.retain(|c| seen.insert(c.metric.clone()));
        if kept.iter().any(|k| k.category == f.category) {
            continue;
        }
        // Only what the finding holds as a whole decides here; each sentence is judged on
        // its own by the gate, so one wrong sentence costs that sentence, not the finding.
        match validate::validate_structure(ctx, &f) {
            Ok(()) => kept.push(f),
            Err(reasons) => {
                reasons_all.extend(reasons.iter().map(|r| format!("{}: {r}", f.category.as_str())));
                refused_beside.push((f, reasons));
            }
        }
    }
    if kept.is_empty() {
        return Err(if reasons_all.is_empty() { vec!["the answer holds no finding".into()] } else { reasons_all });
    }
    out.findings = kept;
    Ok(())
}

/// The ask loop's outcome as accepted and dropped findings, with the sentences re-asked and replaced.
fn answer_of(outcome: AskOutcome<ModelOutput>, mut refused_beside: Vec<(Finding, Vec<String>)>, stats: &mut RunStats) -> Answer {
    let repaired = outcome.repaired();
    let mut answer = Answer { accepted: Vec::new(), dropped: Vec::new(), counts: ProseCounts::default() };
    let counts = &mut answer.counts;
    match outcome.accepted {
        Some(out) => {
            if repaired {
                stats.llm_findings_repaired += out.findings.len();
                // The first answer's sentences were re-asked; the accepted ones are counted later.
                counts.reasked += out.findings.iter().map(sentence_count).sum::<usize>();
            }
            let origin = if repaired { Origin::LlmRepaired } else { Origin::Llm };
            answer.accepted.extend(out.findings.into_iter().map(|f| (f, origin)));
            for (f, reasons) in refused_beside {
                counts.replaced += sentence_count(&f);
                answer.dropped.push(DroppedFinding { finding: f, reasons });
            }
        }
        None => {
            let reasons: Vec<String> = outcome
                .refusals
                .iter()
                .enumerate()
                .flat_map(|(i, r)| r.iter().map(move |x| if i == 0 { x.clone() } else { format!("after the re-ask: {x}") }))
                .collect();
            let finding = outcome.last_refused.and_then(|o| o.findings.into_iter().next()).or_else(|| refused_beside.pop().map(|f| f.0));
            let n = finding.as_ref().map(sentence_count).unwrap_or(0);
            counts.reasked += n;
            counts.replaced += n;
            answer.dropped.push(DroppedFinding { finding: finding.unwrap_or_else(placeholder), reasons });
        }
    }
    answer
}

/// The re-ask of a finding's sentences the gate refused (`fails`: field, text, reasons), through
/// the shared ask loop with no further re-ask: the model's new finding of the same category, or
/// `None` (no valid answer, or the conversation does not fit the context: the expert text stands).
/// Each new sentence is checked on its own by the gate.
pub fn reask_sentences(
    asking: &mut Asking,
    q: &Question,
    f: &Finding,
    fails: &[(String, String, Vec<String>)],
) -> Result<Option<Finding>, ExplainError> {
    let ctx = asking.ctx();
    let mut messages = q.messages.clone();
    messages.push(ChatMessage::assistant(serde_json::to_string(&serde_json::json!({"findings": [f]})).unwrap_or_default()));
    messages.push(ChatMessage::user(prompt::prose_repair(
        f.category.as_str(),
        &crate::prose::gate().topic_words(&ctx, f.category),
        fails,
    )?));
    // Greedy decoding would give the same words again: the re-ask samples (seeded, so runs repeat).
    let options = GenerateOptions { temperature: 0.7, top_p: 0.9, seed: 11, ..q.options.clone() };
    let outcome = ask(
        &mut *asking.engine,
        Ask { messages, schema: &q.schema, options, reasks: 0 },
        |_: &mut ModelOutput| Ok(()),
        // No re-ask of the re-ask (`reasks: 0`): the loop never words one.
        |_| Ok::<String, ExplainError>(String::new()),
    )?;
    if asking.opts.run.trace {
        let answer = match &outcome.accepted {
            Some(out) => serde_json::to_string(&out.findings).unwrap_or_default(),
            None => outcome.refusals.concat().join("; "),
        };
        eprintln!("--- re-asked sentences: {fails:?}\n--- answer\n{answer}");
    }
    Ok(outcome.accepted.and_then(|o| o.findings.into_iter().find(|n| n.category == f.category)))
}

/// Asks for the one checked edit of the first shown finding that can be fixed in the kernel's code.
pub fn ask_for_edit(asking: &mut Asking, found: &CachedFindings, located: &code::Located) -> Result<CodeSection, ExplainError> {
    let categories: Vec<rules::Category> = found.findings.iter().map(|f| f.finding.category).collect();
    let Some(shown) = code::edit_target(&categories).map(|i| &found.findings[i]) else {
        return Ok(CodeSection { kernel: Some(located.reference()), no_edit: Some("no finding to fix".into()), ..Default::default() });
    };
    let category = shown.finding.category;
    let ctx = asking.ctx();
    let facts = prompt::kernel_facts(&ctx, asking.la, asking.group, asking.lines);
    // The explanation's sense against the profile: the validator's checks and the prose gate's.
    let check_sense = |text: &str, grounding: &crate::grounding::Grounding| {
        let mut reasons = validate::sentence_errors(&ctx, grounding, category, "explanation", text);
        for r in crate::prose::gate().check_field_with(&ctx, category, Field::Explanation, text, &[], &grounding.fact_words) {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        reasons
    };
    let hot: Vec<code::HotLine> = asking
        .lines
        .iter()
        .map(|l| code::HotLine { file: l.file.clone(), line: l.line, share_pct: l.share_pct, counter: l.counter.clone() })
        .collect();
    let started = Instant::now();
    let question = code::EditQuestion {
        finding: code::EditTarget { category, claim: &shown.finding.claim, explanation: &shown.finding.explanation },
        grounding: &facts.grounding,
        links: prompt::cause_and_effect(&ctx, &facts.grounding, category),
        check_sense: &check_sense,
        located,
        hot: &hot,
        reasks: asking.opts.settings.repair_attempts,
        decoding: decoding(),
        trace: asking.opts.run.trace,
    };
    let section = code::propose_edit(&mut *asking.engine, question)?;
    asking.stats.edit_s += started.elapsed().as_secs_f64();
    asking.stats.edits_shown += usize::from(section.edit.is_some());
    Ok(section)
}

/// The sentences of a finding: its claim, its explanation and each suggestion.
pub fn sentence_count(f: &Finding) -> usize {
    2 + f.suggestions.len()
}

/// The finding a dropped answer stands for when the model gave none that parsed.
fn placeholder() -> Finding {
    Finding {
        category: rules::Category::LatencyBound,
        severity: rules::Severity::Info,
        claim: String::new(),
        evidence: vec![],
        explanation: String::new(),
        suggestions: vec![],
    }
}

/// Per category, the text schema of each field under `mode`: free sentences, guided openings, or
/// the expert causes and fixes the facts support.
fn text_schema(
    ctx: &Context,
    mode: ProseMode,
    c: rules::Category,
    field: schema::TextField,
    grounding: &crate::grounding::Grounding,
) -> Result<serde_json::Value, ExplainError> {
    use schema::TextField::*;
    let Some(r) = ctx.rules.iter().find(|r| r.category == c) else {
        return Ok(schema::grounded_text(field, grounding));
    };
    Ok(match (mode, field) {
        // A suggestion opens with what to do: the grammar offers only the gate's verbs.
        (ProseMode::Free, Suggestion) => {
            let mut shape = schema::grounded_shape(Suggestion);
            shape.openings = crate::prose::gate().suggestion_verbs();
            schema::grounded_text_shaped(&shape, grounding)
        }
        (ProseMode::Free, f) => schema::grounded_text(f, grounding),
        (_, Claim) => schema::opening_text(&opening(&r.claim, 3), 3, 12),
        (ProseMode::Guided, Explanation) => schema::opening_text(&opening(&r.explanation, 3), 4, 18),
        (ProseMode::Guided, Suggestion) => schema::opening_text(&opening(&r.suggestion, 3), 3, 12),
        (ProseMode::Choose, Explanation) => {
            // Causes: the category's expert explanation, and what the launch's own top stall reasons mean.
            let mut causes = sentences(&r.explanation);
            for st in &ctx.facts.stalls {
                causes.push(prompt::stall_cause(&st.reason, rules::text::stall_hint(&st.reason))?);
            }
            causes.retain(|s| validate::text_numbers_known(ctx, s));
            if causes.is_empty() {
                return Ok(schema::opening_text(&opening(&r.explanation, 3), 4, 18));
            }
            schema::choice_text(&causes)
        }
        (ProseMode::Choose, Suggestion) => {
            let mut fixes = sentences(&r.suggestion);
            fixes.retain(|s| validate::text_numbers_known(ctx, s));
            if fixes.is_empty() {
                return Ok(schema::opening_text(&opening(&r.suggestion, 3), 3, 12));
            }
            schema::choice_text(&fixes)
        }
    })
}

/// The first words of an expert sentence up to its first number or punctuation (at most `max`),
/// for `guided` sentences; empty when the sentence opens with a number.
pub fn opening(text: &str, max: usize) -> String {
    let mut out = Vec::new();
    for w in text.split_whitespace().take(max) {
        let letters = w.trim_end_matches([',', ';', ':', '.']);
        if letters.is_empty() || !letters.chars().all(|c| c.is_ascii_alphabetic()) {
            break;
        }
        out.push(letters);
        if letters.len() != w.len() {
            break;
        }
    }
    out.join(" ")
}

/// The sentences of an expert text (split after ". " and "; "), each ending with a period.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        let end = matches!(c, '.' | ';') && chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        if end {
            let t = cur.trim().trim_end_matches(';').to_string();
            if t.split_whitespace().count() >= 3 {
                let mut t = t;
                if !t.ends_with('.') {
                    t.push('.');
                }
                let mut cs = t.chars();
                if let Some(f) = cs.next() {
                    t = f.to_uppercase().chain(cs).collect();
                }
                out.push(t);
            }
            cur.clear();
        }
    }
    if cur.split_whitespace().count() >= 3 {
        out.push(format!("{}.", cur.trim()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings_stop_at_numbers_and_punctuation() {
        assert_eq!(opening("Global loads are uncoalesced: 4 of 32 bytes.", 3), "Global loads are");
        assert_eq!(opening("Memory-bound: DRAM is at 64.5% of peak.", 3), "");
        assert_eq!(opening("The grid has 96 blocks for 132 SMs.", 3), "The grid has");
        assert_eq!(opening("Make consecutive, aligned accesses.", 3), "Make consecutive");
        assert_eq!(opening("12.5% of branch targets diverge.", 3), "");
    }

    #[test]
    fn expert_text_splits_into_sentences() {
        let s =
            sentences("The memory system moves whole 32-byte sectors; most of them carry no useful bytes. That traffic competes for DRAM.");
        assert_eq!(
            s,
            vec![
                "The memory system moves whole 32-byte sectors.".to_string(),
                "Most of them carry no useful bytes.".to_string(),
                "That traffic competes for DRAM.".to_string()
            ]
        );
        // A decimal point is not a sentence end.
        assert_eq!(sentences("Warps use 12.5 of 32 lanes on average.").len(), 1);
    }
}
