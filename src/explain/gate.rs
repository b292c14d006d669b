//! The per-sentence checks of one kernel's accepted findings: every sentence on its own through
//! the validator (numbers, comparisons, regime words) and the [`crate::prose`] gate (sense); a
//! paragraph's failing tail cut or its restating sentences left out; one re-ask
//! ([`super::ask::reask_sentences`]) for what still fails, then the expert text. It records who
//! wrote each sentence and what it does, audits what a reader will see, and lets the rule layer
//! fill every gap.

use super::ask::{self, sentences, Answer, Asking, Question};
use super::report::*;
use super::rule_answer::{from_rule, shown_llm, verdict};
use super::{prompt, ExplainError, ProseMode, RunStats};
use crate::analysis::LaunchAnalysis;
use crate::grounding::Grounding;
use crate::profile::Launch;
use crate::prose::Field;
use crate::rules;
use crate::validate::{self, Context};

/// What one kernel's sentences are checked against, and who writes them under the prose mode.
struct KernelGate<'a> {
    ctx: Context<'a>,
    launch: &'a Launch,
    la: &'a LaunchAnalysis,
    lines: &'a [SourceLine],
    grounding: &'a Grounding,
    gate: &'static crate::prose::Gate,
    /// The identifiers of the kernel's source, for the kinds of sentences.
    code_words: Vec<String>,
    mode: ProseMode,
}

/// The kernel's findings through the gate so far.
struct Gated {
    shown: Vec<ShownFinding>,
    replaced: Vec<ReplacedSentence>,
    /// The sentences of the findings before (a sentence must not repeat one).
    earlier: Vec<String>,
    counts: ProseCounts,
}

/// Puts every sentence of the accepted findings through the gate (one re-ask, then the expert
/// text), audits what is shown, and fills the gaps with the rule layer's findings, most important
/// first.
pub fn gate_findings(asking: &mut Asking, q: &Question, answer: Answer) -> Result<CachedFindings, ExplainError> {
    let Answer { accepted, dropped, counts } = answer;
    let launch = asking.launch;
    let rows: Vec<(Option<u64>, &str)> = launch.source.iter().flat_map(|s| s.rows.iter().map(|r| (r.line, r.text.as_str()))).collect();
    let kernel = KernelGate {
        ctx: asking.ctx(),
        launch,
        la: asking.la,
        lines: asking.lines,
        grounding: &q.facts.grounding,
        gate: crate::prose::gate(),
        code_words: crate::mechanism::code_words(&rows),
        mode: asking.opts.settings.prose,
    };
    let mut gated = Gated { shown: Vec::new(), replaced: Vec::new(), earlier: Vec::new(), counts };
    for (f, origin) in accepted {
        kernel.finding(asking, q, &mut gated, f, origin)?;
    }
    let Gated { mut shown, replaced, counts, .. } = gated;
    asking.stats.llm_findings_shown += shown.iter().filter(|s| s.origin != Origin::Rules).count();
    asking.stats.llm_findings_dropped += dropped.len();
    kernel.audit(&shown, asking.stats);
    asking.stats.prose.add(&counts);
    let la = kernel.la;
    // The rule layer fills every gap the model left, marked as such.
    for r in &la.findings {
        if !shown.iter().any(|s| s.finding.category == r.category) {
            shown.push(from_rule(la, launch, r, kernel.lines));
        }
    }
    // Most important first: the rule layer's order of categories.
    let order = |c: rules::Category| la.findings.iter().position(|r| r.category == c).unwrap_or(usize::MAX);
    shown.sort_by_key(|s| order(s.finding.category));
    Ok(CachedFindings { verdict: verdict(la), findings: shown, dropped, prose: counts, replaced, code: None })
}

/// The fields of a finding in order: claim, explanation, each suggestion.
fn fields_of(f: &Finding) -> impl Iterator<Item = Field> {
    std::iter::once(Field::Claim).chain(std::iter::once(Field::Explanation)).chain((0..f.suggestions.len()).map(Field::Suggestion))
}

