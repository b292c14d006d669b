//! Units and numbers as Nsight Compute writes them, normalised to one base unit per quantity.
//!
//! ncu writes the same quantity many ways across versions and `--print-units` settings:
//! `nsecond`/`ns`/`usecond`/`msecond`, `byte`/`Kbyte`/`Mbyte`, `byte/second`/`byte/s`/`Gbyte/s`,
//! `hz`/`Mhz`/`Ghz`/`cycle/nsecond`, `cycle`/`Kcycle`, `inst`, `warp`, `%`. Everything is
//! converted to: nanoseconds, bytes, bytes per second, hertz, percent, and plain counts.
//! Numbers may carry thousands separators (`7,256,830,601.09`) or a decimal comma (`1,5`).

use serde::{Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// A normalised unit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Unit {
    Nanoseconds,
    Bytes,
    BytesPerSecond,
    Hertz,
    Percent,
    /// A count of something, singular name: "cycle", "inst", "warp", "sector", "request",
    /// "thread", "block", "register/thread", ... (prefix removed, value scaled).
    Count(Arc<str>),
    /// A count per second ("inst/s", "sector/s").
    PerSecond(Arc<str>),
    /// A dimensionless number (empty unit in the source).
    None,
    /// Anything else, kept as written (lowercased): "inst/cycle", "sector/request"...
    Other(Arc<str>),
}

/// So a metric view's `&Unit` compares with a unit directly.
impl PartialEq<Unit> for &Unit {
    fn eq(&self, other: &Unit) -> bool {
        **self == *other
    }
}

impl Unit {
    pub fn symbol(&self) -> String {
        match self {
            Unit::Nanoseconds => "ns".into(),
            Unit::Bytes => "byte".into(),
            Unit::BytesPerSecond => "byte/s".into(),
            Unit::Hertz => "Hz".into(),
            Unit::Percent => "%".into(),
            Unit::Count(s) => s.to_string(),
            Unit::PerSecond(s) => format!("{s}/s"),
            Unit::None => String::new(),
            Unit::Other(s) => s.to_string(),
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.symbol())
    }
}

impl Serialize for Unit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.symbol())
    }
}

/// Seconds-per-unit factor to nanoseconds, for a time unit name.
fn time_ns(u: &str) -> Option<f64> {
    Some(match u {
        "ns" | "nsecond" | "nseconds" | "nanosecond" | "nanoseconds" => 1.0,
        "us" | "usecond" | "useconds" | "µs" | "microsecond" | "microseconds" => 1e3,
        "ms" | "msecond" | "mseconds" | "millisecond" | "milliseconds" => 1e6,
        "s" | "second" | "seconds" | "sec" => 1e9,
        "ps" | "psecond" => 1e-3,
        _ => return None,
    })
}

/// Splits an SI prefix off a count unit ("Kbyte" -> (1e3, "byte")).
fn split_prefix(u: &str) -> (f64, &str) {
    const BASES: &[&str] = &[
        "byte",
        "cycle",
        "inst",
        "warp",
        "thread",
        "block",
        "sector",
        "request",
        "wavefront",
        "sample",
        "transaction",
        "op",
        "flop",
        "instruction",
    ];
    if BASES.contains(&u) {
        return (1.0, u);
    }
    for (p, f) in [("ki", 1024.0), ("mi", 1048576.0), ("gi", 1073741824.0), ("ti", 1099511627776.0)] {
        if let Some(rest) = u.strip_prefix(p) {
            if BASES.contains(&rest) {
                return (f, rest);
            }
        }
    }
    for (p, f) in [("k", 1e3), ("m", 1e6), ("g", 1e9), ("t", 1e12), ("p", 1e15)] {
        if let Some(rest) = u.strip_prefix(p) {
            if BASES.contains(&rest) {
                return (f, rest);
            }
        }
    }
    (1.0, u)
}

fn singular(u: &str) -> &str {
    match u {
        "bytes" => "byte",
        "cycles" => "cycle",
        "insts" | "instructions" | "instruction" => "inst",
        "warps" => "warp",
        "threads" => "thread",
        "blocks" => "block",
        "sectors" => "sector",
        "requests" => "request",
        "branches" => "branch",
        _ => u,
    }
}

