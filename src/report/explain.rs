//! The explain report's data model (what `keet explain --format json` prints, version
//! [`EXPLAIN_SCHEMA`]), shared by the explain stage, the validator, the cache and the renderers.

use crate::analysis::{FileError, LaunchAnalysis};

use crate::rules::{Category, Severity};

pub use super::code::{CodeEdit, CodeOrigin, CodeSection, EditCheck, KernelCodeRef, RefusedEdit};
pub use super::writer::Writer;
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

/// Who wrote each sentence of a shown finding (model findings only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextOrigin {
    pub claim: Writer,
    pub explanation: Writer,
    pub suggestions: Vec<Writer>,
    /// What each shown sentence of the model (its own words or an expert sentence it chose) does
    /// (links facts, restates, ...), in report order: `keet bench explain` counts them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<KindOfSentence>,
}

/// One shown model sentence and what it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindOfSentence {
    /// "claim", "explanation", "suggestion 1", ...
    pub field: String,
    pub text: String,
    pub kind: crate::mechanism::SentenceKind,
    /// The model's own words, or an expert sentence it chose or copied.
    pub writer: Writer,
}

/// Model sentences shown, re-asked and replaced. Every sentence the model wrote is either shown or
/// replaced (by the expert text, after a failed re-ask, or with its whole finding when the finding
/// failed validation); re-asked counts those that needed a second, constrained try.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProseCounts {
    pub shown: usize,
    pub reasked: usize,
    pub replaced: usize,
}

impl ProseCounts {
    pub fn add(&mut self, o: &ProseCounts) {
        self.shown += o.shown;
        self.reasked += o.reasked;
        self.replaced += o.replaced;
    }
}

/// A model sentence the prose gate kept from the reader, and why (shown only with `--verbose`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplacedSentence {
    pub category: Category,
    /// "claim", "explanation" or "suggestion N".
    pub field: String,
    /// The model's sentence, then its re-asked version when there was one.
    pub texts: Vec<String>,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownFinding {
    pub origin: Origin,
    /// Who wrote each sentence; null for a rule finding (all expert text).
    #[serde(default)]
    pub text_origin: Option<TextOrigin>,
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
    /// The line's own counts, as ncu's Source page shows them: stall samples, excessive global
    /// sectors, excess shared wavefronts (bank conflicts), executed instructions; each with its
    /// share of the kernel's total. Only counters the profile has and the line uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<LineCounter>,
}

/// One counter of a source line: its column, the line's count (summed over the line's SASS
/// instructions) and that count's share of the kernel's total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineCounter {
    pub counter: String,
    pub value: f64,
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
    /// Model sentences shown, re-asked and replaced for this kernel.
    pub prose: ProseCounts,
    /// The model sentences the prose gate replaced (emptied unless `--verbose`).
    pub replaced: Vec<ReplacedSentence>,
    /// The kernel's code and the model's checked edit, when the code was looked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeSection>,
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
    #[serde(default)]
    pub prose: ProseCounts,
    #[serde(default)]
    pub replaced: Vec<ReplacedSentence>,
    #[serde(default)]
    pub code: Option<CodeSection>,
}

/// The summary of a whole report, and who wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    pub text: String,
    pub writer: Writer,
    /// Whether the model's text needed a re-ask (false for the expert summary).
    #[serde(default)]
    pub repaired: bool,
    /// Why the model's summary was refused, when the expert summary stands (shown with `--verbose`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
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
    pub profile: crate::rules::profile_view::ProfileView,
    /// The settings the report was made with (what `keet merge` checks parts agree on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<super::batch::ReportSettings>,
    /// Every group of identical launches in the inputs (what `keet merge` ranks shards by).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<super::batch::BatchTable>,
    /// How model prose was written (`free`, `guided`, `choose`); absent without a model.
    pub prose_mode: Option<String>,
    /// Model sentences shown, re-asked and replaced, over all kernels.
    pub prose: ProseCounts,
    /// Where the time goes and what to do first (with a model and at least two kernels explained).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<ProfileSummary>,
    /// Sets among the inputs: the same kernel (or its versions) while one thing varies (issue 41).
    pub sets: Vec<crate::sets::KernelSet>,
}

impl ExplainReport {
    /// Removes the text of dropped findings and replaced sentences (counts stay): what a report
    /// shows without `--verbose`.
    pub fn hide_dropped_text(&mut self) {
        if let Some(s) = &mut self.summary {
            s.refused.clear();
        }
        for set in &mut self.sets {
            set.summary_refused.clear();
        }
        for k in &mut self.kernels {
            k.replaced.clear();
            if let Some(code) = &mut k.code {
                code.refused.clear();
            }
            for d in &mut k.dropped {
                d.finding.claim.clear();
                d.finding.explanation.clear();
                d.finding.suggestions.clear();
            }
        }
    }
}