impl KernelGate<'_> {
    /// One accepted finding through the gate, into `gated`.
    fn finding(
        &self,
        asking: &mut Asking,
        q: &Question,
        gated: &mut Gated,
        mut f: Finding,
        mut origin: Origin,
    ) -> Result<(), ExplainError> {
        let Some(expert) = expert_for(self.la, f.category) else { return Ok(()) };
        let fails = self.failing_fields(&mut f, gated);
        let mut writers: Vec<(Field, Writer)> = fields_of(&f).map(|fl| (fl, self.chosen_writer(fl))).collect();
        if !fails.is_empty() {
            gated.counts.reasked += fails.len();
            origin = Origin::LlmRepaired;
            let fail_list: Vec<(String, String, Vec<String>)> =
                fails.iter().map(|(fl, r)| (fl.label(), field_text(&f, *fl).unwrap_or_default().to_string(), r.clone())).collect();
            let again = ask::reask_sentences(asking, q, &f, &fail_list)?;
            for (field, reasons) in &fails {
                self.reasked_field(gated, &mut f, (*field, reasons), again.as_ref(), expert, &mut writers);
            }
        }
        self.mark_copies(&f, &mut writers);
        let text_origin = self.text_origin(&mut f, &writers);
        let model_sentences =
            [text_origin.claim, text_origin.explanation].iter().chain(&text_origin.suggestions).filter(|w| **w != Writer::Expert).count();
        gated.counts.shown += model_sentences;
        gated.earlier.push(f.claim.clone());
        gated.earlier.push(f.explanation.clone());
        gated.earlier.extend(f.suggestions.iter().cloned());
        // Every sentence replaced: the rule finding as it is, with its own evidence.
        if model_sentences == 0 {
            if let Some(r) = self.la.findings.iter().find(|r| r.category == f.category) {
                gated.shown.push(from_rule(self.la, self.launch, r, self.lines));
                return Ok(());
            }
            origin = Origin::Rules;
        }
        let mut s = shown_llm(self.la, f, origin, self.lines);
        s.text_origin = Some(text_origin);
        gated.shown.push(s);
        Ok(())
    }

    /// Who writes a field under the prose mode: the model, or the model choosing expert sentences.
    fn chosen_writer(&self, field: Field) -> Writer {
        match (self.mode, field) {
            (ProseMode::Choose, Field::Explanation | Field::Suggestion(_)) => Writer::ModelChosen,
            _ => Writer::Model,
        }
    }

    /// The gate's checks of sense and the validator's checks of each sentence's numbers,
    /// comparisons and regime words, one list of reasons per field.
    fn sentence_check(&self, f: &Finding, field: Field, text: &str, others: &[&str]) -> Vec<String> {
        let (ctx, grounding) = (&self.ctx, self.grounding);
        let mut reasons = validate::sentence_errors(ctx, grounding, f.category, field.kind(), text);
        if field == Field::Explanation && crate::mechanism::only_restates(text) {
            reasons.push(restates_reason(ctx, grounding, f.category));
        }
        for r in self.gate.check_field_with(ctx, f.category, field, text, others, &grounding.fact_words) {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        reasons
    }

    /// Each field checked against the sentences before it: the fields that fail, with their
    /// reasons. An explanation is tidied first ([`KernelGate::tidy_explanation`]).
    fn failing_fields(&self, f: &mut Finding, gated: &mut Gated) -> Vec<(Field, Vec<String>)> {
        let mut seen: Vec<String> = gated.earlier.clone();
        let mut out = Vec::new();
        let fields: Vec<Field> = fields_of(f).collect();
        for field in fields {
            let mut text = field_text(f, field).unwrap_or_default().to_string();
            let others: Vec<&str> = seen.iter().map(String::as_str).collect();
            let mut reasons = self.sentence_check(f, field, &text, &others);
            if field == Field::Explanation {
                self.tidy_explanation(f, (&mut text, &mut reasons), &others, &mut gated.replaced);
            }
            if !reasons.is_empty() {
                out.push((field, reasons));
            }
            seen.push(text);
        }
        out
    }

    /// An explanation paragraph whose first sentences pass keeps them: the sentences from the
    /// first failing one on are cut (and listed with their reasons), not re-asked. Sentences that
    /// only restate a facts line are left out when the paragraph has others.
    fn tidy_explanation(
        &self,
        f: &mut Finding,
        (text, reasons): (&mut String, &mut Vec<String>),
        others: &[&str],
        replaced: &mut Vec<ReplacedSentence>,
    ) {
        let field = Field::Explanation;
        if !reasons.is_empty() {
            if let Some((kept, cut)) = passing_prefix(text, |t| self.sentence_check(f, field, t, others).is_empty()) {
                replaced.push(ReplacedSentence {
                    category: f.category,
                    field: "explanation (sentences cut)".into(),
                    texts: vec![cut],
                    reasons: std::mem::take(reasons),
                });
                *text = kept;
                set_field(f, field, text.clone());
            }
        }
        // What is left must pass the gate on its own (a sentence cut from its number ends
        // mid-sentence: "... would save at most.").
        if reasons.is_empty() {
            if let Some((kept, restating)) =
                crate::mechanism::without_restating(text).filter(|(kept, _)| self.sentence_check(f, field, kept, others).is_empty())
            {
                replaced.push(ReplacedSentence {
                    category: f.category,
                    field: "explanation (sentences left out)".into(),
                    texts: vec![restating],
                    reasons: vec!["it only restates the facts".into()],
                });
                *text = kept;
                set_field(f, field, text.clone());
            }
        }
    }

    /// One re-asked field: the model's new sentence when it passes on its own, else the expert
    /// text (the old and new sentences listed with their reasons).
    fn reasked_field(
        &self,
        gated: &mut Gated,
        f: &mut Finding,
        (field, reasons): (Field, &Vec<String>),
        again: Option<&Finding>,
        expert: &rules::Finding,
        writers: &mut [(Field, Writer)],
    ) {
        let old = field_text(f, field).unwrap_or_default().to_string();
        let new = again.and_then(|a| match field {
            Field::Suggestion(i) => a.suggestions.get(i).or(a.suggestions.first()).cloned(),
            other => field_text(a, other).map(String::from),
        });
        // The other sentences of this finding and the kernel's earlier ones: no repeats.
        let others: Vec<String> = gated
            .earlier
            .iter()
            .cloned()
            .chain(fields_of(f).filter(|fl| *fl != field).filter_map(|fl| field_text(f, fl).map(String::from)))
            .collect();
        let others_ref: Vec<&str> = others.iter().map(String::as_str).collect();
        let new_reasons = new.as_ref().map(|n| self.sentence_check(f, field, n, &others_ref));
        match (new, new_reasons) {
            (Some(n), Some(r)) if r.is_empty() => set_field(f, field, n),
            (n, r) => {
                gated.counts.replaced += 1;
                let mut texts = vec![old];
                let mut all = reasons.clone();
                if let (Some(n), Some(r)) = (n, r) {
                    texts.push(n);
                    all.extend(r.into_iter().map(|x| format!("re-asked: {x}")));
                } else {
                    all.push("re-asked: no valid answer".into());
                }
                gated.replaced.push(ReplacedSentence { category: f.category, field: field.label(), texts, reasons: all });
                let text = match field {
                    Field::Claim => expert.claim.clone(),
                    Field::Explanation => expert.explanation.clone(),
                    Field::Suggestion(_) => expert.suggestion.clone(),
                };
                set_field(f, field, text);
                if let Some(w) = writers.iter_mut().find(|w| w.0 == field) {
                    w.1 = Writer::Expert;
                }
            }
        }
    }

    /// A sentence that copies the expert text the prompt showed (the verdict, the fix) is the
    /// expert's words chosen by the model, not the model's own: marked and counted as such.
    fn mark_copies(&self, f: &Finding, writers: &mut [(Field, Writer)]) {
        let la = self.la;
        // The cause-and-effect lines the prompt showed are keet's words too.
        let expert_texts: Vec<String> = la
            .findings
            .iter()
            .flat_map(|r| [r.claim.clone(), r.suggestion.clone()].into_iter().chain(sentences(&r.explanation)))
            .chain(la.findings.iter().flat_map(|r| prompt::cause_and_effect(&self.ctx, self.grounding, r.category)))
            .collect();
        let expert_refs: Vec<&str> = expert_texts.iter().map(String::as_str).collect();
        for (field, writer) in writers.iter_mut() {
            if *writer == Writer::Model && field_text(f, *field).is_some_and(|t| crate::prose::copies_any(t, &expert_refs)) {
                *writer = Writer::ModelChosen;
            }
        }
    }

    /// Who wrote each sentence and what it does; the expert suggestion once, not as several
    /// replaced suggestions.
    fn text_origin(&self, f: &mut Finding, writers: &[(Field, Writer)]) -> TextOrigin {
        let mut keep = Vec::new();
        let mut sug_writers = Vec::new();
        for (i, s) in f.suggestions.iter().enumerate() {
            let w = writers.iter().find(|w| w.0 == Field::Suggestion(i)).map(|w| w.1).unwrap_or(Writer::Expert);
            if !keep.contains(s) {
                keep.push(s.clone());
                sug_writers.push(w);
            }
        }
        f.suggestions = keep;
        let writer_of = |fl: Field| writers.iter().find(|w| w.0 == fl).map(|w| w.1).unwrap_or(Writer::Expert);
        let mut text_origin = TextOrigin {
            claim: writer_of(Field::Claim),
            explanation: writer_of(Field::Explanation),
            suggestions: sug_writers,
            kinds: Vec::new(),
        };
        text_origin.kinds = kinds_of_sentences(f, &text_origin, &self.code_words);
        text_origin
    }

    /// Audits what a reader will see: every model sentence shown, checked again on its own.
    fn audit(&self, shown: &[ShownFinding], stats: &mut RunStats) {
        for s in shown {
            let Some(to) = &s.text_origin else { continue };
            let f = &s.finding;
            let fields = [(Field::Claim, &f.claim, to.claim), (Field::Explanation, &f.explanation, to.explanation)]
                .into_iter()
                .chain(f.suggestions.iter().zip(&to.suggestions).enumerate().map(|(i, (t, w))| (Field::Suggestion(i), t, *w)));
            for (field, text, writer) in fields {
                if writer == Writer::Expert {
                    continue;
                }
                stats.shown_ungrounded += usize::from(!self.grounding.ungrounded(text).is_empty());
                stats.shown_gate_flagged += usize::from(
                    !self.gate.check_field_with(&self.ctx, f.category, field, text, &[], &self.grounding.fact_words).is_empty()
                        || !validate::sentence_errors(&self.ctx, self.grounding, f.category, field.kind(), text).is_empty(),
                );
            }
        }
    }
}

