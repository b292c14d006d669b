//! Readers for Nsight Compute's CSV exports: every `ncu --csv` page and the GUI's raw export.
//!
//! One entry point, [`read`], recognises the export from its header (never from the file name):
//!
//! | export | header | reader |
//! |---|---|---|
//! | `--page details` | `"ID",...,"Section Name",["Body Item Label",]"Metric Name","Metric Unit","Metric Value"[,"Rule Name",...]` | `long` |
//! | `--metrics ...` | same columns, section `Command line profiler metrics` | `long` |
//! | `--page raw` | `"ID",...,"CC",<raw metric names...>` then a units row | `wide` |
//! | `--page source` | preamble (`"Kernel Name","k"` or `"File Path"`/`"Function Name"`), then `"Address",...` or `"Line No",...` | `source` |
//! | GUI "export raw" | BOM, transposed: `ID,0,1,2` then `metric [unit],v0,v1,v2` | `ui_export` |
//!
//! Columns are found by name. Lines that are not part of the table are skipped and reported in
//! [`Profile::notes`] with their line numbers: ncu's own `==PROF==`/`==WARNING==`/`==ERROR==`
//! lines, application output printed into the same stream, repeated header lines. Reading stops at
//! an appended Python traceback (noted). A file without a table is [`ProfileError::Empty`] saying
//! what was found; a row that cannot be understood is [`ProfileError::Csv`] with its line.
//!
//! Text: UTF-8 (a BOM is dropped; invalid bytes become U+FFFD, noted) or UTF-16 LE/BE (a
//! PowerShell redirect), told by the byte-order mark or, without one, by the NUL bytes, and
//! decoded first with `encoding_rs` into its UTF-8 twin (same lines, so messages keep their line
//! numbers).
//!
//! Numbers: the locale is detected once per file (decimal comma or decimal point with thousands
//! separators), units are normalised per row (see [`super::units`]). Launches keep the order of
//! their first row and are identified by the `ID` column, never by kernel name.

mod long;
mod source;
pub mod tokenizer;
mod ui_export;
mod wide;

#[cfg(test)]
use super::units::scale;
use super::units::{detect_locale, normalize_unit, NumberLocale};
use super::{Launch, Metric, MetricValue, Profile, ProfileError, Result};
use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;
use tokenizer::{guess_delimiter, FieldSink, Fields, Tokenizer};

pub use source::attach_source;

/// Reads a CSV export (any page) from memory. `path` is used in messages and stored in the profile.
pub fn read(path: &Path, bytes: &[u8]) -> Result<Profile> {
    read_with(path, bytes, true)
}

/// [`read`], with the parallel line reader allowed or not (tests compare the two).
pub(crate) fn read_with(path: &Path, bytes: &[u8], parallel: bool) -> Result<Profile> {
    let mut notes = Vec::new();
    let (text, had_bom) = decode(bytes, &mut notes);
    let body: &str = &text;
    let mut input = Input::new(path, body);
    input.parallel = parallel;
    let found = input.find_header()?;
    let profile = match found.kind {
        HeaderKind::Long => long::read(&mut input, &found, notes),
        HeaderKind::Wide => wide::read(&mut input, &found, notes),
        HeaderKind::UiExport => ui_export::read(&mut input, &found, notes, had_bom),
        HeaderKind::Source => source::read(&mut input, &found, notes),
    }?;
    if let Some(line) = input.truncated {
        let what = "a quoted field starts here and is never closed (expected a closing '\"' before the end of the file)";
        if profile.launches.is_empty() {
            return Err(input.csv_error(line, what));
        }
        let mut recovered = profile;
        let message = format!("{what}; kept the {} launch(es) of the complete rows before line {line}", recovered.launches.len());
        recovered.notes.push(format!("line {line}: the file ends early: {message}"));
        return Err(ProfileError::Truncated {
            path: path.to_owned(),
            at: super::At::Line(line),
            message,
            launches: recovered.launches.len(),
            recovered: Box::new(recovered),
        });
    }
    if profile.launches.is_empty() {
        return Err(ProfileError::Empty {
            path: path.to_owned(),
            message: format!("CSV header at line {} but no data rows after it", found.line),
        });
    }
    Ok(profile)
}

