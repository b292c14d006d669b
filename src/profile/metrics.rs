//! A launch's metrics: a compact, sorted table of [`Metric`]s keyed by raw metric name.
//!
//! Profiles are large (a `--page raw` export of 30 launches holds 66k values), so metrics are not
//! stored one heap object each. A [`Metrics`] holds:
//! - the *columns* (name, unit as written, normalised unit, display label, section), sorted by
//!   name and shared between the launches of one page (`Arc`): a raw page writes every column
//!   once, whatever its number of launches;
//! - one fixed-size *cell* per present metric (column, source line, value);
//! - one string with the raw text of every value, which cells point into.
//!
//! Reading a metric returns a [`Metric`], a small `Copy` view borrowing from this storage.
//! Values are parsed and unit-normalised when the metric is stored, never on access.

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

/// What a metric column holds, shared by every launch of a page that has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: Box<str>,
    /// Shared: a page has thousands of columns and a few dozen units.
    pub raw_unit: Arc<str>,
    pub unit: Unit,
    pub label: Option<Box<str>>,
    pub section: Option<Box<str>>,
}

impl Column {
    pub fn new(name: &str, raw_unit: impl Into<Arc<str>>, unit: Unit) -> Self {
        Column { name: name.into(), raw_unit: raw_unit.into(), unit, label: None, section: None }
    }
}

/// Columns with unique names: sorted by name ([`Columns::new`]), or in the order a file has
/// them with a name index beside ([`Columns::keep_order`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    cols: Vec<Column>,
    /// Column indices in name order, when `cols` is not sorted.
    by_name: Option<Box<[u32]>>,
}

impl Columns {
    /// Sorts by name; a repeated name keeps its first column. Returns the columns and, per input
    /// position, the index it has now (`None` for the dropped repeats).
    pub fn new(cols: Vec<Column>) -> (Arc<Columns>, Vec<Option<u32>>) {
        let mut order: Vec<u32> = (0..cols.len() as u32).collect();
        // Stable: among equal names the first stays first.
        order.sort_by(|&a, &b| cols[a as usize].name.cmp(&cols[b as usize].name));
        let mut slot = vec![None; cols.len()];
        let mut taken: Vec<Option<Column>> = cols.into_iter().map(Some).collect();
        let mut out: Vec<Column> = Vec::with_capacity(taken.len());
        for i in order {
            let c = taken[i as usize].take().expect("each index once");
            if out.last().is_some_and(|l| l.name == c.name) {
                continue;
            }
            slot[i as usize] = Some(out.len() as u32);
            out.push(c);
        }
        (Arc::new(Columns { cols: out, by_name: None }), slot)
    }

    /// Keeps the given order (a raw page's header, so a row's cells are appended in the order
    /// they are read); a repeated name keeps its first column. Returns the columns and, per input
    /// position, the index it has now (`None` for the dropped repeats).
    pub fn keep_order(cols: Vec<Column>) -> (Arc<Columns>, Vec<Option<u32>>) {
        let mut order: Vec<u32> = (0..cols.len() as u32).collect();
        order.sort_by(|&a, &b| cols[a as usize].name.cmp(&cols[b as usize].name));
        let mut keep = vec![false; cols.len()];
        for (k, &i) in order.iter().enumerate() {
            keep[i as usize] = k == 0 || cols[order[k - 1] as usize].name != cols[i as usize].name;
        }
        let mut slot = vec![None; cols.len()];
        let mut out: Vec<Column> = Vec::with_capacity(cols.len());
        for (i, c) in cols.into_iter().enumerate() {
            if keep[i] {
                slot[i] = Some(out.len() as u32);
                out.push(c);
            }
        }
        let by_name: Box<[u32]> = order.iter().filter(|&&i| keep[i as usize]).map(|&i| slot[i as usize].expect("kept")).collect();
        let sorted = by_name.iter().enumerate().all(|(k, &i)| k as u32 == i);
        (Arc::new(Columns { cols: out, by_name: (!sorted).then_some(by_name) }), slot)
    }

    pub fn len(&self) -> usize {
        self.cols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cols.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&Column> {
        self.cols.get(i)
    }

    /// Index of the column named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        match &self.by_name {
            None => self.cols.binary_search_by(|c| (*c.name).cmp(name)).ok(),
            Some(order) => order.binary_search_by(|&i| (*self.cols[i as usize].name).cmp(name)).ok().map(|k| order[k] as usize),
        }
    }
}

