//! Validation: every finding is checked against the raw profile before it is shown.
//!
//! A finding passes when (1) every metric it cites exists for that launch, (2) every cited value
//! matches the raw value within rounding, in the metric's unit, (3) its category agrees with the
//! facts and the rule layer (no "memory-bound" when the rules say latency, no occupancy limiter
//! the launch statistics contradict), (4) at least one citation is a metric the category rests
//! on, (5) no number in its claim, explanation or suggestions is absent from the profile, and (6)
//! every qualitative comparison it makes ("high occupancy", "DRAM is saturated", "uncoalesced")
//! agrees with the facts and the thresholds of `expert/comparisons.toml`. Under the grounded
//! grammar ([`validate_grounded`]) every number must also be one of the launch's rendered values.
//! Each failure is a reason naming the metric, value or word at fault.

use crate::explain::report::{Citation, Finding};
use crate::facts::{BoundKind, FactKey, Facts, Limiter};
use crate::profile::Launch;
use crate::rules::{self, Category};
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Qualitative phrases and the facts that must agree with them.
const COMPARISONS: &str = include_str!("../expert/comparisons.toml");

#[derive(Debug, serde::Deserialize)]
struct ComparisonTable {
    comparison: Vec<Comparison>,
    #[serde(default)]
    refusal: Vec<Refusal>,
}

/// A phrase no fact of a kernel's profile can support (`[[refusal]]` in `expert/comparisons.toml`).
#[derive(Debug, serde::Deserialize)]
struct Refusal {
    phrases: Vec<String>,
    reason: String,
}

/// One entry of `expert/comparisons.toml`.
#[derive(Debug, serde::Deserialize)]
struct Comparison {
    phrases: Vec<String>,
    when: Vec<Condition>,
    /// Every condition must hold (default: any one).
    #[serde(default)]
    all: bool,
    /// What the phrase means, in words, for the reason.
    means: String,
}

#[derive(Debug, serde::Deserialize)]
struct Condition {
    fact: FactKey,
    op: String,
    #[serde(default)]
    value: Option<f64>,
    /// Compare with another fact instead of a number.
    #[serde(default)]
    other: Option<FactKey>,
}

fn table() -> &'static ComparisonTable {
    static TABLE: OnceLock<ComparisonTable> = OnceLock::new();
    TABLE.get_or_init(|| toml::from_str::<ComparisonTable>(COMPARISONS).expect("expert/comparisons.toml parses"))
}

fn comparisons() -> &'static [Comparison] {
    &table().comparison
}

