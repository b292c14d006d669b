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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const FIXTURES: [(&str, &str); 4] = [
        ("tiles.cu", include_str!("../tests/fixtures/tiles.cu")),
        ("gemm.cuh", include_str!("../tests/fixtures/gemm.cuh")),
        ("softmax_triton.py", include_str!("../tests/fixtures/softmax_triton.py")),
        ("saxpy_numba.py", include_str!("../tests/fixtures/saxpy_numba.py")),
    ];

    /// Random byte edits to the fixtures (bytes that matter to the grammars, invalid UTF-8 turned
    /// into replacement characters) never make locate or check_edit panic.
    #[test]
    fn random_byte_edits_do_not_panic() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(37);
        let interesting = b"{}()[]<>;:,.\"'/*\n\t @#_0xf\\\xc3\xa9\xff";
        for round in 0..150 {
            let (name, text) = FIXTURES[round % FIXTURES.len()];
            let mut bytes = text.as_bytes().to_vec();
            for _ in 0..rng.random_range(1..12) {
                let at = rng.random_range(0..bytes.len().max(1));
                let byte = interesting[rng.random_range(0..interesting.len())];
                match rng.random_range(0..3) {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => bytes.insert(at.min(bytes.len()), byte),
                }
            }
            let files = vec![CodeFile { path: name.to_string(), text: String::from_utf8_lossy(&bytes).into_owned() }];
            for kernel_name in ["setColReadCol(int*)", "gemm", "fill(int *, int)", "reduce_sum", "softmax_kernel", "kernel", "scaleDouble"]
            {
                let Ok(kernel) = locate(&files, kernel_name) else { continue };
                let lines: Vec<&str> = kernel.text.lines().collect();
                let before = lines.get(rng.random_range(0..lines.len().max(1))).copied().unwrap_or("");
                let after = format!("{before} + 1{}", char::from(interesting[rng.random_range(0..interesting.len() - 3)]));
                let edit = Edit { before: before.to_string(), after };
                let _ = check_edit(&files, &kernel, &edit, &EditKind::ALL);
            }
        }
    }
}