/// The file's text as its UTF-8 twin, and whether it began with a byte-order mark.
///
/// UTF-8, UTF-16 LE and UTF-16 BE are recognised by their BOM; UTF-16 without a BOM by its NUL
/// pattern (ASCII text with every other byte zero). Decoding keeps every character, line break
/// included, so line numbers in messages are those of the original file. Valid UTF-8 is borrowed
/// as it is; invalid bytes become U+FFFD (noted).
fn decode<'b>(bytes: &'b [u8], notes: &mut Vec<String>) -> (Cow<'b, str>, bool) {
    use encoding_rs::{UTF_16BE, UTF_16LE, UTF_8};
    let (encoding, body, bom) = match encoding_rs::Encoding::for_bom(bytes) {
        Some((enc, len)) => (enc, &bytes[len..], true),
        None => match utf16_without_bom(bytes) {
            Some(enc) => (enc, bytes, false),
            None => (UTF_8, bytes, false),
        },
    };
    if encoding == UTF_8 {
        // The validating fast path first: lossy decoding is several times slower on valid text.
        return match std::str::from_utf8(body) {
            Ok(t) => (Cow::Borrowed(t), bom),
            Err(_) => {
                notes.push("the file is not valid UTF-8: invalid bytes were replaced by U+FFFD".to_string());
                (String::from_utf8_lossy(body), bom)
            }
        };
    }
    let (text, malformed) = encoding.decode_without_bom_handling(body);
    let which = if encoding == UTF_16LE {
        "UTF-16 LE"
    } else if encoding == UTF_16BE {
        "UTF-16 BE"
    } else {
        encoding.name()
    };
    notes.push(format!(
        "the file is {which}{} (e.g. redirected by PowerShell); decoded{}",
        if bom { " with a byte-order mark" } else { " without a byte-order mark" },
        if malformed { ", malformed sequences replaced by U+FFFD" } else { "" }
    ));
    (Cow::Owned(text.into_owned()), bom)
}

/// UTF-16 without a byte-order mark, told by where the NUL bytes are in the first 512 bytes:
/// ASCII text in UTF-16 LE has a zero in (almost) every odd byte and none in the even ones.
fn utf16_without_bom(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = &bytes[..bytes.len().min(512) & !1];
    if head.len() < 8 {
        return None;
    }
    let half = head.len() / 2;
    let zeros_odd = head.iter().skip(1).step_by(2).filter(|&&b| b == 0).count();
    let zeros_even = head.iter().step_by(2).filter(|&&b| b == 0).count();
    // Mostly zero on one side (a few non-ASCII characters allowed), almost never on the other.
    let mostly = |z: usize| z * 4 >= half * 3;
    let hardly = |z: usize| z * 16 <= half;
    if mostly(zeros_odd) && hardly(zeros_even) {
        Some(encoding_rs::UTF_16LE)
    } else if mostly(zeros_even) && hardly(zeros_odd) {
        Some(encoding_rs::UTF_16BE)
    } else {
        None
    }
}

/// What the header line says the table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderKind {
    Long,
    Wide,
    UiExport,
    Source,
}

/// The header that was found, plus what came before it.
pub(crate) struct Header<'a> {
    pub kind: HeaderKind,
    pub fields: Fields<'a>,
    /// Physical line of the header.
    pub line: u64,
    /// Whether the header's first field was quoted (ncu quotes every field).
    pub quoted: bool,
    pub delim: u8,
    /// `--page source` preamble pairs (`"Kernel Name","k"`).
    pub preamble: Vec<(String, String)>,
}

