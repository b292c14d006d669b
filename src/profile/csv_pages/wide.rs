//! Wide format: `--page raw` (one row per launch, one column per raw metric, a units row).
//!
//! Columns other than the launch identity columns are raw metric names. The row after the header
//! whose `ID` cell is empty is the units row (one unit per column, normalised once per column).
//! Empty cells (a metric another launch has) are skipped. This is the largest export (thousands of
//! columns), so columns are sorted and their units normalised once, rows are converted in
//! parallel, and no cell is copied before it becomes a [`Metric`].

use super::{locale_of, number_of, Header, IdentityCols, Input, IDENTITY_COLUMNS};
use crate::profile::units::normalize_unit;
use crate::profile::{Column, Columns, Launch, MetricValue, Metrics, Profile, Result, RowBuilder, SourceKind, Unit};
use rayon::prelude::*;

struct Col<'h> {
    idx: usize,
    name: &'h str,
    raw_unit: &'h str,
    norm: (f64, Unit),
}

pub(super) fn read<'a>(input: &mut Input<'a>, header: &Header<'a>, mut notes: Vec<String>) -> Result<Profile> {
    let mut rows = input.data_rows(header)?;
    let ident = IdentityCols::new(header);
    let id_col = header.col("ID").unwrap_or(0);

    // The units row: first row, empty ID cell.
    let units: super::Fields<'a> = match rows.first() {
        Some((_, f)) if f.get(id_col).is_none_or(|s| s.trim().is_empty()) => rows.remove(0).1,
        _ => Vec::new(),
    };

    let mut cols: Vec<Col<'_>> = Vec::with_capacity(header.fields.len());
    for (idx, name) in header.fields.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() || IDENTITY_COLUMNS.contains(&name) {
            continue;
        }
        let raw_unit = units.get(idx).map(|u| u.trim()).unwrap_or("");
        cols.push(Col { idx, name, raw_unit, norm: normalize_unit(raw_unit) });
    }
    cols.sort_by(|a, b| a.name.cmp(b.name));
    let before = cols.len();
    cols.dedup_by(|b, a| a.name == b.name);
    if cols.len() != before {
        notes.push(format!("{} duplicate metric column(s) in the header were ignored (first kept)", before - cols.len()));
    }

    let locale = locale_of(rows.iter().flat_map(|(_, f)| cols.iter().filter_map(move |c| f.get(c.idx).map(|s| &**s))));

    // Identity and validation first (sequential: errors name the first bad line).
    let header_len = header.fields.len();
    let mut launches = Vec::with_capacity(rows.len());
    for (line, f) in &rows {
        let id = ident.id(input, *line, f)?;
        if f.len() > header_len && f[header_len..].iter().any(|s| !s.trim().is_empty()) {
            return Err(input.csv_error(
                *line,
                format!("expected at most {header_len} fields (one per header column), found {}", f.len()),
            ));
        }
        launches.push(ident.launch(id, f));
    }

    // Shared by every launch of the page: names, units (normalised once) and the sort order.
    let (columns, _) = Columns::new(cols.iter().map(|c| Column::new(c.name, c.raw_unit, c.norm.1.clone())).collect());
    let build = |(line, f): &(u64, super::Fields<'a>)| -> Metrics {
        let line = u32::try_from(*line).unwrap_or(u32::MAX);
        let bytes: usize = f.iter().map(|s| s.len()).sum();
        let mut row = RowBuilder::new(columns.clone(), bytes);
        // `cols` is sorted and unique like `columns`, so position `i` is column `i`.
        for (i, c) in cols.iter().enumerate() {
            let Some(cell) = f.get(c.idx) else { continue };
            let cell = cell.trim();
            if cell.is_empty() {
                continue;
            }
            match number_of(cell, c.norm.0, locale) {
                Some(v) => row.push_number(i as u32, cell, v, line),
                None => row.push_text(i as u32, cell, line),
            }
        }
        row.finish()
    };
    let maps: Vec<Metrics> =
        if rows.len() >= 4 { rows.par_iter().map(build).collect() } else { rows.iter().map(build).collect() };

    for (l, m) in launches.iter_mut().zip(maps) {
        l.metrics = m;
        fill_from_metrics(l);
    }
    // One row per launch is the norm; a repeated ID is the same launch: merge, first value wins.
    let mut first: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut merged: Vec<u64> = Vec::new();
    let mut kept: Vec<Launch> = Vec::with_capacity(launches.len());
    for (l, (line, _)) in launches.into_iter().zip(&rows) {
        match first.get(&l.id) {
            Some(&i) => {
                merged.push(*line);
                kept[i].metrics.merge_missing(&l.metrics);
            }
            None => {
                first.insert(l.id, kept.len());
                kept.push(l);
            }
        }
    }
    let launches = kept;
    if !merged.is_empty() {
        notes.push(format!(
            "{} row(s) repeat the ID of an earlier row and were merged into it (line(s) {})",
            merged.len(),
            super::line_list(&merged)
        ));
    }
    input.skipped.notes(&mut notes);
    if units.is_empty() && !rows.is_empty() {
        notes.push("no units row under the header: units taken as empty".to_string());
    }
    Ok(Profile { path: input.path.to_owned(), kind: SourceKind::RawCsv, launches, notes })
}

/// Device name and compute capability from device attributes when the identity columns lack them.
pub(super) fn fill_from_metrics(l: &mut Launch) {
    if l.device_name.is_none() {
        if let Some(MetricValue::Text(t)) = l.metrics.get("device__attribute_display_name").map(|m| m.value) {
            l.device_name = Some(t.to_string());
        }
    }
    if l.compute_capability.is_none() {
        let major = l.metrics.get("device__attribute_compute_capability_major").and_then(|m| m.as_f64());
        let minor = l.metrics.get("device__attribute_compute_capability_minor").and_then(|m| m.as_f64());
        if let (Some(a), Some(b)) = (major, minor) {
            l.compute_capability = Some(format!("{a}.{b}"));
        }
    }
}
