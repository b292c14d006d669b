//! One launch's analysis without the LLM: identity, facts and rule findings, in launch order.
//! This is what `keet inspect` prints ([`inspect`] reads and analyses its inputs) and what the
//! explain stage starts from.

use crate::facts::{self, Facts};
use crate::profile::{Launch, Profile, SourceKind};
use crate::rules::{self, RuleReport};
use serde::Serialize;
use std::path::PathBuf;

/// Version of the JSON documents keet prints for `inspect` (bump on breaking change).
pub const INSPECT_SCHEMA: &str = "keet.inspect/1";

#[derive(Debug, Clone, Serialize)]
pub struct LaunchAnalysis {
    pub id: u64,
    pub name: String,
    pub mangled_name: Option<String>,
    pub device_name: Option<String>,
    pub compute_capability: Option<String>,
    pub block_size: Option<[u64; 3]>,
    pub grid_size: Option<[u64; 3]>,
    pub duration_ns: Option<f64>,
    pub metric_count: usize,
    pub facts: Facts,
    pub findings: Vec<rules::Finding>,
    pub ncu_rules: Vec<crate::profile::NcuRuleResult>,
    /// Regime, kernel kind, missing sections, and where keet disagrees with ncu's estimates.
    pub diagnosis: rules::Diagnosis,
    /// Every raw metric of the launch, sorted by name (`keet inspect --all-metrics` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<MetricRow>>,
}

/// One raw metric as stored, for `keet inspect --all-metrics`: the value after unit
/// normalisation and the value and unit exactly as the source wrote them.
#[derive(Debug, Clone, Serialize)]
pub struct MetricRow {
    pub name: String,
    /// A number in `unit`, or the text of a text metric (`null` for a stored NaN / infinity,
    /// whose text is in `raw_value`).
    pub value: serde_json::Value,
    pub unit: String,
    pub raw_value: String,
    pub raw_unit: String,
}

