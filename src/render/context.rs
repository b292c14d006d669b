//! `--format context`: a compact Markdown report made for an LLM's context window (a coding agent's
//! prompt), for `keet explain` and `keet compare`, fitted to a token budget.
//!
//! Per kernel it keeps what an agent needs to act: identity and launch shape, the regime and the
//! primary problem with their numbers, the top evidence, the hottest source lines and the changes
//! to try. With a budget (`--max-tokens`, counted with the active model's tokenizer) the least
//! important kernels go first (the report's own order: time share for explain, size of the time
//! change for compare), then the last kernel's detail, and a note says what was left out. The
//! result never exceeds the budget; a budget too small for the one-line header is an error.

use super::RenderError;
use crate::compare::CompareReport;
use crate::explain::report::ExplainReport;
use crate::templating::report_environment;
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
            kv["occupancy_line"] = json!(occupancy_line(&k.analysis.facts));
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
                out.push(format!("`{}` = {}{unit}", crate::format::md_code(&e.metric), crate::format::number(e.value)));
            }
        }
    }
    out
}

/// "busiest DRAM at 85% of peak, then SM 40%, L2 30%": the measured units, busiest first; when
/// every unit is under [`SOL_IDLE_PCT`] the line says so first (empty when no unit is measured).
///
/// [`SOL_IDLE_PCT`]: crate::rules::thresholds::SOL_IDLE_PCT
fn units_line(f: &crate::facts::Facts) -> String {
    use crate::rules::{fmt_num, thresholds::SOL_IDLE_PCT};
    let mut units = crate::rules::regime::utilisation(f);
    units.sort_by(|a, b| b.1.total_cmp(&a.1));
    let Some((first, rest)) = units.split_first() else { return String::new() };
    let then: Vec<String> = rest.iter().map(|(name, pct, _)| format!("{name} {}%", fmt_num(*pct))).collect();
    let then = if then.is_empty() { String::new() } else { format!(", then {}", then.join(", ")) };
    let busiest = format!("busiest {} at {}% of peak{then}", first.0, fmt_num(first.1));
    if first.1 < SOL_IDLE_PCT {
        format!("every unit is under {}% of its peak ({busiest})", fmt_num(SOL_IDLE_PCT))
    } else {
        busiest
    }
}

/// "limited by the registers each thread uses: achieved 60% of a theoretical 75%" (empty when the
/// profile has no occupancy).
fn occupancy_line(f: &crate::facts::Facts) -> String {
    use crate::format::number as fmt_num;
    // At a theoretical 100% nothing limits: the smallest limit is only the first of several ties.
    let below_max = f.theoretical_occupancy_pct.as_ref().is_some_and(|t| t.value < 99.5);
    let limiter =
        f.occupancy_limit.as_ref().filter(|_| below_max).map(|l| format!("limited by {}: ", l.limiter.resource())).unwrap_or_default();
    match (&f.achieved_occupancy_pct, &f.theoretical_occupancy_pct) {
        (Some(a), Some(t)) => format!("{limiter}achieved {}% of a theoretical {}%", fmt_num(a.value), fmt_num(t.value)),
        (None, Some(t)) => format!("{limiter}theoretical {}%", fmt_num(t.value)),
        _ => String::new(),
    }
}

/// "96 blocks for 132 SMs (fewer blocks than SMs: 36 SMs get no block); 0.73 waves of blocks", or
/// for a larger grid how many full waves it runs: how the grid fills the GPU (empty when neither
/// the grid nor the waves are known).
fn grid_line(f: &crate::facts::Facts) -> String {
    use crate::format::number as fmt_num;
    let mut parts = Vec::new();
    let short = match (&f.grid_blocks, &f.sm_count) {
        (Some(b), Some(s)) if b.value < s.value => {
            parts.push(format!(
                "{} blocks for {} SMs (fewer blocks than SMs: {} SMs get no block)",
                fmt_num(b.value),
                fmt_num(s.value),
                fmt_num(s.value - b.value)
            ));
            true
        }
        (Some(b), Some(s)) => {
            parts.push(format!("{} blocks for {} SMs", fmt_num(b.value), fmt_num(s.value)));
            false
        }
        _ => false,
    };
    if let Some(w) = &f.waves_per_sm {
        let fill = match w.value {
            _ if short => "",
            x if x < 1.0 => ": less than one full wave (every SM gets a block, but slots are left empty)",
            x if x <= 4.0 => ": between one and four full waves",
            _ => ": more than four waves, so the last partial wave hardly matters",
        };
        let waves = if w.value == 1.0 { "wave" } else { "waves" };
        parts.push(format!("{} {waves} of blocks{fill}", fmt_num(w.value)));
    }
    parts.join("; ")
}