/// The checks of a finding as a whole (see [`validate_structure`]).
fn check_structure(ctx: &Context, f: &Finding, reasons: &mut Vec<String>) {
    if f.evidence.is_empty() {
        reasons.push("the finding cites no evidence".to_string());
    }
    for c in &f.evidence {
        if let Some(r) = check_citation(ctx, c) {
            reasons.push(r);
        }
    }
    if let Some(r) = check_category(ctx, f.category) {
        reasons.push(r);
    } else {
        let relevant = ctx.category_metrics(f.category);
        if !relevant.is_empty() && !f.evidence.iter().any(|c| relevant.contains(&c.metric)) {
            reasons.push(format!(
                "none of the cited metrics supports {} (expected one of: {})",
                f.category.as_str(),
                relevant.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
}

/// Words that make the phrase after them no claim ("no bank conflicts").
const NEGATIONS: &[&str] = &["no", "not", "without", "little", "few", "never", "nor"];

/// Qualitative comparisons in `text` that the facts contradict or cannot support, each a reason.
pub fn comparison_errors(ctx: &Context, text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .to_lowercase()
        .replace('-', " ")
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '%' || c == '.'))
        .map(|w| w.trim_matches('.').to_string())
        .filter(|w| !w.is_empty())
        .collect();
    let claims = |phrase: &str| {
        let p: Vec<&str> = phrase.split_whitespace().collect();
        (0..words.len().saturating_sub(p.len() - 1))
            .any(|i| words[i..i + p.len()].iter().zip(&p).all(|(a, b)| a == b) && !(i > 0 && NEGATIONS.contains(&words[i - 1].as_str())))
    };
    let mut reasons = Vec::new();
    for r in &table().refusal {
        if let Some(phrase) = r.phrases.iter().find(|p| claims(p)) {
            reasons.push(format!("\"{phrase}\" is refused: {}", r.reason));
        }
    }
    for c in comparisons() {
        for phrase in &c.phrases {
            if !claims(phrase) {
                continue;
            }
            let results: Vec<Option<bool>> = c.when.iter().map(|cond| holds(ctx, cond)).collect();
            let known: Vec<bool> = results.iter().flatten().copied().collect();
            let ok = if known.is_empty() {
                false
            } else if c.all {
                known.iter().all(|x| *x)
            } else {
                known.iter().any(|x| *x)
            };
            if !ok {
                let facts: Vec<String> = c
                    .when
                    .iter()
                    .filter_map(|cond| ctx.facts.get(cond.fact).map(|f| format!("{} is {} {}", f.label, rules::fmt_num(f.value), f.unit)))
                    .collect();
                reasons.push(if facts.is_empty() {
                    format!("\"{phrase}\" is not supported: the profile has none of the facts it needs ({})", c.means)
                } else {
                    format!("\"{phrase}\" contradicts the facts: {} (it means {})", facts.join(", "), c.means)
                });
            }
            break;
        }
    }
    reasons
}

/// Whether one condition holds; `None` when a fact it needs is absent.
fn holds(ctx: &Context, cond: &Condition) -> Option<bool> {
    let lhs = ctx.facts.get(cond.fact)?.value;
    let rhs = match (&cond.other, cond.value) {
        (Some(o), _) => ctx.facts.get(*o)?.value,
        (None, Some(v)) => v,
        (None, None) => return None,
    };
    Some(match cond.op.as_str() {
        "<" => lhs < rhs,
        "<=" => lhs <= rhs,
        ">" => lhs > rhs,
        ">=" => lhs >= rhs,
        _ => return None,
    })
}

/// Relative tolerance for a cited value (reports round to 3-4 significant digits).
pub const VALUE_REL_TOLERANCE: f64 = 5e-3;
/// Absolute tolerance, for values near zero printed with two decimals.
pub const VALUE_ABS_TOLERANCE: f64 = 5e-3;

/// What a finding is checked against: one launch, its facts and its rule findings.
pub struct Context<'a> {
    pub launch: &'a Launch,
    pub facts: &'a Facts,
    pub rules: &'a [rules::Finding],
}

impl<'a> Context<'a> {
    /// The raw metrics a category rests on: the evidence of the facts its rule findings cite.
    pub fn category_metrics(&self, c: Category) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for r in self.rules.iter().filter(|r| r.category == c) {
            for key in &r.facts {
                if let Some(f) = self.facts.get(*key) {
                    for e in &f.evidence {
                        if self.launch.metrics.contains_key(&e.metric) {
                            out.insert(e.metric.clone());
                        }
                    }
                }
            }
        }
        out
    }

    /// Every number the profile holds for this launch (normalised and as written), and the facts.
    fn known_numbers(&self) -> Vec<f64> {
        let mut v: Vec<f64> = Vec::new();
        for m in self.launch.metrics.values() {
            if let Some(x) = m.as_f64() {
                v.push(x);
            }
            if let Ok(Some(x)) = crate::profile::units::parse_number(m.raw_value, Default::default()) {
                v.push(x);
            }
        }
        for f in self.facts.all() {
            v.push(f.value);
        }
        for s in &self.facts.stalls {
            if let Some(p) = s.share_pct {
                v.push(p);
            }
        }
        for r in self.rules {
            if let Some(p) = r.estimated_speedup_pct {
                v.push(p);
            }
        }
        for d in [self.launch.block_size, self.launch.grid_size].into_iter().flatten() {
            v.extend(d.iter().map(|&x| x as f64));
        }
        v
    }
}

/// True when `cited` equals `actual` within rounding.
pub fn value_matches(cited: f64, actual: f64) -> bool {
    if approx::relative_eq!(cited, actual, epsilon = VALUE_ABS_TOLERANCE, max_relative = VALUE_REL_TOLERANCE) {
        return true;
    }
    // A value shown with fewer digits ("1.95" for 1952 shown in thousands) is not accepted: units must agree.
    false
}

fn unit_matches(cited: &str, metric_unit: &str, raw_unit: &str) -> bool {
    let c = cited.trim().to_ascii_lowercase();
    let n = metric_unit.to_ascii_lowercase();
    let r = raw_unit.trim().to_ascii_lowercase();
    c == n || c == r || (n.is_empty() && matches!(c.as_str(), "" | "count" | "ratio" | "x"))
}

