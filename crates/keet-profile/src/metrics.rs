//! A launch's metrics: a compact, sorted table of [`Metric`]s keyed by raw metric name.
//!
//! Profiles are large (a `--page raw` export of 30 launches holds 66k values), so metrics are not
//! stored one heap object each. A [`Metrics`] holds:
//! - the *columns* (name, unit as written, normalised unit, display label, section), sorted by
//!   name (or indexed by name) and shared between the launches of one page (`Arc`): a raw page
//!   writes every column once, whatever its number of launches;
//! - the values, in one of two forms:
//!   - *parsed*: one fixed-size cell per column (source line, number or text), for details
//!     pages, `--metrics` output, GUI exports and `.ncu-rep` reports;
//!   - *raw*: a raw page's row kept as its line and the tokenizer's index of where each field
//!     lies, each value parsed and unit-normalised (with the column's [`Scale`]) when it is read.
//!     A raw page has thousands of columns and the facts read a few dozen of them; reading a
//!     value costs one lookup and one parse (tens of nanoseconds), the work ingest would have
//!     done for it;
//! - one string with the raw text of every value, which cells and spans point into.
//!
//! Reading a metric returns a [`Metric`], a small `Copy` view borrowing from this storage. Both
//! forms give the same views for the same text (tests in `csv_pages` compare them).

use super::csv_pages::tokenizer::QuotedLine;
use super::units::{NumberLocale, Scale};
use super::Unit;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// A metric: its value after unit normalisation, plus where it came from. A view into
/// [`Metrics`]; also the input of [`MetricsBuilder::push`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Metric<'a> {
    /// Normalised value (see [`Unit`] for the base units).
    pub value: MetricValue<'a>,
    /// Unit of `value` after normalisation.
    pub unit: &'a Unit,
    /// The value exactly as written in the source (text), before any parsing.
    pub raw_value: &'a str,
    /// The unit exactly as written in the source ("nsecond", "Kbyte", "" ...).
    pub raw_unit: &'a str,
    /// Display label and section when the source had one ("Duration", "GPU Speed Of Light Throughput").
    pub label: Option<&'a str>,
    pub section: Option<&'a str>,
    /// Where in the file.
    pub origin: Origin,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MetricValue<'a> {
    Number(f64),
    Text(&'a str),
}

impl Metric<'_> {
    /// The value when it is a finite number.
    pub fn as_f64(self) -> Option<f64> {
        match self.value {
            MetricValue::Number(v) if v.is_finite() => Some(v),
            _ => None,
        }
    }
}

/// Where a value was read: a CSV line or a report's block and result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// 1-based physical line of a CSV file.
    Line(u32),
    /// Block index and result index within the block of a `.ncu-rep`.
    Report { block: u32, result: u32 },
    /// Made by a program (tests, derived values).
    #[default]
    Unknown,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Line(l) => write!(f, "line {l}"),
            Origin::Report { block, result } => write!(f, "block {block}, result {result}"),
            Origin::Unknown => f.write_str("unknown"),
        }
    }
}

impl Serialize for Origin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A column's unit: as written in the source, normalised, and the factor between them.
#[derive(Debug, Clone, PartialEq)]
struct ColumnUnit {
    raw: Box<str>,
    unit: Unit,
    /// How a raw row's text is parsed on access (see [`RowBuilder`]).
    scale: Scale,
}

/// Columns with unique names: sorted by name ([`Columns::sorted`]), or the columns of a raw page
/// in header order with a name index beside ([`Columns::raw_page`]), shared by every launch
/// that has them.
///
/// Laid out for thousands of columns made once per page: the names one after another in one
/// string, the few dozen distinct units and the distinct labels and sections once each, and per
/// column indices into those.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    names: String,
    /// Column i's name ends here in `names` (it starts where column i - 1's ends).
    name_ends: Vec<u32>,
    units: Vec<ColumnUnit>,
    unit_of: Vec<u32>,
    /// Labels and sections one after another (a run of columns with the same one stores it
    /// once); per column an index + 1 into `string_ends`, 0 for none (empty when no column has
    /// any).
    strings: String,
    string_ends: Vec<u32>,
    label_of: Vec<u32>,
    section_of: Vec<u32>,
    /// Column indices in name order, when the columns are not sorted.
    by_name: Option<Box<[u32]>>,
    /// Raw page: the field of a row that holds each column's value.
    fields: Box<[u32]>,
}

