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
use std::sync::Arc;

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
    /// Shared by the file's members.
    pub file: Arc<Path>,
    /// Shared by every member of the same name in a scan ([`Interner`]).
    pub kernel: Arc<str>,
    /// Position (in its file) of the launch analysed: the median of the member's launches by time.
    pub launch: u32,
    /// How many launches of this kernel and shape the file holds.
    pub launches: usize,
    /// The member's value of what varies in its set (filled when the set is described).
    pub value: String,
    pub gpu: Option<Arc<str>>,
    /// The library or generator whose kernel this is ("cuBLAS", "CUTLASS", ...), when recognised:
    /// its versions are the library's configurations, not steps of the user's code.
    pub library: Option<String>,
    pub block_size: Option<[u64; 3]>,
    pub grid_size: Option<[u64; 3]>,
    /// The median launch's duration.
    pub duration_ns: Option<f64>,
    pub regime: &'static str,
    /// The unit the regime names (SM, DRAM, L2, L1/TEX, or ncu's combined memory throughput) and
    /// its % of peak.
    pub bound_unit: Option<&'static str>,
    pub bound_pct: Option<f64>,
    /// The busiest of the four units (DRAM, L2, L1/TEX, SM) by their own % of peak, as the
    /// single-profile bound-unit rule reads them ([`busiest_unit`]); `None` when none is measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busiest_unit: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busiest_pct: Option<f64>,
    /// When the regime cannot be told: what the profile lacks for it and the ncu option that
    /// collects it (the diagnosis's missing section), e.g. ("speed of light (SM and memory
    /// throughput)", "--section SpeedOfLight").
    #[serde(skip)]
    pub regime_missing: Option<Box<(String, String)>>,
    /// The primary problem (the first rule finding's category) and its estimate, % of the time.
    pub primary: Option<&'static str>,
    pub primary_estimate_pct: Option<f64>,
    pub work: Work,
    /// The member's share of its file's profiled time, percent.
    pub file_share_pct: Option<f64>,
    /// Values of `--vary` keys read from the file path.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub path_values: BTreeMap<String, String>,
    /// The facts members are compared on (`compared_facts` in `expert/sets.toml`) that this
    /// member's profile has, by key. Only those: a set of thousands of members keeps a few hundred
    /// bytes of facts each.
    /// Sorted by key ([`Member::fact`]).
    #[serde(skip)]
    pub facts: Box<[SetFact]>,
}

/// One compared fact of a member: its value, with the label and unit its line is written with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SetFact {
    pub key: FactKey,
    pub value: f64,
    pub form: &'static FactForm,
}

/// A fact's label and unit, interned ([`FactForm::of`]): the few dozen there are are shared by
/// every member instead of stored in each.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FactForm {
    pub label: &'static str,
    pub unit: &'static str,
}

impl FactForm {
    /// The one interned form with this label and unit.
    pub fn of(label: &'static str, unit: &'static str) -> &'static FactForm {
        type Forms = std::sync::Mutex<std::collections::HashMap<(&'static str, &'static str), &'static FactForm>>;
        static FORMS: std::sync::OnceLock<Forms> = std::sync::OnceLock::new();
        let mut forms = FORMS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        forms.entry((label, unit)).or_insert_with(|| Box::leak(Box::new(FactForm { label, unit })))
    }
}

impl Member {
    /// Grid blocks x block threads.
    pub fn threads(&self) -> Option<f64> {
        self.work.threads
    }

    /// The unit the member's row, its regime sentence and its plot point name, with its % of
    /// peak: the busiest of DRAM, L2, L1/TEX and the SM, else the regime's own unit (ncu's
    /// combined memory throughput, when no unit's own % is measured).
    pub fn shown_unit(&self) -> Option<(&'static str, f64)> {
        self.busiest_unit.zip(self.busiest_pct).or(self.bound_unit.zip(self.bound_pct))
    }

    /// Whether `other` comes from the same file: the same shared path, else the same bytes (the
    /// paths come from one listing, so one file has one spelling). Cheaper than `Path`'s
    /// component-wise equality, which every pair of a large set would pay.
    pub fn same_file(&self, other: &Member) -> bool {
        Arc::ptr_eq(&self.file, &other.file) || self.file.as_os_str() == other.file.as_os_str()
    }

