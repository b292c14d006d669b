//! The explain report as its templates see it, shared by every rendering of it (text, Markdown,
//! HTML, `--format context`, and `keet show`, which has only the stored JSON): the template
//! environment with the explain filters, and the template context built from the report's JSON
//! (`keet.explain/2`) plus the facts in [`crate::facts::Facts::all`] order.
//!
//! Lower than [`super::explain`] and [`super::context`], which both use it and not each other's
//! internals.

use super::roofline::Chart;
use crate::explain::report::ExplainReport;
use minijinja::Environment;
use serde_json::{json, Value};

/// keet's template environment plus the filters only the explain templates use: `wrap(width,
/// indent)` (word-wrap, continuation lines indented), `mdcell` (text safe inside a Markdown table
/// cell), `mdcode` (text for a code span, also inside a table cell), `si` (SI-prefixed number), `origin` (the finding origin marker: `rules`, `model`,
/// `model, repaired`), `pctw` (a percentage clamped to 0..100 for bar widths).
pub fn environment() -> Environment<'static> {
    let mut env = super::environment();
    env.add_filter("wrap", |s: String, width: usize, indent: usize| wrap(&s, width, indent));
    env.add_filter("mdcell", |s: String| md_cell(&s));
    env.add_filter("mdcode", |s: String| md_code(&s));
    env.add_filter("si", |x: f64| super::roofline::si(x));
    env.add_filter("origin", |s: String| origin_label(&s).to_string());
    env.add_filter("pctw", |x: f64| if x.is_finite() { format!("{:.2}", x.clamp(0.0, 100.0)) } else { "0".into() });
    env
}

/// The text shown for a finding's origin.
pub fn origin_label(origin: &str) -> &str {
    match origin {
        "llm" => "model",
        "llm-repaired" => "model, repaired",
        "rules" => "rules",
        other => other,
    }
}