/// Collects columns (name, unit, label, section) for [`Columns::sorted`] or [`Columns::raw_page`],
/// storing each distinct unit, label and section once.
#[derive(Default)]
pub struct ColumnsBuilder {
    cols: Columns,
    /// The unit found last (columns come in runs of one unit).
    last_unit: usize,
    /// The label and the section stored last (index + 1).
    last_strings: [u32; 2],
}

impl ColumnsBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(columns: usize, name_bytes: usize) -> Self {
        let mut b = Self::default();
        b.cols.names.reserve(name_bytes);
        b.cols.name_ends.reserve(columns);
        b.cols.unit_of.reserve(columns);
        b
    }

    pub fn len(&self) -> usize {
        self.cols.name_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index of the unit written `raw`, made by `normalise` (normalised unit and factor) the
    /// first time it is seen. `same` says whether a known unit is the one wanted.
    fn unit_index(&mut self, raw: &str, same: impl Fn(&ColumnUnit) -> bool, normalise: impl FnOnce() -> (Unit, Scale)) -> u32 {
        let units = &self.cols.units;
        let found = match units.get(self.last_unit) {
            Some(u) if *u.raw == *raw && same(u) => Some(self.last_unit),
            _ => units.iter().position(|u| *u.raw == *raw && same(u)),
        };
        let i = found.unwrap_or_else(|| {
            let (unit, scale) = normalise();
            self.cols.units.push(ColumnUnit { raw: raw.into(), unit, scale });
            self.cols.units.len() - 1
        });
        self.last_unit = i;
        i as u32
    }

    /// Stores a label (`role` 0) or a section (1), or reuses the last one of that role.
    fn string(&mut self, s: Option<&str>, role: usize) -> u32 {
        let Some(s) = s else { return 0 };
        let last = self.last_strings[role];
        if last > 0 && self.cols.string(last) == s {
            return last;
        }
        self.cols.strings.push_str(s);
        self.cols.string_ends.push(u32::try_from(self.cols.strings.len()).expect("labels under 4 GiB"));
        self.last_strings[role] = self.cols.string_ends.len() as u32;
        self.last_strings[role]
    }

    /// A column whose unit is written `raw_unit` and normalised by `normalise` (called once per
    /// distinct `raw_unit`).
    pub fn push_raw(&mut self, name: &str, raw_unit: &str, normalise: impl FnOnce() -> (Unit, Scale)) {
        let unit = self.unit_index(raw_unit, |_| true, normalise);
        self.push_with(name, unit, None, None);
    }

    /// A column of an already-normalised metric.
    pub fn push(&mut self, name: &str, raw_unit: &str, unit: &Unit, label: Option<&str>, section: Option<&str>) {
        let unit = self.unit_index(raw_unit, |u| u.unit == *unit, || (unit.clone(), Scale::new(1.0)));
        let (label, section) = (self.string(label, 0), self.string(section, 1));
        self.push_with(name, unit, Some(label), Some(section));
    }

    fn push_with(&mut self, name: &str, unit: u32, label: Option<u32>, section: Option<u32>) {
        let c = &mut self.cols;
        c.names.push_str(name);
        c.name_ends.push(u32::try_from(c.names.len()).expect("column names under 4 GiB"));
        c.unit_of.push(unit);
        let n = c.name_ends.len();
        if label.is_some_and(|l| l > 0) || section.is_some_and(|s| s > 0) || !c.label_of.is_empty() {
            c.label_of.resize(n - 1, 0);
            c.section_of.resize(n - 1, 0);
            c.label_of.push(label.unwrap_or(0));
            c.section_of.push(section.unwrap_or(0));
        }
    }
}

