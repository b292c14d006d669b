//! Wide format: `--page raw` (one row per launch, one column per raw metric, a units row).
//!
//! Columns other than the launch identity columns are raw metric names. The row after the header
//! whose `ID` cell is empty is the units row (one unit per column, normalised once per column).
//! Empty cells (a metric another launch has) are skipped.
//!
//! This is the largest export (thousands of columns, ~2 KB of text per launch per 100 metrics),
//! so it is read in one pass per row: each physical line is tokenized and its cells parsed
//! straight into the launch's [`Metrics`] (no list of fields in between), rows in parallel, the
//! columns (names, units, scale factors) shared by every launch and kept in header order.

use super::tokenizer::FieldSink;
use super::{trim_cell, Fields, Header, IdentityCols, Input, IDENTITY_COLUMNS};
use crate::profile::units::{normalize_unit, NumberLocale, Scale};
use crate::profile::{Column, Columns, Launch, MetricValue, Metrics, Profile, Result, RowBuilder, SourceKind, Unit};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// Marks a header position that is not a metric column.
const NOT_METRIC: u32 = u32::MAX;

/// What every row of the page shares.
struct Page {
    columns: Arc<Columns>,
    /// Header position -> column index, or [`NOT_METRIC`].
    map: Vec<u32>,
    /// Per column.
    scales: Vec<Scale>,
    header_len: usize,
    /// Fields kept for the identity columns: the first `ident_len` of each row.
    ident_len: usize,
}

/// One row being read: a [`FieldSink`] that parses cells into the launch's metrics as they come.
struct RowReader<'p, 'a> {
    page: &'p Page,
    /// `None`: parse as dot-decimal and watch for a decimal comma (see `read`).
    locale: Option<NumberLocale>,
    line: u32,
    count: usize,
    ident: Fields<'a>,
    row: RowBuilder,
    comma: bool,
    extra: bool,
}

struct Row<'a> {
    ident: Fields<'a>,
    metrics: Metrics,
    comma: bool,
    /// A non-empty field past the header's width.
    extra: bool,
    count: usize,
}

impl<'p, 'a> RowReader<'p, 'a> {
    fn new(page: &'p Page, locale: Option<NumberLocale>, line: u64) -> Self {
        RowReader {
            page,
            locale,
            line: u32::try_from(line).unwrap_or(u32::MAX),
            count: 0,
            ident: Vec::with_capacity(page.ident_len),
            // ~5 bytes of text per cell is typical; the builder grows if needed.
            row: RowBuilder::new(page.columns.clone(), page.columns.len() * 6),
            comma: false,
            extra: false,
        }
    }

    fn finish(self) -> Row<'a> {
        Row { ident: self.ident, metrics: self.row.finish(), comma: self.comma, extra: self.extra, count: self.count }
    }
}

impl<'a> FieldSink<'a> for RowReader<'_, 'a> {
    #[inline]
    fn field(&mut self, f: Cow<'a, str>) {
        let i = self.count;
        self.count += 1;
        match self.page.map.get(i) {
            Some(&NOT_METRIC) => {}
            Some(&col) => {
                let cell = trim_cell(&f);
                if !cell.is_empty() {
                    let scale = self.page.scales[col as usize];
                    let value = match self.locale {
                        Some(locale) => scale.parse(cell, locale),
                        None => {
                            let (v, comma) = scale.parse_dot(cell);
                            self.comma |= comma;
                            v
                        }
                    };
                    match value {
                        Some(v) => self.row.push_number(col, cell, v, self.line),
                        None => self.row.push_text(col, cell, self.line),
                    }
                }
            }
            None => self.extra |= !f.trim().is_empty(),
        }
        if i < self.page.ident_len {
            self.ident.push(f);
        }
    }
}