/// The text of a field of `f` (`None`: no such suggestion).
fn field_text(f: &Finding, field: Field) -> Option<&str> {
    match field {
        Field::Claim => Some(&f.claim),
        Field::Explanation => Some(&f.explanation),
        Field::Suggestion(i) => f.suggestions.get(i).map(String::as_str),
    }
}

/// Replaces the text of a field of `f`.
fn set_field(f: &mut Finding, field: Field, text: String) {
    match field {
        Field::Claim => f.claim = text,
        Field::Explanation => f.explanation = text,
        Field::Suggestion(i) => {
            if let Some(s) = f.suggestions.get_mut(i) {
                *s = text;
            }
        }
    }
}

/// The rule layer's finding for a category (its expert text replaces failing sentences).
fn expert_for(la: &LaunchAnalysis, c: rules::Category) -> Option<&rules::Finding> {
    la.findings.iter().find(|r| r.category == c)
}

/// The longest run of whole sentences from the start of `paragraph` that passes `passes`, and the
/// sentences after it; `None` when the first sentence already fails or nothing is cut.
fn passing_prefix(paragraph: &str, passes: impl Fn(&str) -> bool) -> Option<(String, String)> {
    let parts: Vec<&str> = paragraph.split_inclusive(". ").map(str::trim).filter(|p| !p.is_empty()).collect();
    (1..parts.len()).rev().find_map(|n| {
        let kept = parts[..n].join(" ");
        passes(&kept).then(|| (kept, parts[n..].join(" ")))
    })
}