/// "most wasted: global loads (uncoalesced: a warp's loads use 8 of each 32-byte sector); global
/// stores use 32 of each 32-byte sector; shared-memory bank conflicts cause 0% of shared
/// wavefronts": how well the kernel's accesses use what they move, the most wasteful first (empty
/// when the profile has no access-pattern metrics).
fn access_line(f: &crate::facts::Facts) -> String {
    use crate::rules::{fmt_num, thresholds::ACCESS_WELL_USED_WASTE};
    // (waste as a share of what is moved, the statement, the statement when it leads)
    let mut parts: Vec<(f64, String, String)> = Vec::new();
    // ncu's count of sectors beyond the ideal pattern, when it finds (almost) none, outranks the
    // SASS bytes-per-sector ratios (which count asynchronous copies at a fraction of their bytes),
    // as in the rule layer (`estimate::coalescing_waste_source`).
    let excess = f.global_excessive_sectors_pct.as_ref().map(|x| x.value);
    let per_direction = if excess.is_some_and(|x| x / 100.0 < ACCESS_WELL_USED_WASTE) {
        [("loads", &None), ("stores", &None)]
    } else {
        [("loads", &f.global_load_bytes_per_sector), ("stores", &f.global_store_bytes_per_sector)]
    };
    for (what, fact) in per_direction {
        if let Some(b) = fact {
            let used = b.value.clamp(0.0, 32.0);
            if used <= 0.0 {
                // No request counted (none issued, or all through TMA/async copies): nothing wasted.
                let none = format!("no global {what} counted");
                parts.push((0.0, none.clone(), none));
                continue;
            }
            let waste = 1.0 - used / 32.0;
            let plain = format!("global {what} use {} of each 32-byte sector", fmt_num(used));
            let lead = format!("global {what} (uncoalesced: a warp's {what} use {} of each 32-byte sector)", fmt_num(used));
            parts.push((waste, plain, lead));
        }
    }
    if parts.is_empty() {
        if let Some(x) = &f.global_excessive_sectors_pct {
            let plain = format!("{}% of global sectors are beyond what a coalesced pattern needs", fmt_num(x.value));
            let lead = format!("global loads and stores (uncoalesced: {plain})");
            parts.push((x.value / 100.0, plain, lead));
        }
    }
    if let Some(c) = &f.shared_bank_conflict_pct {
        let plain = format!("shared-memory bank conflicts cause {}% of shared wavefronts", fmt_num(c.value));
        parts.push((c.value / 100.0, plain.clone(), format!("shared memory ({plain})")));
    }
    parts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let Some(((top, _, lead), rest)) = parts.split_first() else { return String::new() };
    let rest: Vec<&str> = rest.iter().map(|p| p.1.as_str()).collect();
    let rest = if rest.is_empty() { String::new() } else { format!("; {}", rest.join("; ")) };
    if *top < ACCESS_WELL_USED_WASTE {
        let all: Vec<&str> = parts.iter().map(|p| p.1.as_str()).collect();
        return format!("every access pattern measured uses its sectors and banks well: {}", all.join("; "));
    }
    format!("most wasted: {lead}{rest}")
}

