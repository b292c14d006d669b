//! Diagnosis: each launch's regime ([`regime`]), its causes ranked by the share of elapsed time they
//! can explain, and estimates that physics allows. Every threshold is in [`thresholds`], every rule a
//! function in [`causes`] returning a typed candidate, every formula and bound in [`estimate`]
//! (written up in `docs/estimates.md`), every word in `expert/findings.toml` ([`text`]), and what a
//! kernel is (library, generated, warp-specialised) in [`kind`].
//!
//! Findings are structured data (category, severity, the fact keys they rest on, an upper-bound
//! estimate and what bounds it); later stages validate LLM findings against them. Candidates are
//! bounded, graded and ranked first; words are rendered last.
//! Ordering: first the causes that can explain the regime (for a memory-bound launch, those that
//! reduce memory traffic) with an estimate of at least [`thresholds::SEVERITY_MEDIUM_PCT`], then the
//! regime itself (memory-, compute-, latency- or launch-bound), then the rest, each group by
//! estimate; a launch of a few microseconds leads with launch-bound. The first finding is the
//! launch's primary problem.

pub mod causes;
pub mod estimate;
pub mod kind;
pub mod profile_view;
pub mod regime;
pub mod text;

use crate::facts::{BoundKind, Fact, FactKey, Facts};
use crate::profile::{Launch, NcuRuleResult};
pub use kind::{Family, KernelKind};
pub use regime::derive_facts;
use serde::Serialize;