/// Checks one citation; `None` when it is correct.
pub fn check_citation(ctx: &Context, c: &Citation) -> Option<String> {
    if let Some(m) = ctx.launch.metrics.get(&c.metric) {
        let Some(actual) = m.as_f64() else {
            return Some(format!("metric {} is not numeric (value {:?})", c.metric, m.raw_value));
        };
        let raw = crate::profile::units::parse_number(m.raw_value, Default::default()).ok().flatten();
        let unit_ok = unit_matches(&c.unit, &m.unit.symbol(), m.raw_unit);
        let value_ok = value_matches(c.value, actual)
            || (raw.is_some_and(|r| value_matches(c.value, r)) && c.unit.trim().eq_ignore_ascii_case(m.raw_unit.trim()));
        if !value_ok {
            return Some(format!(
                "metric {} is {} {} in the profile (written {} {}), not {} {}",
                c.metric,
                rules::fmt_num(actual),
                m.unit,
                m.raw_value,
                m.raw_unit,
                rules::fmt_num(c.value),
                c.unit
            ));
        }
        if !unit_ok {
            return Some(format!("metric {} is in {}, not {}", c.metric, m.unit, c.unit));
        }
        return None;
    }
    if let Some(f) = ctx.facts.get_named(&c.metric) {
        if !value_matches(c.value, f.value) {
            return Some(format!(
                "fact {} is {} {}, not {} {}",
                c.metric,
                rules::fmt_num(f.value),
                f.unit,
                rules::fmt_num(c.value),
                c.unit
            ));
        }
        return None;
    }
    Some(format!("metric {} does not exist for this launch", c.metric))
}

/// Does the category agree with the facts and the rule layer?
pub fn check_category(ctx: &Context, c: Category) -> Option<String> {
    let f = ctx.facts;
    let bound = f.bound.as_ref().map(|b| b.kind);
    let specific = match c {
        Category::MemoryBound if bound != Some(BoundKind::Memory) => Some(format!(
            "category memory-bound contradicts the facts: memory throughput is {}% and the speed-of-light classification is {}",
            f.memory_throughput_pct.as_ref().map(|x| rules::fmt_num(x.value)).unwrap_or_else(|| "unknown".into()),
            bound_name(bound)
        )),
        Category::ComputeBound if bound != Some(BoundKind::Compute) => Some(format!(
            "category compute-bound contradicts the facts: SM throughput is {}% and the classification is {}",
            f.sm_throughput_pct.as_ref().map(|x| rules::fmt_num(x.value)).unwrap_or_else(|| "unknown".into()),
            bound_name(bound)
        )),
        Category::LatencyBound if !matches!(bound, Some(BoundKind::Latency) | Some(BoundKind::GridTooSmall) | Some(BoundKind::Launch)) => {
            Some(format!("category latency-bound contradicts the facts: the classification is {}", bound_name(bound)))
        }
        Category::OccupancyRegisters | Category::OccupancySharedMemory => {
            let want = if c == Category::OccupancyRegisters { Limiter::Registers } else { Limiter::SharedMemory };
            match &f.occupancy_limit {
                Some(l) if l.limiter != want => Some(format!(
                    "category {} contradicts the launch statistics: occupancy is limited by {}",
                    c.as_str(),
                    l.limiter.label()
                )),
                None => Some(format!("category {} has no occupancy-limit metrics in this profile", c.as_str())),
                _ => None,
            }
        }
        _ => None,
    };
    if specific.is_some() {
        return specific;
    }
    if !ctx.rules.iter().any(|r| r.category == c) {
        let found: Vec<&str> = ctx.rules.iter().map(|r| r.category.as_str()).collect();
        return Some(format!(
            "category {} is not supported by the facts (the rule layer found: {})",
            c.as_str(),
            if found.is_empty() { "nothing".to_string() } else { found.join(", ") }
        ));
    }
    None
}

/// The regime's name in words ("memory bound", ...).
pub fn bound_name(b: Option<BoundKind>) -> &'static str {
    match b {
        Some(BoundKind::Compute) => "compute bound",
        Some(BoundKind::Memory) => "memory bound",
        Some(BoundKind::Latency) => "latency bound",
        Some(BoundKind::GridTooSmall) => "grid too small",
        Some(BoundKind::Launch) => "launch bound",
        None => "unknown",
    }
}

/// Numbers written in free text (skipping digits inside identifiers such as `float4` or `sm_90`).
pub fn numbers_in_text(text: &str) -> Vec<(String, f64)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c.is_ascii_digit() && !prev_ident {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || ((chars[i] == '.' || chars[i] == ',') && i + 1 < chars.len() && chars[i + 1].is_ascii_digit()))
            {
                i += 1;
            }
            // A trailing letter glued to the number is a unit or suffix ("4x", "32B"): still a number.
            let s: String = chars[start..i].iter().collect();
            if let Ok(Some(v)) = crate::profile::units::parse_number(&s, Default::default()) {
                out.push((s, v));
            }
        } else {
            i += 1;
        }
    }
    out
}

