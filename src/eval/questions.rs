//! The questions of `keet eval`, each with its correct option and the raw metrics that make it
//! correct. Answers are computed here from the launch's raw metrics (names and thresholds in
//! `expert/eval.toml`), never from the rule layer, its verdicts or its text, so keet's report is
//! graded by something it did not write. A kernel whose numbers sit near a threshold gets no
//! question of that kind: every answer has a margin.

use crate::profile::Launch;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub(crate) const TABLE: &str = include_str!("../../expert/eval.toml");

/// A value above this percentage of peak is a measurement artefact (as in the facts stage).
const MAX_PCT_OF_PEAK: f64 = 100.5;

/// What a question asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuestionKind {
    BoundUnit,
    OccupancyLimiter,
    SectorWaste,
    TopStall,
    GridFill,
    MostGain,
    PrimaryFix,
    /// `keet eval --twins`: which change makes a kernel fastest, from a real before/after fix.
    TwinFix,
    /// `keet eval --sets` ([`super::sets`]): which member of a set is fastest.
    SetFastest,
    /// `keet eval --sets`: which unit bounds one member of a set.
    SetBound,
    /// `keet eval --sets`: at which member along the set the busiest unit changes.
    SetChange,
    /// `keet eval --sets`: which step of a version series saved the most time.
    SetBestStep,
    /// `keet eval --sets`: which metric a version step changed the most.
    SetStepChange,
}

impl QuestionKind {
    pub const ALL: [QuestionKind; 13] = [
        QuestionKind::BoundUnit,
        QuestionKind::OccupancyLimiter,
        QuestionKind::SectorWaste,
        QuestionKind::TopStall,
        QuestionKind::GridFill,
        QuestionKind::MostGain,
        QuestionKind::PrimaryFix,
        QuestionKind::TwinFix,
        QuestionKind::SetFastest,
        QuestionKind::SetBound,
        QuestionKind::SetChange,
        QuestionKind::SetBestStep,
        QuestionKind::SetStepChange,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuestionKind::BoundUnit => "bound-unit",
            QuestionKind::OccupancyLimiter => "occupancy-limiter",
            QuestionKind::SectorWaste => "sector-waste",
            QuestionKind::TopStall => "top-stall",
            QuestionKind::GridFill => "grid-fill",
            QuestionKind::MostGain => "most-gain",
            QuestionKind::PrimaryFix => "primary-fix",
            QuestionKind::TwinFix => "twin-fix",
            QuestionKind::SetFastest => "set-fastest",
            QuestionKind::SetBound => "set-bound",
            QuestionKind::SetChange => "set-change",
            QuestionKind::SetBestStep => "set-best-step",
            QuestionKind::SetStepChange => "set-step-change",
        }
    }
}

/// One raw metric an answer rests on, as the profile wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Basis {
    pub metric: String,
    /// The value used (units normalised).
    pub value: f64,
    /// The value and unit exactly as the profile wrote them.
    pub raw: String,
    /// Which kernel, for a question about several (the option text); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel: String,
}

/// A question before its options are shuffled: the correct option and three distractors.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub kind: QuestionKind,
    pub question: String,
    /// The key of the correct option in `expert/eval.toml` (`dram`, `registers`, ...), or the
    /// stall reason / kernel label.
    pub answer_key: String,
    pub correct: String,
    pub distractors: Vec<String>,
    pub basis: Vec<Basis>,
}

#[derive(Deserialize)]
pub(crate) struct Thresholds {
    busy_unit_pct: f64,
    idle_all_below_pct: f64,
    unit_margin_pts: f64,
    stall_lead_ratio: f64,
    waste_min: f64,
    waste_lead: f64,
    waste_none_below: f64,
    wave_edge_margin: f64,
    gain_lead_ratio: f64,
    tiny_launch_ns: f64,
    launch_max_unit_pct: f64,
    grid_max_unit_pct: f64,
    uncoalesced_bytes_per_sector: f64,
    bank_conflict_pct: f64,
    bound_pct: f64,
    latency_max_unit_pct: f64,
    low_achieved_occupancy_pct: f64,
    low_theoretical_occupancy_pct: f64,
}

#[derive(Deserialize)]
struct Kind {
    stem: String,
    #[serde(default)]
    options: BTreeMap<String, String>,
}

