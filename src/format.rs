//! Numbers, durations and short text as keet shows them to a reader: reports, prompts, rule
//! words and plots all format through these functions, so a value reads the same everywhere
//! (a duration is "19.81 µs", never "19.81 us").
//!
//! Low in the module graph: it imports no stage, and every stage may use it.

/// A number the way reports show it (and the validator accepts): up to 3 significant decimals;
/// scientific notation for magnitudes of 1e15 and above or below 1e-3.
pub fn number(x: f64) -> String {
    if x.abs() >= 1e15 || (x != 0.0 && x.abs() < 1e-3) {
        return format!("{x:.3e}");
    }
    if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A duration in nanoseconds in the largest unit it fills, 2 decimals (whole nanoseconds below
/// a microsecond): 1952 -> "1.95 µs"; 10776576 -> "10.78 ms"; 12 -> "12 ns". µs, not "us",
/// which reads as a word.
pub fn duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A duration in nanoseconds in the largest unit it fills, with [`number`]'s three significant
/// digits, for times listed side by side in a sentence: 2880129000 -> "2.88 s"; 594960 ->
/// "595 µs"; 452 -> "452 ns".
pub fn duration_3(ns: f64) -> String {
    let (value, unit) = match ns {
        _ if ns >= 1e9 => (ns / 1e9, "s"),
        _ if ns >= 1e6 => (ns / 1e6, "ms"),
        _ if ns >= 1e3 => (ns / 1e3, "µs"),
        _ => (ns, "ns"),
    };
    format!("{} {unit}", number(value))
}

/// A duration in nanoseconds as microseconds with [`number`]'s digits, as the rule findings
/// state times they compare with each other: 43210 -> "43.2 µs"; 1500 -> "1.50 µs".
pub fn micros(ns: f64) -> String {
    format!("{} µs", number(ns / 1000.0))
}

/// A number with an SI prefix: 6.2e13 -> "62 T"; 4.77e12 -> "4.77 T"; 0.5 -> "0.50".
pub fn si(x: f64) -> String {
    const PREFIXES: [(f64, &str); 6] = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, prefix) in PREFIXES {
        if x.abs() >= scale {
            return format!("{} {prefix}", number(x / scale));
        }
    }
    number(x)
}

/// Word-wraps `text` to `width` columns; lines after the first start with `indent` spaces.
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    let mut col = 0usize;
    let mut first_line = true;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        let limit = if first_line { width } else { width.saturating_sub(indent) };
        if col > 0 && col + 1 + len > limit {
            out.push('\n');
            out.push_str(&pad);
            col = 0;
            first_line = false;
        }
        if col > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += len;
    }
    out
}

/// Text for a Markdown table cell: no line breaks, pipes and HTML-significant characters escaped.
pub fn md_cell(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text.replace('\\', "\\\\").replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;")
}

/// Text for a Markdown code span (in a table cell too): one line, pipes escaped, backticks replaced.
pub fn md_code(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text.replace('`', "'").replace('|', "\\|")
}

/// A column of labels that tell each other apart (a set's members' values in the text table):
/// as wide as the longest label, at least `min_width` and at most `max_width` characters, each
/// padded to it. A longer label keeps the part that sets it apart from the label closest to it
/// (where their common start ends): its tail after "..." when that fits
/// (`nvjet_tst_64x8_64x16_4x1_v_bz_TNT` and `..._splitK_TNT` at 30: `...tst_64x8_64x16_4x1_v_bz_TNT`
/// and `...8_64x16_4x1_v_bz_splitK_TNT`), else its start when it differs early, else the stretch
/// from a few characters before where it differs, between "...".
pub fn distinct_column(labels: &[String], min_width: usize, max_width: usize) -> Vec<String> {
    let labels: Vec<Vec<char>> = labels.iter().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ").chars().collect()).collect();
    let longest = labels.iter().map(Vec::len).max().unwrap_or(0);
    let width = longest.clamp(min_width, max_width.max(min_width));
    let common = |a: &[char], b: &[char]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let shown: String = if label.len() <= width {
                label.iter().collect()
            } else {
                let apart =
                    labels.iter().enumerate().filter(|(j, other)| *j != i && *other != label).map(|(_, other)| common(label, other)).max();
                let apart = apart.unwrap_or(0).min(label.len());
                let room = width.saturating_sub(3);
                if label.len() - apart <= room {
                    format!("...{}", label[label.len() - room..].iter().collect::<String>())
                } else if apart + 3 <= room {
                    format!("{}...", label[..room].iter().collect::<String>())
                } else {
                    let from = apart.saturating_sub(3);
                    let middle = width.saturating_sub(6);
                    format!("...{}...", label[from..from + middle].iter().collect::<String>())
                }
            };
            format!("{shown:<width$}")
        })
        .collect()
}