impl Columns {
    /// Sorts by name; a repeated name keeps its first column. Returns the columns and, per
    /// column pushed, the index it has now (`None` for the dropped repeats).
    pub fn sorted(b: ColumnsBuilder) -> (Arc<Columns>, Vec<Option<u32>>) {
        let mut c = b.cols;
        let order = c.name_order();
        let mut slot = vec![None; c.len()];
        let firsts: Vec<usize> = c.first_of_each_name(&order).collect();
        (Arc::new(c.select(firsts.into_iter(), &mut slot)), slot)
    }

    /// The metric columns of a raw page in header order, `fields[i]` being the row field that
    /// holds column `i`'s value; a repeated name keeps its first column. Returns the columns and,
    /// per column pushed, the index it has now (`None` for the dropped repeats).
    pub fn raw_page(b: ColumnsBuilder, fields: Vec<u32>) -> (Arc<Columns>, Vec<Option<u32>>) {
        let mut c = b.cols;
        let n = c.len();
        assert_eq!(fields.len(), n, "one field per column");
        // ncu writes a raw page's metric columns sorted: one pass says so, no sort needed.
        if (1..n).all(|i| c.name(i - 1) < c.name(i)) {
            c.fields = fields.into();
            return (Arc::new(c), (0..n as u32).map(Some).collect());
        }
        let order = c.name_order();
        let mut keep = vec![false; n];
        for i in c.first_of_each_name(&order) {
            keep[i] = true;
        }
        let mut slot = vec![None; n];
        let mut out = c.select((0..n).filter(|&i| keep[i]), &mut slot);
        out.fields = (0..n).filter(|&i| keep[i]).map(|i| fields[i]).collect();
        let by_name: Box<[u32]> = order.iter().filter(|&&i| keep[i as usize]).map(|&i| slot[i as usize].expect("kept")).collect();
        let sorted = by_name.iter().enumerate().all(|(k, &i)| k as u32 == i);
        out.by_name = (!sorted).then_some(by_name);
        (Arc::new(out), slot)
    }

    /// Column indices sorted by name; among equal names the first stays first.
    fn name_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_by(|&a, &b| self.name(a as usize).cmp(self.name(b as usize)));
        order
    }

    /// The first column of each name, from [`Self::name_order`].
    fn first_of_each_name<'s>(&'s self, order: &'s [u32]) -> impl Iterator<Item = usize> + 's {
        order
            .iter()
            .enumerate()
            .filter(move |&(k, &i)| k == 0 || self.name(order[k - 1] as usize) != self.name(i as usize))
            .map(|(_, &i)| i as usize)
    }

    /// A table of columns `which`, in that order, taking this one's units and labels;
    /// `slot[i]` is set to the new index of each column taken.
    fn select(&mut self, which: impl Iterator<Item = usize>, slot: &mut [Option<u32>]) -> Columns {
        let mut out = Columns {
            units: std::mem::take(&mut self.units),
            strings: std::mem::take(&mut self.strings),
            string_ends: std::mem::take(&mut self.string_ends),
            ..Columns::default()
        };
        out.names.reserve(self.names.len());
        let labelled = !self.label_of.is_empty();
        for i in which {
            slot[i] = Some(out.name_ends.len() as u32);
            out.names.push_str(self.name(i));
            out.name_ends.push(out.names.len() as u32);
            out.unit_of.push(self.unit_of[i]);
            if labelled {
                out.label_of.push(self.label_of.get(i).copied().unwrap_or(0));
                out.section_of.push(self.section_of.get(i).copied().unwrap_or(0));
            }
        }
        out
    }

    pub fn len(&self) -> usize {
        self.name_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.name_ends.is_empty()
    }

    /// Column `i`'s name.
    pub fn name(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.name_ends[i - 1] as usize };
        &self.names[start..self.name_ends[i] as usize]
    }

    fn unit(&self, i: usize) -> &ColumnUnit {
        &self.units[self.unit_of[i] as usize]
    }

    /// Label or section `s` (index + 1).
    fn string(&self, s: u32) -> &str {
        let end = self.string_ends[s as usize - 1] as usize;
        let start = if s == 1 { 0 } else { self.string_ends[s as usize - 2] as usize };
        &self.strings[start..end]
    }

    fn string_of(&self, of: &[u32], i: usize) -> Option<&str> {
        of.get(i).filter(|&&s| s > 0).map(|&s| self.string(s))
    }

    /// Index of the column named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        match &self.by_name {
            None => {
                let (mut lo, mut hi) = (0, self.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    match self.name(mid).cmp(name) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Greater => hi = mid,
                        std::cmp::Ordering::Equal => return Some(mid),
                    }
                }
                None
            }
            Some(order) => order.binary_search_by(|&i| self.name(i as usize).cmp(name)).ok().map(|k| order[k] as usize),
        }
    }

    /// The index of the `k`-th column in name order.
    fn in_name_order(&self, k: usize) -> usize {
        self.by_name.as_ref().map_or(k, |o| o[k] as usize)
    }
}