/// Returns the factor that converts a value in `raw` into the returned normalised unit.
pub fn normalize_unit(raw: &str) -> (f64, Unit) {
    let t = raw.trim();
    if t.is_empty() {
        return (1.0, Unit::None);
    }
    if t == "%" {
        return (1.0, Unit::Percent);
    }
    let l = t.to_ascii_lowercase();
    match l.as_str() {
        "hz" => return (1.0, Unit::Hertz),
        "khz" => return (1e3, Unit::Hertz),
        "mhz" => return (1e6, Unit::Hertz),
        "ghz" => return (1e9, Unit::Hertz),
        _ => {}
    }
    if let Some(f) = time_ns(&l) {
        return (f, Unit::Nanoseconds);
    }
    if let Some((num, den)) = l.split_once('/') {
        let (pf, base) = split_prefix(singular(num));
        if let Some(den_ns) = time_ns(den) {
            // X per time unit -> X per second.
            let f = pf * 1e9 / den_ns;
            return match base {
                "byte" => (f, Unit::BytesPerSecond),
                "cycle" => (f, Unit::Hertz),
                _ => (f, Unit::PerSecond(base.into())),
            };
        }
        if den == "thread" && base == "register" {
            return (1.0, Unit::Count("register/thread".into()));
        }
        // "Kbyte/block" and "byte/block" are the same quantity: scale the numerator's prefix.
        if pf != 1.0 {
            return (pf, Unit::Other(format!("{base}/{den}").into()));
        }
        return (1.0, Unit::Other(l.into()));
    }
    let (pf, base) = split_prefix(singular(&l));
    if base == "byte" {
        return (pf, Unit::Bytes);
    }
    if pf != 1.0
        || matches!(
            base,
            "cycle" | "inst" | "warp" | "thread" | "block" | "sector" | "request" | "wavefront" | "sample" | "transaction" | "branch"
        )
    {
        return (pf, Unit::Count(base.into()));
    }
    (1.0, Unit::Other(l.into()))
}

/// How a file writes numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumberLocale {
    /// `1,234,567.89`: comma groups thousands, dot is the decimal point.
    #[default]
    DotDecimal,
    /// `1.234.567,89` or `1 234 567,89`: comma is the decimal point.
    CommaDecimal,
}

/// Text that is not a number (what [`parse_number`] refuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a number")]
pub struct NotANumber;

/// Parses one number as ncu writes it. `Ok(None)` for values that mean "no value"
/// (`n/a`, empty, `-`); `Err(NotANumber)` for text that is not a number.
///
/// Does not allocate: plain numbers go straight to `str::parse`, numbers with separators are
/// copied into a stack buffer first.
pub fn parse_number(text: &str, locale: NumberLocale) -> Result<Option<f64>, NotANumber> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("n/a") || t == "-" || t == "--" || t.eq_ignore_ascii_case("nan") {
        return Ok(None);
    }
    let b = t.as_bytes();
    let plain = b.iter().all(|&c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E'));
    if plain && (locale == NumberLocale::DotDecimal || !b.contains(&b'.')) {
        return t.parse::<f64>().map(Some).map_err(|_| NotANumber);
    }
    let mut buf = [0u8; 96];
    let mut n = 0usize;
    for c in t.chars() {
        let out = match (c, locale) {
            (',', NumberLocale::DotDecimal) => continue,
            ('.', NumberLocale::CommaDecimal) | ('\u{a0}', _) | ('\u{202f}', _) | (' ', _) | ('\'', _) => continue,
            (',', NumberLocale::CommaDecimal) => b'.',
            (c, _) if c.is_ascii() => c as u8,
            _ => return Err(NotANumber),
        };
        if n == buf.len() {
            return Err(NotANumber);
        }
        buf[n] = out;
        n += 1;
    }
    // Only ASCII bytes were written.
    let s = std::str::from_utf8(&buf[..n]).map_err(|_| NotANumber)?;
    s.parse::<f64>().map(Some).map_err(|_| NotANumber)
}

/// Parses a number as [`parse_number`] does and multiplies it by a unit's `factor` (see
/// [`scale`]); `None` for anything that is not a number. [`Scale::parse`], for one value.
#[inline]
pub fn parse_scaled(text: &str, factor: f64, locale: NumberLocale) -> Option<f64> {
    Scale::new(factor).parse(text, locale)
}

