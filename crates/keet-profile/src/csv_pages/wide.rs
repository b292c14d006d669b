//! Wide format: `--page raw` (one row per launch, one column per raw metric, a units row).
//!
//! Columns other than the launch identity columns are raw metric names. The row after the header
//! whose `ID` cell is empty is the units row (one unit per column, normalised once per column).
//! Empty cells (a metric another launch has) are skipped.
//!
//! This is the largest export (thousands of columns, ~2 KB of text per launch per 100 metrics),
//! so a row costs about one instruction per byte: the tokenizer indexes each physical line, 64
//! bytes at a time, into one bit per byte marking where each field ends
//! ([`super::tokenizer::quoted_line`]); that index and a copy of the line are the launch's
//! [`Metrics`], whose values are parsed when read. Rows are read in parallel; the columns (names,
//! units, scale factors) are made once, shared by every launch and kept in header order. The
//! number locale is learnt in the same pass (see [`RowReader::finish`]).

use super::tokenizer::{FieldSink, QuotedLine};
use super::{trim_cell, Fields, Header, IdentityCols, Input, IDENTITY_COLUMNS};
use crate::units::{comma_evidence, normalize_unit, NumberLocale, Scale};
use crate::{Columns, ColumnsBuilder, Launch, MetricValue, Metrics, Profile, Result, RowBuilder, SourceKind};
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
    header_len: usize,
    /// Header positions that are not metric values (identity, repeated names), ascending.
    others: Vec<u32>,
    /// Fields kept for the identity columns: the first `ident_len` of each row.
    ident_len: usize,
}

/// One row being read: a [`FieldSink`] that finds each cell's value and keeps its place in the
/// launch's metrics (values are parsed when read, see [`RowBuilder`]).
struct RowReader<'p, 'a> {
    page: &'p Page,
    line: u32,
    count: usize,
    ident: Fields<'a>,
    row: RowBuilder,
    /// Commas inside the line's fields, when the row was read from the tokenizer's positions
    /// ([`FieldSink::line_fields`]).
    line_commas: Option<usize>,
    /// Commas inside the fields that are not metric values (see [`RowReader::finish`]).
    commas_elsewhere: usize,
    /// A value shows a decimal comma (`units::comma_evidence`).
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

fn commas(s: &str) -> usize {
    s.bytes().filter(|&b| b == b',').count()
}

impl<'p, 'a> RowReader<'p, 'a> {
    fn new(page: &'p Page, line: u64) -> Self {
        RowReader {
            page,
            line: u32::try_from(line).unwrap_or(u32::MAX),
            count: 0,
            ident: Vec::with_capacity(page.ident_len),
            row: RowBuilder::new(page.columns.clone()),
            line_commas: None,
            commas_elsewhere: 0,
            comma: false,
            extra: false,
        }
    }

    /// A field that is not a metric value: identity, a repeated column, or past the header.
    fn other_field(&mut self, i: usize, f: &str) {
        self.commas_elsewhere += commas(f);
        if i >= self.page.map.len() {
            self.extra |= !f.trim().is_empty();
        }
    }

    fn finish(self) -> Row<'a> {
        // Values read one by one were checked for a decimal comma as they came. For a row read
        // from the tokenizer's positions, the values are looked at only when the line's fields
        // hold more commas than its other fields do.
        let metrics = self.row.finish(self.line);
        let comma = self.comma || self.line_commas.is_some_and(|c| c > self.commas_elsewhere) && metrics.raw_values().any(comma_evidence);
        Row { ident: self.ident, metrics, comma, extra: self.extra, count: self.count }
    }
}

impl<'a> FieldSink<'a> for RowReader<'_, 'a> {
    fn field(&mut self, f: Cow<'a, str>) {
        let i = self.count;
        self.count += 1;
        match self.page.map.get(i) {
            Some(&col) if col != NOT_METRIC => {
                let cell = trim_cell(&f);
                if memchr::memchr(b',', cell.as_bytes()).is_some() {
                    self.comma |= comma_evidence(cell);
                }
                self.row.set_text(i, cell);
            }
            _ => self.other_field(i, &f),
        }
        if i < self.page.ident_len {
            self.ident.push(f);
        }
    }