/// Word-wraps `s` to `width` columns; lines after the first start with `indent` spaces.
pub fn wrap(s: &str, width: usize, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    let mut col = 0usize;
    let mut first_line = true;
    for word in s.split_whitespace() {
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
pub fn md_cell(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.replace('\\', "\\\\").replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;")
}

/// Text for a Markdown code span (in a table cell too): one line, pipes escaped, backticks replaced.
pub fn md_code(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.replace('`', "'").replace('|', "\\|")
}

/// The report as JSON plus what the templates need beside it: kernels in rank order, each with
/// `facts_list` (every fact of the representative launch, in [`crate::facts::Facts::all`] order)
/// `gain_rank` (1 = largest estimated gain; null without an estimate), `bar_pct` (time share
/// relative to the longest kernel) and `model_findings`; `totals`; and `chart`
/// (the roofline's roofs, placed points and unplaced kernels).
pub fn template_context(report: &ExplainReport) -> Value {
    let json = serde_json::to_value(report).expect("the explain report serialises");
    let facts = report.kernels.iter().map(|k| serde_json::to_value(k.analysis.facts.all()).expect("facts serialise")).collect();
    let mut v = context_from_json(json, facts);
    v["chart"] = serde_json::to_value(Chart::from_report(report)).expect("chart serialises");
    v
}

/// [`template_context`] from a report's JSON alone (what `keet show` has: the stored report),
/// with the facts lists read from the JSON by [`facts_list`]; `chart` is null (the roofline is
/// drawn from the typed report, for the HTML page only).
pub fn template_context_from_json(report: &Value) -> Value {
    let facts = report
        .get("kernels")
        .and_then(Value::as_array)
        .map(|ks| ks.iter().map(|k| Value::Array(facts_list(k.pointer("/analysis/facts").unwrap_or(&Value::Null)))).collect())
        .unwrap_or_default();
    let mut v = context_from_json(report.clone(), facts);
    if v.is_object() {
        v["chart"] = Value::Null;
    }
    v
}

/// The one place the context is computed: `report` is the report's JSON, `facts_lists[i]` the
/// facts list of `report.kernels[i]` (report order).
fn context_from_json(mut report: Value, facts_lists: Vec<Value>) -> Value {
    let src: Vec<Value> = report.get("kernels").and_then(Value::as_array).cloned().unwrap_or_default();
    let rank = |k: &Value| k.get("rank").and_then(Value::as_u64).unwrap_or(u64::MAX);
    let finite = |k: &Value, ptr: &str| k.pointer(ptr).and_then(Value::as_f64).filter(|x| x.is_finite());
    let mut order: Vec<usize> = (0..src.len()).collect();
    order.sort_by_key(|&i| rank(&src[i]));

    // Gain ranks: largest estimated gain first, kernels without an estimate unranked.
    let gain = |i: usize| finite(&src[i], "/estimated_gain_ns");
    let mut by_gain: Vec<usize> = (0..src.len()).filter(|&i| gain(i).is_some()).collect();
    by_gain.sort_by(|&a, &b| gain(b).unwrap().total_cmp(&gain(a).unwrap()).then(rank(&src[a]).cmp(&rank(&src[b]))));

    // Time-share bars are scaled to the longest kernel (its bar is full width).
    let max_share = src.iter().filter_map(|k| finite(k, "/kernel/time_share_pct")).fold(0.0, f64::max);
    let mut kernels = Vec::with_capacity(src.len());
    let (mut model, mut rules, mut dropped, mut explained_ns) = (0usize, 0usize, 0usize, 0f64);
    for &i in &order {
        let mut kv = src[i].clone();
        if !kv.is_object() {
            continue;
        }
        kv["facts_list"] = facts_lists.get(i).cloned().unwrap_or_else(|| json!([]));
        kv["gain_rank"] = match by_gain.iter().position(|&j| j == i) {
            Some(p) => json!(p + 1),
            None => Value::Null,
        };
        // (A share that is not a number gives a null bar, as NaN serialises.)
        let share = src[i].pointer("/kernel/time_share_pct").and_then(Value::as_f64).unwrap_or(f64::NAN);
        kv["bar_pct"] = json!(if max_share > 0.0 { 100.0 * share / max_share } else { 0.0 });
        let findings = src[i].get("findings").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let m = findings.iter().filter(|f| f.get("origin").and_then(Value::as_str) != Some("rules")).count();
        kv["model_findings"] = json!(m);
        model += m;
        rules += findings.len() - m;
        dropped += src[i].get("dropped").and_then(Value::as_array).map_or(0, Vec::len);
        if let Some(d) = finite(&src[i], "/kernel/total_duration_ns") {
            explained_ns += d;
        }
        kernels.push(kv);
    }
    let total = report.get("total_duration_ns").and_then(Value::as_f64).unwrap_or(0.0);
    let share = if total > 0.0 { 100.0 * explained_ns / total } else { 0.0 };
    if report.is_object() {
        report["kernels"] = Value::Array(kernels);
        report["totals"] = json!({
            "model_findings": model,
            "rules_findings": rules,
            "dropped": dropped,
            "explained_ns": explained_ns,
            "explained_share_pct": share,
        });
    }
    report
}

fn is_fact(v: &Value) -> bool {
    v.get("key").is_some_and(|k| k.is_string()) && v.get("value").is_some() && v.get("evidence").is_some_and(|e| e.is_array())
}

/// Every fact in a serialised [`crate::facts::Facts`], in [`crate::facts::Facts::all`] order: the
/// top-level facts, the roofline's, the occupancy limit's, the stalls'; then any other fact
/// found deeper (a newer report's additions).
pub fn facts_list(facts: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = vec![];
    let Some(obj) = facts.as_object() else { return out };
    out.extend(obj.values().filter(|v| is_fact(v)).cloned());
    if let Some(r) = obj.get("roofline").and_then(Value::as_object) {
        out.extend(r.values().filter(|v| is_fact(v)).cloned());
    }
    if let Some(f) = obj.get("occupancy_limit").and_then(|o| o.get("blocks_per_sm")).filter(|v| is_fact(v)) {
        out.push(f.clone());
    }
    for s in obj.get("stalls").and_then(Value::as_array).into_iter().flatten() {
        if let Some(f) = s.get("cycles_per_issue").filter(|v| is_fact(v)) {
            out.push(f.clone());
        }
    }
    fn walk(v: &Value, seen: &mut Vec<Value>) {
        if is_fact(v) {
            if !seen.contains(v) {
                seen.push(v.clone());
            }
            return;
        }
        match v {
            Value::Object(m) => m.values().for_each(|c| walk(c, seen)),
            Value::Array(a) => a.iter().for_each(|c| walk(c, seen)),
            _ => {}
        }
    }
    walk(facts, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    #[test]
    fn wrapping() {
        assert_eq!(wrap("aa bb cc dd", 5, 2), "aa bb\n  cc\n  dd");
        assert_eq!(wrap("  one  ", 10, 4), "one");
        assert_eq!(wrap("", 10, 4), "");
    }

    #[test]
    fn markdown_cells() {
        assert_eq!(md_cell("a|b <T>\nc"), "a\\|b &lt;T&gt; c");
        assert_eq!(md_code("f<`a`|b>"), "f<'a'\\|b>");
    }

    #[test]
    fn explain_templates_compile_and_html_autoescapes() {
        let env = environment();
        for n in ["explain.txt", "explain.md", "explain.html"] {
            env.get_template(n).unwrap();
        }
        let t = env.template_from_named_str("x.html", "{{ s }}").unwrap();
        assert_eq!(t.render(context! { s => "<&>" }).unwrap(), "&lt;&amp;&gt;");
    }
}