/// [`parse_scaled`] for a file read as [`NumberLocale::DotDecimal`] before its locale is known:
/// [`Scale::parse_dot`], for one value.
#[inline]
pub fn parse_scaled_dot(text: &str, factor: f64) -> (Option<f64>, bool) {
    Scale::new(factor).parse_dot(text)
}

/// A unit's factor, with what scaling needs to know of it worked out once (a reader keeps one per
/// column). Scaling rounds back to the decimal precision the text had when the factor is a power
/// of ten: "8.03" us is 8030 ns, not 8029.999999999999.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    factor: f64,
    /// `k` when the factor is 10^k.
    pow10: Option<i32>,
}

impl Scale {
    pub fn new(factor: f64) -> Self {
        if factor == 1.0 {
            return Scale { factor, pow10: Some(0) };
        }
        let k = factor.log10().round();
        let pow10 = ((10f64.powf(k) - factor).abs() <= f64::EPSILON * factor).then_some(k as i32);
        Scale { factor, pow10 }
    }

    /// `v * factor` for a value written with `decimals` digits after the point.
    #[inline]
    fn apply(self, v: f64, decimals: i32) -> f64 {
        let x = v * self.factor;
        if self.factor == 1.0 || !x.is_finite() {
            return x;
        }
        let Some(k) = self.pow10 else { return x };
        let keep = decimals - k;
        if keep <= 0 {
            x.round()
        } else if keep <= 15 {
            let p = POW10[keep as usize];
            (x * p).round() / p
        } else {
            x
        }
    }

    /// Parses `text` as [`parse_number`] does and scales it; `None` for anything that is not a
    /// number.
    ///
    /// Plain decimals (`1,234.5`, `-0.25`, `12,5` in a comma locale) with at most 19 digits are
    /// parsed here without `str::parse`: the digits make an integer `m` below 2^53 and the value
    /// is `m / 10^d`, one correctly rounded division of two exact values, which is what
    /// `str::parse` gives too. Anything else takes the general path.
    #[inline]
    pub fn parse(self, text: &str, locale: NumberLocale) -> Option<f64> {
        self.parse_noting(text, locale).0
    }

    /// [`Scale::parse`] for a file read as [`NumberLocale::DotDecimal`] before its locale is
    /// known, plus whether `text` shows the file is comma-decimal (see [`detect_locale`]).
    /// Readers parse once this way and parse again only when some value says so: the check costs
    /// nothing for the plain numbers without a comma that make up most of a profile.
    #[inline]
    pub fn parse_dot(self, text: &str) -> (Option<f64>, bool) {
        let (v, maybe_comma) = self.parse_noting(text, NumberLocale::DotDecimal);
        (v, maybe_comma && comma_evidence(text))
    }

    /// The value, and whether the text could be comma-decimal evidence (it had a group separator
    /// or took the general path).
    #[inline]
    fn parse_noting(self, text: &str, locale: NumberLocale) -> (Option<f64>, bool) {
        if let Some((x, decimals, grouped)) = plain_decimal(text.as_bytes().trim_ascii(), locale) {
            return (Some(self.apply(x, decimals)), grouped);
        }
        let v = match parse_number(text, locale) {
            Ok(Some(v)) => Some(scale(v, self.factor, text, locale)),
            _ => None,
        };
        (v, true)
    }
}

/// Exact powers of ten, 10^0 ..= 10^22 (all representable in an f64).
const POW10: [f64; 23] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

/// `[-]digits[.digits]` with group separators: `(value, decimals, any group separator)`, or
/// `None` to take the general path.
#[inline]
fn plain_decimal(b: &[u8], locale: NumberLocale) -> Option<(f64, i32, bool)> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let (point, group) = match locale {
        NumberLocale::DotDecimal => (b'.', b','),
        NumberLocale::CommaDecimal => (b',', b'.'),
    };
    let mut m: u64 = 0;
    let mut n = 0u32;
    let mut frac: Option<i32> = None;
    let mut grouped = false;
    for &c in digits {
        if c.is_ascii_digit() {
            if n == 19 {
                return None;
            }
            m = m * 10 + u64::from(c - b'0');
            n += 1;
            if let Some(f) = &mut frac {
                *f += 1;
            }
        } else if c == point && frac.is_none() {
            frac = Some(0);
        } else if c != group || frac.is_some() {
            return None;
        } else {
            grouped = true;
        }
    }
    let d = frac.unwrap_or(0);
    if n == 0 || d as usize >= POW10.len() || m > (1u64 << 53) || frac == Some(0) {
        return None;
    }
    let x = if d == 0 { m as f64 } else { m as f64 / POW10[d as usize] };
    Some((if neg { -x } else { x }, d, grouped))
}