    /// The parallel reader's usual case: the tokenizer's index becomes the row's and the line
    /// its text. Only the fields that are not metric values are looked at; values are trimmed
    /// only when the tokenizer saw a field that may need it.
    fn line_fields(&mut self, line: &'a str, q: QuotedLine) {
        let text = |k: usize| q.span(k).map_or("", |(s, e)| &line[s as usize..e as usize]);
        let n = q.len();
        if self.count > 0 {
            for (s, e) in q.spans() {
                self.field(Cow::Borrowed(&line[s as usize..e as usize]));
            }
            return;
        }
        for k in 0..self.page.ident_len.min(n) {
            self.ident.push(Cow::Borrowed(text(k)));
        }
        if q.inner_commas > 0 {
            for &k in self.page.others.iter().take_while(|&&k| (k as usize) < n) {
                self.commas_elsewhere += commas(text(k as usize));
            }
        }
        for k in self.page.header_len..n {
            self.other_field(k, text(k));
        }
        let mut narrow = Vec::new();
        if q.padded {
            for (k, (s, e)) in q.spans().enumerate().take(self.page.map.len()) {
                let cell = &line[s as usize..e as usize];
                let trimmed = trim_cell(cell);
                if self.page.map[k] != NOT_METRIC && trimmed.len() != cell.len() {
                    let start = trimmed.as_ptr() as usize - line.as_ptr() as usize;
                    narrow.push((k, start, start + trimmed.len()));
                }
            }
        }
        self.count = n;
        self.line_commas = Some(q.inner_commas as usize);
        self.row = RowBuilder::from_line(self.page.columns.clone(), line, q);
        for (k, s, e) in narrow {
            self.row.narrow(k, s, e);
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

    // Metric columns in header order, each distinct unit normalised once.
    let mut cols = ColumnsBuilder::with_capacity(header.fields.len(), header.fields.iter().map(|f| f.len()).sum());
    let mut fields: Vec<u32> = Vec::with_capacity(header.fields.len());
    for (idx, name) in header.fields.iter().enumerate() {
        let name = trim_cell(name);
        if name.is_empty() || IDENTITY_COLUMNS.contains(&name) {
            continue;
        }
        let raw_unit = units.get(idx).map(|u| trim_cell(u)).unwrap_or("");
        cols.push_raw(name, raw_unit, || {
            let (factor, unit) = normalize_unit(raw_unit);
            (unit, Scale::new(factor))
        });
        fields.push(idx as u32);
    }
    let (columns, slot) = Columns::raw_page(cols, fields.clone());
    let duplicates = slot.iter().filter(|s| s.is_none()).count();
    if duplicates > 0 {
        notes.push(format!("{duplicates} duplicate metric column(s) in the header were ignored (first kept)"));
    }
    let mut map = vec![NOT_METRIC; header.fields.len()];
    for (idx, s) in fields.into_iter().zip(slot) {
        if let Some(c) = s {
            map[idx as usize] = c;
        }
    }
    let others = (0..map.len() as u32).filter(|&k| map[k as usize] == NOT_METRIC).collect();
    let page =
        Page { columns, map, header_len: header.fields.len(), others, ident_len: ident.max_index().map_or(0, |i| i + 1).max(id_col + 1) };

    // Values are kept as text and parsed when read; the page's locale is learnt here: each row
    // says whether a value shows a decimal comma (`units::comma_evidence`).
    let mut rows = Vec::new();
    if let Some((line, fields)) = first_row {
        let mut r = RowReader::new(&page, line);
        for f in fields {
            r.field(f);
        }
        rows.push((line, r.finish()));
    }
    rows.extend(input.rows_par(header, |line| RowReader::new(&page, line), RowReader::finish)?);
    if rows.iter().any(|(_, r)| r.comma) {
        for (_, r) in &mut rows {
            r.metrics.set_locale(NumberLocale::CommaDecimal);
        }
    }

    // Identity and validation in file order: errors name the first bad line.
    let header_len = page.header_len;
    let mut launches = Vec::with_capacity(rows.len());
    let mut lines = Vec::with_capacity(rows.len());
    for (line, r) in rows {
        let id = ident.id(input, line, &r.ident)?;
        if r.extra {
            return Err(input.csv_error(line, format!("expected at most {header_len} fields (one per header column), found {}", r.count)));
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
    Ok(Profile { path: input.path.to_owned(), kind: SourceKind::RawCsv, launches, notes, source_files: Vec::new() })
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
