//! The explain report's data model (what `keet explain --format json` prints, version
//! [`EXPLAIN_SCHEMA`]), shared by the explain stage, the validator, the cache and the renderers.

use crate::analysis::{FileError, LaunchAnalysis};

use crate::rules::{Category, Severity};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const EXPLAIN_SCHEMA: &str = "keet.explain/2";

/// One piece of evidence a finding cites: a raw metric of the launch (or a keet fact key) and its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    pub metric: String,
    pub value: f64,
    pub unit: String,
}

/// A finding as the model emits it (the JSON Schema of [`crate::explain::schema`] admits only this shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub category: Category,
    pub severity: Severity,
    /// One sentence.
    pub claim: String,
    pub evidence: Vec<Citation>,
    pub explanation: String,
    pub suggestions: Vec<String>,
}

/// Where a shown finding came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// The model's finding, validated as emitted.
    Llm,
    /// The model's finding after a bounded, constrained re-ask with the validator's reasons.
    LlmRepaired,
    /// The rule layer's finding, filling a gap the model left (or `--no-llm`).
    Rules,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownFinding {
    pub origin: Origin,
    #[serde(flatten)]
    pub finding: Finding,
    /// Upper-bound estimated speedup from the rule layer for this category, percent.
    pub estimated_speedup_pct: Option<f64>,
    /// Source lines the finding points at (file:line and the line's share of the stall samples / traffic).
    pub source_lines: Vec<SourceLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedFinding {
    pub finding: Finding,
    /// Why the validator rejected it (each reason names the metric or word at fault).
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceLine {
    pub file: Option<String>,
    pub line: Option<u64>,
    pub text: String,
    /// The counter column used ("Warp Stall Sampling (All Samples)", ...) and the line's share of it.
    pub counter: String,
    pub share_pct: f64,
}

/// Identical launches (same name and launch shape) grouped into one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelGroup {
    pub name: String,
    pub files: Vec<PathBuf>,
    /// Launch ids, per file in `files` order.
    pub launch_ids: Vec<u64>,
    pub launches: usize,
    pub total_duration_ns: f64,
    /// Share of all profiled time across the inputs, percent.
    pub time_share_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub name: String,
    pub path: String,
    pub sha256: String,
    pub device: String,
}

/// Everything said about one kernel. Serialise-only: the cache keeps [`CachedFindings`] and the
/// rendered JSON, and recomputes the analysis (cheap) from the profile.
#[derive(Debug, Clone, Serialize)]
pub struct KernelExplanation {
    pub rank: usize,
    pub kernel: KernelGroup,
    /// Facts and rule findings of the representative (longest) launch.
    pub analysis: LaunchAnalysis,
    /// Findings shown to the user, validated, most important first.
    pub findings: Vec<ShownFinding>,
    pub dropped: Vec<DroppedFinding>,
    /// One-line verdict (the primary finding's category and claim).
    pub verdict: String,
    /// Upper-bound gain on the whole profile if the primary problem is fixed, in ns.
    pub estimated_gain_ns: Option<f64>,
    /// True when this explanation came from the cache.
    pub cached: bool,
    /// Cache entry id (for `keet show`).
    pub cache_id: Option<i64>,
}

/// What the cache stores per kernel analysis besides the rendered JSON: the model's validated work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedFindings {
    pub findings: Vec<ShownFinding>,
    pub dropped: Vec<DroppedFinding>,
    pub verdict: String,
}

/// The whole `keet explain` output.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainReport {
    pub schema: String,
    pub keet_version: String,
    pub model: Option<ModelInfo>,
    pub inputs: Vec<PathBuf>,
    pub total_duration_ns: f64,
    pub kernels: Vec<KernelExplanation>,
    /// Launches not explained (below the time threshold or past --top), counted.
    pub skipped_kernels: usize,
    pub errors: Vec<FileError>,
    /// The whole profile (or batch): `families` and `profile_findings` at the top level.
    #[serde(flatten)]
    pub profile: crate::rules::profile::ProfileView,
    /// The settings the report was made with (what `keet merge` checks parts agree on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<crate::batch::ReportSettings>,
    /// Every group of identical launches in the inputs (what `keet merge` ranks shards by).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<crate::batch::BatchTable>,
}