/// Bit of [`Cell::raw_len`] set when the value is text (then `payload` is a span, not an f64).
const TEXT: u32 = 1 << 31;

/// One parsed metric: 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cell {
    /// CSV line (0 when the origin is per launch, see [`Values::Parsed`]).
    line: u32,
    raw_start: u32,
    /// Length of the raw text, [`TEXT`] set for a text value.
    raw_len: u32,
    /// `f64` bits of a number, or `start << 32 | len` of a text value in [`Metrics::text`].
    payload: u64,
}

/// How a launch's values are held.
#[derive(Clone)]
enum Values {
    /// Parsed when stored, one cell per column, in column order.
    Parsed {
        cells: Vec<Cell>,
        /// The origin of every value of a report launch (CSV values carry their own line).
        report: Option<(u32, u32)>,
    },
    /// One row of a raw page: where each field of the row lies in the text (an empty field: no
    /// value); column `i`'s value is in field `Columns::fields[i]`, parsed with the column's
    /// [`Scale`] in `locale` when read. A raw page has thousands of columns of which the facts
    /// read a few dozen, so ingest only finds and keeps the values: the field positions are the
    /// tokenizer's, kept as they are.
    Raw { fields: RowFields, line: u32, locale: NumberLocale },
}

/// Where the fields of a raw row lie in [`Metrics::text`].
#[derive(Clone)]
enum RowFields {
    /// The text is a simple quoted line, with the tokenizer's index of its fields (about one
    /// bit a byte).
    Line(QuotedLine),
    /// `(start, end)` of each field.
    Spans(Vec<(u32, u32)>),
}

impl RowFields {
    #[inline]
    fn get(&self, k: usize) -> Option<(u32, u32)> {
        match self {
            RowFields::Line(line) => line.span(k),
            RowFields::Spans(spans) => spans.get(k).copied(),
        }
    }

    fn spans(&mut self) -> &mut Vec<(u32, u32)> {
        if let RowFields::Line(line) = self {
            *self = RowFields::Spans(line.spans().collect());
        }
        match self {
            RowFields::Spans(spans) => spans,
            RowFields::Line(_) => unreachable!("converted above"),
        }
    }
}

impl Default for Values {
    fn default() -> Self {
        Values::Parsed { cells: Vec::new(), report: None }
    }
}

/// A launch's metrics, sorted by raw metric name. See the module docs.
#[derive(Clone, Default)]
pub struct Metrics {
    cols: Arc<Columns>,
    values: Values,
    /// Raw text of the values (and of text values that differ from their raw text).
    text: String,
}

impl PartialEq for Metrics {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Metrics {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, &v)?;
        }
        map.end()
    }
}

