//! Sets of profiles: the same kernel (or successive versions of it) profiled while one thing
//! changes (the GPU, the launch shape, template parameters, the problem size, the version, or a
//! value read from the file path with `--vary KEY=REGEX`), and what the set shows that no single
//! profile does.
//!
//! Flow: [`members::read`] reduces every file to its members (one per kernel and launch shape,
//! repeated launches at their median) → [`group::sets`] finds which members form a set →
//! [`describe::describe`] says what varies, each member's value and order → [`findings`] computes
//! the fastest member and why, regime and primary-problem changes along the set, how time scales
//! with the work, what each version step changed, and which pairs differ in one thing (only those
//! estimate an effect; a pair differing in two things is listed as not used; in a set whose
//! versions repeat across files, [`effect`] gives the version's effect at each launch from the
//! pairs that differ in the version alone). Every number comes
//! from the members' metrics, with its denominator. Thresholds: `expert/sets.toml`.

pub mod describe;
pub mod effect;
pub mod factors;
pub mod findings;
pub mod group;
pub mod members;
pub mod names;

use crate::facts::FactKey;
use crate::report::writer::Writer;
pub use group::SetKind;
pub use members::{Broken, Member};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

const TABLE: &str = include_str!("../../expert/sets.toml");

/// The thresholds of `expert/sets.toml`.
#[derive(Debug, Clone, Deserialize)]
pub struct Thresholds {
    pub same_threads_pct: f64,
    pub same_work_pct: f64,
    pub time_noise_pct: f64,
    pub all_pairs_up_to: usize,
    pub version_mark: String,
    pub min_pct_points: f64,
    pub compared_facts: Vec<FactKey>,
}

#[derive(Deserialize)]
struct Table {
    thresholds: Thresholds,
}

/// The thresholds, read once from `expert/sets.toml` (embedded; checked by the tests).
pub fn thresholds() -> &'static Thresholds {
    static T: std::sync::OnceLock<Thresholds> = std::sync::OnceLock::new();
    T.get_or_init(|| toml::from_str::<Table>(TABLE).expect("expert/sets.toml is valid (checked by tests)").thresholds)
}

/// The version-mark pattern of `expert/sets.toml`.
pub fn version_mark() -> &'static regex::Regex {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    R.get_or_init(|| regex::Regex::new(&thresholds().version_mark).expect("version_mark is a valid pattern (checked by tests)"))
}

/// How to find sets.
#[derive(Debug, Clone, Default)]
pub struct SetOptions {
    /// `--vary KEY=REGEX`: a value read from each file's path (the first capture group, else the match).
    pub vary: Vec<(String, regex::Regex)>,
    /// `--set-key REGEX`: kernels whose names give the same capture are one kernel.
    pub key: Option<regex::Regex>,
    /// Threads reading files (0: all cores).
    pub jobs: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SetsError {
    #[error("--vary {0:?}: expected KEY=REGEX")]
    VaryForm(String),
    #[error("--vary {key}: {source}")]
    VaryPattern { key: String, source: regex::Error },
    #[error("--set-key: {0}")]
    KeyPattern(#[source] regex::Error),
}

/// Parses `--vary KEY=REGEX` arguments.
pub fn parse_vary(args: &[String]) -> Result<Vec<(String, regex::Regex)>, SetsError> {
    args.iter()
        .map(|a| {
            let (key, pattern) =
                a.split_once('=').filter(|(k, p)| !k.trim().is_empty() && !p.is_empty()).ok_or_else(|| SetsError::VaryForm(a.clone()))?;
            let re = regex::Regex::new(pattern).map_err(|source| SetsError::VaryPattern { key: key.trim().to_string(), source })?;
            Ok((key.trim().to_string(), re))
        })
        .collect()
}

/// Parses `--set-key REGEX`.
pub fn parse_key(pattern: Option<&str>) -> Result<Option<regex::Regex>, SetsError> {
    pattern.map(|p| regex::Regex::new(p).map_err(SetsError::KeyPattern)).transpose()
}

/// The member a set names (the fastest).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberRef {
    pub file: PathBuf,
    pub kernel: String,
    pub value: String,
    pub duration_ns: Option<f64>,
    /// "time", or "time per thread" when the problem size varies.
    pub by: String,
}

/// Two members compared: what differs between them and whether the pair estimates an effect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    /// Positions (1-based) in the set's member order.
    pub a: usize,
    pub b: usize,
    pub differs: Vec<String>,
    /// Differs in exactly one thing: its time ratio is an effect of that thing.
    pub used: bool,
    /// b's time over a's.
    pub time_ratio: Option<f64>,
}

/// Where something changes along the set's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// "regime" or "primary problem".
    pub what: String,
    pub from_value: String,
    pub at_value: String,
    pub before: String,
    pub after: String,
}

/// One line of what the set shows, with its numbers and denominator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetFinding {
    /// "fastest", "regime", "change", "scaling", "step" (a version series' steps), "effect" (the
    /// version's effect in a version x file set), "left", "pairs", "metrics".
    pub kind: String,
    pub text: String,
}