    /// The compared fact `key`, when the member's profile has it.
    pub fn fact(&self, key: FactKey) -> Option<&SetFact> {
        self.facts.binary_search_by(|f| f.key.cmp(&key)).ok().map(|i| &self.facts[i])
    }

    /// Sets the member's compared facts (any order).
    pub fn set_facts(&mut self, mut facts: Vec<SetFact>) {
        facts.sort_by_key(|f| f.key);
        facts.dedup_by_key(|f| f.key);
        self.facts = facts.into_boxed_slice();
    }

    /// The kernel's base name (no template arguments or parameters).
    pub fn base(&self) -> String {
        names::parse(&self.kernel).base
    }
}

/// The kernel and GPU names of the members read so far, so that the members of one kernel across
/// thousands of files hold one copy of its name (a templated kernel's name runs to hundreds of bytes).
#[derive(Default)]
pub struct Interner(std::collections::HashSet<Arc<str>>);

impl Interner {
    /// Points the members' names at the copies already held (keeping the first of each).
    pub fn share(&mut self, members: &mut [Member]) {
        for m in members {
            m.kernel = self.one(&m.kernel);
            m.gpu = m.gpu.as_ref().map(|g| self.one(g));
        }
    }

    fn one(&mut self, name: &Arc<str>) -> Arc<str> {
        match self.0.get(name) {
            Some(held) => Arc::clone(held),
            None => {
                self.0.insert(Arc::clone(name));
                Arc::clone(name)
            }
        }
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
    let mut names = Interner::default();
    for (mut m, b) in results {
        names.share(&mut m);
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
    let file: Arc<Path> = Arc::from(p.path.as_path());
    slots
        .into_iter()
        .map(|(_, _, _, launches)| {
            let slot_ns: f64 = launches.iter().filter_map(|&i| crate::facts::derive_duration(&p.launches[i])).sum();
            let share = (file_ns > 0.0).then(|| 100.0 * slot_ns / file_ns);
            let median = median_launch(&p.launches, &launches);
            let la = analysis::analyse_launch_in(&p.launches[median], share);
            member_of(&file, median, launches.len(), &la, share)
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

fn member_of(file: &Arc<Path>, index: usize, launches: usize, la: &LaunchAnalysis, share: Option<f64>) -> Member {
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
            la.diagnosis
                .missing
                .iter()
                .find_map(|m| m.what.strip_suffix(": the regime").map(|w| Box::new((w.to_string(), m.ncu_option.to_string()))))
        })
        .flatten();
    let mut member = Member {
        file: Arc::clone(file),
        kernel: Arc::from(la.name.as_str()),
        launch: u32::try_from(index).unwrap_or(u32::MAX),
        launches,
        value: String::new(),
        gpu: la.device_name.as_deref().map(Arc::from),
        library: la.diagnosis.kernel.library.clone(),
        block_size: la.block_size,
        grid_size: la.grid_size,
        duration_ns: la.duration_ns,
        regime: la.diagnosis.regime,
        bound_unit: bound.and_then(|b| b.busiest_unit),
        bound_pct: bound.and_then(|b| b.busiest_pct),
        busiest_unit: busiest.map(|b| b.0),
        busiest_pct: busiest.map(|b| b.1),
        regime_missing,
        primary: la.findings.first().map(|f| f.category.as_str()),
        primary_estimate_pct: la.findings.first().and_then(|f| f.estimated_speedup_pct),
        work: Work {
            threads,
            warp_instructions: value(&la.facts.warp_instructions),
            dram_bytes: value(&roof.dram_bytes),
            flops: (!flops.is_empty()).then(|| flops.iter().sum()),
        },
        file_share_pct: share,
        path_values: BTreeMap::new(),
        facts: Box::default(),
    };
    member.set_facts(
        all.iter()
            .filter(|f| super::thresholds().compared_facts.contains(&f.key))
            .map(|f| SetFact { key: f.key, value: f.value, form: FactForm::of(f.label, f.unit) })
            .collect(),
    );
    member
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