fn span(start: usize, len: usize) -> (u32, u32) {
    // Text is per launch; 2 GiB of one launch's values is not a real profile. Saturating keeps
    // a hostile file from wrapping offsets (it only shortens the text shown).
    (u32::try_from(start).unwrap_or(u32::MAX), u32::try_from(len).unwrap_or(u32::MAX >> 1).min(u32::MAX >> 1))
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        match &self.values {
            Values::Parsed { cells, .. } => cells.len(),
            Values::Raw { .. } => self.raw_column_spans().iter().flatten().count(),
        }
    }

    /// A raw row's value span per column (`None`: no value), from one pass over its index
    /// (empty for parsed values). [`Self::at`] finds one column's in a few steps instead.
    fn raw_column_spans(&self) -> Vec<Option<(u32, u32)>> {
        let all: Vec<(u32, u32)> = match &self.values {
            Values::Raw { fields: RowFields::Line(line), .. } => line.spans().collect(),
            Values::Raw { fields: RowFields::Spans(spans), .. } => spans.clone(),
            Values::Parsed { .. } => return Vec::new(),
        };
        self.cols.fields.iter().map(|&f| all.get(f as usize).copied().filter(|(s, e)| e > s)).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn text_at(&self, start: u32, len: u32) -> &str {
        let s = start as usize;
        self.text.get(s..s + len as usize).unwrap_or("")
    }

    /// The metric of column `i`, if this launch has one.
    fn at(&self, i: usize) -> Option<Metric<'_>> {
        let span = match &self.values {
            Values::Raw { fields, .. } => raw_span(fields, &self.cols, i),
            Values::Parsed { .. } => None,
        };
        self.at_span(i, span)
    }

    /// [`Self::at`], given the span of column `i`'s value for a raw row.
    fn at_span(&self, i: usize, span: Option<(u32, u32)>) -> Option<Metric<'_>> {
        let cols = &*self.cols;
        let col = cols.unit(i);
        let (value, raw_value, origin) = match &self.values {
            Values::Parsed { cells, report } => {
                let c = &cells[i];
                let raw_value = self.text_at(c.raw_start, c.raw_len & !TEXT);
                let value = if c.raw_len & TEXT != 0 {
                    MetricValue::Text(self.text_at((c.payload >> 32) as u32, c.payload as u32))
                } else {
                    MetricValue::Number(f64::from_bits(c.payload))
                };
                let origin = match *report {
                    Some((block, result)) => Origin::Report { block, result },
                    None if c.line > 0 => Origin::Line(c.line),
                    None => Origin::Unknown,
                };
                (value, raw_value, origin)
            }
            Values::Raw { line, locale, .. } => {
                let (start, end) = span.filter(|(s, e)| e > s)?;
                let raw = self.text_at(start, end - start);
                let value = match col.scale.parse(raw, *locale) {
                    Some(v) => MetricValue::Number(v),
                    None => MetricValue::Text(raw),
                };
                (value, raw, if *line > 0 { Origin::Line(*line) } else { Origin::Unknown })
            }
        };
        Some(Metric {
            value,
            unit: &col.unit,
            raw_value,
            raw_unit: &col.raw,
            label: cols.string_of(&cols.label_of, i),
            section: cols.string_of(&cols.section_of, i),
            origin,
        })
    }

    fn has(&self, i: usize) -> bool {
        match &self.values {
            Values::Parsed { .. } => true,
            Values::Raw { fields, .. } => raw_span(fields, &self.cols, i).is_some(),
        }
    }

    pub fn get(&self, name: &str) -> Option<Metric<'_>> {
        self.cols.find(name).and_then(|i| self.at(i))
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.cols.find(name).is_some_and(|i| self.has(i))
    }

    /// `(name, metric)` sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Metric<'_>)> + '_ {
        let spans = self.raw_column_spans();
        (0..self.cols.len()).filter_map(move |k| {
            let i = self.cols.in_name_order(k);
            let m = match &self.values {
                Values::Raw { .. } => self.at_span(i, spans[i]),
                Values::Parsed { .. } => self.at(i),
            };
            m.map(|m| (self.cols.name(i), m))
        })
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = Metric<'_>> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// Adds or replaces one metric (rebuilds the table: for tests and small edits, not readers).
    pub fn insert(&mut self, name: &str, m: Metric<'_>) {
        let mut b = MetricsBuilder::new();
        b.push(name, m);
        for (k, v) in self.iter() {
            b.push(k, v);
        }
        *self = b.finish().0;
    }

    /// Adds the metrics of `other` this one lacks (a launch split over two rows).
    pub fn merge_missing(&mut self, other: &Metrics) {
        if other.iter().all(|(k, _)| self.contains_key(k)) {
            return;
        }
        let mut b = MetricsBuilder::new();
        for (k, v) in self.iter().chain(other.iter()) {
            b.push(k, v);
        }
        *self = b.finish().0;
    }

    /// Sets the number locale a raw row's values are parsed in (the reader learns it from the
    /// whole page). No effect on parsed values.
    pub(crate) fn set_locale(&mut self, to: NumberLocale) {
        if let Values::Raw { locale, .. } = &mut self.values {
            *locale = to;
        }
    }

    /// The raw text of every value of a raw row, in column order (parsed values: none).
    pub(crate) fn raw_values(&self) -> impl Iterator<Item = &str> + '_ {
        self.raw_column_spans().into_iter().flatten().map(|(s, e)| self.text_at(s, e - s))
    }
}