/// One set: its members in order, what varies, and what it shows.
#[derive(Debug, Clone, Serialize)]
pub struct KernelSet {
    pub kind: SetKind,
    /// The kernel's base name (or the series' stem).
    pub name: String,
    /// What varies between members: gpu, launch shape, template parameters, problem size,
    /// version, run, or a `--vary` key.
    pub varies: Vec<String>,
    /// How the members are ordered (launch order, version marks, the varying value, time).
    pub order: String,
    pub members: Vec<Member>,
    pub fastest: Option<MemberRef>,
    /// The set in two or three sentences: the expert text, or the model's where a model run wrote
    /// one that passed its checks ([`summary_by`](Self::summary_by) says which).
    pub summary: String,
    /// Who wrote the summary.
    pub summary_by: Writer,
    /// Why the model's summary was refused, when the expert summary stands (shown with `--verbose`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub summary_refused: Vec<String>,
    pub findings: Vec<SetFinding>,
    pub changes: Vec<Change>,
    pub pairs: Vec<Pair>,
    /// Facts compared (present in every member) and those left out (missing in some member).
    pub compared_facts: Vec<FactKey>,
    pub left_out_facts: Vec<FactKey>,
}

/// The sets among `files`, largest total time first, with the files that could not be read
/// (a broken member is reported and its set goes on without it).
pub fn find(files: &[PathBuf], opts: &SetOptions) -> (Vec<KernelSet>, Vec<Broken>) {
    let (all, broken) = members::read(files, opts.jobs);
    (sets_of(all, opts), broken)
}

/// Fills each member's `--vary` values from its file's path.
fn read_path_values(all: &mut [Member], vary: &[(String, regex::Regex)]) {
    if vary.is_empty() {
        return;
    }
    for m in all {
        let path = m.file.to_string_lossy().into_owned();
        for (key, re) in vary {
            if let Some(c) = re.captures(&path) {
                let v = c.get(1).or_else(|| c.get(0)).map(|x| x.as_str().to_string()).unwrap_or_default();
                m.path_values.insert(key.clone(), v);
            }
        }
    }
}

/// The sets among already-read members (their `--vary` values are read here). A member goes
/// into its sets by move (cloned only when it is in more than one), so a batch of thousands of
/// files holds each member once.
pub fn sets_of(mut all: Vec<Member>, opts: &SetOptions) -> Vec<KernelSet> {
    read_path_values(&mut all, &opts.vary);
    let keys: Vec<String> = opts.vary.iter().map(|(k, _)| k.clone()).collect();
    let groups = group::sets(&all, opts.key.as_ref());
    // How many sets each member is still to go into: the last takes it.
    let mut uses = vec![0usize; all.len()];
    for (_, idx) in &groups {
        for &i in idx {
            uses[i] += 1;
        }
    }
    let mut slots: Vec<Option<Member>> = all.into_iter().map(Some).collect();
    let mut take = |i: usize| -> Member {
        uses[i] -= 1;
        if uses[i] == 0 {
            slots[i].take().expect("a member is taken by its last set only")
        } else {
            slots[i].clone().expect("a member still to be used is there")
        }
    };
    let mut out: Vec<KernelSet> =
        groups.into_iter().map(|(kind, idx)| describe::describe(kind, idx.iter().map(|&i| take(i)).collect(), &keys)).collect();
    let total = |s: &KernelSet| s.members.iter().filter_map(|m| m.duration_ns).sum::<f64>();
    out.sort_by(|a, b| total(b).total_cmp(&total(a)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expert_table_reads_and_patterns_compile() {
        let t = thresholds();
        assert!(t.same_threads_pct > 0.0 && t.all_pairs_up_to >= 2);
        assert!(version_mark().is_match("gemm_v7_alter") && !version_mark().is_match("report2"));
        assert!(!t.compared_facts.is_empty());
    }

    #[test]
    fn a_member_of_two_sets_is_in_both_and_members_are_not_copied_otherwise() {
        use group::tests::member;
        // gemm_v1 of a.csv is in the kernel set (with b.csv's) and in a.csv's version series.
        let all = vec![
            member("a.csv", "gemm_v1", 256, 10, 50.0),
            member("a.csv", "gemm_v2", 256, 10, 50.0),
            member("b.csv", "gemm_v1", 256, 10, 100.0),
        ];
        let groups = group::sets(&all, None);
        let sets = sets_of(all, &SetOptions::default());
        assert_eq!(sets.len(), groups.len());
        let count = |file: &str, kernel: &str| {
            sets.iter().flat_map(|s| &s.members).filter(|m| &*m.file == std::path::Path::new(file) && &*m.kernel == kernel).count()
        };
        assert_eq!(count("a.csv", "gemm_v1"), 2, "{sets:#?}");
        assert_eq!((count("a.csv", "gemm_v2"), count("b.csv", "gemm_v1")), (1, 1));
    }

    #[test]
    fn names_and_fact_forms_are_shared() {
        use group::tests::member;
        let mut ms = [member("a.csv", "k<1>", 32, 1, 1.0), member("b.csv", "k<1>", 32, 1, 1.0)];
        let mut names = members::Interner::default();
        for m in ms.iter_mut() {
            names.share(std::slice::from_mut(m));
        }
        assert!(std::sync::Arc::ptr_eq(&ms[0].kernel, &ms[1].kernel));
        assert!(std::ptr::eq(members::FactForm::of("L2 hit rate", "%"), members::FactForm::of("L2 hit rate", "%")));
        assert!(!std::ptr::eq(members::FactForm::of("L2 hit rate", "%"), members::FactForm::of("L2 hit rate", "byte")));
    }

    #[test]
    fn vary_arguments() {
        let v = parse_vary(&["N=N(\\d+)".into()]).unwrap();
        assert_eq!(v[0].0, "N");
        assert!(matches!(parse_vary(&["N".into()]), Err(SetsError::VaryForm(_))));
        assert!(matches!(parse_vary(&["N=(".into()]), Err(SetsError::VaryPattern { .. })));
    }
}
