//! `--format context`: a compact Markdown report made for an LLM's context window (a coding agent's
//! prompt), for `keet explain` and `keet compare`, fitted to a token budget.
//!
//! Per kernel it keeps what an agent needs to act: identity and launch shape, the regime and the
//! primary problem with their numbers, the top evidence, the hottest source lines and the changes
//! to try. With a budget (`--max-tokens`, counted with the active model's tokenizer) the least
//! important kernels go first (the report's own order: time share for explain, size of the time
//! change for compare), then the last kernel's detail, and a note says what was left out. The
//! result never exceeds the budget; a budget too small for the one-line header is an error.

use super::explain_view::environment;
use super::RenderError;
use crate::compare::CompareReport;
use crate::explain::report::ExplainReport;
use serde_json::{json, Value};

/// A token budget and the tokenizer that counts against it.
pub struct TokenBudget<'a> {
    pub max_tokens: usize,
    /// Tokens in a text, as the model that will read it counts them.
    pub count: &'a dyn Fn(&str) -> usize,
}

/// Full detail: every section of a kernel.
const FULL: u8 = 2;

/// The explain report as context, within `budget` when given.
pub fn explain_context(report: &ExplainReport, budget: Option<&TokenBudget>) -> Result<String, RenderError> {
    let mut base = super::explain_view::template_context(report);
    let kernels = base["kernels"].as_array_mut().map(std::mem::take).unwrap_or_default();
    let mut devices: Vec<String> = Vec::new();
    let kernels: Vec<Value> = kernels
        .into_iter()
        .zip(ranked(report))
        .map(|(mut kv, k)| {
            if let Some(d) = &k.analysis.device_name {
                if !devices.contains(d) {
                    devices.push(d.clone());
                }
            }
            kv["evidence_lines"] = json!(evidence_lines(k));
            kv["units_line"] = json!(units_line(&k.analysis.facts));
            kv["stalls_line"] = json!(stalls_line(&k.analysis.facts));
            kv["stalls_in_cycles"] = json!(k.analysis.facts.stalls.iter().all(|s| s.cycles_per_issue.unit == "cycle"));
            kv["grid_line"] = json!(grid_line(&k.analysis.facts));
            kv["access_line"] = json!(access_line(&k.analysis.facts));
            kv["hot_lines"] = json!(hot_lines(k));
            kv["changes"] = json!(changes(k));
            kv
        })
        .collect();
    let shares: Vec<f64> = ranked(report).map(|k| k.kernel.time_share_pct).collect();
    let n = kernels.len();
    base["kernels"] = Value::Array(kernels);
    base["devices"] = json!(devices);
    let skipped = report.skipped_kernels;
    let shown_share = |shown: usize| shares[..shown].iter().filter(|x| x.is_finite()).sum::<f64>();
    let kernels_text = fit(n, budget, |shown, detail| {
        let mut ctx = base.clone();
        ctx["shown"] = json!(shown);
        ctx["detail"] = json!(detail);
        ctx["omitted_kernels"] = json!(n - shown + skipped);
        ctx["omitted_share_pct"] = json!((100.0 - shown_share(shown)).max(0.0));
        ctx["max_tokens"] = json!(budget.filter(|_| shown < n).map(|b| b.max_tokens));
        render("explain.context", ctx)
    })?;
    Ok(with_sets(kernels_text, &report.sets, budget))
}

/// The kernels' context followed by the sets section when sets were found and it fits the budget
/// (the kernels come first: a budget too small for both keeps them and says the sets were left out).
fn with_sets(mut text: String, sets: &[crate::sets::KernelSet], budget: Option<&TokenBudget>) -> String {
    let section = super::set_context::sets_section(sets);
    if section.is_empty() {
        return text;
    }
    let whole = format!("{text}{section}");
    match budget {
        Some(b) if (b.count)(&whole) > b.max_tokens => {
            let note = format!("\n({} sets of profiles left out to fit {} tokens.)\n", sets.len(), b.max_tokens);
            if (b.count)(&format!("{text}{note}")) <= b.max_tokens {
                text.push_str(&note);
            }
            text
        }
        _ => whole,
    }
}