/// Every number the rules compare against, in one place. Each says where it comes from.
pub mod thresholds {
    /// A unit at or above this % of peak is "busy": Nsight Compute's speed-of-light rule
    /// (SOLBottleneck) calls throughput under 60% of peak a latency problem.
    pub const SOL_BUSY_PCT: f64 = 60.0;
    /// Below this top throughput a launch whose grid has fewer blocks than SMs is "grid too small"
    /// (same 60% as above; LaunchStats' small-grid rule compares blocks to SMs).
    pub const SOL_LOW_PCT: f64 = 60.0;
    /// Every unit under this % of peak: no unit is near its limit, so latency or launch overhead
    /// sets the time (half the busy threshold; keet eval's `idle_all_below_pct` is the same 30%).
    pub const SOL_IDLE_PCT: f64 = 30.0;
    /// An access pattern that wastes under this share of what it moves (bytes of each sector, or
    /// shared wavefronts to bank conflicts) uses its sectors and banks well (keet's choice: within
    /// a tenth of ideal; keet eval's `waste_none_below` is the same 0.10).
    pub const ACCESS_WELL_USED_WASTE: f64 = 0.10;
    /// At or above this % of peak a unit is saturated (ncu's SOL rule: "above 80%").
    pub const SOL_SATURATED_PCT: f64 = 80.0;
    /// Global loads/stores using fewer bytes per 32-byte sector than this are uncoalesced
    /// (keet's choice: half of every sector fetched is wasted).
    pub const COALESCED_MIN_BYTES_PER_SECTOR: f64 = 16.0;
    /// Share of global sectors beyond the ideal pattern that counts as uncoalesced
    /// (keet's choice, the quantity is ncu's UncoalescedGlobalAccess rule's "excessive sectors").
    pub const EXCESSIVE_SECTORS_PCT: f64 = 20.0;
    /// Sectors per request above which accesses are scattered whatever their width: 32 threads x 16 bytes
    /// (the widest aligned access, float4) need 16 sectors; 4-byte words need 4.
    pub const MAX_SECTORS_PER_REQUEST: f64 = 16.0;
    /// Sectors a warp's request needs when its 32 threads read consecutive 4-byte words (CUDA
    /// programming guide, coalescing): the ideal when only sectors per request are known.
    pub const IDEAL_SECTORS_PER_REQUEST: f64 = 4.0;
    /// Local memory's share of the memory traffic from which it is reported without spill counts
    /// (keet's choice, same as the excessive-sectors threshold).
    pub const LOCAL_TRAFFIC_PCT: f64 = 20.0;
    /// Share of FP32/FP16 FLOPs done by FMA from which compute-bound work looks like a matrix multiply
    /// (keet's choice: a GEMM's inner loop is all FMA, a reduction's all adds).
    pub const MATRIX_FMA_SHARE_PCT: f64 = 50.0;
    /// Share of the waiting warps' stall cycles on memory and drain from which atomics are contended
    /// when the L2 atomic unit's busiest slice was not collected (keet's choice: most of the waiting).
    pub const ATOMIC_WAIT_SHARE_PCT: f64 = 50.0;
    /// Sectors per atomic request at or under which the warp's threads hit one address (one sector).
    pub const CONTENDED_SECTORS_PER_REQUEST: f64 = 1.5;
    /// Atomic requests as a share of warp instructions from which atomics are a visible part of the work.
    pub const ATOMIC_INST_SHARE_PCT: f64 = 1.0;
    /// Share of shared-memory wavefronts caused by bank conflicts that is worth fixing
    /// (keet's choice; the quantity is ncu's shared-memory "excessive wavefronts").
    pub const BANK_CONFLICT_PCT: f64 = 20.0;
    /// Average active threads per warp instruction under which divergence matters (of 32; keet's choice:
    /// a quarter of the lanes idle).
    pub const DIVERGENCE_ACTIVE_THREADS: f64 = 24.0;
    /// Share of uniform branch targets under which branches diverge enough to matter (keet's choice;
    /// the quantity is ncu's "Branch Efficiency"-style `smsp__sass_average_branch_targets_threads_uniform.pct`).
    pub const BRANCH_UNIFORM_PCT: f64 = 95.0;
    /// Theoretical occupancy under which the occupancy limiter is reported (keet's choice; ncu's
    /// occupancy rules report any limit below 100% but a kernel rarely gains above 50%).
    pub const LOW_THEORETICAL_OCCUPANCY_PCT: f64 = 50.0;
    /// Gap between theoretical and achieved occupancy worth reporting (ncu's AchievedOccupancy rule
    /// compares the two; keet's threshold).
    pub const OCCUPANCY_GAP_PCT: f64 = 20.0;
    /// Warp size: a block size that is not a multiple of it wastes lanes (CUDA programming guide).
    pub const WARP_SIZE: f64 = 32.0;
    /// Waves under which a grid is too small even with a block on every SM: at least half of every
    /// SM's block slots stay empty for the whole launch, so fewer warps hide latency than the kernel's
    /// own limits allow (keet's choice; ncu's LaunchStats reports waves, its small-grid rule compares
    /// blocks to SMs only).
    pub const GRID_FEW_WAVES: f64 = 0.5;
    /// At or above this % of peak a unit is at its roofline: latency hiding (occupancy, a balanced last
    /// wave) can gain at most the few percent left, no finding worth more than info (keet's choice).
    pub const ROOFLINE_PCT: f64 = 90.0;
    /// A pipe within this many points of the SM throughput is what the SM is busy with (ncu's SM
    /// throughput is the highest of its sub-metrics, the pipes among them; keet's tolerance).
    pub const PIPE_IS_SM_PCT: f64 = 2.0;
    /// An FP64 pipe at least this busy that equals the SM throughput is what the launch waits on
    /// (keet's choice: under a fifth busy, the grid or latency explains more).
    pub const FP64_SETS_SM_MIN_PCT: f64 = 20.0;
    /// FP32:FP64 throughput ratio from which FP64 work is expensive enough that a busy FP64 pipe sets
    /// the time (GeForce and workstation parts run FP64 at 1/32 or 1/64; data-centre parts at 1/2).
    pub const FP64_SLOW_RATIO: f64 = 8.0;
    /// Issue slots busy from which a launch is issue-bound: lanes lost to divergence then cost issue
    /// time one for one (same 60% as SOL busy).
    pub const ISSUE_BOUND_PCT: f64 = 60.0;
    /// Idle share of the last wave worth reporting as a tail effect (keet's choice; ncu's TailEffect
    /// rule estimates the same quantity).
    pub const TAIL_IDLE_PCT: f64 = 20.0;
    /// Tensor-pipe use under which a compute-bound, FLOP-heavy kernel "does not use tensor cores".
    pub const TENSOR_UNUSED_PCT: f64 = 5.0;
    /// FP64 pipe use at which the FP64 units are the bottleneck (keet's choice, same as SOL busy).
    pub const FP64_BUSY_PCT: f64 = 60.0;
    /// L2 atomic unit busy share at which atomics contend (keet's choice, same as SOL busy).
    pub const ATOMIC_BUSY_PCT: f64 = 60.0;
    /// Estimated speedup at or above which a finding is high severity; medium from the second value.
    pub const SEVERITY_HIGH_PCT: f64 = 30.0;
    pub const SEVERITY_MEDIUM_PCT: f64 = 10.0;
    /// ... and the estimated gain as a share of the whole profile's time needed for high / medium
    /// (keet's choice: a 50% saving on a launch that takes 0.1% of the profile is not high).
    pub const HIGH_GAIN_SHARE_PCT: f64 = 5.0;
    pub const MEDIUM_GAIN_SHARE_PCT: f64 = 1.0;
    /// Estimates under this are no finding worth acting on (info).
    pub const MIN_ESTIMATE_PCT: f64 = 1.0;
    /// A launch shorter than this that does not fill one wave is launch-bound (keet's choice: launch
    /// overhead and ramp-up are microseconds; the issue of tiny ATen and normalisation launches).
    pub const TINY_LAUNCH_NS: f64 = 5_000.0;
    /// The fixed cost of a launch that no change to its code removes: the shortest launches Nsight
    /// Compute measures (gpu__time_duration of near-empty kernels) are 1.7-2.0 us on the RTX 4090 and
    /// H200 profiles of the corpus; 1.5 us keeps estimates on the safe side.
    pub const LAUNCH_FLOOR_NS: f64 = 1_500.0;
    /// Time saved per percent of divergent branch targets, when active lanes were not collected
    /// (calibrated: reduceNeighbored -> reduceNeighboredLess on an RTX 4090, 9.7% divergent targets,
    /// 28.6% saved: about 3x; see docs/estimates.md).
    pub const DIVERGENT_BRANCH_COST: f64 = 3.0;
    /// Points by which an Nsight Compute estimate must exceed keet's bound to be called out.
    pub const NCU_DISAGREE_MARGIN_PCT: f64 = 5.0;