/// `v * factor`, rounded back to the decimal precision `text` had when the factor is a power of
/// ten (see [`Scale`]).
pub fn scale(v: f64, factor: f64, text: &str, locale: NumberLocale) -> f64 {
    if factor == 1.0 || text.bytes().any(|b| b == b'e' || b == b'E') {
        return v * factor;
    }
    let sep = match locale {
        NumberLocale::DotDecimal => '.',
        NumberLocale::CommaDecimal => ',',
    };
    let decimals = text.trim().rsplit_once(sep).map_or(0, |(_, frac)| frac.bytes().take_while(u8::is_ascii_digit).count());
    Scale::new(factor).apply(v, i32::try_from(decimals).unwrap_or(i32::MAX))
}

/// Guesses a file's locale from sample values: any value like `12,5` or `1.234,5` means comma-decimal.
pub fn detect_locale<'a>(values: impl IntoIterator<Item = &'a str>) -> NumberLocale {
    if values.into_iter().any(comma_evidence) {
        NumberLocale::CommaDecimal
    } else {
        NumberLocale::DotDecimal
    }
}

/// Whether one value is written with a decimal comma: `12,5` or `1.234,5`, not `1,952` (a
/// thousands group: exactly 3 digits after the comma, no dot before it).
pub fn comma_evidence(v: &str) -> bool {
    let v = v.trim();
    let Some((int, frac)) = v.rsplit_once(',') else { return false };
    let int_ok = !int.is_empty() && int.bytes().all(|c| c.is_ascii_digit() || c == b'.' || c == b'-');
    let frac_ok = !frac.is_empty() && frac.bytes().all(|c| c.is_ascii_digit());
    int_ok && frac_ok && (frac.len() != 3 || int.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_normalise() {
        assert_eq!(normalize_unit("nsecond"), (1.0, Unit::Nanoseconds));
        assert_eq!(normalize_unit("usecond"), (1e3, Unit::Nanoseconds));
        assert_eq!(normalize_unit("msecond"), (1e6, Unit::Nanoseconds));
        assert_eq!(normalize_unit("Kbyte"), (1e3, Unit::Bytes));
        assert_eq!(normalize_unit("Gbyte/s"), (1e9, Unit::BytesPerSecond));
        assert_eq!(normalize_unit("byte/second"), (1.0, Unit::BytesPerSecond));
        assert_eq!(normalize_unit("Tbyte/second"), (1e12, Unit::BytesPerSecond));
        assert_eq!(normalize_unit("Ghz"), (1e9, Unit::Hertz));
        assert_eq!(normalize_unit("hz"), (1.0, Unit::Hertz));
        assert_eq!(normalize_unit("cycle/nsecond"), (1e9, Unit::Hertz));
        assert_eq!(normalize_unit("cycle/usecond"), (1e6, Unit::Hertz));
        assert_eq!(normalize_unit("Kcycle"), (1e3, Unit::Count("cycle".into())));
        assert_eq!(normalize_unit("cycle"), (1.0, Unit::Count("cycle".into())));
        assert_eq!(normalize_unit("Minst"), (1e6, Unit::Count("inst".into())));
        assert_eq!(normalize_unit("inst/cycle"), (1.0, Unit::Other("inst/cycle".into())));
        assert_eq!(normalize_unit("%"), (1.0, Unit::Percent));
        assert_eq!(normalize_unit(""), (1.0, Unit::None));
        assert_eq!(normalize_unit("register/thread"), (1.0, Unit::Count("register/thread".into())));
        assert_eq!(normalize_unit("sector/s").1, Unit::PerSecond("sector".into()));
        assert_eq!(normalize_unit("Kbyte/block"), (1e3, Unit::Other("byte/block".into())));
        assert_eq!(normalize_unit("byte/block"), (1.0, Unit::Other("byte/block".into())));
        assert_eq!(normalize_unit("branches"), (1.0, Unit::Count("branch".into())));
        assert_eq!(normalize_unit("sectors"), (1.0, Unit::Count("sector".into())));
    }

    #[test]
    fn numbers_parse() {
        use NumberLocale::*;
        assert_eq!(parse_number("7,256,830,601.09", DotDecimal), Ok(Some(7256830601.09)));
        assert_eq!(parse_number("1,952", DotDecimal), Ok(Some(1952.0)));
        assert_eq!(parse_number("1.234,5", CommaDecimal), Ok(Some(1234.5)));
        assert_eq!(parse_number("n/a", DotDecimal), Ok(None));
        assert_eq!(parse_number("", DotDecimal), Ok(None));
        assert_eq!(parse_number("abc", DotDecimal), Err(NotANumber));
        assert_eq!(parse_number("-3.5e2", DotDecimal), Ok(Some(-350.0)));
        assert_eq!(parse_number("1\u{a0}234,5", CommaDecimal), Ok(Some(1234.5)));
        assert_eq!(parse_number("12,5", CommaDecimal), Ok(Some(12.5)));
        assert_eq!(parse_number("0.017241", DotDecimal), Ok(Some(0.017241)));
        assert_eq!(parse_number("5,151 (33; 33)", DotDecimal), Err(NotANumber));
        assert_eq!(parse_number("µs", DotDecimal), Err(NotANumber));
        assert_eq!(parse_number(&"9".repeat(200), DotDecimal), Ok(Some("9".repeat(200).parse().unwrap())));
    }

    #[test]
    fn plain_decimals_match_the_general_parser() {
        use NumberLocale::*;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let r = next();
            let int = r % 10u64.pow((r >> 40) as u32 % 12);
            let frac_digits = (r >> 50) as usize % 9;
            let frac: String = (0..frac_digits).map(|i| char::from(b'0' + ((r >> (i * 3)) % 10) as u8)).collect();
            let sign = if r & 1 == 1 { "-" } else { "" };
            let dot = if frac.is_empty() { String::new() } else { format!(".{frac}") };
            let text = format!("{sign}{int}{dot}");
            let want: f64 = text.parse().unwrap();
            assert_eq!(parse_number(&text, DotDecimal), Ok(Some(want)), "{text}");
            assert_eq!(parse_scaled(&text, 1.0, DotDecimal), Some(want), "{text}");
            assert_eq!(parse_scaled(&text.replace('.', ","), 1.0, CommaDecimal), Some(want), "{text}");
            for factor in [1e3, 1e6, 1e9, 1024.0, 1e-3] {
                let want_scaled = scale(want, factor, &text, DotDecimal);
                assert_eq!(parse_scaled(&text, factor, DotDecimal), Some(want_scaled), "{text} x {factor}");
                assert_eq!(Scale::new(factor).parse(&text, DotDecimal), Some(want_scaled), "{text} x {factor}");
                assert_eq!(Scale::new(factor).parse_dot(&text), (Some(want_scaled), false), "{text} x {factor}");
            }
            assert_eq!(parse_scaled_dot(&text, 1.0), (Some(want), false));
        }
        // Grouped, signed and odd forms, against the general path.
        for text in [
            "1,952",
            "7,256,830,601.09",
            "-0",
            "0.000001",
            "12345678901234567890",
            "9007199254740993",
            "1.",
            ".5",
            "+5",
            "1e3",
            "n/a",
            "-",
            "1,2,3.4",
        ] {
            let general = match parse_number(text, DotDecimal) {
                Ok(Some(v)) => Some(v),
                _ => None,
            };
            assert_eq!(parse_scaled(text, 1.0, DotDecimal).map(f64::to_bits), general.map(f64::to_bits), "{text}");
        }
        assert!(parse_scaled_dot("12,5", 1.0).1);
        assert_eq!(parse_scaled_dot("1,952", 1.0), (Some(1952.0), false));
        assert!(parse_scaled_dot("1.234,5", 1.0).1);
    }

    #[test]
    fn locale_detection() {
        assert_eq!(detect_locale(["1,952", "7,256,830,601.09"]), NumberLocale::DotDecimal);
        assert_eq!(detect_locale(["12", "37,58"]), NumberLocale::CommaDecimal);
        assert_eq!(detect_locale(["1.234,567"]), NumberLocale::CommaDecimal);
    }
}