/// The re-ask reason for an explanation that only restates facts: what it should join instead.
fn restates_reason(ctx: &Context, grounding: &crate::grounding::Grounding, category: rules::Category) -> String {
    let hints = prompt::cause_and_effect(ctx, grounding, category);
    let example = hints.first().map(|h| format!(", as in: {h}")).unwrap_or_default();
    format!("it only restates the facts, which the engineer already sees; say what causes what in this kernel{example}")
}

/// What each sentence the model wrote or chose does, in report order.
fn kinds_of_sentences(f: &Finding, origin: &TextOrigin, code_words: &[String]) -> Vec<KindOfSentence> {
    let mut fields: Vec<(String, &str, Writer)> =
        vec![("claim".into(), f.claim.as_str(), origin.claim), ("explanation".into(), f.explanation.as_str(), origin.explanation)];
    fields.extend(
        f.suggestions.iter().zip(&origin.suggestions).enumerate().map(|(i, (t, w))| (format!("suggestion {}", i + 1), t.as_str(), *w)),
    );
    let mut out = Vec::new();
    for (field, text, writer) in fields {
        if writer == Writer::Expert {
            continue;
        }
        for s in text.split_inclusive(". ").map(str::trim).filter(|s| !s.is_empty()) {
            let kind = crate::mechanism::classify(s, code_words);
            out.push(KindOfSentence { field: field.clone(), text: s.to_string(), kind, writer });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paragraph_keeps_its_passing_first_sentences() {
        let paragraph = "The DRAM is the bottleneck, at 64.5% of peak. The SM adds to the time at 8.99%. So it is slow.";
        let no_sm = |t: &str| !t.contains("8.99%");
        assert_eq!(
            passing_prefix(paragraph, no_sm),
            Some((
                "The DRAM is the bottleneck, at 64.5% of peak.".to_string(),
                "The SM adds to the time at 8.99%. So it is slow.".to_string()
            ))
        );
        // The first sentence fails: nothing to keep; one sentence: nothing to cut.
        assert_eq!(passing_prefix("The SM adds 8.99%. The DRAM is busy.", no_sm), None);
        assert_eq!(passing_prefix("The DRAM is the bottleneck.", |_| true), None);
    }
}
