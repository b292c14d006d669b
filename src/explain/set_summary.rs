//! The sets of a report and their explanations: the sets among the report's profiles
//! ([`crate::sets`]), and for each, with a model, two or three sentences the model writes from the
//! set's facts block (members with their value, time, regime, bounding unit and primary problem;
//! the set's findings with their numbers). The text is decoded under the grounded grammar of that
//! block and held to the profile summary's checks ([`super::summary::check`]): every number one of
//! the block's values and next to what it measures, every word English or a GPU term, and a regime
//! or bounding unit pinned on a member only where that member's facts give it. A text refused after
//! one re-ask leaves the expert summary, marked as the expert's. The model is the run's own (loaded
//! once); the explanations are cached like the profile summary.

use super::model::ModelSlot;
use super::report::{ExplainReport, ProfileSummary};
use super::summary::{self, SummaryFacts};
use super::{prompt, ExplainError, ExplainOptions, RunStats};
use crate::cache::{Cache, CacheKey};
use crate::report::writer::Writer;
use crate::sets::{KernelSet, SetOptions};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

pub const SET_SUMMARY: &str = include_str!("../../prompts/set-summary.jinja");

/// The units a member's bound names (those [`crate::rules::regime::utilisation`] measures).
const BOUND_UNITS: [&str; 5] = ["SM", "DRAM", "L2", "L1/TEX", "memory"];

/// The facts block's line on the version step that saved the most time.
const LARGEST_SAVING: &str = "The step that saved the most time: ";

/// Set findings the facts block carries (the others are bookkeeping: pairs used, facts compared).
const FACT_FINDINGS: [&str; 7] = ["fastest", "regime", "change", "scaling", "step", "effect", "left"];

/// The sets among the report's profiles (a file that could not be read is in the report's errors
/// already: its sets go on without it; one cut off mid-write gives its complete launches). Their
/// summaries are the expert's.
pub fn find_sets(report: &ExplainReport, opts: &SetOptions) -> Vec<KernelSet> {
    let Some(batch) = &report.batch else { return vec![] };
    let files: Vec<PathBuf> =
        batch.files.iter().enumerate().filter(|(i, _)| !batch.source_pages.contains(&(*i as u32))).map(|(_, f)| f.clone()).collect();
    crate::sets::find(&files, opts).0
}