    /// The table above as data, for documentation and `keet inspect --thresholds`.
    pub fn table() -> Vec<(&'static str, f64, &'static str)> {
        vec![
            ("SOL_BUSY_PCT", SOL_BUSY_PCT, "ncu SOLBottleneck rule: under 60% of peak is a latency problem"),
            ("SOL_LOW_PCT", SOL_LOW_PCT, "small grid: fewer blocks than SMs and under this throughput"),
            ("SOL_SATURATED_PCT", SOL_SATURATED_PCT, "ncu SOL rule: above 80% a unit is saturated"),
            ("COALESCED_MIN_BYTES_PER_SECTOR", COALESCED_MIN_BYTES_PER_SECTOR, "keet: half of each 32-byte sector wasted"),
            ("EXCESSIVE_SECTORS_PCT", EXCESSIVE_SECTORS_PCT, "keet, on ncu's excessive-sectors quantity"),
            ("MAX_SECTORS_PER_REQUEST", MAX_SECTORS_PER_REQUEST, "16-byte accesses need 16; more is scattered"),
            ("IDEAL_SECTORS_PER_REQUEST", IDEAL_SECTORS_PER_REQUEST, "a warp of 4-byte words needs 4 sectors"),
            ("LOCAL_TRAFFIC_PCT", LOCAL_TRAFFIC_PCT, "keet: local memory's share of traffic worth reporting"),
            ("MATRIX_FMA_SHARE_PCT", MATRIX_FMA_SHARE_PCT, "keet: FMA share of FLOPs for matrix-like work"),
            ("ATOMIC_WAIT_SHARE_PCT", ATOMIC_WAIT_SHARE_PCT, "keet: memory + drain stall share for contended atomics"),
            ("CONTENDED_SECTORS_PER_REQUEST", CONTENDED_SECTORS_PER_REQUEST, "one sector per atomic request: one address"),
            ("ATOMIC_INST_SHARE_PCT", ATOMIC_INST_SHARE_PCT, "keet: atomics' share of warp instructions"),
            ("BANK_CONFLICT_PCT", BANK_CONFLICT_PCT, "keet, on ncu's excessive shared wavefronts"),
            ("DIVERGENCE_ACTIVE_THREADS", DIVERGENCE_ACTIVE_THREADS, "keet: a quarter of the lanes idle"),
            ("BRANCH_UNIFORM_PCT", BRANCH_UNIFORM_PCT, "keet, on ncu's uniform-branch-target share"),
            ("LOW_THEORETICAL_OCCUPANCY_PCT", LOW_THEORETICAL_OCCUPANCY_PCT, "keet"),
            ("OCCUPANCY_GAP_PCT", OCCUPANCY_GAP_PCT, "keet, on ncu's achieved-vs-theoretical comparison"),
            ("WARP_SIZE", WARP_SIZE, "CUDA programming guide"),
            ("GRID_FEW_WAVES", GRID_FEW_WAVES, "keet: under half a wave, half of every SM's block slots are empty"),
            ("ROOFLINE_PCT", ROOFLINE_PCT, "keet: a unit this busy leaves latency hiding nothing to gain"),
            ("PIPE_IS_SM_PCT", PIPE_IS_SM_PCT, "keet: a pipe this close to SM throughput is what the SM does"),
            ("FP64_SETS_SM_MIN_PCT", FP64_SETS_SM_MIN_PCT, "keet: an FP64 pipe this busy and equal to SM is the limit"),
            ("FP64_SLOW_RATIO", FP64_SLOW_RATIO, "GeForce/workstation FP64 at 1/32-1/64 of FP32"),
            ("ISSUE_BOUND_PCT", ISSUE_BOUND_PCT, "keet (= SOL busy): issue-bound launches pay for idle lanes"),
            ("TAIL_IDLE_PCT", TAIL_IDLE_PCT, "keet, on ncu's tail-effect quantity"),
            ("TENSOR_UNUSED_PCT", TENSOR_UNUSED_PCT, "keet"),
            ("FP64_BUSY_PCT", FP64_BUSY_PCT, "keet (= SOL busy)"),
            ("ATOMIC_BUSY_PCT", ATOMIC_BUSY_PCT, "keet (= SOL busy)"),
            ("SEVERITY_HIGH_PCT", SEVERITY_HIGH_PCT, "keet: estimated speedup for high severity"),
            ("SEVERITY_MEDIUM_PCT", SEVERITY_MEDIUM_PCT, "keet: estimated speedup for medium severity"),
            ("HIGH_GAIN_SHARE_PCT", HIGH_GAIN_SHARE_PCT, "keet: estimated gain, % of the profile, for high severity"),
            ("MEDIUM_GAIN_SHARE_PCT", MEDIUM_GAIN_SHARE_PCT, "keet: estimated gain, % of the profile, for medium severity"),
            ("MIN_ESTIMATE_PCT", MIN_ESTIMATE_PCT, "keet: smaller estimates are info"),
            ("TINY_LAUNCH_NS", TINY_LAUNCH_NS, "keet: under this and under a wave, launch-bound"),
            ("LAUNCH_FLOOR_NS", LAUNCH_FLOOR_NS, "shortest launches measured in the corpus (1.7-2.0 us)"),
            ("DIVERGENT_BRANCH_COST", DIVERGENT_BRANCH_COST, "calibrated on reduceNeighbored/Less (RTX 4090)"),
            ("NCU_DISAGREE_MARGIN_PCT", NCU_DISAGREE_MARGIN_PCT, "keet: margin before disagreeing with ncu"),
        ]
    }
}

use thresholds as t;

/// The closed list of problem categories (shared by rules, the LLM schema and the validator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    ComputeBound,
    MemoryBound,
    LatencyBound,
    GridTooSmall,
    BlockSize,
    TailEffect,
    OccupancyRegisters,
    OccupancySharedMemory,
    OccupancyOther,
    MemoryCoalescing,
    SharedBankConflicts,
    Divergence,
    RegisterSpilling,
    TensorCoreUnused,
    Fp64,
    AtomicsContention,
}

impl Category {
    pub const ALL: [Category; 16] = [
        Category::ComputeBound,
        Category::MemoryBound,
        Category::LatencyBound,
        Category::GridTooSmall,
        Category::BlockSize,
        Category::TailEffect,
        Category::OccupancyRegisters,
        Category::OccupancySharedMemory,
        Category::OccupancyOther,
        Category::MemoryCoalescing,
        Category::SharedBankConflicts,
        Category::Divergence,
        Category::RegisterSpilling,
        Category::TensorCoreUnused,
        Category::Fp64,
        Category::AtomicsContention,
    ];