impl Header<'_> {
    /// Index of the column named `name`.
    pub fn col(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| trim_cell(f) == name)
    }
}

/// Line bookkeeping shared by all readers: what was skipped and where reading stopped.
#[derive(Default, Clone)]
pub(crate) struct Skipped {
    tool: Vec<u64>,
    other: Vec<u64>,
    repeated_header: Vec<u64>,
    traceback: Option<(u64, u64)>,
}

impl Skipped {
    fn notes(&self, notes: &mut Vec<String>) {
        if !self.tool.is_empty() {
            notes.push(format!(
                "skipped {} ncu message line(s) (==PROF==/==WARNING==/==ERROR==) at line(s) {}",
                self.tool.len(),
                line_list(&self.tool)
            ));
        }
        if !self.other.is_empty() {
            notes.push(format!(
                "skipped {} line(s) that are not part of the CSV table (application output?) at line(s) {}",
                self.other.len(),
                line_list(&self.other)
            ));
        }
        if !self.repeated_header.is_empty() {
            notes.push(format!(
                "skipped {} repeated header line(s) at line(s) {}",
                self.repeated_header.len(),
                line_list(&self.repeated_header)
            ));
        }
        if let Some((line, n)) = self.traceback {
            notes.push(format!("stopped at line {line}: a Python traceback is appended there ({n} line(s) not read)"));
        }
    }
}

/// "1-3, 7, 9" (ranges collapsed, at most 12 items).
fn line_list(lines: &[u64]) -> String {
    let mut out = String::new();
    let mut items = 0;
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        let mut end = start;
        while i + 1 < lines.len() && lines[i + 1] == end + 1 {
            i += 1;
            end = lines[i];
        }
        if items == 12 {
            out.push_str(", ...");
            break;
        }
        if items > 0 {
            out.push_str(", ");
        }
        if start == end {
            let _ = write!(out, "{start}");
        } else {
            let _ = write!(out, "{start}-{end}");
        }
        items += 1;
        i += 1;
    }
    out
}

fn is_tool_line(line: &str) -> bool {
    // ==PROF==, ==WARNING==, ==ERROR==, ==INFO== ...
    let Some(rest) = line.strip_prefix("==") else { return false };
    match rest.find("==") {
        Some(n) => n > 0 && rest[..n].bytes().all(|b| b.is_ascii_uppercase()),
        None => false,
    }
}

fn is_traceback(line: &str) -> bool {
    line.starts_with("Traceback (most recent call last)")
}

/// What a physical line is, before it is read as table text.
enum LineStart {
    Blank,
    /// `==PROF==`, `==WARNING==`...
    Tool,
    /// An appended Python traceback: the table ends here.
    Traceback,
    Text,
}

fn line_start(line: &str) -> LineStart {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        LineStart::Blank
    } else if is_tool_line(trimmed) {
        LineStart::Tool
    } else if is_traceback(trimmed) {
        LineStart::Traceback
    } else {
        LineStart::Text
    }
}

/// The input being read: a tokenizer plus the skipped-line bookkeeping.
#[derive(Clone)]
pub(crate) struct Input<'a> {
    pub path: &'a Path,
    tok: Tokenizer<'a>,
    pub skipped: Skipped,
    /// Whether [`Input::data_rows_par`] may split lines across threads.
    parallel: bool,
    /// The line of a quoted field that is never closed: the file ends inside it (cut off
    /// mid-write), and the table ends before that record.
    pub truncated: Option<u64>,
}

impl<'a> Input<'a> {
    fn new(path: &'a Path, text: &'a str) -> Self {
        Input { path, tok: Tokenizer::new(text, b','), skipped: Skipped::default(), parallel: true, truncated: None }
    }

    pub fn csv_error(&self, line: u64, message: impl Into<String>) -> ProfileError {
        ProfileError::Csv { path: self.path.to_owned(), line, message: message.into() }
    }

