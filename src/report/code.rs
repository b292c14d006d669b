//! The code section of a kernel explanation: where the kernel's definition was found (or why
//! not), and the one checked edit the model proposed for it, as `keet explain -f json` prints it
//! (`code_section` in `docs/schema/explain-v2.schema.json`).

use crate::rules::Category;
use serde::{Deserialize, Serialize};

/// Where the explained kernel's code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodeOrigin {
    /// A source file the report embeds (`ncu --import-source yes`).
    Embedded,
    /// A file the user pointed at with `--source FILE|DIR`.
    User,
}

/// The explained kernel's definition in its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelCodeRef {
    pub path: String,
    /// The definition's own name.
    pub name: String,
    /// 1-based, inclusive.
    pub start_line: usize,
    pub end_line: usize,
    pub origin: CodeOrigin,
    /// Which of several definitions was used and why, when there were several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One check an edit went through before it was shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditCheck {
    /// "differs", "before-lines-exist", "inside-kernel", "parses", "identifiers", "kind of change", "explanation".
    pub name: String,
    pub passed: bool,
}

/// The one code edit the model proposed for the primary finding, as checked and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeEdit {
    /// The finding the edit fixes.
    pub category: Category,
    /// The identifier in the code that causes the problem.
    pub construct: String,
    /// The problem tied to that construct, in the code's own identifiers.
    pub explanation: String,
    pub path: String,
    /// 1-based line of the first `before` line in the file.
    pub start_line: usize,
    pub before: Vec<String>,
    pub after: Vec<String>,
    /// What the edit changes (`expert/edits.toml` kinds: "shared-declaration", "index-expression", ...).
    pub kinds: Vec<String>,
    pub unified_diff: String,
    pub checks: Vec<EditCheck>,
    /// Whether the accepted edit needed a re-ask.
    pub repaired: bool,
}

/// An edit the checks refused (shown with `--verbose`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedEdit {
    pub before: Vec<String>,
    pub after: Vec<String>,
    pub reasons: Vec<String>,
}

/// What keet did with the explained kernel's code.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CodeSection {
    /// The kernel's definition, when keet found it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelCodeRef>,
    /// Why the kernel's code was not found (a library kernel, no match, several matches, no source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// The checked edit, when one passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<CodeEdit>,
    /// Why no edit is shown although the code was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_edit: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedEdit>,
}
