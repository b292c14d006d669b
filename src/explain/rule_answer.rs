//! The rule layer's answer for a kernel: its findings shown as report findings (with their
//! evidence and source lines), and the verdict, which always comes from the diagnosis. It stands
//! where the model is not asked, and fills every gap the model leaves.

use super::report::*;
use super::source;
use crate::analysis::LaunchAnalysis;
use crate::profile::Launch;
use crate::rules;

/// A rule finding shown as a report finding (origin: rules).
pub fn from_rule(la: &LaunchAnalysis, launch: &Launch, r: &rules::Finding, lines: &[SourceLine]) -> ShownFinding {
    let mut evidence = Vec::new();
    for key in &r.facts {
        if let Some(f) = la.facts.get(*key) {
            for e in &f.evidence {
                if let Some(m) = launch.metrics.get(&e.metric) {
                    if let Some(v) = m.as_f64() {
                        if !evidence.iter().any(|c: &Citation| c.metric == e.metric) {
                            evidence.push(Citation { metric: e.metric.clone(), value: v, unit: m.unit.symbol() });
                        }
                    }
                }
            }
        }
    }
    ShownFinding {
        origin: Origin::Rules,
        text_origin: None,
        finding: Finding {
            category: r.category,
            severity: r.severity,
            claim: r.claim.clone(),
            evidence,
            explanation: r.explanation.clone(),
            suggestions: vec![r.suggestion.clone()],
        },
        estimated_speedup_pct: r.estimated_speedup_pct,
        source_lines: source::lines_for(r.category, lines),
    }
}

/// The verdict always comes from the diagnosis (the rule layer's primary finding), never from model text.
pub fn verdict(la: &LaunchAnalysis) -> String {
    match la.findings.first() {
        Some(f) => format!("{}: {}", f.category.as_str(), f.claim),
        // Without the metrics to place the regime, absence of findings says nothing.
        None if la.diagnosis.regime == "unknown" => format!("not diagnosed ({})", la.diagnosis.summary),
        None => format!("no problem found ({})", la.diagnosis.summary),
    }
}

/// The rule layer's findings for a kernel the model does not answer.
pub fn rules_only(launch: &Launch, la: &LaunchAnalysis, lines: &[SourceLine]) -> CachedFindings {
    let findings: Vec<ShownFinding> = la.findings.iter().map(|r| from_rule(la, launch, r, lines)).collect();
    CachedFindings { verdict: verdict(la), findings, dropped: vec![], prose: ProseCounts::default(), replaced: vec![], code: None }
}

/// A model finding as the report shows it, with the rule layer's bound and the source lines of its category.
pub fn shown_llm(la: &LaunchAnalysis, f: Finding, origin: Origin, lines: &[SourceLine]) -> ShownFinding {
    let speedup = la.findings.iter().find(|r| r.category == f.category).and_then(|r| r.estimated_speedup_pct);
    let source_lines = source::lines_for(f.category, lines);
    ShownFinding { origin, text_origin: None, finding: f, estimated_speedup_pct: speedup, source_lines }
}