    /// Moves to the next line that may hold table text: blank lines and ncu's own message lines
    /// are skipped (the latter noted); at an appended traceback (noted) reading ends. Returns the
    /// line's number and text, or `None` at the end.
    fn next_text_line(&mut self) -> Option<(u64, &'a str)> {
        loop {
            if self.tok.at_end() {
                return None;
            }
            let line = self.tok.peek_line();
            let ln = self.tok.line();
            match line_start(line) {
                LineStart::Blank => self.tok.skip_line(),
                LineStart::Tool => {
                    self.skipped.tool.push(ln);
                    self.tok.skip_line();
                }
                LineStart::Traceback => {
                    self.skipped.traceback = Some((ln, self.tok.remaining_lines()));
                    self.tok.skip_to_end(0);
                    return None;
                }
                LineStart::Text => return Some((ln, line)),
            }
        }
    }

    /// Reads the record that starts on the current line, `line`: from the line's spans when its
    /// fields are all simply quoted (the usual ncu line, read without a byte loop), else with
    /// the tokenizer (same fields).
    fn read_line_or_record(&mut self, line: &'a str, fields: &mut Fields<'a>) -> std::result::Result<bool, tokenizer::Unterminated> {
        match tokenizer::quoted_line(line, self.tok.delim()) {
            Some(q) => {
                fields.clear();
                fields.extend(q.spans().map(|(s, e)| Cow::Borrowed(&line[s as usize..e as usize])));
                self.tok.skip_line();
                Ok(true)
            }
            None => self.tok.read_record(fields),
        }
    }