/// The text shown for a finding's origin (`llm` -> "model").
pub fn origin_label(origin: &str) -> &str {
    match origin {
        "llm" => "model",
        "llm-repaired" => "model, repaired",
        "rules" => "rules",
        other => other,
    }
}

/// Items as a sentence lists them: "a", "a and b", "a, b and c".
pub fn and_list<S: AsRef<str>>(items: &[S]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [head @ .., last] => {
            let head: Vec<&str> = head.iter().map(AsRef::as_ref).collect();
            format!("{} and {}", head.join(", "), last.as_ref())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::and_list;

    #[test]
    fn durations_side_by_side_keep_three_digits() {
        assert_eq!(super::duration_3(2_880_129_000.0), "2.88 s");
        assert_eq!(super::duration_3(594_960.0), "595 µs");
        assert_eq!(super::duration_3(5_910.0), "5.91 µs");
        assert_eq!(super::duration_3(452.0), "452 ns");
    }

    #[test]
    fn lists_read_as_sentences() {
        assert_eq!(and_list::<&str>(&[]), "");
        assert_eq!(and_list(&["version"]), "version");
        assert_eq!(and_list(&["version", "launch shape"]), "version and launch shape");
        assert_eq!(and_list(&["version", "launch shape", "problem size"]), "version, launch shape and problem size");
    }

    #[test]
    fn a_column_keeps_what_tells_its_labels_apart() {
        let labels = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // cuBLAS's two configurations: the common start is 30 characters long.
        let cublas = labels(&["nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT"]);
        let shown = super::distinct_column(&cublas, 30, 30);
        assert_eq!(shown, vec!["...tst_64x8_64x16_4x1_v_bz_TNT".to_string(), "...8_64x16_4x1_v_bz_splitK_TNT".to_string()]);
        // Room enough: the whole labels, padded to the longest.
        let shown = super::distinct_column(&cublas, 30, 44);
        assert_eq!(shown[0], format!("{:<40}", cublas[0]));
        assert_eq!(shown[1], cublas[1]);
        // Short labels pad to the least width; a long one differing early keeps its start.
        assert_eq!(super::distinct_column(&labels(&["a", "b"]), 4, 10), vec!["a   ", "b   "]);
        let early = labels(&["alpha_0123456789", "beta_0123456789"]);
        assert_eq!(super::distinct_column(&early, 8, 10)[0], "alpha_0...");
        // Differing in the middle of a long label: the stretch around where it differs.
        let middle = labels(&["0123456789_x_0123456789", "0123456789_y_0123456789"]);
        assert_eq!(super::distinct_column(&middle, 10, 12), vec!["...89_x_0...", "...89_y_0..."]);
    }

    use super::*;

    #[test]
    fn durations_say_microseconds_with_the_micro_sign() {
        assert_eq!(duration(1952.0), "1.95 µs");
        assert_eq!(duration(10_776_576.0), "10.78 ms");
        assert_eq!(duration(2.5e9), "2.50 s");
        assert_eq!(duration(12.0), "12 ns");
        assert_eq!(micros(43_210.0), "43.2 µs");
        assert_eq!(micros(1_500.0), "1.50 µs");
    }

    #[test]
    fn numbers_keep_three_significant_decimals() {
        assert_eq!(number(64.54), "64.5");
        assert_eq!(number(1.956), "1.96");
        assert_eq!(number(167.4), "167");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.0004), "4.000e-4");
        assert_eq!(si(6.2e13), "62 T");
        assert_eq!(si(4.77e12), "4.77 T");
        assert_eq!(si(0.5), "0.50");
    }

    #[test]
    fn markdown_text_is_escaped() {
        assert_eq!(md_cell("a|b <T>\nc"), "a\\|b &lt;T&gt; c");
        assert_eq!(md_code("f<`a`|b>"), "f<'a'\\|b>");
        assert_eq!(wrap("one two three four", 9, 2), "one two\n  three\n  four");
        assert_eq!(wrap("  one  ", 10, 4), "one");
        assert_eq!(wrap("", 10, 4), "");
    }
}
