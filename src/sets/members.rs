//! The candidates for sets: one [`Member`] per kernel and launch shape in each file (repeated
//! launches of it reduced to their median launch), with that launch's regime, bounding unit,
//! primary problem, work counts and facts. Each file is read, reduced and dropped.

use super::names;
use crate::analysis::{self, LaunchAnalysis};
use crate::facts::{FactKey, Facts};
use crate::profile::{Launch, Profile, SourceKind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a member's launch does: the work counts the profile has.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Work {
    /// Grid blocks x threads per block.
    pub threads: Option<f64>,
    pub warp_instructions: Option<f64>,
    pub dram_bytes: Option<f64>,
    /// FP16 + FP32 + FP64 FLOPs.
    pub flops: Option<f64>,
}

/// One member of a set: a kernel at one launch shape in one file.
#[derive(Debug, Clone, Serialize)]
pub struct Member {
    pub file: PathBuf,
    pub kernel: String,
    /// Position (in its file) of the launch analysed: the median of the member's launches by time.
    pub launch: u32,
    /// How many launches of this kernel and shape the file holds.
    pub launches: usize,
    /// The member's value of what varies in its set (filled when the set is described).
    pub value: String,
    pub gpu: Option<String>,
    /// The library or generator whose kernel this is ("cuBLAS", "CUTLASS", ...), when recognised:
    /// its versions are the library's configurations, not steps of the user's code.
    pub library: Option<String>,
    pub block_size: Option<[u64; 3]>,
    pub grid_size: Option<[u64; 3]>,
    /// The median launch's duration.
    pub duration_ns: Option<f64>,
    pub regime: String,
    /// The unit the regime names (SM, DRAM, L2, L1/TEX, or ncu's combined memory throughput) and
    /// its % of peak.
    pub bound_unit: Option<String>,
    pub bound_pct: Option<f64>,
    /// The busiest of the four units (DRAM, L2, L1/TEX, SM) by their own % of peak, as the
    /// single-profile bound-unit rule reads them ([`busiest_unit`]); `None` when none is measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busiest_unit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busiest_pct: Option<f64>,
    /// When the regime cannot be told: what the profile lacks for it and the ncu option that
    /// collects it (the diagnosis's missing section), e.g. ("speed of light (SM and memory
    /// throughput)", "--section SpeedOfLight").
    #[serde(skip)]
    pub regime_missing: Option<(String, String)>,
    /// The primary problem (the first rule finding's category) and its estimate, % of the time.
    pub primary: Option<String>,
    pub primary_estimate_pct: Option<f64>,
    pub work: Work,
    /// The member's share of its file's profiled time, percent.
    pub file_share_pct: Option<f64>,
    /// Values of `--vary` keys read from the file path.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub path_values: BTreeMap<String, String>,
    /// Fact values by key (what members are compared on).
    #[serde(skip)]
    pub facts: BTreeMap<FactKey, f64>,
    /// Labels and units of the facts, by key.
    #[serde(skip)]
    pub labels: BTreeMap<FactKey, (String, String)>,
}

impl Member {
    /// Grid blocks x block threads.
    pub fn threads(&self) -> Option<f64> {
        self.work.threads
    }

    /// The kernel's base name (no template arguments or parameters).
    pub fn base(&self) -> String {
        names::parse(&self.kernel).base
    }
}

/// A file that could not be read, or ended early.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Broken {
    pub file: PathBuf,
    pub message: String,
}

/// Reads `files` on `jobs` threads (0: all cores) and returns every member, file by file in input
/// order, and the files that could not be read. CSV source pages hold no launches to compare.
pub fn read(files: &[PathBuf], jobs: usize) -> (Vec<Member>, Vec<Broken>) {
    use rayon::prelude::*;
    let work = |p: &PathBuf| -> (Vec<Member>, Option<Broken>) {
        let (prof, err) = crate::profile::salvage(crate::profile::read_path(p));
        let broken = err.map(|e| Broken { file: p.clone(), message: e.to_string() });
        (prof.map(|prof| of_profile(&prof)).unwrap_or_default(), broken)
    };
    let results: Vec<(Vec<Member>, Option<Broken>)> = match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
        Ok(pool) => pool.install(|| files.par_iter().map(work).collect()),
        Err(_) => files.iter().map(work).collect(),
    };
    let mut members = Vec::new();
    let mut broken = Vec::new();
    for (m, b) in results {
        members.extend(m);
        broken.extend(b);
    }
    (members, broken)
}

/// A kernel name and launch shape, with the positions of its launches.
type Slot<'a> = (&'a str, Option<[u64; 3]>, Option<[u64; 3]>, Vec<usize>);

