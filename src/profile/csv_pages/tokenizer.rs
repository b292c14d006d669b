//! A lenient, zero-copy CSV tokenizer that knows physical line numbers.
//!
//! Why not the `csv` crate here: ncu's exports are not always valid CSV, and the readers need to
//! look at each physical line before deciding it is a record at all (`==PROF==` lines, application
//! output, an appended traceback). Specifically:
//! - ncu writes source text unescaped inside quotes (`"extern "C" __global__ void f("`); RFC 4180
//!   readers (Python's `csv`, the `csv` crate) drop a quote there. Here a quote inside a quoted
//!   field only closes the field when a delimiter, a line end or the end of input follows it, so
//!   the text comes back exactly as ncu wrote it. `""` is still an escaped quote.
//! - every field is borrowed from the input unless it contained `""` (then it is unescaped into an
//!   owned string), so tokenizing allocates nothing per cell.
//! - ragged rows are fine: a record has as many fields as its line has.
//!
//! Records may span lines (a quoted field with a newline); [`Tokenizer::line`] is the physical line
//! where the current position is, 1-based.

use std::borrow::Cow;

/// One record's fields, borrowed from the input where possible.
pub type Fields<'a> = Vec<Cow<'a, str>>;

/// Receives a record's fields in order (a reader can build its rows without a [`Fields`] list).
pub trait FieldSink<'a> {
    fn field(&mut self, f: Cow<'a, str>);
}

impl<'a> FieldSink<'a> for Fields<'a> {
    #[inline]
    fn field(&mut self, f: Cow<'a, str>) {
        self.push(f);
    }
}

#[derive(Clone)]
pub struct Tokenizer<'a> {
    text: &'a str,
    pos: usize,
    line: u64,
    delim: u8,
}

/// A quoted field ran to the end of the input.
#[derive(Debug)]
pub struct Unterminated {
    /// Physical line where the field started.
    pub line: u64,
}

impl<'a> Tokenizer<'a> {
    pub fn new(text: &'a str, delim: u8) -> Self {
        Tokenizer { text, pos: 0, line: 1, delim }
    }

    pub fn set_delim(&mut self, delim: u8) {
        self.delim = delim;
    }

    /// 1-based physical line of the current position.
    pub fn line(&self) -> u64 {
        self.line
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    /// The rest of the current physical line, without its terminator.
    pub fn peek_line(&self) -> &'a str {
        let rest = &self.text[self.pos..];
        let end = memchr::memchr2(b'\n', b'\r', rest.as_bytes()).unwrap_or(rest.len());
        &rest[..end]
    }

    /// The unread text.
    pub fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    /// Moves to the end of the input, `lines` physical lines further on.
    pub fn skip_to_end(&mut self, lines: u64) {
        self.pos = self.text.len();
        self.line += lines;
    }

    /// Skips the current physical line (and its terminator).
    pub fn skip_line(&mut self) {
        let rest = &self.text.as_bytes()[self.pos..];
        match memchr::memchr2(b'\n', b'\r', rest) {
            Some(i) => {
                self.pos += i;
                self.eat_newline();
            }
            None => self.pos = self.text.len(),
        }
    }

    /// Number of physical lines from the current position to the end (counting a last line
    /// without terminator).
    pub fn remaining_lines(&self) -> u64 {
        let rest = &self.text.as_bytes()[self.pos..];
        if rest.is_empty() {
            return 0;
        }
        let n = memchr::memchr_iter(b'\n', rest).count() as u64;
        if rest.last() == Some(&b'\n') {
            n
        } else {
            n + 1
        }
    }

    fn eat_newline(&mut self) {
        let b = self.text.as_bytes();
        if self.pos < b.len() && b[self.pos] == b'\r' {
            self.pos += 1;
            if self.pos < b.len() && b[self.pos] == b'\n' {
                self.pos += 1;
            }
            self.line += 1;
        } else if self.pos < b.len() && b[self.pos] == b'\n' {
            self.pos += 1;
            self.line += 1;
        }
    }

    /// Reads one record into `out` (cleared first). Returns `Ok(false)` at the end of input.
    pub fn read_record(&mut self, out: &mut Fields<'a>) -> Result<bool, Unterminated> {
        out.clear();
        self.read_record_into(out)
    }

