//! The batch table as plain data: one [`GroupEntry`] per group of identical launches across the
//! batch's files, with exact totals ([`ExactSum`]) and representatives, and the settings a report was
//! made with ([`ReportSettings`], with the typed [`ProseMode`]). The batch stage (`crate::batch`)
//! fills the table and re-reads representatives; the explain report, `keet merge` and the renderers
//! read it.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;

/// An exactly rounded floating-point sum (Shewchuk's algorithm, as Python's `math.fsum`): the
/// result does not depend on the order of the terms, so a sum over shards merged later equals the
/// sum over the whole batch, bit for bit. Serialised as its canonical partials (largest first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExactSum {
    /// Non-overlapping partial sums, increasing magnitude; their exact sum is the total.
    partials: Vec<f64>,
}

impl ExactSum {
    /// Adds `x` exactly. Non-finite terms count as 0 (a duration that is not a number is no time).
    pub fn add(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        let mut x = x;
        let mut i = 0;
        for j in 0..self.partials.len() {
            let mut y = self.partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        self.partials.truncate(i);
        self.partials.push(x);
    }

    /// Adds every term of `other` (exactly: the result is the sum of both).
    pub fn merge(&mut self, other: &ExactSum) {
        for &p in &other.partials {
            self.add(p);
        }
    }

    /// The correctly rounded total.
    pub fn value(&self) -> f64 {
        let p = &self.partials;
        let mut n = p.len();
        if n == 0 {
            return 0.0;
        }
        n -= 1;
        let mut hi = p[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = p[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        // Round half to even across the partials left below.
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        hi
    }

    /// The canonical partials of the exact sum: the rounded total, then the rounded remainder, ...
    /// (unique for a given exact value, whatever order the terms came in).
    pub fn canonical(&self) -> Vec<f64> {
        let mut rest = self.clone();
        let mut out = Vec::new();
        while !rest.partials.iter().all(|p| *p == 0.0) && out.len() < 64 {
            let v = rest.value();
            out.push(v);
            rest.add(-v);
        }
        out
    }
}

impl Serialize for ExactSum {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.canonical().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ExactSum {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let terms = Vec::<f64>::deserialize(d)?;
        let mut s = ExactSum::default();
        for t in terms {
            s.add(t);
        }
        Ok(s)
    }
}

/// A launch in the table: the file (index into [`BatchTable::files`]) and its position there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LaunchRef {
    pub file: u32,
    /// Position of the launch in its file (launch order).
    pub index: u32,
    /// ncu's launch id.
    pub id: u64,
    /// `gpu__time_duration.sum` in ns (0 when absent); -1 before any launch beat the first.
    pub duration_ns: f64,
}

/// The launch ids a group has in one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub file: u32,
    pub ids: Vec<u64>,
}

/// One group of identical launches (same name and launch shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupEntry {
    pub name: String,
    pub block_size: Option<[u64; 3]>,
    pub grid_size: Option<[u64; 3]>,
    pub launches: usize,
    /// Exact total duration, as canonical partials (the first is the rounded total).
    pub total_duration_ns: ExactSum,
    /// Where the group was first seen: `[file, launch index]` (ties in time keep this order).
    pub first_seen: [u32; 2],
    /// The representative: the longest launch (the first of equally long ones).
    pub rep: LaunchRef,
    /// `(file, launch id)` of every launch, in file order (written as [`Run`]s: ids per file).
    #[serde(rename = "runs", serialize_with = "ser_runs", deserialize_with = "de_runs")]
    pub launch_refs: Vec<(u32, u64)>,
    /// When the report explained this group: the cache key of the representative's analysis
    /// (everything its findings depend on, the source lines included). `keet merge` takes a
    /// shard's findings only when the whole batch gives the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis_key: Option<String>,
    /// The representative's kernel family, primary finding and its estimate (% of the kernel's
    /// time): what the whole-profile view is computed from.
    #[serde(default = "other_family")]
    pub family: crate::rules::Family,
    #[serde(default)]
    pub primary: Option<String>,
    #[serde(default)]
    pub primary_gain_pct: Option<f64>,
}

fn other_family() -> crate::rules::Family {
    crate::rules::Family::Other
}

fn ser_runs<S: serde::Serializer>(refs: &[(u32, u64)], s: S) -> Result<S::Ok, S::Error> {
    let mut runs: Vec<Run> = Vec::new();
    for &(file, id) in refs {
        match runs.last_mut() {
            Some(r) if r.file == file => r.ids.push(id),
            _ => runs.push(Run { file, ids: vec![id] }),
        }
    }
    runs.serialize(s)
}

fn de_runs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(u32, u64)>, D::Error> {
    let runs = Vec::<Run>::deserialize(d)?;
    Ok(runs.into_iter().flat_map(|r| r.ids.into_iter().map(move |id| (r.file, id))).collect())
}