/// The span of column `i`'s value in a raw row, if it has one.
#[inline]
fn raw_span(fields: &RowFields, cols: &Columns, i: usize) -> Option<(u32, u32)> {
    fields.get(*cols.fields.get(i)? as usize).filter(|(s, e)| e > s)
}

impl<'a> IntoIterator for &'a Metrics {
    type Item = (&'a str, Metric<'a>);
    type IntoIter = Box<dyn Iterator<Item = (&'a str, Metric<'a>)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// Builds one row of a raw page: columns shared with the page's other launches (made by
/// [`Columns::raw_page`]), values kept as text and parsed when read (see the module docs).
pub struct RowBuilder {
    cols: Arc<Columns>,
    fields: RowFields,
    text: String,
}

impl RowBuilder {
    /// A row whose fields come one by one ([`Self::set_text`]).
    pub fn new(cols: Arc<Columns>) -> Self {
        RowBuilder { cols, fields: RowFields::Spans(Vec::new()), text: String::new() }
    }

    /// A row read from `line` by [`quoted_line`](crate::csv_pages::tokenizer::quoted_line): its index is kept as it is, `line`
    /// is copied once.
    pub fn from_line(cols: Arc<Columns>, line: &str, fields: QuotedLine) -> Self {
        RowBuilder { cols, fields: RowFields::Line(fields), text: line.to_owned() }
    }

    /// Field `field` is `value` (appended to the row's text; a field keeps its first value).
    pub fn set_text(&mut self, field: usize, value: &str) {
        let (start, len) = span(self.text.len(), value.len());
        let spans = self.fields.spans();
        if spans.len() <= field {
            spans.resize(field + 1, (0, 0));
        }
        if spans[field].0 == spans[field].1 {
            spans[field] = (start, start.saturating_add(len));
            self.text.push_str(value);
        }
    }

    /// Field `field` is narrowed to `start..end` of the line (a value with white space around).
    pub fn narrow(&mut self, field: usize, start: usize, end: usize) {
        if let Some(s) = self.fields.spans().get_mut(field) {
            debug_assert!(s.0 as usize <= start && end <= s.1 as usize);
            *s = (start as u32, end as u32);
        }
    }