    /// Skips everything before the table's header and classifies the header.
    fn find_header(&mut self) -> Result<Header<'a>> {
        let mut preamble: Vec<(String, String)> = Vec::new();
        let mut first_other: Option<(u64, String)> = None;
        let mut fields: Fields<'a> = Vec::new();
        loop {
            let Some((ln, line)) = self.next_text_line() else {
                return Err(self.no_header(first_other, &preamble));
            };
            let delim = guess_delimiter(line);
            self.tok.set_delim(delim);
            let saved = self.tok.clone();
            let kind = match self.read_line_or_record(line, &mut fields) {
                Ok(true) => classify_header(&fields),
                _ => None,
            };
            match kind {
                Some(Classified::Header(kind)) => {
                    return Ok(Header {
                        kind,
                        fields: std::mem::take(&mut fields),
                        line: ln,
                        quoted: line.trim_start().starts_with('"'),
                        delim,
                        preamble,
                    });
                }
                Some(Classified::Preamble) => {
                    preamble.push((fields[0].trim().to_string(), fields.get(1).map(|s| s.to_string()).unwrap_or_default()));
                }
                None => {
                    self.tok = saved;
                    self.tok.skip_line();
                    self.skipped.other.push(ln);
                    if first_other.is_none() {
                        first_other = Some((ln, line.trim().chars().take(80).collect()));
                    }
                }
            }
        }
    }

    fn no_header(&self, first_other: Option<(u64, String)>, preamble: &[(String, String)]) -> ProfileError {
        let s = &self.skipped;
        let message = if s.tool.is_empty() && s.other.is_empty() && preamble.is_empty() && s.traceback.is_none() {
            "the file is empty (no CSV header, no data)".to_string()
        } else if s.other.is_empty() && preamble.is_empty() && s.traceback.is_none() {
            format!("only ==PROF== lines ({} line(s)), no CSV header: ncu printed no results", s.tool.len())
        } else {
            let mut m = format!("no CSV header found: {} ==PROF== line(s), {} other line(s)", s.tool.len(), s.other.len());
            if let Some((ln, text)) = first_other {
                let _ = write!(m, " (first at line {ln}: {text:?})");
            }
            if !preamble.is_empty() {
                let _ = write!(m, "; a --page source preamble but no \"Address\"/\"Line No\" header");
            }
            if let Some((ln, _)) = s.traceback {
                let _ = write!(m, "; a Python traceback starts at line {ln}");
            }
            m
        };
        ProfileError::Empty { path: self.path.to_owned(), message }
    }

    /// Reads the data records after the header, skipping what is not table data.
    pub fn data_rows(&mut self, header: &Header<'a>) -> Result<Vec<(u64, Fields<'a>)>> {
        let mut rows = Vec::new();
        while let Some(row) = self.next_row(header)? {
            rows.push(row);
        }
        Ok(rows)
    }

    /// The next data record after the header (skipping, and noting, what is not table data), or
    /// `None` at the end of the table.
    pub fn next_row(&mut self, header: &Header<'a>) -> Result<Option<(u64, Fields<'a>)>> {
        let mut fields: Fields<'a> = Vec::new();
        loop {
            let Some((ln, line)) = self.next_text_line() else { return Ok(None) };
            let looks_like_row =
                if header.quoted { line.starts_with('"') } else { line.as_bytes().contains(&header.delim) || header.fields.len() == 1 };
            if !looks_like_row {
                self.skipped.other.push(ln);
                self.tok.skip_line();
                continue;
            }
            match self.read_line_or_record(line, &mut fields) {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => {
                    // The file ends inside this record: keep the complete rows before it.
                    self.truncated = Some(e.line);
                    let lines = self.tok.remaining_lines();
                    self.tok.skip_to_end(lines);
                    return Ok(None);
                }
            }
            if fields == header.fields {
                self.skipped.repeated_header.push(ln);
                continue;
            }
            // A quoted line of application output: one field where the table has many.
            if fields.len() == 1 && header.fields.len() > 2 {
                self.skipped.other.push(ln);
                continue;
            }
            return Ok(Some((ln, fields)));
        }
    }

    /// [`Input::data_rows`], with each physical line tokenized on its own, in parallel.
    pub fn data_rows_par(&mut self, header: &Header<'a>) -> Result<Vec<(u64, Fields<'a>)>> {
        self.rows_par(header, |_| Vec::with_capacity(header.fields.len()), |f| f)
    }

    /// The remaining data records, each handed field by field to a sink made by `make` (given the
    /// record's line) and turned into a row by `finish`, in file order.
    ///
    /// Physical lines are tokenized in parallel when the table is quoted (ncu quotes every field):
    /// there a line is a record unless a quoted field runs past its end. Then, or when the file
    /// has a lone CR line end or is small, the sequential reader does the work. Both give the
    /// same rows and the same notes.
    pub fn rows_par<S, T>(
        &mut self,
        header: &Header<'a>,
        make: impl Fn(u64) -> S + Sync,
        finish: impl Fn(S) -> T + Sync,
    ) -> Result<Vec<(u64, T)>>
    where
        S: FieldSink<'a>,
        T: Send,
    {
        use rayon::prelude::*;
        let sequential = |input: &mut Self| -> Result<Vec<(u64, T)>> {
            let mut rows = Vec::new();
            while let Some((ln, fields)) = input.next_row(header)? {
                let mut sink = make(ln);
                for f in fields {
                    sink.field(f);
                }
                rows.push((ln, finish(sink)));
            }
            Ok(rows)
        };
        let rest = self.tok.rest();
        if !self.parallel || !header.quoted || rest.len() < PAR_MIN_BYTES {
            return sequential(self);
        }
        let bytes = rest.as_bytes();
        let mut lines: Vec<&'a str> = Vec::with_capacity(64);
        let (mut start, mut crlf) = (0, 0);
        for nl in memchr::memchr_iter(b'\n', bytes) {
            let mut end = nl;
            if end > start && bytes[end - 1] == b'\r' {
                end -= 1;
                crlf += 1;
            }
            lines.push(&rest[start..end]);
            start = nl + 1;
        }
        if start < bytes.len() {
            lines.push(&rest[start..]);
        }
        if memchr::memchr_iter(b'\r', bytes).count() != crlf {
            return sequential(self);
        }
        let first = self.tok.line();
        // At least ~16 KB of text per task: one line of a raw page, a hundred of a details page.
        let per_task = (16 * 1024 * lines.len() / bytes.len().max(1)).max(1);
        let kinds: Vec<LineKind<T>> = lines
            .par_iter()
            .enumerate()
            .with_min_len(per_task)
            .map(|(i, line)| {
                match line_start(line) {
                    LineStart::Blank => return LineKind::Blank,
                    LineStart::Tool => return LineKind::Tool,
                    LineStart::Traceback => return LineKind::Traceback,
                    LineStart::Text => {}
                }
                if !line.starts_with('"') {
                    return LineKind::Other;
                }
                let mut sink = Checked { inner: make(first + i as u64), header: &header.fields, count: 0, same: true };
                if let Some(q) = tokenizer::quoted_line(line, header.delim) {
                    sink.line_fields(line, q);
                } else if tokenizer::read_line_record(line, header.delim, &mut sink).is_err() {
                    return LineKind::Continues;
                }
                if sink.same && sink.count == header.fields.len() {
                    LineKind::RepeatedHeader
                } else if sink.count == 1 && header.fields.len() > 2 {
                    LineKind::Other
                } else {
                    LineKind::Row(finish(sink.inner))
                }
            })
            .collect();
        let read = kinds.iter().position(|k| matches!(k, LineKind::Traceback)).unwrap_or(kinds.len());
        if kinds[..read].iter().any(|k| matches!(k, LineKind::Continues)) {
            return sequential(self);
        }
        let mut rows = Vec::with_capacity(kinds.len());
        for (i, kind) in kinds.into_iter().enumerate().take(read + 1) {
            let ln = first + i as u64;
            match kind {
                LineKind::Blank | LineKind::Continues => {}
                LineKind::Tool => self.skipped.tool.push(ln),
                LineKind::Other => self.skipped.other.push(ln),
                LineKind::RepeatedHeader => self.skipped.repeated_header.push(ln),
                LineKind::Traceback => self.skipped.traceback = Some((ln, (lines.len() - i) as u64)),
                LineKind::Row(r) => rows.push((ln, r)),
            }
        }
        self.tok.skip_to_end(lines.len() as u64);
        Ok(rows)
    }
}