impl GroupEntry {
    pub fn key(&self) -> GroupKey {
        (self.name.clone(), self.block_size, self.grid_size)
    }
}

/// What makes launches identical.
pub type GroupKey = (String, Option<[u64; 3]>, Option<[u64; 3]>);

/// Everything the cross-file ranking needs, without any raw metrics (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchTable {
    /// The profiles read, in the order they were read (sorted).
    pub files: Vec<PathBuf>,
    /// Indices (into `files`) of `--page source` exports, re-read to attach their source views.
    pub source_pages: Vec<u32>,
    /// In first-seen order.
    pub groups: Vec<GroupEntry>,
    /// Group key to index into `groups` (rebuilt by the batch stage, not serialised).
    #[serde(skip)]
    pub(crate) index: HashMap<GroupKey, usize>,
}

/// The settings a report was made with: everything besides the inputs that decides which
/// kernels are explained and how (the explain stage's options hold them as they are recorded). Shard reports merge only when these agree (except `shard`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportSettings {
    pub coverage_pct: f64,
    pub top: usize,
    pub max_findings: usize,
    pub no_llm: bool,
    pub repair_attempts: usize,
    /// `--source` files.
    pub source_files: Vec<PathBuf>,
    /// SHA-256 over the prompt templates.
    pub prompt_templates_sha256: String,
    /// `[K, N]`: this report covers the K-th of N shares of the input files (`--shard K/N`).
    pub shard: Option<[usize; 2]>,
    /// Profile files found in the inputs, before sharding.
    pub input_files: usize,
    /// How model prose was written (`--prose`).
    #[serde(default)]
    pub prose: ProseMode,
    /// Whether the kernels' code was looked for and an edit asked for (`--no-edit` turns it off).
    #[serde(default = "default_edit")]
    pub edit: bool,
}

fn default_edit() -> bool {
    true
}

/// `keet explain`'s defaults; the prompt hash and the count of input files are filled in by the run.
impl Default for ReportSettings {
    fn default() -> Self {
        ReportSettings {
            coverage_pct: 95.0,
            top: 10,
            max_findings: 1,
            no_llm: false,
            repair_attempts: 1,
            source_files: vec![],
            prompt_templates_sha256: String::new(),
            shard: None,
            input_files: 0,
            prose: ProseMode::default(),
            edit: default_edit(),
        }
    }
}

/// How the model writes the sentences of a finding (`--prose`). All three go through the same
/// validator and prose gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProseMode {
    /// Free sentences under the grounded grammar: numbers only from the launch's facts, GPU terms
    /// from the glossary and the kernel's identifiers, a paragraph explanation and up to three
    /// suggestions. The default, for a model that can write (the default Qwen2.5-Coder-1.5B).
    #[default]
    Free,
    /// A worked example in the prompt, and shorter digit-free sentences that must start with the
    /// opening words of the expert text for the category: for a tiny model (SmolLM2-135M).
    Guided,
    /// The claim as in `guided`; the explanation and suggestions chosen among expert-written causes
    /// (the category's explanation, the launch's own top stall reasons) and fixes, all supported by
    /// the facts.
    Choose,
}

impl ProseMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ProseMode::Free => "free",
            ProseMode::Guided => "guided",
            ProseMode::Choose => "choose",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sum_is_order_independent() {
        let terms = [1e16, 1.0, -1e16, 0.1, 0.2, 0.3, 3.52e3, 1e-3, 7.25, 123456.789];
        let mut a = ExactSum::default();
        terms.iter().for_each(|t| a.add(*t));
        let mut b = ExactSum::default();
        terms.iter().rev().for_each(|t| b.add(*t));
        assert_eq!(a.value().to_bits(), b.value().to_bits());
        assert_eq!(a.canonical(), b.canonical());
        // Naive summation loses the 1.0 next to 1e16; the exact sum keeps it.
        let naive: f64 = terms.iter().sum();
        assert_ne!(naive, a.value());
        assert!((a.value() - 126985.64).abs() < 1e-6, "{}", a.value());
        // Merging two halves equals adding all.
        let mut h1 = ExactSum::default();
        let mut h2 = ExactSum::default();
        for (i, t) in terms.iter().enumerate() {
            if i % 2 == 0 {
                h1.add(*t)
            } else {
                h2.add(*t)
            }
        }
        h1.merge(&h2);
        assert_eq!(h1.canonical(), a.canonical());
        // Round trip through JSON.
        let json = serde_json::to_string(&a).unwrap();
        let back: ExactSum = serde_json::from_str(&json).unwrap();
        assert_eq!(back.canonical(), a.canonical());
        assert_eq!(ExactSum::default().value(), 0.0);
        let mut nan = ExactSum::default();
        nan.add(f64::NAN);
        nan.add(2.5);
        assert_eq!(nan.value(), 2.5);
    }
}