/// With set options: the report's sets; with a model and summaries asked for, the first `top` of
/// them (largest total time first) explained by the model, from the cache when the same facts,
/// model and prompts made the explanation before.
pub(super) fn add_sets(
    report: &mut ExplainReport,
    members: Option<Vec<crate::sets::Member>>,
    model: &mut ModelSlot,
    cache: Option<&Cache>,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<(), ExplainError> {
    let Some(set_opts) = &opts.sets else { return Ok(()) };
    report.sets = match members {
        Some(members) => crate::sets::sets_of(members, set_opts),
        None => find_sets(report, set_opts),
    };
    if model.sha.is_none() || !opts.summary {
        return Ok(());
    }
    for index in 0..report.sets.len().min(opts.settings.top) {
        let facts = set_facts(&report.sets[index]);
        let key =
            summary::cache_key(&facts, "set-summary-v1", SET_SUMMARY, model.sha.as_deref().expect("a model hash checked above"), opts);
        let written = match summary::cached(cache, &key, opts)? {
            Some(found) => found,
            None => {
                let found = ask(model, &facts, index, opts, stats)?;
                store(cache, &key, report, index, &found, model)?;
                found
            }
        };
        apply(&mut report.sets[index], written);
    }
    if report.model.is_none() {
        report.model = model.loaded.as_ref().map(|m| m.info.clone());
    }
    Ok(())
}

/// Puts a written summary on its set: the model's text, or the expert's with the reasons the
/// model's was refused.
pub fn apply(set: &mut KernelSet, written: ProfileSummary) {
    if written.writer != Writer::Expert {
        set.summary = written.text;
    }
    set.summary_by = written.writer;
    set.summary_refused = written.refused;
}

/// The set's facts block, its grounding, its expert summary, and what each member may be called:
/// its regime (grid-bound also "grid too small"), its bounding unit, fastest or slowest.
pub fn set_facts(set: &KernelSet) -> SummaryFacts {
    use std::fmt::Write;
    let varies = if set.varies.is_empty() { "nothing".to_string() } else { crate::format::and_list(&set.varies) };
    let mut out = format!("Set {}: {} members, varying {varies}, in order of {}.\n", set.name, set.members.len(), set.order);
    let _ = writeln!(out, "Members:");
    let ends = fastest_and_slowest(set);
    let mut diagnoses: Vec<(String, Vec<String>)> = Vec::new();
    for (i, m) in set.members.iter().enumerate() {
        let time = m.duration_ns.map(crate::format::duration).unwrap_or_else(|| "time not measured".into());
        let bound = match m.shown_unit() {
            Some((unit, pct)) => format!(" ({unit} at {} of peak)", prompt::fmt_value(pct, "%")),
            None => String::new(),
        };
        let primary = m.primary.map(|p| format!("primary problem {p}")).unwrap_or_else(|| "no problem found".into());
        let end: Vec<&str> = ends.iter().filter(|(_, at)| *at == i).map(|(word, _)| *word).collect();
        let end = if end.is_empty() { String::new() } else { format!(" ({})", end.join(", ")) };
        let _ = writeln!(out, "- {}{end}: {time}; {}{bound}; {primary}.", m.value, m.regime);
        let mut said = vec![m.regime.to_string()];
        if m.regime == "grid-bound" {
            said.push("grid-too-small".into());
        }
        // The regime's own unit; in a throughput-bound member also the busiest unit the line names
        // (a latency-bound member is bound by no unit, however busy).
        let throughput_bound = matches!(m.regime, "memory-bound" | "compute-bound");
        let busiest = m.shown_unit().map(|u| u.0).filter(|_| throughput_bound);
        for unit in m.bound_unit.into_iter().chain(busiest) {
            let claim = unit_claim(unit);
            if !said.contains(&claim) {
                said.push(claim);
            }
        }
        diagnoses.push((m.value.clone(), said));
    }
    for f in set.findings.iter().filter(|f| FACT_FINDINGS.contains(&f.kind.as_str())) {
        let _ = writeln!(out, "{}", f.text);
    }
    if let Some(line) = largest_saving(set) {
        let _ = writeln!(out, "{line}");
    }
    let pair_facts = pair_facts(set, &ends);
    let names: Vec<&str> = set.members.iter().map(|m| &*m.kernel).collect();
    let superlatives = ends.iter().map(|(word, at)| (word.to_string(), set.members[*at].value.clone())).collect();
    SummaryFacts::new(out, &names.join(" "), set.summary.clone(), diagnoses, claim_phrases())
        .with_unnamed_claims_held()
        .with_superlatives(superlatives)
        .with_pair_facts(pair_facts)
}

/// The facts the block lists as changed between two members: in each version step, and between
/// the slowest and the fastest.
fn pair_facts(set: &KernelSet, ends: &[(&str, usize)]) -> Vec<([String; 2], Vec<String>)> {
    let members = &set.members;
    let labels = |a: usize, b: usize, n: usize| -> Vec<String> {
        crate::sets::findings::differing(&members[a], &members[b], &set.compared_facts, n).into_iter().map(|(label, _)| label).collect()
    };
    let mut out = Vec::new();
    if set.findings.iter().any(|f| f.kind == "step") {
        for b in 1..members.len() {
            out.push(([members[b - 1].value.clone(), members[b].value.clone()], labels(b - 1, b, crate::sets::findings::STEP_FACTS)));
        }
    }
    if let [("fastest", fastest), ("slowest", slowest)] = ends {
        out.push((
            [members[*slowest].value.clone(), members[*fastest].value.clone()],
            labels(*slowest, *fastest, crate::sets::findings::STEP_FACTS),
        ));
    }
    out
}

/// The positions of the fastest and the slowest member, by the cost the set's fastest is chosen by
/// (time, or time per thread when the problem size varies).
fn fastest_and_slowest(set: &KernelSet) -> Vec<(&'static str, usize)> {
    let per_thread = set.fastest.as_ref().is_some_and(|f| f.by != "time");
    let costs: Vec<(usize, f64)> =
        set.members.iter().enumerate().filter_map(|(i, m)| crate::sets::findings::cost(m, per_thread).map(|c| (i, c))).collect();
    let fastest = costs.iter().min_by(|a, b| a.1.total_cmp(&b.1));
    let slowest = costs.iter().max_by(|a, b| a.1.total_cmp(&b.1));
    match (fastest, slowest) {
        (Some(f), Some(s)) if f.0 != s.0 => vec![("fastest", f.0), ("slowest", s.0)],
        _ => Vec::new(),
    }
}

/// In a version series, the step (one member to the next) that saved the most time, with its
/// step line (what it changed), so the model need not find the largest itself.
fn largest_saving(set: &KernelSet) -> Option<String> {
    let steps = set.members.windows(2).filter_map(|w| Some((w, w[0].duration_ns? - w[1].duration_ns?)));
    let (step, saved_ns) = steps.max_by(|a, b| a.1.total_cmp(&b.1))?;
    let line = set.findings.iter().find(|f| f.kind == "step" && f.text.starts_with(&format!("{} -> {}:", step[0].value, step[1].value)))?;
    (saved_ns > 0.0).then(|| format!("{LARGEST_SAVING}{}", line.text))
}

/// The phrases that claim a regime or a bounding unit, each with its claim.
fn claim_phrases() -> Vec<(String, String)> {
    let mut phrases = summary::regime_phrases();
    for unit in BOUND_UNITS {
        let claim = unit_claim(unit);
        let mut said = vec![
            format!("bound by {unit}"),
            format!("bound by the {unit}"),
            format!("limited by {unit}"),
            format!("limited by the {unit}"),
        ];
        if unit != "memory" {
            // "memory-bound" is the regime's phrase.
            said.extend([format!("{unit}-bound"), format!("{unit} bound")]);
        }
        phrases.extend(said.into_iter().map(|phrase| (phrase, claim.clone())));
    }
    phrases
}

/// The claim that a member is bound by `unit` ("DRAM-bound"; "bound by memory" for ncu's combined
/// memory throughput, whose "memory-bound" is the regime).
fn unit_claim(unit: &str) -> String {
    if unit == "memory" {
        "bound by memory".into()
    } else {
        format!("{unit}-bound")
    }
}

/// The user message asking for the set's explanation.
pub fn question(facts: &SummaryFacts) -> Result<String, minijinja::Error> {
    let steps = facts.facts.contains(&format!("\n{LARGEST_SAVING}"));
    crate::templating::prompt_environment().render_str(SET_SUMMARY, json!({ "facts": facts.facts, "steps": steps }))
}

/// Asks the run's model (loaded on first use) for set `index`'s explanation.
fn ask(
    model: &mut ModelSlot,
    facts: &SummaryFacts,
    index: usize,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<ProfileSummary, ExplainError> {
    let m = model.load(&opts.run, stats)?;
    let started = Instant::now();
    if opts.run.progress {
        eprintln!("keet: asking {} to explain set S{} ...", m.info.name, index + 1);
    }
    let system = prompt::system(opts.settings.prose.as_str())?;
    let found = summary::ask_summary(&mut m.engine, facts, question(facts)?, system, opts.settings.repair_attempts)?;
    stats.generate_s += started.elapsed().as_secs_f64();
    Ok(found)
}

/// Stores a new explanation of set `index`; `keet show` renders the entry's report: the set alone.
fn store(
    cache: Option<&Cache>,
    key: &CacheKey,
    report: &ExplainReport,
    index: usize,
    found: &ProfileSummary,
    model: &ModelSlot,
) -> Result<(), ExplainError> {
    let (Some(c), Some(m)) = (cache, model.loaded.as_ref()) else { return Ok(()) };
    let mut set = report.sets[index].clone();
    apply(&mut set, found.clone());
    let meta = crate::cache::EntryMeta {
        file: set.members.first().map(|m| m.file.display().to_string()).unwrap_or_default(),
        kernel: format!("(set {})", set.name),
        model: m.info.name.clone(),
        verdict: found.text.chars().take(120).collect(),
    };
    let mut alone = report.clone();
    alone.kernels.clear();
    alone.batch = None;
    alone.summary = None;
    alone.sets = vec![set];
    let report_json = serde_json::to_string(&alone).expect("report serialises");
    c.put(key, &meta, &serde_json::to_string(found).expect("summary serialises"), &report_json)?;
    Ok(())
}
