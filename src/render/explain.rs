//! Rendering the explain report: terminal text, Markdown, JSON (`keet.explain/2`, described by
//! `docs/schema/explain-v2.schema.json`) and one self-contained HTML page with a roofline chart.
//!
//! No ANSI colours are ever written, so `NO_COLOR` and pipes need no special handling.

use super::roofline::Chart;
use super::{Format, RenderError};
use crate::explain::report::ExplainReport;
use minijinja::{context, Environment, Value};
use serde_json::json;

/// Renders the report in `format`.
pub fn render_explain(report: &ExplainReport, format: Format) -> Result<String, RenderError> {
    let name = match format {
        Format::Json => return super::json(report),
        Format::Context => return super::context::explain_context(report, None),
        Format::Text => "explain.txt",
        Format::Md => "explain.md",
        Format::Html => "explain.html",
    };
    let base = Value::from_serialize(template_context(report));
    let ctx = if format == Format::Html {
        // The chart is built (and escaped) in Rust; the template inserts it as is.
        let svg = Chart::from_report(report).svg().map(Value::from_safe_string).unwrap_or(Value::from(()));
        context! { roofline_svg => svg, ..base }
    } else {
        base
    };
    let env = environment();
    let tmpl = env.get_template(name).map_err(|source| RenderError::Template { name: name.into(), source })?;
    let mut out = tmpl.render(ctx).map_err(|source| RenderError::Template { name: name.into(), source })?;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

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
pub fn template_context(report: &ExplainReport) -> serde_json::Value {
    let mut v = serde_json::to_value(report).expect("the explain report serialises");
    let mut order: Vec<usize> = (0..report.kernels.len()).collect();
    order.sort_by_key(|&i| report.kernels[i].rank);

    // Gain ranks: largest estimated gain first, kernels without an estimate unranked.
    let mut by_gain: Vec<usize> = (0..report.kernels.len()).filter(|&i| report.kernels[i].estimated_gain_ns.is_some_and(f64::is_finite)).collect();
    by_gain.sort_by(|&a, &b| {
        let (ga, gb) = (report.kernels[a].estimated_gain_ns.unwrap(), report.kernels[b].estimated_gain_ns.unwrap());
        gb.total_cmp(&ga).then(report.kernels[a].rank.cmp(&report.kernels[b].rank))
    });

    // Time-share bars are scaled to the longest kernel (its bar is full width).
    let max_share = report.kernels.iter().map(|k| k.kernel.time_share_pct).filter(|x| x.is_finite()).fold(0.0, f64::max);
    let src = v["kernels"].as_array().cloned().unwrap_or_default();
    let mut kernels = Vec::with_capacity(src.len());
    let (mut model, mut rules, mut dropped, mut explained_ns) = (0usize, 0usize, 0usize, 0f64);
    for &i in &order {
        let k = &report.kernels[i];
        let mut kv = src[i].clone();
        kv["facts_list"] = serde_json::to_value(k.analysis.facts.all()).expect("facts serialise");
        kv["gain_rank"] = match by_gain.iter().position(|&j| j == i) {
            Some(p) => json!(p + 1),
            None => serde_json::Value::Null,
        };
        kv["bar_pct"] = json!(if max_share > 0.0 { 100.0 * k.kernel.time_share_pct / max_share } else { 0.0 });
        let m = k.findings.iter().filter(|f| f.origin != crate::explain::report::Origin::Rules).count();
        kv["model_findings"] = json!(m);
        model += m;
        rules += k.findings.len() - m;
        dropped += k.dropped.len();
        if k.kernel.total_duration_ns.is_finite() {
            explained_ns += k.kernel.total_duration_ns;
        }
        kernels.push(kv);
    }
    v["kernels"] = serde_json::Value::Array(kernels);
    let share = if report.total_duration_ns > 0.0 { 100.0 * explained_ns / report.total_duration_ns } else { 0.0 };
    v["totals"] = json!({
        "model_findings": model,
        "rules_findings": rules,
        "dropped": dropped,
        "explained_ns": explained_ns,
        "explained_share_pct": share,
    });
    v["chart"] = serde_json::to_value(Chart::from_report(report)).expect("chart serialises");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

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