/// Bit of [`Cell::raw_len`] set when the value is text (then `payload` is a span, not an f64).
const TEXT: u32 = 1 << 31;

/// One present metric: 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cell {
    col: u32,
    /// CSV line (0 when the origin is per launch, see [`Metrics::report`]).
    line: u32,
    raw_start: u32,
    /// Length of the raw text, [`TEXT`] set for a text value.
    raw_len: u32,
    /// `f64` bits of a number, or `start << 32 | len` of a text value in [`Metrics::text`].
    payload: u64,
}

/// A launch's metrics, sorted by raw metric name. See the module docs.
#[derive(Clone, Default)]
pub struct Metrics {
    cols: Arc<Columns>,
    /// Sorted by column, at most one per column.
    cells: Vec<Cell>,
    text: String,
    /// The origin of every value of a report launch (CSV values carry their own line).
    report: Option<(u32, u32)>,
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
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    fn view(&self, c: &Cell) -> (&str, Metric<'_>) {
        let col = &self.cols.cols[c.col as usize];
        let raw_len = (c.raw_len & !TEXT) as usize;
        let raw_value = self.text.get(c.raw_start as usize..c.raw_start as usize + raw_len).unwrap_or("");
        let value = if c.raw_len & TEXT != 0 {
            let (s, l) = ((c.payload >> 32) as usize, (c.payload & 0xffff_ffff) as usize);
            MetricValue::Text(self.text.get(s..s + l).unwrap_or(""))
        } else {
            MetricValue::Number(f64::from_bits(c.payload))
        };
        let origin = match self.report {
            Some((block, result)) => Origin::Report { block, result },
            None if c.line > 0 => Origin::Line(c.line),
            None => Origin::Unknown,
        };
        (
            &col.name,
            Metric {
                value,
                unit: &col.unit,
                raw_value,
                raw_unit: &col.raw_unit,
                label: col.label.as_deref(),
                section: col.section.as_deref(),
                origin,
            },
        )
    }

    fn cell_index(&self, name: &str) -> Option<usize> {
        let col = self.cols.find(name)? as u32;
        // Per-launch columns have a cell each: direct index.
        if self.cells.len() == self.cols.len() {
            return Some(col as usize);
        }
        self.cells.binary_search_by_key(&col, |c| c.col).ok()
    }

    pub fn get(&self, name: &str) -> Option<Metric<'_>> {
        self.cell_index(name).map(|i| self.view(&self.cells[i]).1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.cell_index(name).is_some()
    }

    /// `(name, metric)` sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Metric<'_>)> + '_ {
        let (sorted, by_name): (&[Cell], &[u32]) = match &self.cols.by_name {
            None => (&self.cells, &[]),
            Some(order) => (&[], order),
        };
        let full = self.cells.len() == self.cols.len();
        let in_name_order = by_name.iter().filter_map(move |&col| {
            if full {
                Some(&self.cells[col as usize])
            } else {
                self.cells.binary_search_by_key(&col, |c| c.col).ok().map(|i| &self.cells[i])
            }
        });
        sorted.iter().chain(in_name_order).map(|c| self.view(c))
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
}

impl<'a> IntoIterator for &'a Metrics {
    type Item = (&'a str, Metric<'a>);
    type IntoIter = Box<dyn Iterator<Item = (&'a str, Metric<'a>)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// Builds the metrics of one launch whose columns are shared with other launches (a raw page):
/// cells must be pushed in column order.
pub struct RowBuilder {
    cols: Arc<Columns>,
    cells: Vec<Cell>,
    text: String,
}

impl RowBuilder {
    /// `text_capacity`: bytes of raw text expected (the row's length is a good bound).
    pub fn new(cols: Arc<Columns>, text_capacity: usize) -> Self {
        let n = cols.len();
        RowBuilder { cols, cells: Vec::with_capacity(n), text: String::with_capacity(text_capacity) }
    }

    /// Appends the value of column `col` (greater than the last one pushed).
    pub fn push_number(&mut self, col: u32, raw_value: &str, value: f64, line: u32) {
        debug_assert!(self.cells.last().is_none_or(|c| c.col < col));
        let (raw_start, raw_len) = span(self.text.len(), raw_value.len());
        self.text.push_str(raw_value);
        self.cells.push(Cell { col, line, raw_start, raw_len, payload: value.to_bits() });
    }

