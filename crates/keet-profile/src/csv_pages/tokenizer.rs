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
//!
//! Three readers, one meaning: [`Tokenizer`] (byte-wise, any text), [`read_line_record`] (one
//! physical line, quotes found by bit mask first) and [`quoted_line`] (a line of simply quoted
//! fields, the usual ncu line, indexed 64 bytes at a time with no per-field work). Each of the
//! last two either gives exactly the first one's fields or declines the line; randomised tests
//! pin that.

use std::borrow::Cow;

/// One record's fields, borrowed from the input where possible.
pub type Fields<'a> = Vec<Cow<'a, str>>;

/// Receives a record's fields in order (a reader can build its rows without a [`Fields`] list).
pub trait FieldSink<'a> {
    fn field(&mut self, f: Cow<'a, str>);

    /// Every field of one physical line at once, as [`quoted_line`] found them. By default
    /// each is handed to [`FieldSink::field`]; a sink that keeps positions can take them as
    /// they are.
    fn line_fields(&mut self, line: &'a str, fields: QuotedLine) {
        for (s, e) in fields.spans() {
            self.field(Cow::Borrowed(&line[s as usize..e as usize]));
        }
    }
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

    pub fn delim(&self) -> u8 {
        self.delim
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

/// A physical line read by [`quoted_line`]: where its fields are, as a bit index.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotedLine {
    /// Bit i of word w: byte 64w + i is the closing quote of a field.
    ends: Vec<u64>,
    /// Fields that end in the words before word w (one more entry than `ends`: the total).
    rank: Vec<u32>,
    /// Commas inside the fields' text (delimiters not counted).
    pub inner_commas: u32,
    /// Whether some field's text may start or end with white space: its first or last byte is
    /// not ASCII-graphic. When `false`, no field needs trimming.
    pub padded: bool,
    /// The line ends with a delimiter, which opens one last empty field here.
    trailing: Option<u32>,
}

impl QuotedLine {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.quoted() + usize::from(self.trailing.is_some())
    }

    /// Number of quoted fields (all but a trailing empty one).
    fn quoted(&self) -> usize {
        self.rank.last().map_or(0, |&r| r as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Position of the closing quote of field `k`: its word from the rank table, then its bit.
    fn end(&self, k: usize) -> Option<u32> {
        if k >= self.quoted() {
            return None;
        }
        let w = self.rank.partition_point(|&r| r as usize <= k) - 1;
        let mut m = self.ends[w];
        for _ in 0..k - self.rank[w] as usize {
            m &= m - 1;
        }
        Some((w * 64) as u32 + m.trailing_zeros())
    }

    /// `(start, end)` of field `k`'s text: it starts after its opening quote, which follows the
    /// previous field's closing quote and the delimiter.
    pub fn span(&self, k: usize) -> Option<(u32, u32)> {
        if k == self.quoted() {
            return self.trailing.map(|n| (n, n));
        }
        let end = self.end(k)?;
        let start = if k == 0 { 1 } else { self.end(k - 1)? + 3 };
        Some((start, end))
    }

    /// Every field's `(start, end)`, in order.
    pub fn spans(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let ends = self.ends.iter().enumerate().flat_map(|(w, &word)| {
            let mut m = word;
            std::iter::from_fn(move || {
                (m != 0).then(|| {
                    let end = (w * 64) as u32 + m.trailing_zeros();
                    m &= m - 1;
                    end
                })
            })
        });
        let mut start = 1;
        ends.map(move |end| {
            let span = (start, end);
            start = end + 3;
            span
        })
        .chain(self.trailing.map(|n| (n, n)))
    }
}

/// Reads a physical line (no `\n` or `\r`) whose fields are all quoted with no quote inside
/// (`"a","b",""`, or `"a","b",` where the trailing delimiter opens an empty last field: every line
/// of ncu's raw and details pages); `None` for any other line: [`read_line_record`] reads those,
/// and gives the same fields for the lines this reads.
///
/// No byte loop and no per-field work: 64 bytes at a time, the masks of quotes and delimiters
/// give the separators `","` (a quote, a delimiter, a quote). The line has the simple form
/// exactly when its quotes are the first byte, the last byte and the two of each separator, no
/// two separators sharing one (`",","`), which is a count and three bit tests. The separators'
/// bits, with a running count per word, are the index of the fields ([`QuotedLine::span`] finds
/// one in a few steps); the same masks count the commas inside fields and find the fields that
/// may need trimming.
pub fn quoted_line(line: &str, delim: u8) -> Option<QuotedLine> {
    let full = line.as_bytes();
    if u32::try_from(full.len()).is_err() {
        return None;
    }
    let (b, trailing) = match full.split_last() {
        Some((&last, rest)) if last == delim => (rest, Some(full.len() as u32)),
        _ => (full, None),
    };
    let n = b.len();
    if n < 2 || b[0] != b'"' || b[n - 1] != b'"' {
        return None;
    }
    let words = n.div_ceil(64);
    // One zero word past the end, so that shifts can read the next word everywhere.
    let mut masks = line_masks(b, delim, 1);
    masks.push(ByteMasks::default());
    // Word w + 1, bit i: byte 64w + i starts a separator (quote, delimiter, quote). A zero word
    // on each side.
    let mut seps = vec![0u64; words + 2];
    let (mut n_quotes, mut n_seps, mut n_commas) = (0, 0, 0);
    for w in 0..words {
        let (m, next) = (&masks[w], &masks[w + 1]);
        let s = m.quote & ((m.delim >> 1) | (next.delim << 63)) & ((m.quote >> 2) | (next.quote << 62));
        n_quotes += m.quote.count_ones();
        n_seps += s.count_ones();
        n_commas += m.comma.count_ones();
        seps[w + 1] = s;
    }
    let is_sep = |i: usize| seps[1 + i / 64] >> (i % 64) & 1 == 1;
    let shared = (1..=words).any(|w| seps[w] & ((seps[w] >> 2) | (seps[w + 1] << 62)) != 0);
    if shared || n_quotes != 2 + 2 * n_seps || is_sep(0) || n >= 3 && is_sep(n - 3) {
        return None;
    }
    // A field's first byte follows its opening quote (3 after a separator, or byte 1); its last
    // precedes its closing quote (1 before a separator, or byte n - 2). An empty field's are
    // quotes.
    let loose = |i: usize| masks[i / 64].loose >> (i % 64) & 1 == 1;
    let padded = loose(1)
        || loose(n - 2)
        || (1..=words).any(|w| {
            let first = (seps[w] << 3) | (seps[w - 1] >> 61);
            let last = (seps[w] >> 1) | (seps[w + 1] << 63);
            masks[w - 1].loose & (first | last) != 0
        });
    // The index: a separator's first byte is a field's closing quote; so is the line's last.
    let mut ends = seps;
    ends.pop();
    ends.remove(0);
    ends[(n - 1) / 64] |= 1 << ((n - 1) % 64);
    let mut rank = Vec::with_capacity(words + 1);
    let mut total = 0;
    for &e in &ends {
        rank.push(total);
        total += e.count_ones();
    }
    rank.push(total);
    let inner_commas = n_commas - if delim == b',' { n_seps } else { 0 };
    Some(QuotedLine { ends, rank, inner_commas, padded, trailing })
}

/// Bit masks of one 64-byte chunk (bit i for byte i).
#[derive(Debug, Clone, Copy, Default)]
struct ByteMasks {
    quote: u64,
    delim: u64,
    comma: u64,
    /// Bytes that are not ASCII-graphic (white space, control, DEL, non-ASCII).
    loose: u64,
}

/// [`byte_masks`] of every 64-byte chunk of `b` (the last one padded), with room for `spare`
/// more.
fn line_masks(b: &[u8], delim: u8, spare: usize) -> Vec<ByteMasks> {
    let mut masks = Vec::with_capacity(b.len().div_ceil(64) + spare);
    let chunks = b.chunks_exact(64);
    let tail = chunks.remainder();
    masks.extend(chunks.map(|c| byte_masks(c.try_into().expect("64 bytes"), delim)));
    if !tail.is_empty() {
        masks.push(tail_masks(tail, delim));
    }
    masks
}

/// [`byte_masks`] of the last, shorter chunk of a line. Kept out of line: a copy into a local
/// array inside the main loop makes the compiler build every chunk byte by byte.
#[inline(never)]
fn tail_masks(tail: &[u8], delim: u8) -> ByteMasks {
    let mut c = [0u8; 64];
    c[..tail.len()].copy_from_slice(tail);
    let mut m = byte_masks(&c, delim);
    // The padding is not text.
    m.loose &= u64::MAX >> (64 - tail.len());
    m
}

#[inline]
fn byte_masks(c: &[u8; 64], delim: u8) -> ByteMasks {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    {
        use std::arch::x86_64::*;
        // SAFETY: AVX2 is enabled for the whole build (the cfg above); `c` holds 64 readable
        // bytes and the loads are unaligned.
        unsafe {
            let (lo, hi) = (_mm256_loadu_si256(c.as_ptr().cast()), _mm256_loadu_si256(c.as_ptr().add(32).cast()));
            let bits = |l, h| u64::from(_mm256_movemask_epi8(l) as u32) | u64::from(_mm256_movemask_epi8(h) as u32) << 32;
            let eq = |n: u8| {
                let v = _mm256_set1_epi8(n as i8);
                bits(_mm256_cmpeq_epi8(lo, v), _mm256_cmpeq_epi8(hi, v))
            };
            // Signed bytes: 0x21..=0x7e are greater than 0x20 and not 0x7f; non-ASCII bytes are
            // negative.
            let graphic =
                |v| _mm256_andnot_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(0x7f)), _mm256_cmpgt_epi8(v, _mm256_set1_epi8(0x20)));
            ByteMasks { quote: eq(b'"'), delim: eq(delim), comma: eq(b','), loose: !bits(graphic(lo), graphic(hi)) }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
    {
        fn mask(c: &[u8; 64], f: impl Fn(u8) -> bool) -> u64 {
            c.iter().enumerate().fold(0u64, |m, (j, &v)| m | u64::from(f(v)) << j)
        }
        ByteMasks {
            quote: mask(c, |v| v == b'"'),
            delim: mask(c, |v| v == delim),
            comma: mask(c, |v| v == b','),
            loose: mask(c, |v| !v.is_ascii_graphic()),
        }
    }
}

/// Positions of `"` in a line, one bit per byte.
struct QuoteMask {
    words: Vec<u64>,
}

impl QuoteMask {
    fn new(b: &[u8]) -> Self {
        QuoteMask { words: line_masks(b, b'"', 0).iter().map(|m| m.quote).collect() }
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
    // ncu's own quoted, comma-separated header: no need to count (the tests below pin that the
    // answer is the same).
    if line.contains("\",\"") {
        return b',';
    }
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
        let mut simple = 0;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Cells of well-formed quoted lines, and what breaks that form now and then.
        let cells = ["", "a", "1.5", "é", "x,y", " 2 ", "(1, 1, 1)"];
        let breaks = ["\"", "\"\"", "b", ",", "\",", " "];
        for n in 0..10000 {
            let mut line = String::from("\"");
            if n % 2 == 0 {
                let len = (next() % 200) as usize + usize::from(n % 7 == 0) * 300;
                for _ in 0..len {
                    line.push_str(alphabet[(next() % alphabet.len() as u64) as usize]);
                }
            } else {
                line.clear();
                for k in 0..(next() % 150) as usize + 1 {
                    if k > 0 {
                        line.push(',');
                    }
                    line.push('"');
                    line.push_str(cells[(next() % cells.len() as u64) as usize]);
                    line.push('"');
                    if next() % 400 == 0 {
                        line.push_str(breaks[(next() % breaks.len() as u64) as usize]);
                    }
                }
                // ncu's details rows end with a delimiter.
                if n % 6 == 1 {
                    line.push(',');
                }
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
            // The simple form, from the tokenizer's fields: each quoted, quote-free, joined by
            // the delimiter (a trailing delimiter opens an empty last field).
            let quoted = |f: &[Cow<str>]| f.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(",");
            let is_simple = expected.as_ref().is_ok_and(|&end| end)
                && want.iter().all(|f| !f.contains('"'))
                && (line == quoted(&want) || want.last().is_some_and(|f| f.is_empty()) && line == quoted(&want[..want.len() - 1]) + ",");
            let read = quoted_line(&line, b',');
            assert_eq!(read.is_some(), is_simple, "{line:?}");
            if let Some(q) = read {
                simple += 1;
                let fields: Vec<&str> = q.spans().map(|(s, e)| &line[s as usize..e as usize]).collect();
                assert_eq!(fields, want, "{line:?}");
                let one_by_one: Vec<&str> = (0..q.len()).map(|k| q.span(k).unwrap()).map(|(s, e)| &line[s as usize..e as usize]).collect();
                assert_eq!(one_by_one, want, "{line:?}");
                assert_eq!(q.span(q.len()), None);
                let inner_commas: usize = want.iter().map(|f| f.matches(',').count()).sum();
                assert_eq!(q.inner_commas as usize, inner_commas, "{line:?}");
                let padded = want.iter().any(|f| {
                    f.bytes().next().is_some_and(|c| !c.is_ascii_graphic()) || f.bytes().last().is_some_and(|c| !c.is_ascii_graphic())
                });
                assert_eq!(q.padded, padded, "{line:?}");
            }
        }
        assert!(simple > 2000, "only {simple} simple lines");
    }

    /// The vector masks against a byte-by-byte reference, on every byte value.
    #[test]
    fn byte_masks_match_a_scalar_reference() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000 {
            let mut c = [0u8; 64];
            for (j, b) in c.iter_mut().enumerate() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = if round < 4 { (round * 64 + j) as u8 } else { (seed >> 56) as u8 };
            }
            for delim in [b',', b';', b'\t'] {
                let bits = |f: &dyn Fn(u8) -> bool| c.iter().enumerate().fold(0u64, |m, (j, &v)| m | u64::from(f(v)) << j);
                let m = byte_masks(&c, delim);
                assert_eq!(m.quote, bits(&|v| v == b'"'));
                assert_eq!(m.delim, bits(&|v| v == delim));
                assert_eq!(m.comma, bits(&|v| v == b','));
                assert_eq!(m.loose, bits(&|v| !v.is_ascii_graphic()), "{c:?}");
            }
        }
        let t = tail_masks(b" a\"", b',');
        assert_eq!((t.quote, t.loose), (0b100, 0b1));
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
