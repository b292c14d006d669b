//! Ingest: turns any Nsight Compute export (`.ncu-rep`, CSV pages) into one [`Profile`] model.
//!
//! Every reader in this module produces the same types, so later stages (facts, rules, ...) never
//! care where a number came from, except through [`Metric::origin`], which keeps the provenance.
//!
//! Metric keys: readers store metrics under ncu's *raw metric name* (`gpu__time_duration.sum`).
//! The details page only has display labels ("Duration" in section "GPU Speed Of Light Throughput");
//! [`names`] maps the known labels to raw names, and unknown labels are kept as
//! `"<Section Name>/<Metric Name>"` so nothing is lost.

pub mod csv_pages;
pub mod metrics;
pub mod names;
pub mod ncu_rep;
pub mod units;

use serde::Serialize;
use std::path::{Path, PathBuf};

pub use metrics::{Columns, ColumnsBuilder, Metric, MetricValue, Metrics, MetricsBuilder, Origin, RowBuilder};
pub use units::Unit;

/// Which kind of export a profile was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    NcuRep,
    DetailsCsv,
    RawCsv,
    MetricsCsv,
    SourceCsv,
    UiExportCsv,
}

/// One file's worth of kernel launches.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub path: PathBuf,
    pub kind: SourceKind,
    /// In launch order (ncu's ID / result order).
    pub launches: Vec<Launch>,
    /// Things the reader skipped on purpose (application output, `==PROF==` lines, a traceback...).
    pub notes: Vec<String>,
    /// Source files embedded in the report (`ncu --import-source yes`), deduplicated by path, in
    /// order of first appearance; [`Launch::source_files`] indexes it. Empty for CSV exports.
    pub source_files: Vec<SourceFile>,
}

/// A source file embedded in a report (`ncu --import-source yes`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SourceFile {
    /// The path as the compiler saw it (`/home/u/app/kernel.cu`, `C:/src/k.cu`).
    pub path: String,
    /// The file's text (decoded lossily when it is not UTF-8; the profile's notes then say so).
    pub text: String,
}

/// One profiled kernel launch.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Launch {
    /// ncu's launch ID (the `ID` column, or the result's position in a report). Identity, with order.
    pub id: u64,
    /// Demangled where known (the name the user recognises).
    pub name: String,
    /// Mangled name when the source has it.
    pub mangled_name: Option<String>,
    pub process_name: Option<String>,
    pub process_id: Option<u64>,
    pub device_name: Option<String>,
    /// Device index as ncu reports it.
    pub device_id: Option<u64>,
    /// "8.6", "9.0", ...
    pub compute_capability: Option<String>,
    pub context_id: Option<u64>,
    pub stream_id: Option<u64>,
    /// Threads per block, x/y/z.
    pub block_size: Option<[u64; 3]>,
    /// Blocks per grid, x/y/z.
    pub grid_size: Option<[u64; 3]>,
    /// Keyed by raw metric name (see module docs).
    pub metrics: Metrics,
    /// Nsight Compute's own rule results stored in the profile.
    pub ncu_rules: Vec<NcuRuleResult>,
    /// Per-source-line / per-SASS counters, when the export has them.
    pub source: Option<SourceView>,
    /// The embedded source files of this launch's module (what Nsight Compute's
    /// `action.source_files()` lists): indices into [`Profile::source_files`].
    pub source_files: Vec<usize>,
}

/// Nsight Compute rule severity ("Rule Type" in CSV, message type in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NcuRuleType {
    /// OPT: an optimisation opportunity.
    Opt,
    /// WRN: a warning.
    Wrn,
    /// INF: information.
    Inf,
    Err,
    Other,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcuRuleResult {
    /// Rule identifier or name ("SOLBottleneck", "Uncoalesced Global Accesses"...).
    pub rule: String,
    pub section: Option<String>,
    pub kind: NcuRuleType,
    pub message: String,
    /// "local" / "global" when given.
    pub speedup_type: Option<String>,
    /// Estimated speedup in percent, when given.
    pub speedup_pct: Option<f64>,
}