/// `[twin_fix]`: the question of `keet eval --twins`, its options beyond `primary_fix`'s, and the
/// option that stands for each finding category.
#[derive(Deserialize)]
struct TwinFixTable {
    stem: String,
    options: BTreeMap<String, String>,
    categories: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct System {
    prompt: String,
    /// The prompt's last sentence when answers are given as the option's text.
    prompt_text_answers: String,
    prompt_cloze_answers: String,
}

#[derive(Deserialize)]
pub(crate) struct Table {
    pub(crate) thresholds: Thresholds,
    system: System,
    bound_unit: Kind,
    occupancy_limiter: Kind,
    sector_waste: Kind,
    top_stall: Kind,
    grid_fill: Kind,
    most_gain: Kind,
    primary_fix: Kind,
    twin_fix: TwinFixTable,
    pub(crate) metrics: BTreeMap<String, toml::Value>,
}

impl Table {
    /// The text of option `key` of a question kind named by its table key (`bound_unit`), as the
    /// questions show it.
    pub(crate) fn option_text(&self, kind: &str, key: &str) -> Option<String> {
        let of = self.kind(kind)?;
        of.options.contains_key(key).then(|| self.option(of, key))
    }

    fn kind(&self, kind: &str) -> Option<&Kind> {
        Some(match kind {
            "bound_unit" => &self.bound_unit,
            "occupancy_limiter" => &self.occupancy_limiter,
            "sector_waste" => &self.sector_waste,
            "top_stall" => &self.top_stall,
            "grid_fill" => &self.grid_fill,
            "most_gain" => &self.most_gain,
            "primary_fix" => &self.primary_fix,
            _ => return None,
        })
    }

    /// The options of a question kind by its table key (`bound_unit`), when the table lists them.
    #[cfg(test)]
    pub(crate) fn options_of(&self, kind: &str) -> Option<&BTreeMap<String, String>> {
        Some(&self.kind(kind)?.options)
    }
}

pub(crate) fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| toml::from_str(TABLE).unwrap_or_else(|e| panic!("expert/eval.toml: {e}")))
}

/// The system prompt the model answers under with letters.
pub fn system_prompt() -> &'static str {
    &table().system.prompt
}

/// The system prompt when the model is asked without options (`keet eval --answer cloze`).
pub fn system_prompt_cloze_answers() -> String {
    with_last_sentence(&table().system.prompt_cloze_answers)
}

/// The system prompt when the model answers with the option's text: the letter prompt with its
/// last sentence ("Reply with the letter ...") replaced.
pub fn system_prompt_text_answers() -> String {
    with_last_sentence(&table().system.prompt_text_answers)
}

/// The letter prompt with its last sentence ("Reply with the letter ...") replaced by `last`.
fn with_last_sentence(last: &str) -> String {
    let letters = &table().system.prompt;
    let head = letters.rfind(". ").map_or(letters.as_str(), |at| &letters[..at + 1]);
    format!("{head} {last}")
}

impl Table {
    fn option(&self, kind: &Kind, key: &str) -> String {
        let t = kind.options.get(key).unwrap_or_else(|| panic!("expert/eval.toml: no option {key}"));
        t.replace("{idle_pct}", &crate::rules::fmt_num(self.thresholds.idle_all_below_pct))
    }

    fn names(&self, key: &str) -> Vec<&str> {
        match self.metrics.get(key) {
            Some(toml::Value::Array(a)) => a.iter().filter_map(|v| v.as_str()).collect(),
            Some(toml::Value::String(s)) => vec![s.as_str()],
            _ => panic!("expert/eval.toml: no metrics.{key}"),
        }
    }
}

/// Reads raw metrics by the names in `expert/eval.toml`, recording each one read as basis.
struct Raw<'a> {
    launch: &'a Launch,
    basis: Vec<Basis>,
}

impl<'a> Raw<'a> {
    fn new(launch: &'a Launch) -> Self {
        Raw { launch, basis: Vec::new() }
    }

    fn get(&mut self, key: &str) -> Option<f64> {
        for name in table().names(key) {
            if let Some(m) = self.launch.metrics.get(name) {
                if let Some(v) = m.as_f64() {
                    let raw = if m.raw_unit.is_empty() { m.raw_value.to_string() } else { format!("{} {}", m.raw_value, m.raw_unit) };
                    self.basis.push(Basis { metric: name.to_string(), value: v, raw, kernel: String::new() });
                    return Some(v);
                }
            }
        }
        None
    }