    /// The kebab-case name used in JSON, schemas and labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::ComputeBound => "compute-bound",
            Category::MemoryBound => "memory-bound",
            Category::LatencyBound => "latency-bound",
            Category::GridTooSmall => "grid-too-small",
            Category::BlockSize => "block-size",
            Category::TailEffect => "tail-effect",
            Category::OccupancyRegisters => "occupancy-registers",
            Category::OccupancySharedMemory => "occupancy-shared-memory",
            Category::OccupancyOther => "occupancy-other",
            Category::MemoryCoalescing => "memory-coalescing",
            Category::SharedBankConflicts => "shared-bank-conflicts",
            Category::Divergence => "divergence",
            Category::RegisterSpilling => "register-spilling",
            Category::TensorCoreUnused => "tensor-core-unused",
            Category::Fp64 => "fp64",
            Category::AtomicsContention => "atomics-contention",
        }
    }

    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Speed-of-light classifications are context, not a specific problem.
    pub fn is_bound(self) -> bool {
        matches!(self, Category::ComputeBound | Category::MemoryBound | Category::LatencyBound)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    High,
    Medium,
    Low,
    Info,
}

/// One rule finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Which rule fired ("uncoalesced-global", ...).
    pub rule: &'static str,
    pub category: Category,
    pub severity: Severity,
    /// One sentence, numbers taken from the facts it cites.
    pub claim: String,
    /// Why it costs time on this GPU, in this kernel, with its numbers and the bound on the estimate.
    pub explanation: String,
    /// What to change, for who controls the code (the user's own kernel, a library, generated code).
    pub suggestion: String,
    /// Keys of the facts the finding rests on (see [`Facts::get`]).
    pub facts: Vec<FactKey>,
    /// Upper-bound estimate of the kernel-time reduction if fixed, percent (bounded by [`estimate::cap`]).
    pub estimated_speedup_pct: Option<f64>,
    /// What caps the estimate: the busiest unit the fix does not relieve, or the launch cost.
    pub bound: Option<estimate::Cap>,
}

/// A section a verdict needs that the profile lacks, and the ncu option that collects it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub what: &'static str,
    pub ncu_option: &'static str,
}

/// The launch as a whole: its regime in one line, what it is, what the profile lacks, and where keet
/// and Nsight Compute's own rules disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// "memory-bound", "compute-bound", "latency-bound", "grid-bound", "launch-bound", or "unknown".
    pub regime: &'static str,
    /// One line: the regime, its unit and the largest cause, with numbers.
    pub summary: String,
    pub kernel: KernelKind,
    pub missing: Vec<Missing>,
    /// Nsight Compute estimates that physics does not allow, each with keet's reasoning.
    pub ncu_disagreements: Vec<String>,
}

/// Rule findings for one launch, with Nsight Compute's own rule results kept beside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleReport {
    pub findings: Vec<Finding>,
    pub ncu_rules: Vec<NcuRuleResult>,
    pub diagnosis: Diagnosis,
}

impl RuleReport {
    /// The launch's primary problem: the first finding.
    pub fn primary(&self) -> Option<&Finding> {
        self.findings.first()
    }
}

/// Evaluates the rules for one launch. `time_share_pct` is the launch's share of the profile's time
/// (severity follows the estimate in time of the profile); 100 for a launch judged alone.
pub fn evaluate_launch(launch: &Launch, facts: &Facts, time_share_pct: f64) -> RuleReport {
    let kernel = kind::recognise(&launch.name, facts);
    let findings = evaluate_kind(facts, &kernel, time_share_pct);
    let diagnosis = diagnose(launch, facts, kernel, &findings);
    RuleReport { findings, ncu_rules: launch.ncu_rules.clone(), diagnosis }
}

fn v(f: &Option<Fact>) -> Option<f64> {
    f.as_ref().map(|f| f.value)
}

/// Formats a number the way reports show it (and the validator accepts): [`crate::format::number`].
pub use crate::format::number as fmt_num;

/// The rules for a user's kernel judged alone (no name, the whole profile).
pub fn evaluate(f: &Facts) -> Vec<Finding> {
    let kernel = KernelKind { origin: kind::Origin::User, library: None, family: kind::Family::Other, warp_specialized: false };
    evaluate_kind(f, &kernel, 100.0)
}

/// A launch's diagnosis in brief, for tables over many launches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Brief {
    pub family: Family,
    pub primary: Option<Category>,
    /// The primary finding's estimate, % of the launch's time.
    pub estimate_pct: Option<f64>,
}

/// The family and primary problem of one launch, without rendering any words.
pub fn brief(launch: &Launch) -> Brief {
    let facts = regime::derive_facts(launch);
    let kind = kind::recognise(&launch.name, &facts);
    let out = ranked(&facts, &kind, 100.0);
    let first = out.first().map(|x| &x.0);
    Brief { family: kind.family, primary: first.map(|x| x.category), estimate_pct: first.and_then(|x| x.estimated_speedup_pct) }
}

/// A candidate bounded by physics, as a finding without words yet.
fn bounded(c: &causes::Candidate, f: &Facts) -> Finding {
    let cap = estimate::cap(c.category, f);
    let est = if c.by_design { None } else { c.raw_estimate.map(|r| estimate::bounded(c.category, f, r)) };
    Finding {
        rule: c.rule,
        category: c.category,
        severity: if est.is_some() { Severity::Low } else { Severity::Info },
        claim: String::new(),
        explanation: String::new(),
        suggestion: String::new(),
        facts: c.facts.clone(),
        estimated_speedup_pct: est,
        bound: cap.filter(|_| est.is_some()),
    }
}

/// Every rule's candidate, bounded, graded and ranked (no words).
fn ranked(f: &Facts, kind: &KernelKind, time_share_pct: f64) -> Vec<(Finding, causes::Candidate)> {
    let ctx = causes::Ctx::new(f, kind);
    let out = causes::candidates(&ctx).into_iter().map(|c| (bounded(&c, f), c)).collect();
    order_and_grade(out, f, time_share_pct)
}

