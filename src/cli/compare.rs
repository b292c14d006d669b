//! `keet compare BEFORE AFTER`: matched kernels, metric deltas and a validated explanation of
//! what changed; `--fail-on-regression PCT` turns it into a CI gate.

use super::args::{JobsArgs, ModelArgs, OutputArgs};
use crate::compare::{self, CompareOptions, CompareReport};
use crate::render;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    Text,
    Md,
    Json,
    /// Compact Markdown for an LLM's context window (`--max-tokens` budgets it).
    Context,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The baseline: a `.ncu-rep` file, an ncu CSV export, or a directory (searched recursively).
    pub before: PathBuf,
    /// The new profile(s), same kinds as BEFORE.
    pub after: PathBuf,
    /// Output format: text (default), md, json (schema keet.compare/1) or context (compact
    /// Markdown for an LLM's context window).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<CompareFormat>,
    /// With `--format context`: at most this many tokens, counted with the model's tokenizer
    /// (`--model`, else the default); the smallest changes are cut first.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<usize>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Exit 1 when any matched kernel's total time grew by more than PCT percent.
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
    /// Deltas only: no model is loaded.
    #[arg(long)]
    pub no_llm: bool,
    /// Ask the model about at most this many changed kernels (largest time change first).
    #[arg(long, default_value_t = 3)]
    pub top: usize,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub jobs: JobsArgs,
    /// Pair the before kernel whose name contains OLD with the after kernel whose name contains
    /// NEW (a kernel renamed in a fix that keet cannot pair by its role); repeatable.
    #[arg(long = "match", value_name = "OLD=NEW", value_parser = parse_match)]
    pub matches: Vec<(String, String)>,
}

fn parse_match(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((old, new)) if !old.is_empty() && !new.is_empty() => Ok((old.to_string(), new.to_string())),
        _ => Err(format!("expected OLD=NEW, got {s:?}")),
    }
}

/// Renders the report in `format`.
pub fn render_report(r: &CompareReport, format: CompareFormat) -> anyhow::Result<String> {
    Ok(match format {
        CompareFormat::Json => render::json(r)?,
        CompareFormat::Md => render::render("compare.md", r)?,
        CompareFormat::Text => render::render("compare.txt", r)?,
        CompareFormat::Context => render::context::compare_context(r, None)?,
    })
}

pub fn run(a: CompareArgs) -> anyhow::Result<i32> {
    if let Some(p) = a.fail_on_regression {
        if !p.is_finite() || p < 0.0 {
            eprintln!("error: --fail-on-regression takes a percentage >= 0, not {p}");
            return Ok(2);
        }
    }
    let format = a.format.unwrap_or(CompareFormat::Text);
    let counter = match a.max_tokens {
        Some(_) if format != CompareFormat::Context => {
            eprintln!("error: --max-tokens applies to --format context only");
            return Ok(2);
        }
        Some(n) => Some((n, super::token_counter(a.model.model.as_deref())?)),
        None => None,
    };
    let opts = CompareOptions {
        top: a.top,
        no_llm: a.no_llm || a.top == 0,
        engine: a.model.engine_options(),
        jobs: a.jobs.jobs,
        matches: a.matches.clone(),
    };
    let mut report = compare::compare(&a.before, &a.after, &opts).map_err(|e| match e {
        compare::CompareError::Llm(_) => anyhow::anyhow!("{e} (use --no-llm for the deltas alone)"),
        e => e.into(),
    })?;
    for e in &report.errors {
        eprintln!("error: {}", e.message);
    }
    if report.before.launches == 0 || report.after.launches == 0 {
        let side = if report.before.launches == 0 { &a.before } else { &a.after };
        eprintln!("error: no kernel launches found in {}", side.display());
        return Ok(2);
    }
    if let Some(p) = a.fail_on_regression {
        report.check_regressions(p);
    }
    let out = match &counter {
        Some((max_tokens, count)) => {
            let budget = render::context::TokenBudget { max_tokens: *max_tokens, count: count.as_ref() };
            match render::context::compare_context(&report, Some(&budget)) {
                Ok(s) => s,
                Err(e @ render::RenderError::Budget { .. }) => {
                    eprintln!("error: {e}");
                    return Ok(2);
                }
                Err(e) => return Err(e.into()),
            }
        }
        None => render_report(&report, format)?,
    };
    a.output.write(&out)?;
    if !report.errors.is_empty() {
        return Ok(2);
    }
    if let Some(p) = report.regression_threshold_pct {
        for r in &report.regressions {
            eprintln!(
                "regression: {} total time {} -> {} (+{}%, threshold {}%)",
                r.name,
                crate::format::duration(r.before_ns),
                crate::format::duration(r.after_ns),
                crate::rules::fmt_num(r.delta_pct),
                crate::rules::fmt_num(p)
            );
        }
        if !report.regressions.is_empty() {
            return Ok(1);
        }
    }
    Ok(0)
}
