//! The report's assembly: the whole report from the explained kernels (report-level aggregates
//! over the whole batch, for `keet explain` and `keet merge` alike), the report one cached kernel
//! stands in alone (what `keet show` prints), and the batch's kernel times for the profile view.

use super::report::*;
use crate::analysis::FileError;
use crate::batch::{BatchTable, ReportSettings};
use crate::rules;
use std::path::PathBuf;

/// What the whole report is made of.
pub struct ReportParts {
    pub inputs: Vec<PathBuf>,
    pub model: Option<ModelInfo>,
    pub total_duration_ns: f64,
    pub kernels: Vec<KernelExplanation>,
    pub skipped_kernels: usize,
    pub errors: Vec<FileError>,
    pub settings: ReportSettings,
    pub table: BatchTable,
    /// How model prose was written; `None` without a model.
    pub prose_mode: Option<String>,
}

/// Assembles the whole report from the explained kernels; report-level aggregates are computed
/// here, over the whole batch, for `keet explain` and `keet merge` alike.
pub fn build_report(parts: ReportParts) -> ExplainReport {
    let ReportParts { inputs, model, total_duration_ns, kernels, skipped_kernels, errors, settings, table, prose_mode } = parts;
    let profile = rules::profile_view::profile_view(&kernel_times(&table));
    ExplainReport {
        schema: EXPLAIN_SCHEMA.into(),
        keet_version: env!("CARGO_PKG_VERSION").into(),
        model,
        inputs,
        total_duration_ns,
        prose_mode,
        prose: kernels.iter().fold(ProseCounts::default(), |mut a, k| {
            a.add(&k.prose);
            a
        }),
        kernels,
        skipped_kernels,
        errors,
        profile,
        settings: Some(settings),
        batch: Some(table),
        summary: None,
        sets: vec![],
    }
}

/// The report a cache entry holds for one kernel (what `keet show` prints): the kernel alone, over
/// its group's files and time.
pub fn kernel_alone(k: &KernelExplanation, model: Option<ModelInfo>, prose_mode: Option<String>) -> ExplainReport {
    ExplainReport {
        schema: EXPLAIN_SCHEMA.into(),
        keet_version: env!("CARGO_PKG_VERSION").into(),
        model,
        inputs: k.kernel.files.clone(),
        total_duration_ns: k.kernel.total_duration_ns,
        kernels: vec![k.clone()],
        skipped_kernels: 0,
        errors: vec![],
        profile: Default::default(),
        settings: None,
        batch: None,
        prose_mode,
        prose: k.prose,
        summary: None,
        sets: vec![],
    }
}

/// Every kernel group of the batch as the profile view needs it: family, time, and the estimated
/// gain of its representative's primary problem (recorded in the table by the first pass).
pub fn kernel_times(table: &BatchTable) -> Vec<rules::profile_view::KernelTime> {
    table
        .groups
        .iter()
        .map(|g| {
            let total = g.total_duration_ns.value();
            rules::profile_view::KernelTime {
                name: g.name.clone(),
                block_size: g.block_size,
                grid_size: g.grid_size,
                family: g.family,
                launches: g.launches,
                total_ns: total,
                gain_ns: g.primary_gain_pct.map(|p| p / 100.0 * total),
                primary: g.primary.clone(),
            }
        })
        .collect()
}