/// The compare report as context, within `budget` when given.
pub fn compare_context(report: &CompareReport, budget: Option<&TokenBudget>) -> Result<String, RenderError> {
    let base = serde_json::to_value(report)?;
    let n = report.matched.len();
    fit(n, budget, |shown, detail| {
        let mut ctx = base.clone();
        ctx["shown"] = json!(shown);
        ctx["detail"] = json!(detail);
        ctx["omitted_kernels"] = json!(n - shown);
        ctx["max_tokens"] = json!(budget.filter(|_| shown < n).map(|b| b.max_tokens));
        render("compare.context", ctx)
    })
}

/// The report's kernels in rank order (the order `template_context` lists them in).
fn ranked(report: &ExplainReport) -> impl Iterator<Item = &crate::explain::report::KernelExplanation> {
    let mut v: Vec<_> = report.kernels.iter().collect();
    v.sort_by_key(|k| k.rank);
    v.into_iter()
}

/// "`metric` = value unit" for the evidence of the shown findings, primary first, each metric once.
fn evidence_lines(k: &crate::explain::report::KernelExplanation) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for f in &k.findings {
        for e in &f.finding.evidence {
            if seen.insert(e.metric.clone()) {
                let unit = if e.unit.is_empty() { String::new() } else { format!(" {}", e.unit) };
                out.push(format!("`{}` = {}{unit}", super::explain_view::md_code(&e.metric), crate::rules::fmt_num(e.value)));
            }
        }
    }
    out
}

/// "SM 69.8%, DRAM 18.7% of peak; occupancy 60% of a theoretical 75% (limited by registers)": the
/// busy units and the occupancy, from the facts (empty when none is known).
fn units_line(f: &crate::facts::Facts) -> String {
    use crate::rules::fmt_num;
    let mut parts = Vec::new();
    let units = crate::rules::regime::utilisation(f);
    if !units.is_empty() {
        let u: Vec<String> = units.iter().map(|(name, pct, _)| format!("{name} {}%", fmt_num(*pct))).collect();
        parts.push(format!("{} of peak", u.join(", ")));
    }
    match (&f.achieved_occupancy_pct, &f.theoretical_occupancy_pct) {
        (Some(a), Some(t)) => {
            let limiter = f.occupancy_limit.as_ref().map(|l| format!(" (limited by {})", l.limiter.label())).unwrap_or_default();
            parts.push(format!("occupancy {}% of a theoretical {}%{limiter}", fmt_num(a.value), fmt_num(t.value)));
        }
        (None, Some(t)) => parts.push(format!("theoretical occupancy {}%", fmt_num(t.value))),
        _ => {}
    }
    parts.join("; ")
}

/// "96 blocks for 132 SMs (fewer blocks than SMs: 36 SMs get no block); 0.73 waves of blocks": how the grid fills
/// the GPU (empty when neither the grid nor the waves are known).
fn grid_line(f: &crate::facts::Facts) -> String {
    use crate::rules::fmt_num;
    let mut parts = Vec::new();
    match (&f.grid_blocks, &f.sm_count) {
        (Some(b), Some(s)) if b.value < s.value => parts.push(format!(
            "{} blocks for {} SMs (fewer blocks than SMs: {} SMs get no block)",
            fmt_num(b.value),
            fmt_num(s.value),
            fmt_num(s.value - b.value)
        )),
        (Some(b), Some(s)) => parts.push(format!("{} blocks for {} SMs", fmt_num(b.value), fmt_num(s.value))),
        _ => {}
    }
    if let Some(w) = &f.waves_per_sm {
        parts.push(format!("{} waves of blocks", fmt_num(w.value)));
    }
    parts.join("; ")
}