/// Every metric of `launch`, sorted by name.
pub fn metric_rows(launch: &Launch) -> Vec<MetricRow> {
    let mut rows: Vec<MetricRow> = launch
        .metrics
        .iter()
        .map(|(name, m)| MetricRow {
            name: name.to_string(),
            value: match m.value {
                crate::profile::MetricValue::Number(v) => {
                    serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number)
                }
                crate::profile::MetricValue::Text(t) => serde_json::Value::String(t.to_string()),
            },
            unit: m.unit.to_string(),
            raw_value: m.raw_value.to_string(),
            raw_unit: m.raw_unit.to_string(),
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

#[derive(Debug, Clone, Serialize)]
pub struct FileAnalysis {
    pub path: PathBuf,
    pub kind: SourceKind,
    pub notes: Vec<String>,
    pub launches: Vec<LaunchAnalysis>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileError {
    pub path: PathBuf,
    pub message: String,
}

/// The whole `keet inspect --format json` document.
#[derive(Debug, Clone, Serialize)]
pub struct InspectDocument {
    pub schema: &'static str,
    pub keet_version: &'static str,
    pub files: Vec<FileAnalysis>,
    pub errors: Vec<FileError>,
}

/// One launch judged alone (its findings' severities as if it were the whole profile).
pub fn analyse_launch(launch: &Launch) -> LaunchAnalysis {
    analyse_launch_in(launch, None)
}

/// One launch whose kernel takes `time_share_pct` of the profile's time (severity follows the
/// estimated gain in time of the profile); `None`: judged alone.
pub fn analyse_launch_in(launch: &Launch, time_share_pct: Option<f64>) -> LaunchAnalysis {
    let facts = rules::derive_facts(launch);
    let share = time_share_pct.unwrap_or(100.0);
    let RuleReport { findings, ncu_rules, diagnosis } = rules::evaluate_launch(launch, &facts, share);
    LaunchAnalysis {
        id: launch.id,
        name: launch.name.clone(),
        mangled_name: launch.mangled_name.clone(),
        device_name: launch.device_name.clone(),
        compute_capability: launch.compute_capability.clone(),
        block_size: launch.block_size,
        grid_size: launch.grid_size,
        duration_ns: facts.duration_ns.as_ref().map(|f| f.value),
        metric_count: launch.metrics.len(),
        facts,
        findings,
        ncu_rules,
        diagnosis,
        metrics: None,
    }
}

pub fn analyse_profile(p: &Profile) -> FileAnalysis {
    let total = profile_time_ns(p);
    let share = |l: &Launch| total.zip(launch_ns(l)).filter(|(t, _)| *t > 0.0).map(|(t, d)| 100.0 * d / t);
    FileAnalysis {
        path: p.path.clone(),
        kind: p.kind,
        notes: p.notes.clone(),
        launches: p.launches.iter().map(|l| analyse_launch_in(l, share(l))).collect(),
    }
}

/// The profile's total launch time (sum of the launches' durations), when any is known.
pub fn profile_time_ns(p: &Profile) -> Option<f64> {
    let d: Vec<f64> = p.launches.iter().filter_map(launch_ns).collect();
    (!d.is_empty()).then(|| d.iter().sum())
}

fn launch_ns(l: &Launch) -> Option<f64> {
    facts::derive_duration(l)
}

/// Why [`inspect`] could not start on its inputs (a bad file is not one: it is listed in the
/// document's `errors`).
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("listing inputs: {0}")]
    List(#[source] std::io::Error),
    #[error("no .ncu-rep or .csv files found in {0}")]
    NoInputs(String),
    #[error("thread pool: {0}")]
    Pool(#[from] rayon::ThreadPoolBuildError),
}

/// `keet inspect`'s document for `inputs` (files, or folders searched recursively): each file read
/// and analysed on `jobs` threads (0: all cores), in input order, with every raw metric of every
/// launch when `all_metrics`. A file that is not a profile is listed in `errors`; one that ends
/// early (a report cut off mid-write) too, after its complete launches.
pub fn inspect(inputs: &[PathBuf], jobs: usize, all_metrics: bool) -> Result<InspectDocument, InspectError> {
    let files = crate::profile::expand_inputs(inputs).map_err(InspectError::List)?;
    if files.is_empty() {
        return Err(InspectError::NoInputs(inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")));
    }
    Ok(inspect_files(&files, jobs, all_metrics)?)
}

/// `keet inspect`'s document for `files` (already expanded from the inputs), parsed with `jobs`
/// threads (0: all cores). A file cut off mid-write keeps its complete launches and adds an error
/// (naming where it ends); `all_metrics` adds every raw metric of every launch.
pub fn inspect_files(files: &[PathBuf], jobs: usize, all_metrics: bool) -> Result<InspectDocument, rayon::ThreadPoolBuildError> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build()?;
    let results: Vec<_> = pool.install(|| {
        use rayon::prelude::*;
        files
            .par_iter()
            .map(|p| {
                let (prof, err) = crate::profile::salvage(crate::profile::read_path(p));
                let analysed = prof.map(|prof| {
                    let mut f = analyse_profile(&prof);
                    if all_metrics {
                        for (l, launch) in f.launches.iter_mut().zip(&prof.launches) {
                            l.metrics = Some(metric_rows(launch));
                        }
                    }
                    f
                });
                (analysed, err)
            })
            .collect()
    });
    let mut doc = InspectDocument { schema: INSPECT_SCHEMA, keet_version: env!("CARGO_PKG_VERSION"), files: vec![], errors: vec![] };
    for (path, (f, e)) in files.iter().zip(results) {
        doc.files.extend(f);
        if let Some(e) = e {
            doc.errors.push(FileError { path: path.clone(), message: e.to_string() });
        }
    }
    Ok(doc)
}

/// A launch's duration in ns (0 when absent): what kernel groups are ranked by. It is the
/// `duration_ns` fact (`gpu__time_duration.sum`, then `.avg`, then the plain name, in ns), so a
/// ranking and the facts it ranks by never disagree.
pub fn duration_ns(l: &Launch) -> f64 {
    crate::facts::derive_duration(l).unwrap_or(0.0)
}
