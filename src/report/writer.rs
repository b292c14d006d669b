//! Who wrote a text of a report: the model, the model choosing expert text, or the expert (the rule
//! layer's words). Plain data below every stage: findings, the profile summary and the sets' summaries
//! are marked with it.

use serde::{Deserialize, Serialize};

/// Who wrote a text: one sentence of a shown finding, a profile summary or a set's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Writer {
    /// The model wrote it, and it passed the validator and the prose gate.
    Model,
    /// The model chose it from expert-written sentences the facts support (`--prose choose`), or
    /// copied an expert sentence its prompt showed nearly word for word (`--prose free`).
    ModelChosen,
    /// Expert text: the rule layer's (`expert/findings.toml`), or the sets stage's summary of a set.
    Expert,
}
