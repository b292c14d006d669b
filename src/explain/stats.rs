//! What one explain run counted and timed: kernels, findings, sentences, edits and seconds
//! ([`RunStats`]), for the benchmark and the progress lines.

use super::report::ProseCounts;

/// Timing of one run, for the benchmark.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunStats {
    pub parse_s: f64,
    pub model_load_s: f64,
    pub first_finding_s: Option<f64>,
    pub kernels_explained: usize,
    pub kernels_from_cache: usize,
    pub llm_findings_shown: usize,
    pub llm_findings_repaired: usize,
    pub llm_findings_dropped: usize,
    /// Model sentences shown / re-asked / replaced by expert text.
    pub prose: ProseCounts,
    /// Shown model sentences with a number that is not one of the kernel's rendered values (audit; 0 expected).
    pub shown_ungrounded: usize,
    /// Shown model sentences the prose gate flags when checked again on their own (audit; 0 expected).
    pub shown_gate_flagged: usize,
    /// Seconds spent generating (model calls only).
    pub generate_s: f64,
    /// Kernels the model was asked about.
    pub kernels_asked: usize,
    /// Kernels whose code keet found, edits shown, and seconds spent asking for edits.
    pub kernels_with_code: usize,
    pub edits_shown: usize,
    pub edit_s: f64,
    pub total_s: f64,
}

impl RunStats {
    /// Adds what another thread counted while asking the model (its kernels, findings, sentences,
    /// edits and seconds).
    pub fn absorb(&mut self, o: &RunStats) {
        self.llm_findings_shown += o.llm_findings_shown;
        self.llm_findings_repaired += o.llm_findings_repaired;
        self.llm_findings_dropped += o.llm_findings_dropped;
        self.prose.add(&o.prose);
        self.shown_ungrounded += o.shown_ungrounded;
        self.shown_gate_flagged += o.shown_gate_flagged;
        self.generate_s += o.generate_s;
        self.kernels_asked += o.kernels_asked;
        self.edits_shown += o.edits_shown;
        self.edit_s += o.edit_s;
    }
}