fn check_text_numbers(ctx: &Context, field: &str, text: &str, known: &[f64], reasons: &mut Vec<String>) {
    // Superscripts, fractions and other numeric look-alikes carry numbers past a digit check.
    if let Some(c) = text.chars().find(|c| c.is_numeric() && !c.is_ascii_digit()) {
        reasons.push(format!("the {field} writes a number with the character {c:?}"));
    }
    for (s, v) in numbers_in_text(text) {
        // Percent-of-peak values are shown rounded to integers or one decimal in prose.
        let ok = known.iter().any(|&k| value_matches(v, k) || (k.abs() >= 1.0 && (k - v).abs() < 0.5 && v.fract() == 0.0))
            || v == rules::thresholds::WARP_SIZE;
        if !ok {
            reasons.push(format!("number {s} in the {field} is not in the profile"));
        }
    }
    let _ = ctx;
}

/// True when every number in `text` is one the profile, the facts or the rule layer hold (the
/// validator's check on free text), so an expert sentence can be offered to the model as is.
pub fn text_numbers_known(ctx: &Context, text: &str) -> bool {
    let mut reasons = Vec::new();
    check_text_numbers(ctx, "text", text, &ctx.known_numbers(), &mut reasons);
    reasons.is_empty()
}

fn check_contradicting_words(ctx: &Context, f: &Finding, reasons: &mut Vec<String>) {
    reasons.extend(contradicting_words(ctx, &format!("{} {}", f.claim, f.explanation)));
}

/// Words in `text` that contradict the facts: a regime the speed-of-light classification does not
/// support ("compute bound" on a memory-bound kernel), the regime it does support denied ("not
/// memory bound" on a memory-bound kernel), an occupancy limiter the launch statistics contradict.
pub fn contradicting_words(ctx: &Context, text: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    let text = text.to_lowercase().replace('-', " ");
    let bound = ctx.facts.bound.as_ref().map(|b| b.kind);
    let says = |w: &str| text.contains(w) && !text.contains(&format!("not {w}"));
    if says("memory bound") && bound.is_some() && bound != Some(BoundKind::Memory) {
        reasons.push(format!("the text calls the kernel memory bound, but the facts say {}", bound_name(bound)));
    }
    if says("compute bound") && bound.is_some() && bound != Some(BoundKind::Compute) {
        reasons.push(format!("the text calls the kernel compute bound, but the facts say {}", bound_name(bound)));
    }
    for (w, kind) in [("not memory bound", BoundKind::Memory), ("not compute bound", BoundKind::Compute)] {
        if text.contains(w) && bound == Some(kind) {
            reasons.push(format!("the text says the kernel is {w}, but the facts say {}", bound_name(bound)));
        }
    }
    if let Some(l) = &ctx.facts.occupancy_limit {
        for (w, lim) in [("limited by registers", Limiter::Registers), ("limited by shared memory", Limiter::SharedMemory)] {
            if text.contains(w) && l.limiter != lim {
                reasons.push(format!("the text says occupancy is {w}, but the launch statistics say {}", l.limiter.label()));
            }
        }
    }
    reasons
}

/// Words one of which a claim of each category must use (lower case, matched as prefixes of words).
pub fn category_words(c: Category) -> &'static [&'static str] {
    match c {
        Category::ComputeBound => &["compute", "arithmetic", "instruction", "math", "pipe", "throughput", "fma", "alu"],
        Category::MemoryBound => &["memory", "bandwidth", "dram", "byte", "traffic", "cache", "throughput", "load", "store"],
        Category::LatencyBound => &["latency", "stall", "wait", "parallelism", "occupancy", "warp", "idle", "dependen"],
        Category::GridTooSmall => &["grid", "block", "multiprocessor", "sm", "idle", "fill", "parallelism", "small"],
        Category::BlockSize => &["block", "thread", "warp", "size", "lane"],
        Category::TailEffect => &["wave", "tail", "block", "idle", "last"],
        Category::OccupancyRegisters => &["register", "occupancy"],
        Category::OccupancySharedMemory => &["shared", "occupancy"],
        Category::OccupancyOther => &["occupancy", "warp", "block", "imbalance"],
        Category::MemoryCoalescing => {
            &["coalesc", "sector", "access", "stride", "contiguous", "consecutive", "load", "store", "transaction", "memory"]
        }
        Category::SharedBankConflicts => &["bank", "conflict", "shared"],
        Category::Divergence => &["diverg", "branch", "warp", "lane", "thread"],
        Category::RegisterSpilling => &["spill", "register", "local"],
        Category::TensorCoreUnused => &["tensor", "matrix", "mma"],
        Category::Fp64 => &["double", "precision", "fp"],
        Category::AtomicsContention => &["atomic", "contention", "contend"],
    }
}