/// "long_scoreboard 12.3 (45%), barrier 4.1 (15%)": the top stall reasons in cycles per issued
/// instruction and their share (empty without the WarpStateStats section).
fn stalls_line(f: &crate::facts::Facts) -> String {
    let fmt = crate::format::number;
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
    let env = report_environment();
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
    use crate::facts::FactKey;

    fn fact(key: FactKey, value: f64) -> Option<crate::facts::Fact> {
        Some(crate::facts::Fact { key, label: key.as_str(), value, unit: "", evidence: Vec::new() })
    }

    #[test]
    fn grid_and_access_lines_say_what_the_raw_metrics_say() {
        let mut f = crate::facts::Facts {
            grid_blocks: fact(FactKey::GridBlocks, 96.0),
            sm_count: fact(FactKey::SmCount, 132.0),
            waves_per_sm: fact(FactKey::WavesPerSm, 0.73),
            global_load_bytes_per_sector: fact(FactKey::GlobalLoadBytesPerSector, 8.0),
            global_store_bytes_per_sector: fact(FactKey::GlobalStoreBytesPerSector, 32.0),
            shared_bank_conflict_pct: fact(FactKey::SharedBankConflictPct, 0.0),
            ..Default::default()
        };
        assert_eq!(grid_line(&f), "96 blocks for 132 SMs (fewer blocks than SMs: 36 SMs get no block); 0.73 waves of blocks");
        assert_eq!(
            access_line(&f),
            "most wasted: global loads (uncoalesced: a warp's loads use 8 of each 32-byte sector); \
             global stores use 32 of each 32-byte sector; shared-memory bank conflicts cause 0% of shared wavefronts"
        );
        // ncu's count of sectors beyond the ideal outranks the SASS ratio (asynchronous copies).
        f.global_excessive_sectors_pct = fact(FactKey::GlobalExcessiveSectorsPct, 0.0);
        assert_eq!(
            access_line(&f),
            "every access pattern measured uses its sectors and banks well: \
             0% of global sectors are beyond what a coalesced pattern needs; shared-memory bank conflicts cause 0% of shared wavefronts"
        );
        f.global_excessive_sectors_pct = None;
        f.global_load_bytes_per_sector = fact(FactKey::GlobalLoadBytesPerSector, 0.0);
        f.shared_bank_conflict_pct = fact(FactKey::SharedBankConflictPct, 50.0);
        assert_eq!(
            access_line(&f),
            "most wasted: shared memory (shared-memory bank conflicts cause 50% of shared wavefronts); \
             no global loads counted; global stores use 32 of each 32-byte sector"
        );
        f.grid_blocks = fact(FactKey::GridBlocks, 12288.0);
        f.global_load_bytes_per_sector = None;
        f.global_store_bytes_per_sector = None;
        f.shared_bank_conflict_pct = None;
        assert_eq!(
            grid_line(&f),
            "12288 blocks for 132 SMs; 0.73 waves of blocks: less than one full wave (every SM gets a block, but slots are left empty)"
        );
        f.waves_per_sm = fact(FactKey::WavesPerSm, 2.5);
        assert!(grid_line(&f).ends_with("waves of blocks: between one and four full waves"), "{}", grid_line(&f));
        f.waves_per_sm = fact(FactKey::WavesPerSm, 93.0);
        assert!(grid_line(&f).ends_with(": more than four waves, so the last partial wave hardly matters"));
        assert_eq!(access_line(&f), "");
        assert_eq!(grid_line(&crate::facts::Facts::default()), "");
    }

    #[test]
    fn the_units_line_names_the_busiest_unit_first_and_says_when_none_is_busy() {
        let pct = |key: FactKey, v: f64| {
            let metric = format!("{key}.avg.pct_of_peak_sustained_elapsed");
            Some(crate::facts::Fact {
                key,
                label: key.as_str(),
                value: v,
                unit: "%",
                evidence: vec![crate::facts::Evidence {
                    metric,
                    value: v,
                    unit: "%".into(),
                    raw_value: v.to_string(),
                    raw_unit: "%".into(),
                    origin: String::new(),
                }],
            })
        };
        let mut f = crate::facts::Facts {
            sm_throughput_pct: pct(FactKey::SmThroughputPct, 40.0),
            dram_throughput_pct: pct(FactKey::DramThroughputPct, 85.0),
            ..Default::default()
        };
        assert_eq!(units_line(&f), "busiest DRAM at 85% of peak, then SM 40%");
        f.dram_throughput_pct = pct(FactKey::DramThroughputPct, 5.0);
        f.sm_throughput_pct = pct(FactKey::SmThroughputPct, 12.0);
        assert_eq!(units_line(&f), "every unit is under 30% of its peak (busiest SM at 12% of peak, then DRAM 5%)");
        assert_eq!(units_line(&crate::facts::Facts::default()), "");
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
