//! Rendering the explain report: terminal text, Markdown, JSON (`keet.explain/2`, described by
//! `docs/schema/explain-v2.schema.json`) and one self-contained HTML page with a roofline chart.
//!
//! No ANSI colours are ever written, so `NO_COLOR` and pipes need no special handling.

use super::roofline::Chart;
use super::{Format, RenderError};
use crate::explain::report::ExplainReport;
use minijinja::{context, Value};

// The template context lives one layer down (shared with `--format context` and `keet show`).
pub use super::explain_view::template_context;

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
        let set_svgs: Vec<Value> =
            report.sets.iter().map(|s| super::sets_plot::svg(s).map(Value::from_safe_string).unwrap_or(Value::from(()))).collect();
        context! { roofline_svg => svg, set_svgs => set_svgs, ..base }
    } else {
        base
    };
    let env = crate::templating::report_environment();
    let tmpl = env.get_template(name).map_err(|source| RenderError::Template { name: name.into(), source })?;
    let mut out = tmpl.render(ctx).map_err(|source| RenderError::Template { name: name.into(), source })?;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}