    /// A percentage of peak; an artefact above 100.5% counts as missing.
    fn pct(&mut self, key: &str) -> Option<f64> {
        self.get(key).filter(|v| (0.0..=MAX_PCT_OF_PEAK).contains(v))
    }

    /// The four units' utilisation, busiest first (those present).
    fn units(&mut self) -> Vec<(&'static str, f64)> {
        let mut v: Vec<(&'static str, f64)> = ["dram", "l2", "l1", "sm"].into_iter().filter_map(|u| Some((u, self.pct(u)?))).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v
    }
}

/// The kernel's questions (every kind but [`QuestionKind::MostGain`]), for the kernel named `label`.
pub fn kernel_questions(launch: &Launch, label: &str, rng: &mut StdRng) -> Vec<Draft> {
    [
        bound_unit(launch, label),
        occupancy_limiter(launch, label),
        sector_waste(launch, label),
        top_stall(launch, label),
        grid_fill(launch, label),
        primary_fix(launch, label, rng),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn stem(kind: &Kind, label: &str) -> String {
    kind.stem.replace("{kernel}", label)
}

/// The single-profile bound-unit question (also asked of each member of a set by `keet eval --sets`).
pub(crate) fn bound_unit(launch: &Launch, label: &str) -> Option<Draft> {
    let t = table();
    let th = &t.thresholds;
    let mut r = Raw::new(launch);
    let units = r.units();
    if units.len() < 3 {
        return None;
    }
    let (top, top_pct) = units[0];
    let (answer, distractors): (&str, Vec<&str>) = if top_pct < th.idle_all_below_pct {
        ("none", units.iter().take(3).map(|u| u.0).collect())
    } else if top_pct >= th.busy_unit_pct && top_pct - units[1].1 >= th.unit_margin_pts {
        (top, units[1..].iter().map(|u| u.0).chain(["none"]).take(3).collect())
    } else {
        return None;
    };
    Some(Draft {
        kind: QuestionKind::BoundUnit,
        question: stem(&t.bound_unit, label),
        answer_key: answer.into(),
        correct: t.option(&t.bound_unit, answer),
        distractors: distractors.iter().map(|k| t.option(&t.bound_unit, k)).collect(),
        basis: r.basis,
    })
}

fn occupancy_limiter(launch: &Launch, label: &str) -> Option<Draft> {
    let t = table();
    let mut r = Raw::new(launch);
    let theoretical = r.get("theoretical_occupancy")?;
    if theoretical >= 99.5 {
        return None;
    }
    let keys = ["registers", "shared_mem", "warps", "blocks"];
    let limits: Vec<f64> = keys.iter().map(|k| r.get(&format!("limit_{k}"))).collect::<Option<_>>()?;
    let (i, min) = limits.iter().copied().enumerate().min_by(|a, b| a.1.total_cmp(&b.1))?;
    // A tie leaves two right answers.
    if limits.iter().enumerate().any(|(j, &v)| j != i && v < min + 0.5) {
        return None;
    }
    Some(Draft {
        kind: QuestionKind::OccupancyLimiter,
        question: stem(&t.occupancy_limiter, label),
        answer_key: keys[i].into(),
        correct: t.option(&t.occupancy_limiter, keys[i]),
        distractors: keys.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, k)| t.option(&t.occupancy_limiter, k)).collect(),
        basis: r.basis,
    })
}

/// Share of each 32-byte sector a global access pattern does not use (0 when it has no accesses).
fn sector_waste_of(r: &mut Raw, ratio: &str, pct: &str) -> Option<f64> {
    let bytes = r.get(ratio).or_else(|| r.get(pct).map(|p| p * 32.0 / 100.0))?;
    Some(if bytes > 0.0 { (1.0 - bytes / 32.0).clamp(0.0, 1.0) } else { 0.0 })
}

/// Share of shared-memory wavefronts caused by bank conflicts.
fn bank_conflict_share(r: &mut Raw) -> Option<f64> {
    if let (Some(c), Some(w)) = (r.get("shared_bank_conflicts"), r.get("shared_wavefronts")) {
        return Some(if w > 0.0 { c.min(w) / w } else { 0.0 });
    }
    let w = r.get("shared_wavefronts_tables")?;
    let ideal = r.get("shared_wavefronts_ideal")?;
    Some(if w > 0.0 { ((w - ideal) / w).clamp(0.0, 1.0) } else { 0.0 })
}

/// Whether L2's count of the global sectors the kernel moved is no more than the count its
/// accesses ideally need (ncu's MemoryWorkloadAnalysis tables): then no global access wastes
/// sectors, whatever the SASS bytes-per-sector ratios say (they count asynchronous copies, LDGSTS,
/// at a fraction of the bytes they move).
fn global_sectors_ideal(r: &mut Raw) -> bool {
    matches!((r.get("global_sectors"), r.get("global_sectors_ideal")), (Some(n), Some(ideal)) if n <= ideal)
}

fn sector_waste(launch: &Launch, label: &str) -> Option<Draft> {
    let t = table();
    let th = &t.thresholds;
    let mut r = Raw::new(launch);
    let (load, store) = if global_sectors_ideal(&mut r) {
        (0.0, 0.0)
    } else {
        match (
            sector_waste_of(&mut r, "load_bytes_per_sector", "load_bytes_per_sector_pct"),
            sector_waste_of(&mut r, "store_bytes_per_sector", "store_bytes_per_sector_pct"),
        ) {
            (Some(l), Some(s)) => (l, s),
            _ => return None,
        }
    };
    let mut waste = [("global_load", load), ("global_store", store), ("shared", bank_conflict_share(&mut r)?)];
    waste.sort_by(|a, b| b.1.total_cmp(&a.1));
    let answer = if waste[0].1 < th.waste_none_below {
        "none"
    } else if waste[0].1 >= th.waste_min && waste[0].1 - waste[1].1 >= th.waste_lead {
        waste[0].0
    } else {
        return None;
    };
    let keys = ["global_load", "global_store", "shared", "none"];
    Some(Draft {
        kind: QuestionKind::SectorWaste,
        question: stem(&t.sector_waste, label),
        answer_key: answer.into(),
        correct: t.option(&t.sector_waste, answer),
        distractors: keys.iter().filter(|k| **k != answer).map(|k| t.option(&t.sector_waste, k)).collect(),
        basis: r.basis,
    })
}

/// Stall reasons with their cycles per issued instruction, largest first, with their basis.
fn stalls(launch: &Launch) -> Vec<(String, f64, Basis)> {
    let t = table();
    let prefix = t.names("stall_prefix")[0];
    let suffix = t.names("stall_suffix")[0];
    let mut v: Vec<(String, f64, Basis)> = launch
        .metrics
        .iter()
        .filter_map(|(name, m)| {
            let reason = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
            if reason == "selected" || reason.ends_with("_not_issued") {
                return None;
            }
            let value = m.as_f64().filter(|v| *v > 0.0)?;
            let raw = if m.raw_unit.is_empty() { m.raw_value.to_string() } else { format!("{} {}", m.raw_value, m.raw_unit) };
            Some((reason.to_string(), value, Basis { metric: name.to_string(), value, raw, kernel: String::new() }))
        })
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

fn top_stall(launch: &Launch, label: &str) -> Option<Draft> {
    let t = table();
    let s = stalls(launch);
    if s.len() < 4 || s[0].1 < t.thresholds.stall_lead_ratio * s[1].1 {
        return None;
    }
    let text = |reason: &str| format!("{reason} ({})", crate::rules::text::stall_hint(reason));
    Some(Draft {
        kind: QuestionKind::TopStall,
        question: stem(&t.top_stall, label),
        answer_key: s[0].0.clone(),
        correct: text(&s[0].0),
        distractors: s[1..4].iter().map(|x| text(&x.0)).collect(),
        basis: s.into_iter().take(4).map(|x| x.2).collect(),
    })
}

fn grid_fill(launch: &Launch, label: &str) -> Option<Draft> {
    let t = table();
    let m = t.thresholds.wave_edge_margin;
    let mut r = Raw::new(launch);
    let blocks = r.get("grid_blocks").filter(|b| *b > 0.0)?;
    let sms = r.get("sm_count").filter(|s| *s > 0.0)?;
    let waves = r.get("waves").filter(|w| *w > 0.0)?;
    let answer = if blocks < sms {
        "fewer_blocks_than_sms"
    } else if waves < 1.0 - m {
        "under_one_wave"
    } else if waves > 1.0 + m && waves < 4.0 - m {
        "one_to_four_waves"
    } else if waves > 4.0 + m {
        "many_waves"
    } else {
        return None;
    };
    let keys = ["fewer_blocks_than_sms", "under_one_wave", "one_to_four_waves", "many_waves"];
    Some(Draft {
        kind: QuestionKind::GridFill,
        question: stem(&t.grid_fill, label),
        answer_key: answer.into(),
        correct: t.option(&t.grid_fill, answer),
        distractors: keys.iter().filter(|k| **k != answer).map(|k| t.option(&t.grid_fill, k)).collect(),
        basis: r.basis,
    })
}

/// Every primary problem the raw metrics show, in the order of `expert/eval.toml`'s thresholds
/// (the first is the answer; the others cannot be distractors).
fn primary_problems(launch: &Launch, r: &mut Raw) -> Vec<&'static str> {
    let th = &table().thresholds;
    let units = r.units();
    if units.len() < 2 {
        return Vec::new();
    }
    let (top, top_pct) = units[0];
    let unit = |name: &str| units.iter().find(|u| u.0 == name).map(|u| u.1);
    let mut found = Vec::new();
    let duration = crate::facts::derive_duration(launch);
    if duration.is_some_and(|d| d < th.tiny_launch_ns) && top_pct < th.launch_max_unit_pct {
        found.push("launch");
    }
    if let (Some(b), Some(s)) = (r.get("grid_blocks"), r.get("sm_count")) {
        if b > 0.0 && b < s && top_pct < th.grid_max_unit_pct {
            found.push("grid");
        }
    }
    let memory_busy = top != "sm" && top_pct >= th.busy_unit_pct;
    let uncoalesced = !global_sectors_ideal(r)
        && [("load_bytes_per_sector", "load_bytes_per_sector_pct"), ("store_bytes_per_sector", "store_bytes_per_sector_pct")].iter().any(
            |(a, p)| {
                r.get(a).or_else(|| r.get(p).map(|x| x * 32.0 / 100.0)).is_some_and(|b| b > 0.0 && b < th.uncoalesced_bytes_per_sector)
            },
        );
    if memory_busy && uncoalesced {
        found.push("coalesce");
    }
    if top == "l1" && top_pct >= th.busy_unit_pct && bank_conflict_share(r).is_some_and(|s| 100.0 * s >= th.bank_conflict_pct) {
        found.push("bank");
    }
    if top == "dram" && top_pct >= th.bound_pct {
        found.push("bytes");
    }
    if top == "sm" && top_pct >= th.bound_pct {
        found.push("instructions");
    }
    if top_pct < th.latency_max_unit_pct && unit("sm").is_some() {
        if let (Some(a), Some(tt)) = (r.get("achieved_occupancy"), r.get("theoretical_occupancy")) {
            if a < th.low_achieved_occupancy_pct && tt < th.low_theoretical_occupancy_pct {
                found.push("occupancy");
            }
        }
    }
    found
}

fn primary_fix(launch: &Launch, label: &str, rng: &mut StdRng) -> Option<Draft> {
    let t = table();
    let mut r = Raw::new(launch);
    let found = primary_problems(launch, &mut r);
    let answer = *found.first()?;
    let mut others: Vec<&String> = t.primary_fix.options.keys().filter(|k| !found.contains(&k.as_str())).collect();
    if others.len() < 3 {
        return None;
    }
    others.shuffle(rng);
    Some(Draft {
        kind: QuestionKind::PrimaryFix,
        question: stem(&t.primary_fix, label),
        answer_key: answer.into(),
        correct: t.option(&t.primary_fix, answer),
        distractors: others[..3].iter().map(|k| t.option(&t.primary_fix, k)).collect(),
        basis: r.basis,
    })
}

/// The twin question's stem and every option it may draw (`primary_fix`'s and `twin_fix`'s own).
pub fn twin_fix_options() -> (&'static str, &'static BTreeMap<String, String>) {
    static OPTIONS: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    let t = table();
    let options = OPTIONS.get_or_init(|| {
        let mut all: BTreeMap<String, String> = t.primary_fix.options.clone();
        all.extend(t.twin_fix.options.clone());
        all
    });
    (t.twin_fix.stem.as_str(), options)
}

/// The option key that stands for a finding category's fix (`shared-bank-conflicts` -> `bank`).
pub fn twin_fix_key(category: &str) -> Option<&'static str> {
    table().twin_fix.categories.get(category).map(String::as_str)
}