/// "global loads use 8 of each 32-byte sector, stores 32 of 32; shared-memory bank conflicts
/// 0% of wavefronts": how well the kernel's accesses use what they move (empty when the profile
/// has no access-pattern metrics).
fn access_line(f: &crate::facts::Facts) -> String {
    use crate::rules::fmt_num;
    let mut parts = Vec::new();
    let bytes = |what: &str, fact: &Option<crate::facts::Fact>| {
        fact.as_ref().map(|b| format!("global {what} use {} of each 32-byte sector", fmt_num(b.value.min(32.0))))
    };
    parts.extend(bytes("loads", &f.global_load_bytes_per_sector));
    parts.extend(bytes("stores", &f.global_store_bytes_per_sector));
    if parts.is_empty() {
        if let Some(x) = &f.global_excessive_sectors_pct {
            parts.push(format!("{}% of global sectors are beyond what a coalesced pattern needs", fmt_num(x.value)));
        }
    }
    if let Some(c) = &f.shared_bank_conflict_pct {
        parts.push(format!("shared-memory bank conflicts cause {}% of shared wavefronts", fmt_num(c.value)));
    }
    parts.join("; ")
}

/// "long_scoreboard 12.3 (45%), barrier 4.1 (15%)": the top stall reasons in cycles per issued
/// instruction and their share (empty without the WarpStateStats section).
fn stalls_line(f: &crate::facts::Facts) -> String {
    let fmt = crate::rules::fmt_num;
    f.stalls
        .iter()
        .map(|s| {
            // Cycles per issued instruction need no unit (the heading says it); another form names its own.
            let unit = match s.cycles_per_issue.unit {
                "cycle" => String::new(),
                "%" => "% of active warps".to_string(),
                u => format!(" {u}s"),
            };
            match s.share_pct {
                Some(p) => format!("{} {}{unit} ({}%)", s.reason, fmt(s.cycles_per_issue.value), fmt(p)),
                None => format!("{} {}{unit}", s.reason, fmt(s.cycles_per_issue.value)),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Source lines the findings point at, largest share first, each line once.
fn hot_lines(k: &crate::explain::report::KernelExplanation) -> Vec<&crate::explain::report::SourceLine> {
    let mut v: Vec<_> = k.findings.iter().flat_map(|f| f.source_lines.iter()).collect();
    v.sort_by(|a, b| b.share_pct.total_cmp(&a.share_pct));
    v.dedup_by(|a, b| a.file == b.file && a.line == b.line && a.text == b.text);
    v
}

/// The changes to try: the findings' suggestions in finding order, each once.
fn changes(k: &crate::explain::report::KernelExplanation) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in k.findings.iter().flat_map(|f| f.finding.suggestions.iter()) {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn render(name: &str, ctx: Value) -> Result<String, RenderError> {
    let env = environment();
    let tmpl = env.get_template(name).map_err(|source| RenderError::Template { name: name.into(), source })?;
    let mut out =
        tmpl.render(minijinja::Value::from_serialize(&ctx)).map_err(|source| RenderError::Template { name: name.into(), source })?;
    while out.contains("\n\n\n") {
        out = out.replace("\n\n\n", "\n\n");
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Renders `n` items with `render(shown, detail)`, cutting to fit `budget`: first the least
/// important items (the last ones), then the detail of the one left, then lines from the end.
fn fit(n: usize, budget: Option<&TokenBudget>, render: impl Fn(usize, u8) -> Result<String, RenderError>) -> Result<String, RenderError> {
    let Some(b) = budget else { return render(n, FULL) };
    let fits = |s: &str| (b.count)(s) <= b.max_tokens;
    for shown in (1..=n).rev() {
        let out = render(shown, FULL)?;
        if fits(&out) {
            return Ok(out);
        }
    }
    for detail in (0..FULL).rev() {
        let out = render(n.min(1), detail)?;
        if fits(&out) {
            return Ok(out);
        }
    }
    // Even one kernel at the least detail is too long (a huge kernel name, a tiny budget): keep
    // whole lines from the top while they fit, and the closing note that says what was left out.
    let out = render(n.min(1), 0)?;
    let (body, note) = match out.rfind("\n(") {
        Some(i) => out.split_at(i + 1),
        None => (out.as_str(), ""),
    };
    let keep = |tail: &str| {
        let mut kept = String::new();
        for line in body.split_inclusive('\n') {
            if !fits(&format!("{kept}{line}{tail}")) {
                break;
            }
            kept.push_str(line);
        }
        (!kept.trim().is_empty()).then(|| kept + tail)
    };
    keep(note).or_else(|| keep("")).ok_or_else(|| {
        let first = out.lines().next().unwrap_or_default();
        RenderError::Budget { max_tokens: b.max_tokens, needed: (b.count)(first) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(key: &'static str, value: f64) -> Option<crate::facts::Fact> {
        Some(crate::facts::Fact { key, label: key, value, unit: "", evidence: Vec::new() })
    }

    #[test]
    fn grid_and_access_lines_say_what_the_raw_metrics_say() {
        let mut f = crate::facts::Facts {
            grid_blocks: fact("grid_blocks", 96.0),
            sm_count: fact("sm_count", 132.0),
            waves_per_sm: fact("waves_per_sm", 0.73),
            global_load_bytes_per_sector: fact("global_load_bytes_per_sector", 8.0),
            global_store_bytes_per_sector: fact("global_store_bytes_per_sector", 32.0),
            shared_bank_conflict_pct: fact("shared_bank_conflict_pct", 0.0),
            ..Default::default()
        };
        assert_eq!(grid_line(&f), "96 blocks for 132 SMs (fewer blocks than SMs: 36 SMs get no block); 0.73 waves of blocks");
        assert_eq!(
            access_line(&f),
            "global loads use 8 of each 32-byte sector; global stores use 32 of each 32-byte sector; \
             shared-memory bank conflicts cause 0% of shared wavefronts"
        );
        f.grid_blocks = fact("grid_blocks", 12288.0);
        f.global_load_bytes_per_sector = None;
        f.global_store_bytes_per_sector = None;
        f.shared_bank_conflict_pct = None;
        assert_eq!(grid_line(&f), "12288 blocks for 132 SMs; 0.73 waves of blocks");
        assert_eq!(access_line(&f), "");
        assert_eq!(grid_line(&crate::facts::Facts::default()), "");
    }

    /// Words as tokens: enough to test the fitting without a model.
    fn words(s: &str) -> usize {
        s.split_whitespace().count()
    }

    fn render_items(shown: usize, detail: u8) -> Result<String, RenderError> {
        let mut s = String::from("# header line\n");
        for i in 0..shown {
            s.push_str(&format!("## item {i}\n"));
            for j in 0..(detail as usize * 3) {
                s.push_str(&format!("- detail {j} of item {i}\n"));
            }
        }
        if shown < 5 {
            s.push_str(&format!("\n({} left out)\n", 5 - shown));
        }
        Ok(s)
    }

    #[test]
    fn fitting_cuts_items_then_detail_then_lines() {
        let unlimited = fit(5, None, render_items).unwrap();
        assert_eq!(unlimited.matches("## item").count(), 5);
        for max in [200, 60, 30, 12, 9, 5, 3] {
            let b = TokenBudget { max_tokens: max, count: &words };
            let out = fit(5, Some(&b), render_items).unwrap();
            assert!(words(&out) <= max, "{max}: {out}");
            assert!(out.starts_with("# header line"), "{max}: {out}");
            // The note of what was cut stays while the header and the note fit (3 + 3 words); all
            // five items (198 words) need no note.
            assert_eq!(out.contains("left out)"), (6..198).contains(&max), "{max}: {out}");
        }
        // A full item is 3 + 6 * 6 = 39 words: 60 hold the header, one and the note, not two.
        let b = TokenBudget { max_tokens: 60, count: &words };
        assert_eq!(fit(5, Some(&b), render_items).unwrap().matches("## item").count(), 1);
        let b = TokenBudget { max_tokens: 2, count: &words };
        assert!(matches!(fit(5, Some(&b), render_items), Err(RenderError::Budget { max_tokens: 2, needed: 3 })));
    }
}