    /// Reads one record, handing each field to `out`. Returns `Ok(false)` at the end of input.
    pub fn read_record_into<S: FieldSink<'a>>(&mut self, out: &mut S) -> Result<bool, Unterminated> {
        let text = self.text;
        let b = text.as_bytes();
        if self.pos >= b.len() {
            return Ok(false);
        }
        let delim = self.delim;
        loop {
            // At the start of a field.
            if self.pos < b.len() && b[self.pos] == b'"' {
                let start_line = self.line;
                let start = self.pos + 1;
                let mut i = start;
                let mut escaped = false;
                loop {
                    // Find the next quote, counting newlines on the way (one pass).
                    let Some(q) = find_quote_or_newline(&b[i..]) else {
                        return Err(Unterminated { line: start_line });
                    };
                    let at = i + q;
                    if b[at] == b'\n' {
                        self.line += 1;
                        i = at + 1;
                        continue;
                    }
                    let next = b.get(at + 1).copied();
                    match next {
                        Some(b'"') => {
                            escaped = true;
                            i = at + 2;
                        }
                        None | Some(b'\n') | Some(b'\r') => {
                            out.field(field(&text[start..at], escaped));
                            self.pos = at + 1;
                            self.eat_newline();
                            return Ok(true);
                        }
                        Some(c) if c == delim => {
                            out.field(field(&text[start..at], escaped));
                            self.pos = at + 2;
                            break;
                        }
                        // A quote inside the field that ncu did not escape: keep it.
                        Some(_) => i = at + 1,
                    }
                }
            } else {
                let rest = &b[self.pos..];
                let end = find_field_end(rest, delim).unwrap_or(rest.len());
                out.field(Cow::Borrowed(&text[self.pos..self.pos + end]));
                self.pos += end;
                if self.pos < b.len() && b[self.pos] == delim {
                    self.pos += 1;
                } else {
                    self.eat_newline();
                    return Ok(true);
                }
            }
            if self.pos >= b.len() {
                // "a,b," at the very end: the trailing delimiter opens one last empty field.
                out.field(Cow::Borrowed(""));
                return Ok(true);
            }
        }
    }
}

/// Reads the record on one physical line (`line` holds no `\n` or `\r`), exactly as
/// [`Tokenizer::read_record`] would, or `Err` when a quoted field runs past the line's end.
///
/// Built for the parallel reader's long lines: the quotes of the whole line are found first, 64
/// bytes at a time, into a bit mask; each quoted field is then one bit scan instead of a byte
/// loop whose exit the CPU cannot predict.
pub fn read_line_record<'a, S: FieldSink<'a>>(line: &'a str, delim: u8, out: &mut S) -> Result<(), Unterminated> {
    let b = line.as_bytes();
    debug_assert!(!b.contains(&b'\n') && !b.contains(&b'\r'));
    if b.is_empty() {
        return Ok(());
    }
    let quotes = QuoteMask::new(b);
    let mut pos = 0;
    loop {
        if b[pos] == b'"' {
            let start = pos + 1;
            let mut i = start;
            let mut escaped = false;
            loop {
                let Some(at) = quotes.next(i) else { return Err(Unterminated { line: 1 }) };
                match b.get(at + 1).copied() {
                    Some(b'"') => {
                        escaped = true;
                        i = at + 2;
                    }
                    None => {
                        out.field(field(&line[start..at], escaped));
                        return Ok(());
                    }
                    Some(c) if c == delim => {
                        out.field(field(&line[start..at], escaped));
                        pos = at + 2;
                        break;
                    }
                    Some(_) => i = at + 1,
                }
            }
        } else {
            let end = memchr::memchr(delim, &b[pos..]).map_or(b.len(), |e| pos + e);
            out.field(Cow::Borrowed(&line[pos..end]));
            if end == b.len() {
                return Ok(());
            }
            pos = end + 1;
        }
        if pos >= b.len() {
            out.field(Cow::Borrowed(""));
            return Ok(());
        }
    }
}

/// Positions of `"` in a line, one bit per byte.
struct QuoteMask {
    words: Vec<u64>,
}

impl QuoteMask {
    fn new(b: &[u8]) -> Self {
        // Fixed-size chunks: a loop the compiler turns into vector compares.
        let bits = |c: &[u8]| c.iter().enumerate().fold(0u64, |m, (j, &x)| m | u64::from(x == b'"') << j);
        QuoteMask { words: b.chunks(64).map(bits).collect() }
    }

    /// The first quote at or after `from`.
    #[inline]
    fn next(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let mut m = self.words.get(w)? & (u64::MAX << (from % 64));
        loop {
            if m != 0 {
                return Some(w * 64 + m.trailing_zeros() as usize);
            }
            w += 1;
            m = *self.words.get(w)?;
        }
    }
}

/// Bytes looked at one by one before a vectorised search: most ncu cells are a few bytes long,
/// where a plain loop beats `memchr`'s setup.
const SHORT: usize = 16;

/// Position of the first `"` or `\n` in `hay`.
#[inline]
fn find_quote_or_newline(hay: &[u8]) -> Option<usize> {
    if let Some(i) = hay.iter().take(SHORT).position(|&c| c == b'"' || c == b'\n') {
        return Some(i);
    }
    if hay.len() <= SHORT {
        return None;
    }
    memchr::memchr2(b'"', b'\n', &hay[SHORT..]).map(|i| i + SHORT)
}

/// Position of the first delimiter or line end in `hay`.
#[inline]
fn find_field_end(hay: &[u8], delim: u8) -> Option<usize> {
    if let Some(i) = hay.iter().take(SHORT).position(|&c| c == delim || c == b'\n' || c == b'\r') {
        return Some(i);
    }
    if hay.len() <= SHORT {
        return None;
    }
    memchr::memchr3(delim, b'\n', b'\r', &hay[SHORT..]).map(|i| i + SHORT)
}