/// The problems the raw metrics show (the `primary_fix` option keys), most important first.
pub fn problems_of(launch: &Launch) -> Vec<&'static str> {
    let mut raw = Raw::new(launch);
    primary_problems(launch, &mut raw)
}

/// A raw metric by its `expert/eval.toml` key (`duration`, `grid_blocks`, ...), with its basis.
pub(crate) fn raw_metric(launch: &Launch, key: &str) -> Option<(f64, Basis)> {
    let mut r = Raw::new(launch);
    let v = r.get(key)?;
    Some((v, r.basis.pop()?))
}

/// A raw metric by the first of `names` the launch has, with its basis.
pub(crate) fn raw_named(launch: &Launch, names: &[String]) -> Option<(f64, Basis)> {
    names.iter().find_map(|name| {
        let m = launch.metrics.get(name)?;
        let v = m.as_f64()?;
        let raw = if m.raw_unit.is_empty() { m.raw_value.to_string() } else { format!("{} {}", m.raw_value, m.raw_unit) };
        Some((v, Basis { metric: name.clone(), value: v, raw, kernel: String::new() }))
    })
}

/// The share of peak under which no unit bounds a kernel (`idle_all_below_pct`).
pub(crate) fn idle_all_below_pct() -> f64 {
    table().thresholds.idle_all_below_pct
}