/// The words of one ranked finding, rendered from `expert/findings.toml` with the candidate's values,
/// the bounded estimate and what bounds it.
fn with_words(mut x: Finding, c: causes::Candidate, f: &Facts, kind: &KernelKind) -> Finding {
    let cap = estimate::cap(c.category, f);
    let mut vars = match c.vars {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    vars.insert("est".into(), x.estimated_speedup_pct.unwrap_or(0.0).into());
    vars.insert(
        "bound".into(),
        match &cap {
            Some(b) => serde_json::json!({"unit": b.unit, "pct": b.unit_pct, "cap": b.pct}),
            None => serde_json::json!({"unit": "none measured", "pct": 0.0, "cap": 100.0}),
        },
    );
    let w = text::render(c.rule, kind, c.variant, c.by_design, serde_json::Value::Object(vars));
    x.claim = w.claim;
    x.explanation = w.why;
    x.suggestion = w.fix;
    x
}

/// The rules with what the kernel is and its share of the profile's time: ranked, then put in words.
pub fn evaluate_kind(f: &Facts, kind: &KernelKind, time_share_pct: f64) -> Vec<Finding> {
    ranked(f, kind, time_share_pct).into_iter().map(|(x, c)| with_words(x, c, f, kind)).collect()
}

/// Orders findings (the causes that explain the regime, the regime, then the rest, each by estimate:
/// every estimate is the share of the launch's elapsed time the cause can explain, so they compare)
/// and sets severities from the bounded estimate in time of the profile.
fn order_and_grade<T>(mut out: Vec<(Finding, T)>, f: &Facts, time_share_pct: f64) -> Vec<(Finding, T)> {
    let regime = f.bound.as_ref().map(|b| b.kind);
    let is_regime = |x: &Finding| matches!(x.rule, "sol-memory" | "sol-compute" | "sol-latency" | "launch-bound");
    let busiest_unit = f.bound.as_ref().and_then(|b| b.busiest_unit);
    // Lost lanes set the time only of a launch that is issue-bound; elsewhere divergence is secondary.
    let issue_bound = v(&f.issue_slots_busy_pct).is_some_and(|i| i >= t::ISSUE_BOUND_PCT);
    // Atomics that serialise on one address form a queue more warps only lengthen: occupancy does not
    // explain such a launch's time.
    let serial_queue = out
        .iter()
        .any(|(x, _)| x.category == Category::AtomicsContention && x.estimated_speedup_pct.is_some_and(|e| e >= t::SEVERITY_MEDIUM_PCT));
    let occupancy = |c: Category| matches!(c, Category::OccupancyRegisters | Category::OccupancySharedMemory | Category::OccupancyOther);
    let explains_regime = |x: &Finding| {
        let big = x.estimated_speedup_pct.is_some_and(|e| e >= t::SEVERITY_MEDIUM_PCT);
        let secondary = (x.category == Category::Divergence && regime == Some(BoundKind::Compute) && !issue_bound)
            || (serial_queue && occupancy(x.category));
        big && !is_regime(x)
            && !secondary
            && match regime {
                // Throughput-bound: only a fix that relieves the busiest unit explains the time.
                Some(BoundKind::Memory | BoundKind::Compute) => busiest_unit.is_some_and(|u| estimate::relieves_unit_of(x.category, u, f)),
                Some(BoundKind::Launch) => false,
                _ => true,
            }
    };
    let share = time_share_pct.clamp(0.0, 100.0);
    // A launch at its roofline has no latency to hide: occupancy and a ragged last wave are not worth acting on.
    let at_roofline = f.bound.as_ref().and_then(|b| b.busiest_pct).is_some_and(|p| p >= t::ROOFLINE_PCT);
    let hides_latency = |c: Category| {
        matches!(c, Category::OccupancyRegisters | Category::OccupancySharedMemory | Category::OccupancyOther | Category::TailEffect)
    };
    for (x, _) in &mut out {
        x.severity = match x.estimated_speedup_pct {
            _ if regime == Some(BoundKind::Launch) && !is_regime(x) => Severity::Info,
            _ if at_roofline && hides_latency(x.category) => Severity::Info,
            None if matches!(x.rule, "sol-memory" | "sol-compute") => {
                let pct = x.bound.as_ref().map(|b| b.unit_pct).or_else(|| f.bound.as_ref().and_then(|b| b.busiest_pct)).unwrap_or(0.0);
                if share < t::MEDIUM_GAIN_SHARE_PCT {
                    Severity::Low
                } else if pct >= t::SOL_SATURATED_PCT {
                    Severity::High
                } else {
                    Severity::Medium
                }
            }
            None => Severity::Info,
            Some(e) if e < t::MIN_ESTIMATE_PCT => Severity::Info,
            Some(e) => {
                let gain_share = e * share / 100.0;
                if e >= t::SEVERITY_HIGH_PCT && gain_share >= t::HIGH_GAIN_SHARE_PCT {
                    Severity::High
                } else if e >= t::SEVERITY_MEDIUM_PCT && gain_share >= t::MEDIUM_GAIN_SHARE_PCT {
                    Severity::Medium
                } else {
                    Severity::Low
                }
            }
        };
    }
    let rank = |x: &Finding| -> u8 {
        if regime == Some(BoundKind::Launch) && is_regime(x) {
            0
        } else if explains_regime(x) {
            1
        } else if is_regime(x) {
            2
        } else if x.severity != Severity::Info {
            3
        } else {
            4
        }
    };
    out.sort_by(|(a, _), (b, _)| {
        rank(a).cmp(&rank(b)).then(b.estimated_speedup_pct.unwrap_or(-1.0).total_cmp(&a.estimated_speedup_pct.unwrap_or(-1.0)))
    });
    out
}

/// The launch's regime in one line, what is missing, and where ncu's estimates exceed the bounds.
fn diagnose(launch: &Launch, f: &Facts, kernel: KernelKind, findings: &[Finding]) -> Diagnosis {
    let regime = regime_of(f);
    let busiest = f.bound.as_ref().and_then(|b| b.busiest_unit.zip(b.busiest_pct));
    let summary = regime_summary(f, regime, busiest, findings);
    let missing = missing_sections(launch, f, &kernel, regime, busiest);
    let ncu_disagreements = ncu_disagreements(launch, f);
    Diagnosis { regime, summary, kernel, missing, ncu_disagreements }
}

/// The regime's name ("memory-bound", ..., "unknown" without throughput metrics).
fn regime_of(f: &Facts) -> &'static str {
    match f.bound.as_ref().map(|b| b.kind) {
        Some(BoundKind::Memory) => "memory-bound",
        Some(BoundKind::Compute) => "compute-bound",
        Some(BoundKind::Latency) => "latency-bound",
        Some(BoundKind::GridTooSmall) => "grid-bound",
        Some(BoundKind::Launch) => "launch-bound",
        None => "unknown",
    }
}