/// Forwards fields to a sink, counting them and comparing them with the header.
struct Checked<'h, 'a, S> {
    inner: S,
    header: &'h [Cow<'a, str>],
    count: usize,
    same: bool,
}

impl<'a, S: FieldSink<'a>> FieldSink<'a> for Checked<'_, 'a, S> {
    #[inline]
    fn field(&mut self, f: Cow<'a, str>) {
        if self.same && self.header.get(self.count) != Some(&f) {
            self.same = false;
        }
        self.count += 1;
        self.inner.field(f);
    }

    fn line_fields(&mut self, line: &'a str, fields: tokenizer::QuotedLine) {
        if self.same {
            let rest = self.header.get(self.count..).unwrap_or(&[]);
            self.same = fields.len() <= rest.len() && fields.spans().zip(rest).all(|((s, e), h)| &line[s as usize..e as usize] == h);
        }
        self.count += fields.len();
        self.inner.line_fields(line, fields);
    }
}

/// What one physical line is, for [`Input::rows_par`].
enum LineKind<T> {
    Blank,
    Tool,
    Traceback,
    Other,
    RepeatedHeader,
    Row(T),
    /// A quoted field runs on to the next line: only the sequential reader can read it.
    Continues,
}

/// Below this much text, splitting lines across threads costs more than it saves.
const PAR_MIN_BYTES: usize = 64 * 1024;