/// The members of one profile: its launches grouped by name and launch shape (first-seen order).
pub fn of_profile(p: &Profile) -> Vec<Member> {
    if p.kind == SourceKind::SourceCsv {
        return vec![];
    }
    let mut slots: Vec<Slot> = Vec::new();
    for (i, l) in p.launches.iter().enumerate() {
        if l.name.is_empty() {
            continue;
        }
        match slots.iter_mut().find(|s| s.0 == l.name && s.1 == l.block_size && s.2 == l.grid_size) {
            Some(s) => s.3.push(i),
            None => slots.push((&l.name, l.block_size, l.grid_size, vec![i])),
        }
    }
    // A launch without a time (an empty record) cannot be compared: it is no member.
    slots.retain(|s| s.3.iter().any(|&i| crate::facts::derive_duration(&p.launches[i]).is_some()));
    let file_ns: f64 = p.launches.iter().filter_map(crate::facts::derive_duration).sum();
    slots
        .into_iter()
        .map(|(_, _, _, launches)| {
            let slot_ns: f64 = launches.iter().filter_map(|&i| crate::facts::derive_duration(&p.launches[i])).sum();
            let share = (file_ns > 0.0).then(|| 100.0 * slot_ns / file_ns);
            let median = median_launch(&p.launches, &launches);
            let la = analysis::analyse_launch_in(&p.launches[median], share);
            member_of(&p.path, median, launches.len(), &la, share)
        })
        .collect()
}

/// The launch of median duration among `indices` (the lower median; the first when none has a duration).
fn median_launch(launches: &[Launch], indices: &[usize]) -> usize {
    let mut timed: Vec<(f64, usize)> =
        indices.iter().filter_map(|&i| crate::facts::derive_duration(&launches[i]).map(|d| (d, i))).collect();
    if timed.is_empty() {
        return indices[0];
    }
    timed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    timed[(timed.len() - 1) / 2].1
}

fn member_of(path: &Path, index: usize, launches: usize, la: &LaunchAnalysis, share: Option<f64>) -> Member {
    let bound = la.facts.bound.as_ref();
    let value = |f: &Option<crate::facts::Fact>| f.as_ref().map(|f| f.value);
    let roof = &la.facts.roofline;
    let flops: Vec<f64> = [&roof.fp16_flop, &roof.fp32_flop, &roof.fp64_flop].into_iter().filter_map(value).collect();
    let threads = match (la.grid_size, la.block_size) {
        (Some(g), Some(b)) => Some((g.iter().product::<u64>() * b.iter().product::<u64>()) as f64),
        _ => None,
    };
    let all = la.facts.all();
    let busiest = busiest_unit(&la.facts);
    let regime_missing = (la.diagnosis.regime == "unknown")
        .then(|| {
            la.diagnosis.missing.iter().find_map(|m| m.what.strip_suffix(": the regime").map(|w| (w.to_string(), m.ncu_option.to_string())))
        })
        .flatten();
    Member {
        file: path.to_path_buf(),
        kernel: la.name.clone(),
        launch: u32::try_from(index).unwrap_or(u32::MAX),
        launches,
        value: String::new(),
        gpu: la.device_name.clone(),
        library: la.diagnosis.kernel.library.clone(),
        block_size: la.block_size,
        grid_size: la.grid_size,
        duration_ns: la.duration_ns,
        regime: la.diagnosis.regime.to_string(),
        bound_unit: bound.and_then(|b| b.busiest_unit).map(str::to_string),
        bound_pct: bound.and_then(|b| b.busiest_pct),
        busiest_unit: busiest.map(|b| b.0.to_string()),
        busiest_pct: busiest.map(|b| b.1),
        regime_missing,
        primary: la.findings.first().map(|f| f.category.as_str().to_string()),
        primary_estimate_pct: la.findings.first().and_then(|f| f.estimated_speedup_pct),
        work: Work {
            threads,
            warp_instructions: value(&la.facts.warp_instructions),
            dram_bytes: value(&roof.dram_bytes),
            flops: (!flops.is_empty()).then(|| flops.iter().sum()),
        },
        file_share_pct: share,
        path_values: BTreeMap::new(),
        facts: all.iter().map(|f| (f.key, f.value)).collect(),
        labels: all.iter().map(|f| (f.key, (f.label.to_string(), f.unit.to_string()))).collect(),
    }
}

/// The busiest of DRAM, L2, L1/TEX and the SM by their throughput facts (% of peak; the facts
/// leave out a value above [`crate::facts::MAX_PCT_OF_PEAK`]), the first named on a tie: the unit
/// the single-profile bound-unit question keys (`expert/eval.toml` `[metrics]` reads the same
/// metrics). Not ncu's combined memory throughput, which names no unit.
pub fn busiest_unit(f: &Facts) -> Option<(&'static str, f64)> {
    [(&f.dram_throughput_pct, "DRAM"), (&f.l2_throughput_pct, "L2"), (&f.l1_throughput_pct, "L1/TEX"), (&f.sm_throughput_pct, "SM")]
        .into_iter()
        .filter_map(|(fact, unit)| fact.as_ref().map(|x| (unit, x.value)))
        .fold(None, |best: Option<(&'static str, f64)>, (unit, pct)| match best {
            Some((_, top)) if top >= pct => best,
            _ => Some((unit, pct)),
        })
}