/// The regime in one line, with the busiest unit (`busiest`: unit and % of peak), the largest
/// cause and, when latency-bound, the top stall.
fn regime_summary(f: &Facts, regime: &str, busiest: Option<(&'static str, f64)>, findings: &[Finding]) -> String {
    let mut summary = match (regime, busiest) {
        ("unknown", _) => "regime unknown: the profile has no throughput metrics".to_string(),
        ("memory-bound" | "compute-bound", Some((u, p))) => {
            format!("{regime} on {u} at {}% of peak: a fix that does not reduce {u} work saves at most {}%", fmt_num(p), fmt_num(100.0 - p))
        }
        ("launch-bound", b) => format!(
            "launch-bound: {}{}, {}",
            v(&f.duration_ns).map(crate::format::micros).unwrap_or_else(|| "? µs".into()),
            v(&f.grid_blocks).map(|g| format!(", {} block{}", fmt_num(g), if g == 1.0 { "" } else { "s" })).unwrap_or_default(),
            b.map(|(u, p)| format!("busiest unit {u} at {}%", fmt_num(p))).unwrap_or_else(|| "no throughput measured".into())
        ),
        (_, Some((u, p))) => format!("{regime}: busiest unit {u} at {}% of peak", fmt_num(p)),
        (_, None) => regime.to_string(),
    };
    // The largest cause: the primary finding when it is a specific cause, not the regime itself.
    if let Some(top) = findings.first().filter(|x| x.severity != Severity::Info && !x.category.is_bound() && x.rule != "launch-bound") {
        if let Some(e) = top.estimated_speedup_pct {
            summary.push_str(&format!("; largest cause: {} (up to {}%)", top.category.as_str(), fmt_num(e)));
        }
    }
    if regime == "latency-bound" {
        match f.stalls.first() {
            Some(s) => summary.push_str(&format!(
                "; top stall {} ({}% of stall cycles)",
                s.reason.replace('_', " "),
                s.share_pct.map(fmt_num).unwrap_or_else(|| "?".into())
            )),
            None => summary.push_str("; stall reasons not collected"),
        }
    }
    summary
}

/// The sections the profile lacks for this launch's questions, with the ncu option that collects each.
fn missing_sections(launch: &Launch, f: &Facts, kernel: &KernelKind, regime: &str, busiest: Option<(&'static str, f64)>) -> Vec<Missing> {
    let mut missing = Vec::new();
    if f.sm_throughput_pct.is_none() && f.memory_throughput_pct.is_none() {
        missing.push(Missing { what: "speed of light (SM and memory throughput): the regime", ncu_option: "--section SpeedOfLight" });
    }
    if f.stalls.is_empty() && matches!(regime, "latency-bound" | "grid-bound" | "unknown") {
        missing.push(Missing { what: "warp stall reasons: what the warps wait on", ncu_option: "--section WarpStateStats" });
    }
    if f.theoretical_occupancy_pct.is_none() {
        missing.push(Missing { what: "occupancy and its limiter", ncu_option: "--section Occupancy" });
    }
    if f.sm_count.is_none() || f.grid_blocks.is_none() {
        missing.push(Missing { what: "launch shape against the GPU (blocks, SMs, waves)", ncu_option: "--section LaunchStats" });
    }
    // Whenever a memory unit is the busiest (memory-bound, or latency-bound with memory the busiest unit),
    // how well the accesses use their sectors is the first question, and it needs the tables.
    let memory_busiest = busiest.is_some_and(|(u, _)| u != "SM");
    let access_known = f.global_load_bytes_per_sector.is_some()
        || f.global_excessive_sectors_pct.is_some()
        || f.global_load_sectors_per_request.is_some()
        || f.global_store_sectors_per_request.is_some();
    if memory_busiest && matches!(regime, "memory-bound" | "latency-bound") && !access_known {
        missing.push(Missing {
            what: "access-pattern efficiency (bytes used per sector)",
            ncu_option: "--section MemoryWorkloadAnalysis_Tables --section SourceCounters",
        });
    }
    if launch.source.is_none() && kernel.origin == kind::Origin::User && regime != "launch-bound" {
        missing.push(Missing {
            what: "source lines with the most stalls",
            ncu_option: "--section SourceCounters --import-source yes (compile with -lineinfo)",
        });
    }
    missing
}

/// Where ncu's own rules estimate more than keet's physical bound allows, one line each.
fn ncu_disagreements(launch: &Launch, f: &Facts) -> Vec<String> {
    let mut ncu_disagreements = Vec::new();
    for r in &launch.ncu_rules {
        let Some(x) = r.speedup_pct else { continue };
        let proxy = match ncu_rule_relieves(&r.rule) {
            estimate::Relieves::Nothing => Category::OccupancyOther,
            estimate::Relieves::Sm => Category::Divergence,
            estimate::Relieves::SmAndL1 => Category::SharedBankConflicts,
            estimate::Relieves::Memory => Category::MemoryCoalescing,
        };
        if let Some(c) = estimate::cap(proxy, f) {
            if x > c.pct + t::NCU_DISAGREE_MARGIN_PCT {
                let why = if c.unit == "launch cost" {
                    format!(
                        "the launch lasts {}, of which about 1.5 µs is launch cost",
                        v(&f.duration_ns).map(crate::format::micros).unwrap_or_else(|| " µs".into())
                    )
                } else {
                    format!("{} is at {}% of peak", c.unit, fmt_num(c.unit_pct))
                };
                let line = format!("ncu's {} estimates {}%; {why}, so at most {}%", r.rule, fmt_num(x), fmt_num(c.pct));
                if !ncu_disagreements.contains(&line) {
                    ncu_disagreements.push(line);
                }
            }
        }
    }
    ncu_disagreements
}

/// Which units the fix behind one of Nsight Compute's rules relieves (by the rule's name).
fn ncu_rule_relieves(rule: &str) -> estimate::Relieves {
    let r = rule.to_ascii_lowercase();
    let any = |ws: &[&str]| ws.iter().any(|w| r.contains(w));
    if any(&["uncoalesc", "memory", "dram", "l2", "l1tex", "sector", "excessive", "global", "local", "spill", "atomic"])
        && !any(&["shared"])
    {
        estimate::Relieves::Memory
    } else if any(&["bank", "shared"]) {
        estimate::Relieves::SmAndL1
    } else if any(&["diverg", "branch", "fp64", "fp32", "pipe", "tensor", "issue", "instruction", "compute"]) {
        estimate::Relieves::Sm
    } else {
        estimate::Relieves::Nothing
    }
}

#[cfg(test)]
mod patterns;

#[cfg(test)]
mod tests {
    use super::regime::derive_facts as derive;
    use super::*;
    use crate::profile::{Launch, Metric, MetricValue};

    fn launch(metrics: &[(&str, f64)]) -> Launch {
        let mut l = Launch::default();
        for (n, v) in metrics {
            let unit = if n.contains("pct") { crate::profile::Unit::Percent } else { crate::profile::Unit::None };
            l.metrics.insert(
                n,
                Metric {
                    value: MetricValue::Number(*v),
                    unit: &unit,
                    raw_value: &v.to_string(),
                    raw_unit: "",
                    label: None,
                    section: None,
                    origin: Default::default(),
                },
            );
        }
        l
    }

    #[test]
    fn uncoalesced_is_primary_over_memory_bound() {
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 10.0),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 85.0),
            ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0),
        ]);
        let fs = evaluate(&derive(&l));
        assert_eq!(fs[0].category, Category::MemoryCoalescing);
        // 87.5% of the sectors wasted, the memory system saturated at 85%: 87.5% of 85% of the time.
        approx::assert_relative_eq!(fs[0].estimated_speedup_pct.unwrap(), 74.375, epsilon = 1e-9);
        assert_eq!(fs.last().unwrap().category, Category::MemoryBound);
    }

    #[test]
    fn clean_kernel_has_only_context() {
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 10.0),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 90.0),
            ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 32.0),
            ("launch__block_size", 256.0),
            ("launch__grid_size", 4096.0),
            ("launch__sm_count", 132.0),
        ]);
        let fs = evaluate(&derive(&l));
        assert_eq!(fs.len(), 1, "{fs:?}");
        assert_eq!(fs[0].category, Category::MemoryBound);
    }

    #[test]
    fn block_size_and_grid() {
        let l = launch(&[("launch__block_size", 100.0), ("launch__grid_size", 4.0), ("launch__sm_count", 132.0)]);
        let cats: Vec<_> = evaluate(&derive(&l)).iter().map(|f| f.category).collect();
        assert!(cats.contains(&Category::BlockSize));
        assert!(cats.contains(&Category::GridTooSmall));
    }

    #[test]
    fn registers_limit_occupancy() {
        let l = launch(&[
            ("sm__maximum_warps_per_active_cycle_pct", 25.0),
            ("launch__occupancy_limit_registers", 1.0),
            ("launch__occupancy_limit_warps", 8.0),
            ("launch__registers_per_thread", 255.0),
        ]);
        let fs = evaluate(&derive(&l));
        assert_eq!(fs[0].category, Category::OccupancyRegisters);
        assert!(fs[0].facts.contains(&FactKey::RegistersPerThread));
    }

    #[test]
    fn categories_round_trip() {
        for c in Category::ALL {
            assert_eq!(Category::parse(c.as_str()), Some(c));
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::Value::String(c.as_str().into()));
        }
    }

    #[test]
    fn library_occupancy_is_info_and_never_primary() {
        // A cuBLAS-like Hopper GEMM: 168 registers, one 384-thread block per SM, DRAM at 65%.
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 9.0),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 65.0),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 65.0),
            ("sm__maximum_warps_per_active_cycle_pct", 18.75),
            ("launch__occupancy_limit_registers", 1.0),
            ("launch__occupancy_limit_warps", 5.0),
            ("launch__registers_per_thread", 168.0),
        ]);
        let f = derive(&l);
        let k = kind::recognise("nvjet_tst_64x8_64x16_2x1_v_bz_TNT", &f);
        let fs = evaluate_kind(&f, &k, 100.0);
        assert_eq!(fs[0].category, Category::MemoryBound, "{fs:#?}");
        let occ = fs.iter().find(|x| x.category == Category::OccupancyRegisters).unwrap();
        assert_eq!((occ.severity, occ.estimated_speedup_pct), (Severity::Info, None));
        assert!(occ.explanation.contains("by design"), "{}", occ.explanation);
        // The same kernel as the user's own code: an estimate, bounded by DRAM's headroom (35%).
        let fs = evaluate(&f);
        let occ = fs.iter().find(|x| x.category == Category::OccupancyRegisters).unwrap();
        assert!((occ.estimated_speedup_pct.unwrap() - 35.0).abs() < 1e-9);
        assert_eq!(occ.bound.as_ref().unwrap().unit, "DRAM");
        assert_eq!(fs[0].category, Category::MemoryBound, "a fix that moves no fewer bytes does not lead a memory-bound launch");
    }

    #[test]
    fn tiny_launch_is_launch_bound_first() {
        // A 2 us ATen kernel on one block of 132 SMs, with lanes idle and an L1 "active" artefact.
        let l = launch(&[
            ("gpu__time_duration.sum", 2000.0),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 0.01),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 0.45),
            ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 0.45),
            ("l1tex__throughput.avg.pct_of_peak_sustained_active", 148.7),
            ("launch__grid_size", 1.0),
            ("launch__sm_count", 132.0),
            ("launch__block_size", 128.0),
            ("smsp__thread_inst_executed_per_inst_executed.ratio", 14.5),
        ]);
        let f = derive(&l);
        assert!(f.l1_throughput_pct.is_none() && f.artifacts.len() == 1);
        assert_eq!(f.bound.as_ref().unwrap().kind, BoundKind::Launch);
        let fs = evaluate(&f);
        assert_eq!((fs[0].rule, fs[0].category), ("launch-bound", Category::GridTooSmall));
        // 2 us minus the 1.5 us launch cost: at most 25%.
        assert!((fs[0].estimated_speedup_pct.unwrap() - 25.0).abs() < 1e-9);
        assert!(fs[0].suggestion.contains("CUDA Graph"));
        // Divergence in a launch this short is context only.
        let d = fs.iter().find(|x| x.category == Category::Divergence).unwrap();
        assert_eq!(d.severity, Severity::Info);
    }

    #[test]
    fn severity_follows_the_gain_in_time_of_the_profile() {
        let l = launch(&[("launch__block_size", 256.0), ("launch__grid_size", 33.0), ("launch__sm_count", 132.0)]);
        let f = derive(&l);
        let k = KernelKind { origin: kind::Origin::User, library: None, family: Family::Other, warp_specialized: false };
        // 75% of a kernel that is the whole profile: high; of a kernel at 2% of the profile: low.
        assert_eq!(evaluate_kind(&f, &k, 100.0)[0].severity, Severity::High);
        assert_eq!(evaluate_kind(&f, &k, 2.0)[0].severity, Severity::Medium);
        assert_eq!(evaluate_kind(&f, &k, 0.5)[0].severity, Severity::Low);
    }

    #[test]
    fn disagrees_with_ncu_beyond_the_bound() {
        let mut l = launch(&[
            ("gpu__time_duration.sum", 239_008.0),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 46.5),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 91.7),
        ]);
        for (rule, pct) in [("AchievedOccupancy", 26.0), ("UncoalescedGlobalAccess", 20.0)] {
            l.ncu_rules.push(NcuRuleResult {
                rule: rule.into(),
                section: None,
                kind: crate::profile::NcuRuleType::Opt,
                message: String::new(),
                speedup_type: None,
                speedup_pct: Some(pct),
            });
        }
        let f = derive(&l);
        let r = evaluate_launch(&l, &f, 100.0);
        assert_eq!(r.diagnosis.regime, "memory-bound");
        assert_eq!(
            r.diagnosis.ncu_disagreements,
            vec!["ncu's AchievedOccupancy estimates 26%; DRAM is at 91.7% of peak, so at most 8.30%".to_string()]
        );
        assert!(r.diagnosis.summary.starts_with("memory-bound on DRAM at 91.7% of peak"), "{}", r.diagnosis.summary);
        assert!(r.diagnosis.missing.iter().any(|m| m.ncu_option.contains("Occupancy")));
    }

    #[test]
    fn pipe_rules_explain_with_their_numbers() {
        // Compute-bound on FP64, atomics contending, tensor pipe idle: every why names its numbers.
        let l = launch(&[
            ("gpu__time_duration.sum", 1e6),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 85.0),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 30.0),
            ("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active", 80.0),
            ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 0.0),
            ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 1e9),
            ("lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed", 70.0),
        ]);
        let fs = evaluate(&derive(&l));
        for (cat, num) in [(Category::Fp64, "80%"), (Category::AtomicsContention, "70%")] {
            let x = fs.iter().find(|x| x.category == cat).unwrap_or_else(|| panic!("{cat:?} in {fs:#?}"));
            assert!(x.severity != Severity::Info && x.explanation.contains(num), "{cat:?}: {}", x.explanation);
        }
        // The FP64 pipe is the busiest: FP64 work, not matrix work on the CUDA cores.
        assert!(!fs.iter().any(|x| x.category == Category::TensorCoreUnused), "{fs:#?}");
        // FMA-bound FP32 work staged through shared-memory tiles, with the tensor pipe idle, is.
        let l = launch(&[
            ("gpu__time_duration.sum", 1e6),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 85.0),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 30.0),
            ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed", 84.0),
            ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 0.0),
            ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 1e9),
            ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", 1e4),
            ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", 1e8),
        ]);
        let fs = evaluate(&derive(&l));
        let x = fs.iter().find(|x| x.category == Category::TensorCoreUnused).unwrap_or_else(|| panic!("{fs:#?}"));
        assert!(x.severity != Severity::Info && x.explanation.contains("85%"), "{}", x.explanation);
    }

    #[test]
    fn finding_facts_exist() {
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 5.0),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 5.0),
            ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 5.0),
            ("smsp__thread_inst_executed_per_inst_executed.ratio", 8.0),
        ]);
        let facts = derive(&l);
        for f in evaluate(&facts) {
            for k in &f.facts {
                assert!(facts.get(*k).is_some(), "{} cites missing fact {k}", f.rule);
            }
        }
    }
}