/// `s` without surrounding white space; ASCII-only fast path (cells rarely have any).
#[inline]
pub(crate) fn trim_cell(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

enum Classified {
    Header(HeaderKind),
    Preamble,
}

fn classify_header(fields: &Fields<'_>) -> Option<Classified> {
    let has = |name: &str| fields.iter().any(|f| trim_cell(f) == name);
    let first = fields.first().map(|f| f.trim()).unwrap_or("");
    if has("ID") && has("Kernel Name") {
        if has("Metric Name") && has("Metric Value") {
            return Some(Classified::Header(HeaderKind::Long));
        }
        return Some(Classified::Header(HeaderKind::Wide));
    }
    if first == "ID"
        && fields.len() >= 2
        && fields[1..].iter().all(|f| !f.trim().is_empty() && f.trim().bytes().all(|b| b.is_ascii_digit()))
    {
        return Some(Classified::Header(HeaderKind::UiExport));
    }
    if matches!(first, "Address" | "Line No" | "# Address" | "Line") && fields.len() >= 2 && has("Source") {
        return Some(Classified::Header(HeaderKind::Source));
    }
    let nonempty = fields.iter().filter(|f| !f.trim().is_empty()).count();
    if matches!(first, "Kernel Name" | "File Path" | "Function Name" | "Mangled Name" | "Demangled Name") && nonempty <= 2 {
        return Some(Classified::Preamble);
    }
    None
}

/// Launch identity columns of the details / raw / metrics pages, found by name.
pub(crate) struct IdentityCols {
    id: Option<usize>,
    pid: Option<usize>,
    pname: Option<usize>,
    kname: Option<usize>,
    ctx: Option<usize>,
    stream: Option<usize>,
    block: Option<usize>,
    grid: Option<usize>,
    device: Option<usize>,
    cc: Option<usize>,
}

pub(crate) const IDENTITY_COLUMNS: &[&str] =
    &["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC"];

impl IdentityCols {
    pub fn new(h: &Header<'_>) -> Self {
        IdentityCols {
            id: h.col("ID"),
            pid: h.col("Process ID"),
            pname: h.col("Process Name"),
            kname: h.col("Kernel Name"),
            ctx: h.col("Context"),
            stream: h.col("Stream"),
            block: h.col("Block Size"),
            grid: h.col("Grid Size"),
            device: h.col("Device"),
            cc: h.col("CC"),
        }
    }

    /// The largest column index used.
    pub fn max_index(&self) -> Option<usize> {
        [self.id, self.pid, self.pname, self.kname, self.ctx, self.stream, self.block, self.grid, self.device, self.cc]
            .into_iter()
            .flatten()
            .max()
    }

    /// The launch ID of a row, or an error naming the line.
    pub fn id(&self, input: &Input<'_>, line: u64, f: &Fields<'_>) -> Result<u64> {
        let col = self.id.unwrap_or(0);
        let Some(raw) = f.get(col) else {
            return Err(input.csv_error(
                line,
                format!("expected a launch ID in column \"ID\" (column {}), the row has only {} field(s)", col + 1, f.len()),
            ));
        };
        parse_u64(raw).ok_or_else(|| {
            input.csv_error(
                line,
                format!("expected a launch ID (a whole number) in column \"ID\" (column {}), found {:?}", col + 1, short(raw)),
            )
        })
    }

    /// A launch with the identity columns of `f` filled in.
    pub fn launch(&self, id: u64, f: &Fields<'_>) -> Launch {
        let get = |c: Option<usize>| c.and_then(|c| f.get(c)).map(|s| s.trim()).filter(|s| !s.is_empty());
        let mut l = Launch { id, ..Default::default() };
        set_kernel_name(&mut l, get(self.kname).unwrap_or(""));
        l.process_id = get(self.pid).and_then(parse_u64);
        l.process_name = get(self.pname).map(str::to_string);
        l.context_id = get(self.ctx).and_then(parse_u64);
        l.stream_id = get(self.stream).and_then(parse_u64);
        l.block_size = get(self.block).and_then(parse_dim3);
        l.grid_size = get(self.grid).and_then(parse_dim3);
        l.device_id = get(self.device).and_then(parse_u64);
        l.compute_capability = get(self.cc).map(str::to_string);
        l
    }
}

/// Sets `name` (demangled when the text is an Itanium-mangled name) and `mangled_name`.
pub(crate) fn set_kernel_name(l: &mut Launch, raw: &str) {
    let raw = raw.trim();
    if raw.starts_with("_Z") {
        if let Some(d) = demangle(raw) {
            l.name = d;
            l.mangled_name = Some(raw.to_string());
            return;
        }
    }
    l.name = raw.to_string();
}

/// Demangles an Itanium C++ name; `None` when it does not parse (never panics).
pub fn demangle(mangled: &str) -> Option<String> {
    // Deeply nested hostile input must not take the reader down.
    if mangled.len() > 16 * 1024 {
        return None;
    }
    std::panic::catch_unwind(|| {
        let sym = cpp_demangle::Symbol::new(mangled.as_bytes()).ok()?;
        sym.demangle(&cpp_demangle::DemangleOptions::default()).ok()
    })
    .ok()
    .flatten()
}

/// "1,234" / "42" / " 7 " -> u64.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    if let Ok(v) = t.parse::<u64>() {
        return Some(v);
    }
    let mut v: u64 = 0;
    let mut digits = 0;
    for b in t.bytes() {
        match b {
            b'0'..=b'9' => {
                v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
                digits += 1;
            }
            b',' | b'.' | b' ' | b'\'' => {}
            _ => return None,
        }
    }
    (digits > 0).then_some(v)
}