    /// The row read from CSV line `line`; values are parsed as dot-decimal until
    /// `Metrics::set_locale` says otherwise.
    pub fn finish(self, line: u32) -> Metrics {
        Metrics { cols: self.cols, values: Values::Raw { fields: self.fields, line, locale: NumberLocale::DotDecimal }, text: self.text }
    }
}

/// Builds the metrics of one launch from metrics in any order (details pages, reports, tests).
#[derive(Default)]
pub struct MetricsBuilder {
    cols: ColumnsBuilder,
    cells: Vec<Cell>,
    text: String,
    report: Option<(u32, u32)>,
}

impl MetricsBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every value comes from this report block and result.
    pub fn report_origin(&mut self, block: u32, result: u32) {
        self.report = Some((block, result));
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Adds a metric; when a name repeats, the first one pushed is kept (see [`Self::finish`]).
    pub fn push(&mut self, name: &str, m: Metric<'_>) {
        self.cols.push(name, m.raw_unit, m.unit, m.label, m.section);
        let (raw_start, raw_len) = span(self.text.len(), m.raw_value.len());
        self.text.push_str(m.raw_value);
        let line = match m.origin {
            Origin::Line(l) => l,
            _ => 0,
        };
        let (raw_len, payload) = match m.value {
            MetricValue::Number(v) => (raw_len, v.to_bits()),
            MetricValue::Text(t) if t == m.raw_value => (raw_len | TEXT, (u64::from(raw_start) << 32) | u64::from(raw_len)),
            MetricValue::Text(t) => {
                let (s, l) = span(self.text.len(), t.len());
                self.text.push_str(t);
                (raw_len | TEXT, (u64::from(s) << 32) | u64::from(l))
            }
        };
        self.cells.push(Cell { line, raw_start, raw_len, payload });
    }

    /// Sorts by name. A repeated name keeps the first metric pushed; the count of dropped
    /// repeats is returned beside the table.
    pub fn finish(self) -> (Metrics, usize) {
        let pushed = self.cols.len();
        let (cols, slot) = Columns::sorted(self.cols);
        let mut cells = vec![Cell { line: 0, raw_start: 0, raw_len: 0, payload: 0 }; cols.len()];
        for (c, s) in self.cells.into_iter().zip(&slot) {
            if let Some(s) = s {
                cells[*s as usize] = c;
            }
        }
        let dropped = pushed - cols.len();
        (Metrics { cols, values: Values::Parsed { cells, report: self.report }, text: self.text }, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num<'a>(v: f64, raw: &'a str, unit: &'a Unit) -> Metric<'a> {
        Metric { value: MetricValue::Number(v), unit, raw_value: raw, raw_unit: "", label: None, section: None, origin: Origin::Line(7) }
    }

    #[test]
    fn builder_sorts_and_keeps_first() {
        let u = Unit::Percent;
        let mut b = MetricsBuilder::new();
        b.push("z", num(1.0, "1", &u));
        b.push("a", num(2.0, "2", &u));
        b.push("z", num(3.0, "3", &u));
        b.push("t", Metric { value: MetricValue::Text("H100"), raw_value: "H100 (x)", ..num(0.0, "", &u) });
        let (m, dropped) = b.finish();
        assert_eq!(dropped, 1);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "t", "z"]);
        assert_eq!(m.get("z").unwrap().as_f64(), Some(1.0));
        assert_eq!(m.get("z").unwrap().origin.to_string(), "line 7");
        let t = m.get("t").unwrap();
        assert_eq!(t.value, MetricValue::Text("H100"));
        assert_eq!(t.raw_value, "H100 (x)");
        assert!(m.get("b").is_none());
    }

    #[test]
    fn raw_rows_with_gaps() {
        // Fields 0 and 4 are not metrics; field 2 repeats field 1's name.
        let mut b = ColumnsBuilder::new();
        b.push_raw("b", "cycle", || (Unit::Count("cycle".into()), Scale::new(1.0)));
        b.push_raw("a", "usecond", || (Unit::Nanoseconds, Scale::new(1e3)));
        b.push_raw("a", "", || (Unit::None, Scale::new(1.0)));
        b.push_raw("c", "", || unreachable!("normalised once per unit"));
        let (cols, slot) = Columns::raw_page(b, vec![3, 1, 2, 5]);
        assert_eq!(slot, [Some(0), Some(1), None, Some(2)]);
        assert_eq!((cols.find("a"), cols.find("b"), cols.find("c")), (Some(1), Some(0), Some(2)));
        let line = r#""x"," 1.5 ","7","","k","n/a""#;
        let mut r = RowBuilder::from_line(cols.clone(), line, crate::csv_pages::tokenizer::quoted_line(line, b',').unwrap());
        r.narrow(1, 6, 9);
        let m = r.finish(3);
        assert_eq!(m.len(), 2);
        assert!(!m.contains_key("b"));
        let a = m.get("a").unwrap();
        assert_eq!((a.as_f64(), a.raw_value, a.raw_unit, a.unit), (Some(1500.0), "1.5", "usecond", &Unit::Nanoseconds));
        assert_eq!(a.origin, Origin::Line(3));
        assert_eq!(m.get("c").unwrap().value, MetricValue::Text("n/a"));
        assert_eq!(m.raw_values().collect::<Vec<_>>(), ["1.5", "n/a"]);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "c"]);
        // Fields one by one; a short row.
        let mut other = RowBuilder::new(cols);
        other.set_text(3, "9");
        other.set_text(1, "1,5");
        other.set_text(1, "2");
        let mut other = other.finish(4);
        assert_eq!(other.get("a").unwrap().as_f64(), Some(15000.0));
        other.set_locale(NumberLocale::CommaDecimal);
        assert_eq!(other.get("a").unwrap().as_f64(), Some(1500.0));
        assert!(!other.contains_key("c"));
        let mut merged = m.clone();
        merged.merge_missing(&other);
        assert_eq!(merged.get("b").unwrap().as_f64(), Some(9.0));
        assert_eq!(merged.get("a").unwrap().as_f64(), Some(1500.0));
        assert_eq!(merged.get("b").unwrap().origin, Origin::Line(4));
        assert_eq!(merged, {
            let mut b = MetricsBuilder::new();
            for (k, v) in m.iter().chain(other.iter()) {
                b.push(k, v);
            }
            b.finish().0
        });
    }

    #[test]
    fn unsorted_raw_columns_iterate_by_name() {
        let names = ["m", "b", "m", "a", "z"];
        let mut b = ColumnsBuilder::new();
        for n in names {
            b.push_raw(n, "", || (Unit::None, Scale::new(1.0)));
        }
        let (cols, slot) = Columns::raw_page(b, (0..5).collect());
        assert_eq!(slot, [Some(0), Some(1), None, Some(2), Some(3)]);
        assert_eq!(cols.find("a"), Some(2));
        assert_eq!(cols.find("m"), Some(0));
        assert_eq!(cols.find("q"), None);
        let mut r = RowBuilder::new(cols.clone());
        r.set_text(0, "1");
        r.set_text(3, "3");
        r.set_text(4, "4");
        let m = r.finish(1);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "m", "z"]);
        assert_eq!(m.get("z").unwrap().as_f64(), Some(4.0));
        assert!(m.get("b").is_none());
        let mut r = RowBuilder::new(cols);
        for (i, v) in ["1", "2", "x", "3", "4"].into_iter().enumerate() {
            r.set_text(i, v);
        }
        let m = r.finish(1);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b", "m", "z"]);
        assert_eq!(m.values().map(|v| v.as_f64().unwrap()).collect::<Vec<_>>(), [3.0, 2.0, 1.0, 4.0]);
        // Already sorted: kept as is, no name index.
        let mut b = ColumnsBuilder::new();
        b.push_raw("a", "", || (Unit::None, Scale::new(1.0)));
        b.push_raw("b", "", || (Unit::None, Scale::new(1.0)));
        let (cols, slot) = Columns::raw_page(b, vec![0, 1]);
        assert_eq!((slot, cols.by_name.is_none()), (vec![Some(0), Some(1)], true));
    }

    #[test]
    fn insert_replaces() {
        let u = Unit::None;
        let mut m = Metrics::new();
        m.insert("x", num(1.0, "1", &u));
        m.insert("x", num(2.0, "2", &u));
        assert_eq!(m.len(), 1);
        assert_eq!(m.get("x").unwrap().as_f64(), Some(2.0));
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["x"]["value"], 2.0);
        assert_eq!(json["x"]["origin"], "line 7");
    }
}
