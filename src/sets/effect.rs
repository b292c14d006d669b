//! The version's effect in a set whose versions repeat across files (a version x file set, such as
//! a sweep that runs two versions of a reduction at each block and problem size): estimated only
//! from the pairs that differ in the version alone (the same file, or the same launch shape and
//! size), one figure for each launch; the pairs that differ in the version and something else are
//! counted and said not to be used.

use super::members::Member;
use super::{thresholds, Pair};
use crate::format::duration;
use crate::rules::fmt_num;

/// Two versions and the pairs that compare them: (from, to, the pairs differing in the version
/// alone as (from's member, to's member), how many pairs also differ in something else and in what).
struct Versus<'a> {
    from: String,
    to: String,
    alone: Vec<(&'a Member, &'a Member)>,
    mixed: usize,
    mixed_in: Vec<String>,
}

/// The versions in the set's order (first seen) and every pair of them.
fn versus<'a>(ms: &'a [Member], pairs: &[Pair]) -> Vec<Versus<'a>> {
    let mut versions: Vec<String> = Vec::new();
    for m in ms {
        if !versions.contains(&m.base()) {
            versions.push(m.base());
        }
    }
    let mut out = Vec::new();
    for (at, from) in versions.iter().enumerate() {
        for to in &versions[at + 1..] {
            let mut v = Versus { from: from.clone(), to: to.clone(), alone: Vec::new(), mixed: 0, mixed_in: Vec::new() };
            for p in pairs.iter().filter(|p| p.differs.iter().any(|d| d == "version")) {
                let (a, b) = (&ms[p.a - 1], &ms[p.b - 1]);
                let (first, second) = match (a.base(), b.base()) {
                    (base_a, base_b) if base_a == *from && base_b == *to => (a, b),
                    (base_a, base_b) if base_a == *to && base_b == *from => (b, a),
                    _ => continue,
                };
                if p.used {
                    v.alone.push((first, second));
                    continue;
                }
                v.mixed += 1;
                for d in p.differs.iter().filter(|d| *d != "version") {
                    if !v.mixed_in.contains(d) {
                        v.mixed_in.push(d.clone());
                    }
                }
            }
            out.push(v);
        }
    }
    out
}

/// The launch a member's value names besides its version ("block 32, 1000032 threads"), else its file.
fn launch_of(m: &Member) -> String {
    let rest = m.value.replacen(&format!("{}, ", m.base()), "", 1);
    if rest == m.value || rest.is_empty() {
        m.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    } else {
        rest
    }
}

/// Percent time change from `a` to `b`.
fn change_pct(a: &Member, b: &Member) -> Option<f64> {
    let (x, y) = (a.duration_ns?, b.duration_ns?);
    (x > 0.0).then(|| 100.0 * (y - x) / x)
}

fn less_or_more(pct: f64) -> String {
    if pct < 0.0 {
        format!("{}% less", fmt_num(-pct))
    } else {
        format!("{}% more", fmt_num(pct))
    }
}

/// One line for each pair of versions: the time change at each launch where only the version
/// differs, and the pairs not used.
pub fn version_effects(ms: &[Member], pairs: &[Pair]) -> Vec<String> {
    versus(ms, pairs)
        .into_iter()
        .map(|v| {
            let not_used = match v.mixed {
                0 => String::new(),
                1 => format!(" Not used: the pair that differs in the version and the {}.", v.mixed_in.join(" or ")),
                n => format!(" Not used: the {n} pairs that differ in the version and the {}.", v.mixed_in.join(" or ")),
            };
            if v.alone.is_empty() {
                return format!("{} -> {}: no pair differs in the version alone.{not_used}", v.from, v.to);
            }
            let at: Vec<String> = v
                .alone
                .iter()
                .filter_map(|(a, b)| {
                    let pct = change_pct(a, b)?;
                    let noise = if pct.abs() < thresholds().time_noise_pct { ", within noise" } else { "" };
                    let times = format!("{} -> {}", duration(a.duration_ns?), duration(b.duration_ns?));
                    Some(format!("{} time at {} ({times}{noise})", less_or_more(pct), launch_of(a)))
                })
                .collect();
            let pairs = if v.alone.len() == 1 { "the one pair".to_string() } else { format!("the {} pairs", v.alone.len()) };
            format!("{} -> {}, from {pairs} that differ in the version alone: {}.{not_used}", v.from, v.to, at.join("; "))
        })
        .collect()
}

/// The version's effect in a clause for the set's summary: each pair of versions with the range
/// of its time change over the launches where only the version differs.
pub fn summary_clause(ms: &[Member], pairs: &[Pair]) -> Option<String> {
    let parts: Vec<String> = versus(ms, pairs)
        .into_iter()
        .filter_map(|v| {
            let pcts: Vec<f64> = v.alone.iter().filter_map(|(a, b)| change_pct(a, b)).collect();
            let lo = pcts.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = pcts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let range = match pcts.len() {
                0 => return None,
                1 => less_or_more(lo),
                _ if hi < 0.0 => format!("{}% to {}% less", fmt_num(-hi), fmt_num(-lo)),
                _ if lo >= 0.0 => format!("{}% to {}% more", fmt_num(lo), fmt_num(hi)),
                _ => format!("{} to {}", less_or_more(lo), less_or_more(hi)),
            };
            Some(format!("{} takes {range} time than {} ({} launches)", v.to, v.from, pcts.len()))
        })
        .collect();
    (!parts.is_empty()).then(|| format!("Where only the version differs, {}.", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sets::group::tests::member;

    fn timed(file: &str, kernel: &str, value: &str, ns: f64) -> Member {
        let mut m = member(file, kernel, 32, 1, 50.0);
        m.value = value.into();
        m.duration_ns = Some(ns);
        m
    }

    #[test]
    fn the_effect_comes_from_the_pairs_that_differ_in_the_version_alone() {
        let ms = vec![
            timed("r1", "reduce1(float *)", "reduce1, block 32", 100.0),
            timed("r1", "reduce2(float *)", "reduce2, block 32", 90.0),
            timed("r2", "reduce1(float *)", "reduce1, block 128", 50.0),
            timed("r2", "reduce2(float *)", "reduce2, block 128", 55.0),
        ];
        let pair = |a: usize, b: usize, differs: &[&str]| Pair {
            a,
            b,
            differs: differs.iter().map(|d| d.to_string()).collect(),
            used: differs.len() == 1,
            time_ratio: None,
        };
        let pairs = vec![
            pair(1, 2, &["version"]),
            pair(1, 3, &["launch shape"]),
            pair(1, 4, &["version", "launch shape"]),
            pair(2, 3, &["version", "launch shape"]),
            pair(2, 4, &["launch shape"]),
            pair(3, 4, &["version"]),
        ];
        let lines = version_effects(&ms, &pairs);
        assert_eq!(
            lines,
            vec!["reduce1 -> reduce2, from the 2 pairs that differ in the version alone: 10% less time at block 32 (100 ns -> 90 ns); \
                  10% more time at block 128 (50 ns -> 55 ns). Not used: the 2 pairs that differ in the version and the launch shape."
                .to_string()]
        );
        assert_eq!(
            summary_clause(&ms, &pairs).as_deref(),
            Some("Where only the version differs, reduce2 takes 10% less to 10% more time than reduce1 (2 launches).")
        );
    }
}