/// One kernel of a profile, for the profile question.
pub struct ProfileKernel<'a> {
    /// How the options name it (name and launch shape).
    pub label: String,
    /// Its launches' summed duration, ns.
    pub total_ns: f64,
    pub launch: &'a Launch,
}

/// Which kernel could gain the most: total time times the headroom of its busiest unit.
pub fn most_gain(kernels: &[ProfileKernel]) -> Option<Draft> {
    let t = table();
    let mut scored: Vec<(usize, f64, Vec<Basis>)> = kernels
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            let mut r = Raw::new(k.launch);
            let units = r.units();
            let busiest = units.first()?.1;
            let basis = r.basis.into_iter().map(|b| Basis { kernel: k.label.clone(), ..b }).collect::<Vec<_>>();
            Some((i, k.total_ns * (1.0 - busiest / 100.0), basis))
        })
        .filter(|x| x.1.is_finite() && kernels[x.0].total_ns > 0.0)
        .collect();
    if scored.len() < 4 {
        return None;
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    if scored[0].1 < t.thresholds.gain_lead_ratio * scored[1].1 {
        return None;
    }
    let answer = scored[0].0;
    // Distractors: the other kernels that take the most time (the plausible candidates).
    let mut by_time: Vec<usize> = scored.iter().map(|x| x.0).filter(|&i| i != answer).collect();
    by_time.sort_by(|&a, &b| kernels[b].total_ns.total_cmp(&kernels[a].total_ns));
    let mut basis = Vec::new();
    for (i, _, b) in &scored {
        if *i == answer || by_time[..3].contains(i) {
            basis.push(Basis {
                metric: "gpu__time_duration.sum (all launches)".into(),
                value: kernels[*i].total_ns,
                raw: format!("{} ns", kernels[*i].total_ns),
                kernel: kernels[*i].label.clone(),
            });
            basis.extend(b.iter().cloned());
        }
    }
    Some(Draft {
        kind: QuestionKind::MostGain,
        question: t.most_gain.stem.clone(),
        answer_key: kernels[answer].label.clone(),
        correct: kernels[answer].label.clone(),
        distractors: by_time[..3].iter().map(|&i| kernels[i].label.clone()).collect(),
        basis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_every_option_renders() {
        let t = table();
        for k in [&t.bound_unit, &t.occupancy_limiter, &t.sector_waste, &t.grid_fill, &t.primary_fix] {
            assert!(k.stem.contains("{kernel}"));
            assert!(k.options.len() >= 4, "{}", k.stem);
            for key in k.options.keys() {
                assert!(!t.option(k, key).is_empty());
            }
        }
        for key in ["dram", "l2", "l1", "sm", "duration", "limit_registers", "waves", "stall_prefix"] {
            assert!(!t.names(key).is_empty());
        }
        assert!(!system_prompt().is_empty());
        let text = system_prompt_text_answers();
        assert!(text.ends_with("Reply with the text of the correct option.") && !text.contains("letter"), "{text}");
        assert!(text.starts_with("You answer multiple-choice questions"), "{text}");
    }
}