/// "(32, 8, 1)" or "    1,    1,    1" -> [32, 8, 1].
pub(crate) fn parse_dim3(s: &str) -> Option<[u64; 3]> {
    let t = s.trim().trim_start_matches('(').trim_end_matches(')');
    let mut it = t.split(',').map(|p| p.trim().parse::<u64>());
    let d = [it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?];
    if it.next().is_some() {
        return None;
    }
    Some(d)
}

/// At most 60 characters of a value, for messages.
pub(crate) fn short(s: &str) -> String {
    let mut o: String = s.chars().take(60).collect();
    if s.chars().count() > 60 {
        o.push('…');
    }
    o
}

/// Detects the file's number locale from a sample of values.
pub(crate) fn locale_of<'b>(values: impl IntoIterator<Item = &'b str>) -> NumberLocale {
    detect_locale(values)
}

/// A metric view of a cell as written, for [`crate::MetricsBuilder::push`].
pub(crate) fn cell_metric<'a>(
    raw_value: &'a str,
    raw_unit: &'a str,
    norm: &'a (f64, super::Unit),
    locale: NumberLocale,
    line: u64,
) -> Metric<'a> {
    // `None` for text that is not a number (`n/a` included), kept as text.
    let value = match super::units::parse_scaled(raw_value, norm.0, locale) {
        Some(v) => MetricValue::Number(v),
        None => MetricValue::Text(raw_value),
    };
    Metric { value, unit: &norm.1, raw_value, raw_unit, label: None, section: None, origin: line_origin(line) }
}

/// A CSV line as a metric origin.
pub(crate) fn line_origin(line: u64) -> super::Origin {
    super::Origin::Line(u32::try_from(line).unwrap_or(u32::MAX))
}

/// `normalize_unit` with a one-entry cache (units repeat row after row).
pub(crate) struct UnitCache {
    last: Option<(String, (f64, super::Unit))>,
}

impl UnitCache {
    pub fn new() -> Self {
        UnitCache { last: None }
    }

    pub fn get(&mut self, raw: &str) -> (f64, super::Unit) {
        if let Some((k, v)) = &self.last {
            if k == raw {
                return v.clone();
            }
        }
        let v = normalize_unit(raw);
        self.last = Some((raw.to_string(), v.clone()));
        v
    }
}

#[cfg(test)]
mod tests;
