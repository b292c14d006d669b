//! Rendering: turns analyses into terminal text, Markdown, JSON or HTML with minijinja templates
//! (embedded in the binary from `src/render/templates/`; their environment is
//! [`crate::templating::report_environment`]).

use minijinja::Value;
use serde::Serialize;

pub mod context;
pub mod explain;
pub mod explain_view;
pub mod roofline;
pub mod set_context;
pub mod sets_plot;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Md,
    Json,
    Html,
    /// Compact Markdown for an LLM's context window (`--max-tokens` budgets it).
    Context,
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("template {name}: {source}")]
    Template {
        name: String,
        #[source]
        source: minijinja::Error,
    },
    #[error("--max-tokens {max_tokens} is below the smallest report: its first line alone is {needed} tokens")]
    Budget { max_tokens: usize, needed: usize },
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Renders `data` with the named template (`inspect.txt`, ...).
pub fn render<T: Serialize>(template: &str, data: &T) -> Result<String, RenderError> {
    let env = crate::templating::report_environment();
    let tmpl = env.get_template(template).map_err(|source| RenderError::Template { name: template.into(), source })?;
    tmpl.render(Value::from_serialize(data)).map_err(|source| RenderError::Template { name: template.into(), source })
}

/// Pretty JSON with a trailing newline.
pub fn json<T: Serialize>(data: &T) -> Result<String, RenderError> {
    let mut s = serde_json::to_string_pretty(data)?;
    s.push('\n');
    Ok(s)
}