/// Source-level counters: one row per SASS instruction or source line.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SourceView {
    /// "sass", "cuda", "cuda,sass" ...
    pub view: String,
    /// Column names of the counters, in order (e.g. "Warp Stall Sampling (All Samples)").
    pub columns: Vec<String>,
    pub rows: Vec<SourceRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SourceRow {
    /// Source file when known (CUDA view).
    pub file: Option<String>,
    /// 1-based source line when known.
    pub line: Option<u64>,
    /// SASS address, e.g. "00007f1b2c000100", when known.
    pub address: Option<String>,
    /// Source text or SASS text.
    pub text: String,
    /// Same order as [`SourceView::columns`]; `None` where empty / n/a.
    pub values: Vec<Option<f64>>,
}

/// Ingest errors. Each names the file and the line or byte offset.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Csv { path: PathBuf, line: u64, message: String },
    #[error("{path}: at byte {offset}: {message}")]
    Report { path: PathBuf, offset: u64, message: String },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    #[error("{path}: no profile data: {message}")]
    Empty { path: PathBuf, message: String },
    /// The file ends early (a report cut off mid-write, a CSV page ending inside a quoted field).
    /// The complete launches before the cut are in `recovered` (see [`salvage`]); the file still
    /// counts as bad input (exit 2) so that scripts notice.
    #[error("{path}: {at}: the file ends early: {message}")]
    Truncated {
        path: PathBuf,
        at: At,
        message: String,
        /// How many launches were recovered (stays when `recovered` is taken by [`salvage`]).
        launches: usize,
        recovered: Box<Profile>,
    },
}

/// A position in an input file, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum At {
    /// Byte offset in a binary report.
    Byte(u64),
    /// 1-based physical line of a text export.
    Line(u64),
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Byte(b) => write!(f, "at byte {b}"),
            At::Line(l) => write!(f, "line {l}"),
        }
    }
}

/// Splits a read into what can still be shown and what must be reported: a
/// [`ProfileError::Truncated`] gives both its recovered profile and the error (with the profile
/// taken out), any other error only the error.
pub fn salvage(r: Result<Profile>) -> (Option<Profile>, Option<ProfileError>) {
    match r {
        Ok(p) => (Some(p), None),
        Err(ProfileError::Truncated { path, at, message, launches, recovered }) => {
            let empty =
                Profile { path: path.clone(), kind: recovered.kind, launches: Vec::new(), notes: Vec::new(), source_files: Vec::new() };
            let err = ProfileError::Truncated { path, at, message, launches, recovered: Box::new(empty) };
            (Some(*recovered), Some(err))
        }
        Err(e) => (None, Some(e)),
    }
}

pub type Result<T, E = ProfileError> = std::result::Result<T, E>;

/// Reads any supported export, choosing the reader from the content (not only the extension).
pub fn read_path(path: &Path) -> Result<Profile> {
    let bytes = std::fs::read(path).map_err(|source| ProfileError::Io { path: path.to_owned(), source })?;
    read_bytes(path, &bytes)
}

/// Like [`read_path`] with the content already in memory (the path is used in messages).
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Result<Profile> {
    if bytes.starts_with(b"NVR\0") {
        ncu_rep::read(path, bytes)
    } else {
        csv_pages::read(path, bytes)
    }
}

/// Expands files and directories (recursively) into the list of profile files, sorted.
/// Directories contribute `.ncu-rep` and `.csv` files; files given by name are always kept.
pub fn expand_inputs(inputs: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut stack = vec![p.clone()];
            while let Some(dir) = stack.pop() {
                let mut entries: Vec<_> = std::fs::read_dir(&dir)?.collect::<std::io::Result<_>>()?;
                entries.sort_by_key(|e| e.path());
                for e in entries {
                    let ep = e.path();
                    if ep.is_dir() {
                        stack.push(ep);
                    } else if matches!(ep.extension().and_then(|e| e.to_str()), Some("ncu-rep") | Some("csv")) {
                        out.push(ep);
                    }
                }
            }
        } else {
            out.push(p.clone());
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}