    /// Appends a text value of column `col` (the raw text is the value).
    pub fn push_text(&mut self, col: u32, raw_value: &str, line: u32) {
        debug_assert!(self.cells.last().is_none_or(|c| c.col < col));
        let (raw_start, raw_len) = span(self.text.len(), raw_value.len());
        self.text.push_str(raw_value);
        let payload = (u64::from(raw_start) << 32) | u64::from(raw_len);
        self.cells.push(Cell { col, line, raw_start, raw_len: raw_len | TEXT, payload });
    }

    pub fn finish(self) -> Metrics {
        Metrics { cols: self.cols, cells: self.cells, text: self.text, report: None }
    }
}

/// Builds the metrics of one launch from metrics in any order (details pages, reports, tests).
#[derive(Default)]
pub struct MetricsBuilder {
    cols: Vec<Column>,
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
        let col = self.cols.len() as u32;
        let mut c = Column::new(name, m.raw_unit, m.unit.clone());
        c.label = m.label.map(Into::into);
        c.section = m.section.map(Into::into);
        self.cols.push(c);
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
        self.cells.push(Cell { col, line, raw_start, raw_len, payload });
    }

    /// Sorts by name. A repeated name keeps the first metric pushed; the count of dropped
    /// repeats is returned beside the table.
    pub fn finish(self) -> (Metrics, usize) {
        let pushed = self.cols.len();
        let (cols, slot) = Columns::new(self.cols);
        let mut cells: Vec<Cell> = Vec::with_capacity(cols.len());
        for (c, s) in self.cells.into_iter().zip(&slot) {
            if let Some(s) = s {
                cells.push(Cell { col: *s, ..c });
            }
        }
        cells.sort_unstable_by_key(|c| c.col);
        let dropped = pushed - cells.len();
        (Metrics { cols, cells, text: self.text, report: self.report }, dropped)
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
    fn shared_columns_with_gaps() {
        let cols = vec![Column::new("b", "cycle", Unit::Count("cycle".into())), Column::new("a", "%", Unit::Percent), Column::new("c", "", Unit::None)];
        let (cols, slot) = Columns::new(cols);
        assert_eq!(slot, [Some(1), Some(0), Some(2)]);
        let mut r = RowBuilder::new(cols.clone(), 16);
        r.push_number(0, "5", 5.0, 3);
        r.push_text(2, "n/a", 3);
        let m = r.finish();
        assert_eq!(m.len(), 2);
        assert!(!m.contains_key("b"));
        assert_eq!(m.get("a").unwrap().unit, &Unit::Percent);
        assert_eq!(m.get("a").unwrap().raw_unit, "%");
        assert_eq!(m.get("c").unwrap().value, MetricValue::Text("n/a"));
        let mut other = RowBuilder::new(cols, 4);
        other.push_number(1, "9", 9.0, 4);
        let mut merged = m.clone();
        merged.merge_missing(&other.finish());
        assert_eq!(merged.get("b").unwrap().as_f64(), Some(9.0));
        assert_eq!(merged.get("a").unwrap().as_f64(), Some(5.0));
        assert_eq!(merged.get("b").unwrap().origin, Origin::Line(4));
    }

    #[test]
    fn file_order_columns_iterate_by_name() {
        let names = ["m", "b", "m", "a", "z"];
        let (cols, slot) = Columns::keep_order(names.iter().map(|n| Column::new(n, "", Unit::None)).collect());
        assert_eq!(slot, [Some(0), Some(1), None, Some(2), Some(3)]);
        assert_eq!(cols.find("a"), Some(2));
        assert_eq!(cols.find("m"), Some(0));
        assert_eq!(cols.find("q"), None);
        let mut r = RowBuilder::new(cols.clone(), 8);
        r.push_number(0, "1", 1.0, 1);
        r.push_number(2, "3", 3.0, 1);
        r.push_number(3, "4", 4.0, 1);
        let m = r.finish();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "m", "z"]);
        assert_eq!(m.get("z").unwrap().as_f64(), Some(4.0));
        assert!(m.get("b").is_none());
        let mut r = RowBuilder::new(cols, 8);
        for (i, v) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
            r.push_number(i as u32, "x", v, 1);
        }
        let m = r.finish();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b", "m", "z"]);
        assert_eq!(m.values().map(|v| v.as_f64().unwrap()).collect::<Vec<_>>(), [3.0, 2.0, 1.0, 4.0]);
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