fn field(raw: &str, escaped: bool) -> Cow<'_, str> {
    if escaped {
        Cow::Owned(raw.replace("\"\"", "\""))
    } else {
        Cow::Borrowed(raw)
    }
}

/// Guesses the delimiter of a header line: `,` unless the line is clearly `;`- or tab-separated.
pub fn guess_delimiter(line: &str) -> u8 {
    let count = |d: u8| memchr::memchr_iter(d, line.as_bytes()).count();
    let (c, s, t) = (count(b','), count(b';'), count(b'\t'));
    if line.contains("\";\"") && !line.contains("\",\"") || (c == 0 && s > 0 && s >= t) {
        b';'
    } else if line.contains("\"\t\"") && !line.contains("\",\"") || (c == 0 && t > 0) {
        b'\t'
    } else {
        b','
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<(u64, Vec<String>)> {
        let mut t = Tokenizer::new(text, b',');
        let mut out = Vec::new();
        let mut f = Vec::new();
        loop {
            let line = t.line();
            if !t.read_record(&mut f).unwrap() {
                break;
            }
            out.push((line, f.iter().map(|s| s.to_string()).collect()));
        }
        out
    }

    #[test]
    fn quoted_and_plain() {
        let r = all("\"a\",\"b,c\",d\n1,\"x\"\"y\",\r\n\"last\"");
        assert_eq!(r[0], (1, vec!["a".into(), "b,c".into(), "d".into()]));
        assert_eq!(r[1], (2, vec!["1".into(), "x\"y".into(), "".into()]));
        assert_eq!(r[2], (3, vec!["last".into()]));
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn unescaped_quotes_kept() {
        let r = all("\"83\",\"extern \"C\" __global__ void f(\",\"-\"\n");
        assert_eq!(r[0].1, vec!["83", "extern \"C\" __global__ void f(", "-"]);
    }

    #[test]
    fn multiline_field_counts_lines() {
        let r = all("\"a\nb\",c\n\"d\"\n");
        assert_eq!(r[0], (1, vec!["a\nb".into(), "c".into()]));
        assert_eq!(r[1], (3, vec!["d".into()]));
    }

    #[test]
    fn unterminated_is_an_error() {
        let mut t = Tokenizer::new("x\n\"abc,def\n", b',');
        let mut f = Vec::new();
        assert!(t.read_record(&mut f).unwrap());
        let e = t.read_record(&mut f).unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn trailing_delimiter_at_eof() {
        let r = all("a,b,");
        assert_eq!(r[0].1, vec!["a", "b", ""]);
    }

    #[test]
    fn line_records_match_the_tokenizer() {
        let alphabet = ["\"", ",", "a", "\"\"", "é", "\",\"", " ", "1.5"];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in 0..5000 {
            let len = (next() % 200) as usize + usize::from(n % 7 == 0) * 300;
            let mut line = String::from("\"");
            for _ in 0..len {
                line.push_str(alphabet[(next() % alphabet.len() as u64) as usize]);
            }
            let mut want: Fields = Vec::new();
            let mut tok = Tokenizer::new(&line, b',');
            let expected = tok.read_record(&mut want).map(|_| tok.at_end());
            let mut got: Fields = Vec::new();
            let result = read_line_record(&line, b',', &mut got);
            match expected {
                Ok(true) => {
                    assert!(result.is_ok(), "{line:?}");
                    assert_eq!(got, want, "{line:?}");
                }
                _ => assert!(result.is_err(), "{line:?}: tokenizer {expected:?}, line reader {got:?}"),
            }
        }
    }

    #[test]
    fn quote_or_newline_search() {
        for len in 0..40 {
            for at in 0..len {
                for c in [b'"', b'\n'] {
                    let mut v = vec![b'a'; len];
                    v[at] = c;
                    if at + 1 < len {
                        v[at + 1] = b'"';
                    }
                    assert_eq!(find_quote_or_newline(&v), Some(at), "{len} {at}");
                }
            }
            assert_eq!(find_quote_or_newline(&vec![0xffu8; len]), None);
        }
    }

    #[test]
    fn lines_and_delims() {
        let mut t = Tokenizer::new("one\r\ntwo\nthree", b',');
        assert_eq!(t.peek_line(), "one");
        assert_eq!(t.remaining_lines(), 3);
        t.skip_line();
        assert_eq!((t.line(), t.peek_line()), (2, "two"));
        t.skip_line();
        t.skip_line();
        assert!(t.at_end());
        assert_eq!(guess_delimiter("\"a\";\"b\";\"c\""), b';');
        assert_eq!(guess_delimiter("a\tb\tc"), b'\t');
        assert_eq!(guess_delimiter("\"a\",\"1;2\""), b',');
    }
}