fn claim_topic_errors(category: Category, claim: &str, reasons: &mut Vec<String>) {
    if claim.trim().is_empty() {
        reasons.push("the claim is empty".into());
        return;
    }
    let lower = claim.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let want = category_words(category);
    if !words.iter().any(|w| want.iter().any(|k| w.starts_with(k))) {
        reasons.push(format!("the claim does not say anything about {} (expected a word like: {})", category.as_str(), want.join(", ")));
    }
    if claim.split_whitespace().count() < 3 {
        reasons.push("the claim is not a sentence (fewer than three words)".to_string());
    }
    if lower.contains("http") || lower.contains("www.") || claim.contains('_') {
        reasons.push("the claim holds a link or an identifier instead of a sentence".to_string());
    }
}

/// [`validate`] plus the grounded grammar's rule: every number in the text is one of the launch's
/// rendered values (`grounding`), as written, and sits next to the quantity it measures.
pub fn validate_grounded(ctx: &Context, f: &Finding, grounding: &crate::grounding::Grounding) -> Result<(), Vec<String>> {
    let mut reasons = validate_with(ctx, f, false).err().unwrap_or_default();
    for (field, text) in
        [("claim", &f.claim), ("explanation", &f.explanation)].into_iter().chain(f.suggestions.iter().map(|s| ("suggestion", s)))
    {
        reasons.extend(grounding_errors(grounding, field, text));
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// What a finding must hold as a whole, whatever its sentences say: its citations exist and match
/// the raw values, its category agrees with the facts and the rule layer, and one citation is a
/// metric the category rests on. A finding that fails here is dropped; one that passes has each
/// sentence judged on its own ([`sentence_errors`]), so one wrong sentence costs that sentence only.
pub fn validate_structure(ctx: &Context, f: &Finding) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    check_structure(ctx, f, &mut reasons);
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// The validator's checks of one sentence of a grounded finding (`field`: "claim", "explanation"
/// or "suggestion"): numbers only from the rendered facts and next to what they measure, no words
/// that contradict the regime or the occupancy limiter, no comparison the facts contradict, and for
/// the claim a sentence about its category.
pub fn sentence_errors(ctx: &Context, grounding: &crate::grounding::Grounding, category: Category, field: &str, text: &str) -> Vec<String> {
    // The regime first: a sentence that contradicts it is wrong whatever its numbers are.
    let mut reasons = contradicting_words(ctx, text);
    for r in comparison_errors(ctx, text) {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    }
    reasons.extend(grounding_errors(grounding, field, text));
    if field == "claim" {
        claim_topic_errors(category, text, &mut reasons);
    }
    reasons
}

/// Numbers in one sentence that are not the launch's rendered values, or sit next to a quantity
/// they do not measure.
fn grounding_errors(grounding: &crate::grounding::Grounding, field: &str, text: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    for n in grounding.ungrounded(text) {
        reasons.push(format!("number {n} in the {field} is not one of this kernel's values"));
    }
    for wrong in grounding.misattributed(text).into_iter().chain(grounding.bounds_as_shares(text)) {
        reasons.push(format!("in the {field}, {wrong}"));
    }
    reasons
}

/// Validates one finding; `Err` holds every reason it fails.
pub fn validate(ctx: &Context, f: &Finding) -> Result<(), Vec<String>> {
    validate_with(ctx, f, true)
}

/// [`validate`]; `known_numbers`: check the text's numbers against every number the profile holds
/// (the grounded check replaces it with the rendered values).
fn validate_with(ctx: &Context, f: &Finding, known_numbers: bool) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    check_structure(ctx, f, &mut reasons);
    if known_numbers {
        let known = ctx.known_numbers();
        check_text_numbers(ctx, "claim", &f.claim, &known, &mut reasons);
        check_text_numbers(ctx, "explanation", &f.explanation, &known, &mut reasons);
        for s in &f.suggestions {
            check_text_numbers(ctx, "suggestion", s, &known, &mut reasons);
        }
    }
    check_contradicting_words(ctx, f, &mut reasons);
    for text in [&f.claim, &f.explanation].into_iter().chain(&f.suggestions) {
        for r in comparison_errors(ctx, text) {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
    }
    claim_topic_errors(f.category, &f.claim, &mut reasons);
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile::{Metric, MetricValue, Unit};
    use crate::rules::Severity;

    /// A memory-bound launch with uncoalesced loads (also the prose gate's test launch).
    pub(crate) fn launch() -> Launch {
        let mut l = Launch { name: "k".into(), block_size: Some([256, 1, 1]), grid_size: Some([4096, 1, 1]), ..Default::default() };
        for (n, v, u, raw, ru) in [
            ("gpu__time_duration.sum", 10776576.0, Unit::Nanoseconds, "10,776,576", "nsecond"),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.5, Unit::Percent, "12.50", "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 88.1, Unit::Percent, "88.10", "%"),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 88.1, Unit::Percent, "88.10", "%"),
            ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, Unit::None, "4", ""),
        ] {
            l.metrics.insert(
                n,
                Metric {
                    value: MetricValue::Number(v),
                    unit: &u,
                    raw_value: raw,
                    raw_unit: ru,
                    label: None,
                    section: None,
                    origin: Default::default(),
                },
            );
        }
        l
    }

    fn finding(category: Category, evidence: Vec<(&str, f64, &str)>, claim: &str) -> Finding {
        Finding {
            category,
            severity: Severity::High,
            claim: claim.into(),
            evidence: evidence.into_iter().map(|(m, v, u)| Citation { metric: m.into(), value: v, unit: u.into() }).collect(),
            explanation: "Each warp fetches whole sectors but uses a small part of them.".into(),
            suggestions: vec!["Make consecutive threads read consecutive addresses.".into()],
        }
    }

    fn with_ctx(f: impl FnOnce(&Context)) {
        let l = launch();
        let facts = crate::rules::derive_facts(&l);
        let rules = crate::rules::evaluate(&facts);
        f(&Context { launch: &l, facts: &facts, rules: &rules });
    }

    #[test]
    fn correct_finding_passes() {
        with_ctx(|ctx| {
            let f = finding(
                Category::MemoryCoalescing,
                vec![("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, "")],
                "Global loads use a small part of each sector.",
            );
            assert_eq!(validate(ctx, &f), Ok(()));
        });
    }

    #[test]
    fn fabricated_metric_is_caught() {
        with_ctx(|ctx| {
            let f =
                finding(Category::MemoryCoalescing, vec![("compute_bound_metric_findings_findings_1", 1.2, "")], "Loads are uncoalesced.");
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("does not exist")), "{r:?}");
        });
    }

    #[test]
    fn wrong_value_is_caught_and_rounding_accepted() {
        with_ctx(|ctx| {
            let f = finding(
                Category::MemoryBound,
                vec![("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 55.0, "%")],
                "DRAM is busy.",
            );
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("88.1") && r.contains("not 55")), "{r:?}");
            let f = finding(
                Category::MemoryBound,
                vec![("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 88.1004, "%")],
                "DRAM is busy.",
            );
            assert_eq!(validate(ctx, &f), Ok(()));
            // The value as written, in the unit as written.
            let f = finding(
                Category::MemoryBound,
                vec![
                    ("gpu__time_duration.sum", 10776576.0, "nsecond"),
                    ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 88.1, "%"),
                ],
                "DRAM is busy.",
            );
            assert_eq!(validate(ctx, &f), Ok(()));
        });
    }

    #[test]
    fn wrong_category_is_caught() {
        with_ctx(|ctx| {
            let f = finding(
                Category::ComputeBound,
                vec![("sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.5, "%")],
                "The kernel is compute bound.",
            );
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("compute-bound contradicts")), "{r:?}");
            let f = finding(
                Category::OccupancyRegisters,
                vec![("sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.5, "%")],
                "Registers limit occupancy.",
            );
            assert!(validate(ctx, &f).is_err());
        });
    }

    #[test]
    fn invented_numbers_in_text_are_caught() {
        with_ctx(|ctx| {
            let f = finding(
                Category::MemoryCoalescing,
                vec![("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, "")],
                "Loads waste 75% of every sector and run 3.7x slower.",
            );
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("number 75")), "{r:?}");
            assert!(r.iter().any(|r| r.contains("number 3.7")), "{r:?}");
            // Numbers that the profile holds are fine, as are identifiers like float4.
            let f = finding(
                Category::MemoryCoalescing,
                vec![("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, "")],
                "Loads use 4 of 32 bytes per sector; use float4 loads.",
            );
            assert_eq!(validate(ctx, &f), Ok(()));
        });
    }

    #[test]
    fn irrelevant_evidence_is_caught() {
        with_ctx(|ctx| {
            let f = finding(Category::MemoryCoalescing, vec![("gpu__time_duration.sum", 10776576.0, "ns")], "Loads are uncoalesced.");
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("none of the cited metrics supports")), "{r:?}");
        });
    }

    #[test]
    fn contradicting_words_are_caught() {
        with_ctx(|ctx| {
            let mut f = finding(
                Category::MemoryCoalescing,
                vec![("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, "")],
                "This compute-bound kernel wastes sectors.",
            );
            f.explanation = "It is compute bound.".into();
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("compute bound")), "{r:?}");
        });
    }

    #[test]
    fn unicode_digits_are_caught() {
        with_ctx(|ctx| {
            let f = finding(
                Category::MemoryCoalescing,
                vec![("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, "")],
                "Occupancy is \u{b9}/\u{2080} and loads waste sectors.",
            );
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("writes a number")), "{r:?}");
        });
    }

    #[test]
    fn off_topic_claims_are_caught() {
        with_ctx(|ctx| {
            let f = finding(
                Category::MemoryCoalescing,
                vec![("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, "")],
                "smsp-average-data-bytes-per-sector-memory-global-op-ld",
            );
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("not a sentence")), "{r:?}");
            let f = finding(
                Category::MemoryCoalescing,
                vec![("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0, "")],
                "The kernel reduces the number of layers.",
            );
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|r| r.contains("does not say anything about memory-coalescing")), "{r:?}");
        });
    }

    #[test]
    fn numbers_are_extracted() {
        let n: Vec<f64> = numbers_in_text("use 1,024 threads, float4 and sm_90; 12.5% busy").into_iter().map(|x| x.1).collect();
        assert_eq!(n, vec![1024.0, 12.5]);
    }

    #[test]
    fn a_wrong_comparison_is_refused() {
        with_ctx(|ctx| {
            // DRAM is at 88.1%, the SM at 12.5%, loads use 4 of 32 bytes per sector.
            assert!(comparison_errors(ctx, "DRAM is saturated while the SMs are idle.").is_empty());
            assert!(comparison_errors(ctx, "Loads are uncoalesced, so DRAM moves wasted sectors.").is_empty());
            let wrong = comparison_errors(ctx, "DRAM is idle because the SMs are saturated.");
            assert_eq!(wrong.len(), 2, "{wrong:?}");
            assert!(wrong[0].contains("DRAM") && wrong[0].contains("88.1"), "{wrong:?}");
            let coalesced = comparison_errors(ctx, "The loads are fully coalesced.");
            assert_eq!(coalesced.len(), 1, "{coalesced:?}");
            // A negated phrase is no claim; a phrase without the facts it needs is refused as a guess.
            assert!(comparison_errors(ctx, "There are no register spills here.").is_empty());
            let guess = comparison_errors(ctx, "The kernel has high occupancy.");
            assert!(guess.len() == 1 && guess[0].contains("not supported"), "{guess:?}");
            // A 10.8 ms launch is not dominated by its launch cost; an SM at 12.5% is not busy
            // processing (both written by the default model of kernels like these).
            let launch = comparison_errors(ctx, "The time is dominated by the launch overhead.");
            assert!(launch.len() == 1 && launch[0].contains("Duration"), "{launch:?}");
            let busy = comparison_errors(ctx, "The SM is at 12.5%, so it spends a lot of time processing data.");
            assert!(busy.len() == 1 && busy[0].contains("12.5"), "{busy:?}");
            // The README's first command, after the Q6_K kernel change moved the greedy path.
            let considerable = comparison_errors(
                ctx,
                "The SM is also at 12.5%, indicating that it is spending a considerable amount of time processing data.",
            );
            assert!(considerable.len() == 1 && considerable[0].contains("12.5"), "{considerable:?}");
            // decode_c1.ncu-rep's top kernel with the default model (SM at 8.99% there).
            let resources = comparison_errors(ctx, "The SM is also at 12.5%, indicating that the kernel uses a lot of compute resources.");
            assert!(resources.len() == 1 && resources[0].contains("12.5"), "{resources:?}");
            // The README's first command on 4c579d9 (SM at 8.99% there): idle SMs are not computing.
            let computing = comparison_errors(
                ctx,
                "The SM is also at 12.5%, indicating that it is spending a considerable amount of time performing computations.",
            );
            assert!(computing.len() == 1 && computing[0].contains("12.5"), "{computing:?}");
            // The eval's explained context of decode_c1 (achieved occupancy 14.5% there; unknown here).
            let warps = comparison_errors(ctx, "Even though there are many warps, they cannot keep up with the data transfer rate.");
            assert!(warps.len() == 1 && warps[0].contains("not supported"), "{warps:?}");
            assert!(comparison_errors(ctx, "There are not many warps to hide the latency.").is_empty());
            let cpu = comparison_errors(ctx, "The kernel reads global memory, which can be slow and consume a lot of CPU cycles.");
            assert!(cpu.len() == 1 && cpu[0].contains("cpu cycles") && cpu[0].contains("GPU"), "{cpu:?}");
            let idle =
                comparison_errors(ctx, "Each block will be assigned to only one SM, and there will be no work being done by any thread.");
            assert!(idle.len() == 1 && idle[0].contains("refused"), "{idle:?}");
            let high = comparison_errors(ctx, "The SM throughput is high, so compute sets the time.");
            assert!(high.len() == 1 && high[0].contains("12.5"), "{high:?}");
            assert!(comparison_errors(ctx, "The DRAM throughput is high.").is_empty());
            assert_eq!(comparison_errors(ctx, "The L2 cache throughput is high.").len(), 1);
            // validate() carries the comparison reasons.
            let mut f = finding(
                Category::MemoryBound,
                vec![("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 88.1, "%")],
                "Memory traffic sets the time of this kernel.",
            );
            f.explanation = "DRAM is idle while the loads wait.".into();
            let r = validate(ctx, &f).unwrap_err();
            assert!(r.iter().any(|x| x.contains("dram is idle")), "{r:?}");
        });
    }

    /// The test launch's grounding (a rendered throughput line) and a memory-bound finding that
    /// passes every check.
    fn grounded_memory_finding() -> (crate::grounding::Grounding, Finding) {
        let g = crate::grounding::Grounding::new("Throughput (% of peak): SM 12.5%, DRAM 88.1%, headroom 11.9%", "k");
        let f = finding(
            Category::MemoryBound,
            vec![("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 88.1, "%")],
            "DRAM is at 88.1% of peak, so memory traffic sets the time.",
        );
        (g, f)
    }

    #[test]
    fn grounded_validation_refuses_numbers_not_rendered() {
        with_ctx(|ctx| {
            let (g, mut f) = grounded_memory_finding();
            f.explanation = "The DRAM has 11.9% headroom left, so a fix that keeps its traffic saves little.".into();
            assert_eq!(validate_grounded(ctx, &f, &g), Ok(()));
            f.explanation = "The DRAM has 12% headroom left, so a fix that keeps its traffic saves little.".into();
            let r = validate_grounded(ctx, &f, &g).unwrap_err();
            assert!(r.iter().any(|x| x.contains("12%")), "{r:?}");
            // Grounded but put next to the wrong quantity.
            f.explanation = "The SM is at 88.1% of peak.".into();
            let r = validate_grounded(ctx, &f, &g).unwrap_err();
            assert!(r.iter().any(|x| x.contains("88.1% is not what the sentence says")), "{r:?}");
        });
    }

    #[test]
    fn a_wrong_sentence_costs_that_sentence_not_the_finding() {
        with_ctx(|ctx| {
            let (g, mut f) = grounded_memory_finding();
            f.explanation = "The SM is at 88.1% of peak. The kernel is compute bound.".into();
            // The finding as a whole (citations, category) stands; its explanation does not.
            assert_eq!(validate_structure(ctx, &f), Ok(()));
            assert!(validate_grounded(ctx, &f, &g).is_err());
            let r = sentence_errors(ctx, &g, f.category, "explanation", &f.explanation);
            // The regime first: the sentence contradicts the facts whatever its numbers say.
            assert!(r[0].contains("compute bound") && r[0].contains("memory"), "{r:?}");
            assert!(r.iter().any(|x| x.contains("88.1% is not what the sentence says")), "{r:?}");
            // A wrong comparison is refused in any field; the claim must be about its category.
            let r = sentence_errors(ctx, &g, f.category, "suggestion", "Use more loads, since DRAM is idle here.");
            assert!(r.iter().any(|x| x.contains("dram is idle")), "{r:?}");
            let r = sentence_errors(ctx, &g, f.category, "claim", "The SMs are at 12.5% of peak.");
            assert!(r.iter().any(|x| x.contains("does not say anything about memory-bound")), "{r:?}");
            assert!(sentence_errors(ctx, &g, f.category, "claim", &f.claim).is_empty());
            // A wrong citation drops the finding.
            f.evidence[0].value = 50.0;
            assert!(validate_structure(ctx, &f).is_err());
        });
    }
}