pub(super) fn read<'a>(input: &mut Input<'a>, header: &Header<'a>, mut notes: Vec<String>) -> Result<Profile> {
    let ident = IdentityCols::new(header);
    let id_col = header.col("ID").unwrap_or(0);

    // The units row: first row, empty ID cell.
    let (units, first_row): (Fields<'a>, _) = match input.next_row(header)? {
        Some((_, f)) if f.get(id_col).is_none_or(|s| s.trim().is_empty()) => (f, None),
        other => (Vec::new(), other),
    };

    // Metric columns in header order, units normalised once per distinct unit.
    let mut norms: HashMap<&str, (Scale, Arc<str>, Unit)> = HashMap::new();
    let mut cols: Vec<Column> = Vec::with_capacity(header.fields.len());
    let mut positions: Vec<(usize, Scale)> = Vec::with_capacity(header.fields.len());
    for (idx, name) in header.fields.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() || IDENTITY_COLUMNS.contains(&name) {
            continue;
        }
        let raw_unit = units.get(idx).map(|u| u.trim()).unwrap_or("");
        let (scale, raw_unit, unit) = norms
            .entry(raw_unit)
            .or_insert_with(|| {
                let (factor, unit) = normalize_unit(raw_unit);
                (Scale::new(factor), raw_unit.into(), unit)
            })
            .clone();
        cols.push(Column::new(name, raw_unit, unit));
        positions.push((idx, scale));
    }
    let (columns, slot) = Columns::keep_order(cols);
    let duplicates = slot.iter().filter(|s| s.is_none()).count();
    if duplicates > 0 {
        notes.push(format!("{duplicates} duplicate metric column(s) in the header were ignored (first kept)"));
    }
    let mut map = vec![NOT_METRIC; header.fields.len()];
    let mut scales = vec![Scale::new(1.0); columns.len()];
    for ((idx, scale), s) in positions.into_iter().zip(slot) {
        if let Some(c) = s {
            map[idx] = c;
            scales[c as usize] = scale;
        }
    }
    let page = Page { columns, map, scales, header_len: header.fields.len(), ident_len: ident.max_index().map_or(0, |i| i + 1).max(id_col + 1) };

    // Rows are parsed as dot-decimal, each saying whether a value shows a decimal comma
    // (`units::detect_locale`'s test, run only on values with a comma); when one does, every row
    // is read again in the comma locale. One pass for the usual file instead of a detection pass.
    let start = input.clone();
    let read_rows = |input: &mut Input<'a>, locale: Option<NumberLocale>| -> Result<Vec<(u64, Row<'a>)>> {
        let mut rows = Vec::new();
        if let Some((line, fields)) = &first_row {
            let mut r = RowReader::new(&page, locale, *line);
            for f in fields {
                r.field(f.clone());
            }
            rows.push((*line, r.finish()));
        }
        rows.extend(input.rows_par(header, |line| RowReader::new(&page, locale, line), RowReader::finish)?);
        Ok(rows)
    };
    let mut rows = read_rows(input, None)?;
    if rows.iter().any(|(_, r)| r.comma) {
        *input = start;
        rows = read_rows(input, Some(NumberLocale::CommaDecimal))?;
    }

    // Identity and validation in file order: errors name the first bad line.
    let header_len = page.header_len;
    let mut launches = Vec::with_capacity(rows.len());
    let mut lines = Vec::with_capacity(rows.len());
    for (line, r) in rows {
        let id = ident.id(input, line, &r.ident)?;
        if r.extra {
            return Err(input.csv_error(
                line,
                format!("expected at most {header_len} fields (one per header column), found {}", r.count),
            ));
        }
        let mut l = ident.launch(id, &r.ident);
        l.metrics = r.metrics;
        fill_from_metrics(&mut l);
        launches.push(l);
        lines.push(line);
    }

    // One row per launch is the norm; a repeated ID is the same launch: merge, first value wins.
    let mut first: HashMap<u64, usize> = HashMap::new();
    let mut merged: Vec<u64> = Vec::new();
    let mut kept: Vec<Launch> = Vec::with_capacity(launches.len());
    for (l, line) in launches.into_iter().zip(&lines) {
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
    if units.is_empty() && !lines.is_empty() {
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
