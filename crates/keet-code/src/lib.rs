//! keet's code stage: finds the definition of a profiled kernel in the user's source files, and checks
//! a model-proposed edit to that kernel before keet shows it.
//!
//! It imports nothing else of keet. Three entry points:
//! - [`read_user_sources`] reads `--source FILE|DIR` into [`CodeFile`]s (skipping what cannot be read
//!   or parsed, with a warning each);
//! - [`locate`] turns the kernel name from a profile (demangled with namespaces, template arguments and
//!   parameters, plain, mangled by Numba, or a Triton function name) into the [`KernelCode`] that
//!   defines it, with its launch sites;
//! - [`check_edit`] checks an [`Edit`] (before/after lines) against the kernel and the edit kinds the
//!   finding allows, and returns the [`CheckedEdit`] with a unified diff, or an [`EditRefusal`] whose
//!   sentence the model can act on when asked again.
//!
//! Source is parsed with tree-sitter, never with regular expressions: macros, templates, comments
//! and strings make line-based matching wrong in the cases that matter.
//!
//! Why each dependency is here:
//! - `tree-sitter` (0.27): the parsing runtime; every syntax question (where a definition starts
//!   and ends, what a launch's grid is, which nodes an edit changed) is answered on its trees.
//! - `tree-sitter-cuda` (0.21.2): the CUDA grammar (tree-sitter-cpp extended with `__global__`,
//!   `__shared__`, `__launch_bounds__` and `<<<...>>>` launches), used for .cu/.cuh/.cpp/.h/.hpp/.cc.
//!   It is generated for tree-sitter ABI 15 and links through `tree-sitter-language` 0.1, the same
//!   as `tree-sitter` 0.27, so no C++ fallback grammar is needed.
//! - `tree-sitter-python` (0.25): the Python grammar, for Triton (`@triton.jit`) and Numba
//!   (`@cuda.jit`) kernels (also ABI 15 through `tree-sitter-language` 0.1).
//! - `similar`: the unified diff of an accepted edit ([`CheckedEdit::unified_diff`]).
//! - `thiserror`: the error types ([`NotFound`], [`EditRefusal`]) with their sentences.
//! - `serde`: [`EditKind`]'s kebab-case names (as in `expert/edits.toml`) and serialisable results.

mod classify;
mod edit;
mod locate;
mod names;
mod parse;
mod sources;

use serde::{Deserialize, Serialize};

pub use classify::{EditKind, ExpertEdit};
pub use edit::{check_edit, CheckedEdit, Edit, EditRefusal};
pub use locate::{locate, KernelCode, LaunchSite, NotFound};
pub use sources::{read_user_sources, MAX_FILES, MAX_FILE_BYTES};

/// One source file as keet read it: the path as given (or found under the `--source` directory) and
/// its UTF-8 text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeFile {
    pub path: String,
    pub text: String,
}

/// The language a kernel is written in, from the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Language {
    /// CUDA C++: .cu .cuh .cpp .h .hpp .cc (`__global__` functions).
    Cuda,
    /// Python: .py (Triton `@triton.jit`, Numba `@cuda.jit` functions).
    Python,
}

impl Language {
    /// The language of a file from its extension; `None` for files keet does not read.
    pub fn of_path(path: &str) -> Option<Language> {
        let ext = path.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase())?;
        match ext.as_str() {
            "cu" | "cuh" | "cpp" | "h" | "hpp" | "cc" => Some(Language::Cuda),
            "py" => Some(Language::Python),
            _ => None,
        }
    }
}
