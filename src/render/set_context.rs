//! A set of profiles as compact text for an LLM's context window (the `set` format of `keet eval
//! --sets`, and the sets section of `keet explain --format context`): one table row per member with
//! its varying value, time, regime, busiest unit (DRAM, L2, L1/TEX or SM, as the single-profile
//! bound-unit rule names it; ncu's combined memory throughput only where no unit was measured) and
//! its % of peak, and primary problem; the fastest member; where the regime or the primary problem
//! changes; how time scales; what each version step changed (or the version's effect where the
//! versions repeat across files); in `keet explain`'s section, the set's summary on top (the
//! expert's, or the model's text that passed its checks, marked). Everything else comes from the
//! set's structured analysis ([`crate::sets`]), which is computed from the members' facts; nothing
//! is added here but the layout.

use crate::format::number as fmt_num;
use crate::report::writer::Writer;
use crate::sets::{KernelSet, Member};

/// Kinds of set findings shown (the others repeat the table or are bookkeeping).
const SHOWN_FINDINGS: [&str; 4] = ["change", "scaling", "step", "effect"];

/// The set as compact Markdown.
pub fn set_context(set: &KernelSet) -> String {
    let varies = if set.varies.is_empty() { "nothing".to_string() } else { crate::format::and_list(&set.varies) };
    let mut out = format!("## Set `{}`: {} members, varying {varies} (ordered by {})\n\n", set.name, set.members.len(), set.order);
    out.push_str("| # | member | file | time | regime | busiest unit | primary problem |\n|---|---|---|---|---|---|---|\n");
    for (i, m) in set.members.iter().enumerate() {
        out.push_str(&member_row(i + 1, m));
    }
    out.push('\n');
    if let Some(f) = &set.fastest {
        let time = f.duration_ns.map(crate::format::duration).unwrap_or_else(|| "?".into());
        let per_thread = set.members.iter().find(|m| *m.file == *f.file && *m.kernel == *f.kernel && m.value == f.value).and_then(|m| {
            let threads = m.threads().filter(|t| *t > 0.0)?;
            Some(format!(", {} ns per thread", fmt_num(m.duration_ns? / threads)))
        });
        let shown = if f.by == "time" { String::new() } else { per_thread.unwrap_or_default() };
        let per_thread = f.by != "time";
        let noise = crate::sets::findings::same_time_spread_pct(&set.members, per_thread)
            .map(|spread| format!(" (every member within {}% of it: the same time within noise)", fmt_num(spread)))
            .unwrap_or_default();
        out.push_str(&format!("Fastest (by {}): {} at {time}{shown}{noise}.\n", f.by, f.value));
    }
    for finding in set.findings.iter().filter(|f| SHOWN_FINDINGS.contains(&f.kind.as_str())) {
        out.push_str(&format!("- {}\n", finding.text));
    }
    out
}

fn member_row(number: usize, m: &Member) -> String {
    let file = m.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let time = m.duration_ns.map(crate::format::duration).unwrap_or_else(|| "?".into());
    let unit = match m.shown_unit() {
        Some((u, p)) => format!("{u} {}%", fmt_num(p)),
        None => "not measured".into(),
    };
    let primary = m.primary.unwrap_or("none found");
    format!("| {number} | {} | {file} | {time} | {} | {unit} | {primary} |\n", m.value, m.regime)
}

/// The sets section appended to `keet explain --format context` when sets were found: each set's
/// summary (marked when the model wrote it) above its table.
pub fn sets_section(sets: &[KernelSet]) -> String {
    if sets.is_empty() {
        return String::new();
    }
    let mut out = format!("\n# Sets of profiles ({})\n\n", sets.len());
    for set in sets {
        let context = set_context(set);
        let (header, rest) = context.split_once("\n\n").unwrap_or((context.as_str(), ""));
        let by = if set.summary_by == Writer::Model { " (model)" } else { "" };
        out.push_str(&format!("{header}\n\nIn short{by}: {}\n\n{rest}\n", set.summary));
    }
    out
}
