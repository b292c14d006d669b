//! One launch's analysis without the LLM: identity, facts and rule findings, in launch order.
//! This is what `keet inspect` prints and what the explain stage starts from.

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
    let facts = facts::derive(launch);
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
    }
}

pub fn analyse_profile(p: &Profile) -> FileAnalysis {
    let total = profile_time_ns(p);
    let share = |l: &Launch| total.zip(launch_ns(l)).filter(|(t, _)| *t > 0.0).map(|(t, d)| 100.0 * d / t);
    FileAnalysis { path: p.path.clone(), kind: p.kind, notes: p.notes.clone(), launches: p.launches.iter().map(|l| analyse_launch_in(l, share(l))).collect() }
}

/// The profile's total launch time (sum of the launches' durations), when any is known.
pub fn profile_time_ns(p: &Profile) -> Option<f64> {
    let d: Vec<f64> = p.launches.iter().filter_map(launch_ns).collect();
    (!d.is_empty()).then(|| d.iter().sum())
}

fn launch_ns(l: &Launch) -> Option<f64> {
    facts::derive_duration(l)
}
