//! The placebo format of `keet eval`, `generic`: CUDA performance advice written for no particular
//! kernel, cut to about the length in tokens of keet's `context` for the same question. It is built
//! from keet's own expert tables alone (the fixes of `expert/findings.toml`, the definitions of
//! `expert/definitions.toml`, the stall reasons' meanings), never from a profile, and keeps only
//! lines without a digit: it holds no fact, number or name of the kernel. If `context` beats
//! `generic` by as much as it beats `raw`, the gain is keet's interpretation, not the added text.

use std::sync::OnceLock;

const FINDINGS: &str = include_str!("../../expert/findings.toml");
const DEFINITIONS: &str = include_str!("../../expert/definitions.toml");

/// The heading the advice is given under (the same for every kernel).
pub const HEADING: &str = "## CUDA performance advice\n\n";

/// The fix keys of a finding, in the order the advice takes them: the code the user writes first,
/// then a library's, generated code's and a framework's.
const FIX_ORDER: [&str; 4] = ["user", "library", "generated", "framework"];

/// Every line of advice, in order: each finding's fixes (by [`FIX_ORDER`], each tier over all
/// findings before the next), the definitions of GPU terms, then what each stall reason means. Lines
/// that are templates (they take a kernel's values) or hold a digit are left out.
pub fn lines() -> &'static [String] {
    static LINES: OnceLock<Vec<String>> = OnceLock::new();
    LINES.get_or_init(|| {
        let findings: toml::Table = toml::from_str(FINDINGS).unwrap_or_else(|e| panic!("expert/findings.toml: {e}"));
        let definitions: toml::Table = toml::from_str(DEFINITIONS).unwrap_or_else(|e| panic!("expert/definitions.toml: {e}"));
        let mut out: Vec<String> = Vec::new();
        for tier in FIX_ORDER {
            for rule in findings.values().filter_map(toml::Value::as_table) {
                let Some(fixes) = rule.get("fix").and_then(toml::Value::as_table) else { continue };
                // `user`, then `user_registers`, `user_shared` (the variants of one tier).
                let mut keys: Vec<&String> = fixes.keys().filter(|k| *k == tier || k.starts_with(&format!("{tier}_"))).collect();
                keys.sort_by_key(|k| (k.len(), k.as_str()));
                out.extend(keys.iter().filter_map(|k| fixes.get(*k)?.as_str()).map(str::to_string));
            }
        }
        let terms = definitions.get("term").and_then(toml::Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for term in terms {
            if let Some(why) = term.get("why").and_then(toml::Value::as_str) {
                out.push(sentence(why));
            }
        }
        if let Some(hints) = findings.get("stall_hints").and_then(toml::Value::as_table) {
            for (reason, hint) in hints {
                if let Some(hint) = hint.as_str() {
                    out.push(format!("A warp stalled on {reason} is {hint}."));
                }
            }
        }
        out.retain(|l| !l.contains("{{") && !l.contains("{%"));
        let mut out: Vec<String> =
            out.iter().map(|l| without_numbered_asides(l)).filter(|l| !l.chars().any(|c| c.is_ascii_digit())).collect();
        out.dedup();
        out
    })
}

/// `line` without its parenthesised asides that hold a digit ("aligned vector loads (float4)" ->
/// "aligned vector loads"); nested parentheses go with their aside.
fn without_numbered_asides(line: &str) -> String {
    let mut out = String::new();
    let mut aside = String::new();
    let mut depth = 0usize;
    for c in line.chars() {
        match c {
            '(' => {
                depth += 1;
                aside.push(c);
            }
            ')' if depth > 0 => {
                depth -= 1;
                aside.push(c);
                if depth == 0 {
                    if !aside.chars().any(|x| x.is_ascii_digit()) {
                        out.push_str(&aside);
                    } else if out.ends_with(' ') {
                        out.pop();
                    }
                    aside.clear();
                }
            }
            _ if depth > 0 => aside.push(c),
            _ => out.push(c),
        }
    }
    out.push_str(&aside);
    out
}

/// `text` as a sentence: capitalised, ending with a full stop.
fn sentence(text: &str) -> String {
    let mut chars = text.trim().chars();
    let mut s: String = chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default();
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

/// The advice for a context of `target` tokens: [`HEADING`], then [`lines`] as bullets (from the
/// start again when they run out), as many as bring the count closest to `target`. Each line's
/// tokens are counted once (`count`), so the total is the sum of the parts.
pub fn advice(target: usize, count: &dyn Fn(&str) -> usize) -> String {
    let lines = lines();
    let bullets: Vec<(String, usize)> = lines
        .iter()
        .map(|l| {
            let b = format!("- {l}\n");
            let n = count(&b);
            (b, n)
        })
        .collect();
    let mut out = HEADING.to_string();
    let mut tokens = count(HEADING);
    if bullets.is_empty() {
        return out;
    }
    for (bullet, n) in bullets.iter().cycle() {
        // Stop where one more line would overshoot the target by more than it is short of it now.
        if tokens + n > target && tokens + n - target > target.saturating_sub(tokens) {
            break;
        }
        out.push_str(bullet);
        tokens += n;
    }
    out
}

/// A rough count of tokens (about four bytes each) for when no tokenizer is at hand.
pub fn approx_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advice_comes_from_the_tables_and_holds_no_digit() {
        let lines = lines();
        assert!(lines.len() >= 40, "{} lines", lines.len());
        for l in lines {
            assert!(!l.chars().any(|c| c.is_ascii_digit()), "{l}");
            assert!(!l.contains("{{") && !l.contains("{%"), "{l}");
        }
        // A numbered aside goes, the advice stays.
        assert!(lines.iter().any(|l| l.ends_with("a shared-memory tile for transposes, aligned vector loads.")), "{lines:#?}");
        assert_eq!(
            without_numbered_asides("index so (tid < stride, not tid % (2*stride) == 0), or branch (on the warp)."),
            "index so, or branch (on the warp)."
        );
    }

    #[test]
    fn the_advice_is_about_as_long_as_asked() {
        let words = |s: &str| s.split_whitespace().count();
        for target in [50, 300, 1000, 5000] {
            let a = advice(target, &words);
            let n = words(&a);
            assert!(n.abs_diff(target) <= 30, "target {target}: {n} words");
            assert!(a.starts_with(HEADING));
        }
        // Longer than the tables: the lines start again.
        let long = advice(5000, &words);
        assert!(long.matches(&format!("- {}\n", lines()[0])).count() >= 2);
        assert_eq!(advice(0, &words), HEADING);
    }
}
