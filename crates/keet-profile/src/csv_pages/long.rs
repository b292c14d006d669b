//! Long-format pages: `--page details` and `--metrics` (one row per metric, plus rule rows).
//!
//! Columns used (by name): the launch identity columns, `Section Name`, `Body Item Label` (newer
//! ncu, optional), `Metric Name`, `Metric Unit`, `Metric Value`, and for rule rows `Rule Name`,
//! `Rule Type`, `Rule Description`, `Estimated Speedup Type`, `Estimated Speedup`. Rows are ragged
//! (metric rows end after `Metric Value`, often with a trailing empty field).
//!
//! Metric keys: `--metrics` rows already carry raw names; details rows are mapped with
//! [`crate::names::raw_name`]. Unmapped rows are kept as `"<Section>/<Label>"` (or
//! `"<Section>/<Body Item Label>/<Label>"`), repeated unmapped labels get `" #2"`, `" #3"`...
//! When several rows map to the same raw name (a label shown in two sections) the first is kept.

use super::{cell_metric, locale_of, short, trim_cell, Header, IdentityCols, Input, UnitCache};
use crate::names::{self, COMMAND_LINE_SECTION};
use crate::{MetricsBuilder, NcuRuleResult, NcuRuleType, Profile, Result, SourceKind};
use std::collections::HashMap;

pub(super) fn read<'a>(input: &mut Input<'a>, header: &Header<'a>, mut notes: Vec<String>) -> Result<Profile> {
    let rows = input.data_rows_par(header)?;
    let ident = IdentityCols::new(header);
    let c_name = header.col("Metric Name");
    let c_value = header.col("Metric Value");
    let (Some(c_name), Some(c_value)) = (c_name, c_value) else {
        return Err(input.csv_error(header.line, "expected columns \"Metric Name\" and \"Metric Value\" in the header"));
    };
    let c_unit = header.col("Metric Unit");
    let c_section = header.col("Section Name");
    let c_body = header.col("Body Item Label");
    let c_rule = header.col("Rule Name");
    let c_rule_type = header.col("Rule Type");
    let c_rule_desc = header.col("Rule Description");
    let c_speedup_type = header.col("Estimated Speedup Type");
    let c_speedup = header.col("Estimated Speedup");

    let locale = locale_of(rows.iter().filter_map(|(_, f)| f.get(c_value).map(|s| &**s)));

    let mut launches: Vec<crate::Launch> = Vec::new();
    // Per launch; a name seen twice keeps its first row (the builder keeps the first push).
    let mut metrics: Vec<MetricsBuilder> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    // (launch index, "section/body/label") -> rows seen so far, for labels repeated in a table.
    let mut seen: HashMap<(usize, String), usize> = HashMap::new();
    // (launch index, unmapped key) -> rows seen so far.
    let mut repeats: HashMap<(usize, String), usize> = HashMap::new();
    let mut units = UnitCache::new();
    let mut any_detail_section = false;
    let mut empty_rows: Vec<u64> = Vec::new();

    for (line, f) in &rows {
        let line = *line;
        let get = |c: Option<usize>| c.and_then(|c| f.get(c)).map(|s| trim_cell(s)).unwrap_or("");
        let id = ident.id(input, line, f)?;
        let li = *index.entry(id).or_insert_with(|| {
            launches.push(ident.launch(id, f));
            metrics.push(MetricsBuilder::new());
            launches.len() - 1
        });
        let section = get(c_section);
        let rule = get(c_rule);
        if !rule.is_empty() {
            let speedup = get(c_speedup);
            launches[li].ncu_rules.push(NcuRuleResult {
                rule: rule.to_string(),
                section: (!section.is_empty()).then(|| section.to_string()),
                kind: rule_type(get(c_rule_type)),
                message: get(c_rule_desc).to_string(),
                speedup_type: Some(get(c_speedup_type)).filter(|s| !s.is_empty()).map(str::to_string),
                speedup_pct: crate::units::parse_number(speedup, locale).ok().flatten(),
            });
        }
        let label = get(Some(c_name));
        if label.is_empty() {
            if rule.is_empty() {
                empty_rows.push(line);
            }
            continue;
        }
        if f.len() <= c_value {
            return Err(input.csv_error(
                line,
                format!(
                    "expected a value in column \"Metric Value\" (column {}) for metric {:?}, but the row has only {} field(s)",
                    c_value + 1,
                    short(label),
                    f.len()
                ),
            ));
        }
        let raw_value = &*f[c_value];
        let raw_unit = get(c_unit);
        let body = get(c_body);
        let section_display = names::section_display_name(section);
        if section_display != COMMAND_LINE_SECTION {
            any_detail_section = true;
        }
        let occurrence = if body.is_empty() {
            0
        } else {
            let n = seen.entry((li, format!("{section_display}/{body}/{label}"))).or_insert(0);
            *n += 1;
            *n - 1
        };
        let norm = units.get(raw_unit);
        let mut m = cell_metric(trim_cell(raw_value), raw_unit, &norm, locale, line);
        let builder = &mut metrics[li];
        match names::raw_name(section_display, body, label, occurrence) {
            Some(raw) => {
                if section_display != COMMAND_LINE_SECTION {
                    m.label = Some(label);
                }
                m.section = Some(section_display);
                // The same metric shown twice (e.g. "Block Size" in Launch Statistics and in an
                // Occupancy chart): the first is kept.
                builder.push(&raw, m);
            }
            None => {
                m.label = Some(label);
                m.section = Some(section_display);
                let base = if body.is_empty() { format!("{section_display}/{label}") } else { format!("{section_display}/{body}/{label}") };
                // Repeats of an unmapped label: " #2", " #3"... (counted, not searched, so a
                // file with many repeats stays linear).
                let n = repeats.entry((li, base.clone())).or_insert(0);
                *n += 1;
                let key = if *n == 1 { base } else { format!("{base} #{n}") };
                builder.push(&key, m);
            }
        }
    }
    for (l, b) in launches.iter_mut().zip(metrics) {
        l.metrics = b.finish().0;
    }

    input.skipped.notes(&mut notes);
    if !empty_rows.is_empty() {
        notes.push(format!(
            "{} row(s) with neither a metric nor a rule name were ignored (line(s) {})",
            empty_rows.len(),
            super::line_list(&empty_rows)
        ));
    }
    let kind = if any_detail_section || launches.iter().any(|l| !l.ncu_rules.is_empty()) {
        SourceKind::DetailsCsv
    } else {
        SourceKind::MetricsCsv
    };
    Ok(Profile { path: input.path.to_owned(), kind, launches, notes, source_files: Vec::new() })
}

fn rule_type(s: &str) -> NcuRuleType {
    match s.trim().to_ascii_uppercase().as_str() {
        "OPT" => NcuRuleType::Opt,
        "WRN" | "WARNING" => NcuRuleType::Wrn,
        "INF" | "INFO" => NcuRuleType::Inf,
        "ERR" | "ERROR" => NcuRuleType::Err,
        _ => NcuRuleType::Other,
    }
}
