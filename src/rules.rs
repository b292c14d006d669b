//! Rule layer: deterministic findings from [`Facts`], with every threshold in [`thresholds`].
//!
//! Findings are structured data (category, severity, the fact keys they rest on, an estimated
//! speedup where one can be estimated); later stages validate LLM findings against them.
//! Ordering: specific problems first, by estimated speedup; the speed-of-light classification
//! (compute / memory / latency bound) comes after them as context, so the first finding is the
//! launch's primary problem.

use crate::facts::{BoundKind, Fact, Facts, Limiter};
use crate::profile::{Launch, NcuRuleResult};
use serde::Serialize;

/// Every number the rules compare against, in one place. Each says where it comes from.
pub mod thresholds {
    /// A unit at or above this % of peak is "busy": Nsight Compute's speed-of-light rule
    /// (SOLBottleneck) calls throughput under 60% of peak a latency problem.
    pub const SOL_BUSY_PCT: f64 = 60.0;
    /// Below this top throughput a launch whose grid has fewer blocks than SMs is "grid too small"
    /// (same 60% as above; LaunchStats' small-grid rule compares blocks to SMs).
    pub const SOL_LOW_PCT: f64 = 60.0;
    /// At or above this % of peak a unit is saturated (ncu's SOL rule: "above 80%").
    pub const SOL_SATURATED_PCT: f64 = 80.0;
    /// Global loads/stores using fewer bytes per 32-byte sector than this are uncoalesced
    /// (keet's choice: half of every sector fetched is wasted).
    pub const COALESCED_MIN_BYTES_PER_SECTOR: f64 = 16.0;
    /// Share of global sectors beyond the ideal pattern that counts as uncoalesced
    /// (keet's choice, the quantity is ncu's UncoalescedGlobalAccess rule's "excessive sectors").
    pub const EXCESSIVE_SECTORS_PCT: f64 = 20.0;
    /// Sectors per request above which 4-byte accesses are scattered (ideal is 4 for 32 threads x 4 bytes).
    pub const MAX_SECTORS_PER_REQUEST: f64 = 8.0;
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

    /// The table above as data, for documentation and `keet inspect --thresholds`.
    pub fn table() -> Vec<(&'static str, f64, &'static str)> {
        vec![
            ("SOL_BUSY_PCT", SOL_BUSY_PCT, "ncu SOLBottleneck rule: under 60% of peak is a latency problem"),
            ("SOL_LOW_PCT", SOL_LOW_PCT, "small grid: fewer blocks than SMs and under this throughput"),
            ("SOL_SATURATED_PCT", SOL_SATURATED_PCT, "ncu SOL rule: above 80% a unit is saturated"),
            ("COALESCED_MIN_BYTES_PER_SECTOR", COALESCED_MIN_BYTES_PER_SECTOR, "keet: half of each 32-byte sector wasted"),
            ("EXCESSIVE_SECTORS_PCT", EXCESSIVE_SECTORS_PCT, "keet, on ncu's excessive-sectors quantity"),
            ("MAX_SECTORS_PER_REQUEST", MAX_SECTORS_PER_REQUEST, "keet: ideal is 4 for 4-byte words"),
            ("BANK_CONFLICT_PCT", BANK_CONFLICT_PCT, "keet, on ncu's excessive shared wavefronts"),
            ("DIVERGENCE_ACTIVE_THREADS", DIVERGENCE_ACTIVE_THREADS, "keet: a quarter of the lanes idle"),
            ("BRANCH_UNIFORM_PCT", BRANCH_UNIFORM_PCT, "keet, on ncu's uniform-branch-target share"),
            ("LOW_THEORETICAL_OCCUPANCY_PCT", LOW_THEORETICAL_OCCUPANCY_PCT, "keet"),
            ("OCCUPANCY_GAP_PCT", OCCUPANCY_GAP_PCT, "keet, on ncu's achieved-vs-theoretical comparison"),
            ("WARP_SIZE", WARP_SIZE, "CUDA programming guide"),
            ("TAIL_IDLE_PCT", TAIL_IDLE_PCT, "keet, on ncu's tail-effect quantity"),
            ("TENSOR_UNUSED_PCT", TENSOR_UNUSED_PCT, "keet"),
            ("FP64_BUSY_PCT", FP64_BUSY_PCT, "keet (= SOL busy)"),
            ("ATOMIC_BUSY_PCT", ATOMIC_BUSY_PCT, "keet (= SOL busy)"),
            ("SEVERITY_HIGH_PCT", SEVERITY_HIGH_PCT, "keet: estimated speedup for high severity"),
            ("SEVERITY_MEDIUM_PCT", SEVERITY_MEDIUM_PCT, "keet: estimated speedup for medium severity"),
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

impl Severity {
    fn from_speedup(pct: Option<f64>) -> Severity {
        match pct {
            Some(p) if p >= t::SEVERITY_HIGH_PCT => Severity::High,
            Some(p) if p >= t::SEVERITY_MEDIUM_PCT => Severity::Medium,
            Some(_) => Severity::Low,
            None => Severity::Info,
        }
    }
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
    /// What to change.
    pub suggestion: String,
    /// Keys of the facts the finding rests on (see [`Facts::get`]).
    pub facts: Vec<&'static str>,
    /// Upper-bound estimate of the kernel-time reduction if fixed, percent.
    pub estimated_speedup_pct: Option<f64>,
}

/// Rule findings for one launch, with Nsight Compute's own rule results kept beside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleReport {
    pub findings: Vec<Finding>,
    pub ncu_rules: Vec<NcuRuleResult>,
}

impl RuleReport {
    /// The launch's primary problem: the first finding.
    pub fn primary(&self) -> Option<&Finding> {
        self.findings.first()
    }
}

/// Evaluates the rules for one launch.
pub fn evaluate_launch(launch: &Launch, facts: &Facts) -> RuleReport {
    RuleReport { findings: evaluate(facts), ncu_rules: launch.ncu_rules.clone() }
}

fn v(f: &Option<Fact>) -> Option<f64> {
    f.as_ref().map(|f| f.value)
}

/// Formats a number the way reports show it (and the validator accepts): up to 3 significant decimals.
pub fn fmt_num(x: f64) -> String {
    if x.abs() >= 1e15 || (x != 0.0 && x.abs() < 1e-3) {
        return format!("{x:.3e}");
    }
    let s = if x.abs() >= 100.0 || x.fract() == 0.0 { format!("{x:.0}") } else if x.abs() >= 10.0 { format!("{x:.1}") } else { format!("{x:.2}") };
    s
}

/// The deterministic rules, in the order given by the module docs.
pub fn evaluate(f: &Facts) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let mut push = |rule, category, claim: String, suggestion: &str, facts: Vec<&'static str>, speedup: Option<f64>| {
        let speedup = speedup.map(|s: f64| s.clamp(0.0, 100.0));
        out.push(Finding {
            rule,
            category,
            severity: Severity::from_speedup(speedup),
            claim,
            suggestion: suggestion.to_string(),
            facts,
            estimated_speedup_pct: speedup,
        });
    };

    // Uncoalesced global access.
    let bps_ld = v(&f.global_load_bytes_per_sector);
    let bps_st = v(&f.global_store_bytes_per_sector);
    let spr_ld = v(&f.global_load_sectors_per_request);
    let spr_st = v(&f.global_store_sectors_per_request);
    let excess = v(&f.global_excessive_sectors_pct);
    let worst_bps = [bps_ld, bps_st].into_iter().flatten().fold(f64::INFINITY, f64::min);
    let worst_spr = [spr_ld, spr_st].into_iter().flatten().fold(0.0, f64::max);
    if excess.is_some_and(|e| e >= t::EXCESSIVE_SECTORS_PCT) || worst_bps < t::COALESCED_MIN_BYTES_PER_SECTOR || worst_spr > t::MAX_SECTORS_PER_REQUEST {
        let mut facts = vec![];
        let mut parts = vec![];
        if let Some(e) = excess {
            facts.push("global_excessive_sectors_pct");
            parts.push(format!("{}% of global sectors are excessive", fmt_num(e)));
        }
        for (key, val, what) in [
            ("global_load_bytes_per_sector", bps_ld, "loads use"),
            ("global_store_bytes_per_sector", bps_st, "stores use"),
        ] {
            if let Some(x) = val {
                if x < t::COALESCED_MIN_BYTES_PER_SECTOR {
                    facts.push(key);
                    parts.push(format!("{what} {} of 32 bytes per sector", fmt_num(x)));
                }
            }
        }
        for (key, val, what) in [
            ("global_load_sectors_per_request", spr_ld, "loads need"),
            ("global_store_sectors_per_request", spr_st, "stores need"),
        ] {
            if let Some(x) = val {
                if x > t::MAX_SECTORS_PER_REQUEST {
                    facts.push(key);
                    parts.push(format!("{what} {} sectors per request", fmt_num(x)));
                }
            }
        }
        let speedup = excess.or_else(|| (worst_bps.is_finite()).then(|| 100.0 * (1.0 - worst_bps / 32.0)));
        push(
            "uncoalesced-global",
            Category::MemoryCoalescing,
            format!("Global memory accesses are uncoalesced: {}.", parts.join(", ")),
            "Make consecutive threads access consecutive addresses (structure of arrays, a shared-memory tile for transposes, aligned vector loads).",
            facts,
            speedup,
        );
    }

    // Shared-memory bank conflicts.
    if let Some(c) = v(&f.shared_bank_conflict_pct) {
        if c >= t::BANK_CONFLICT_PCT {
            push(
                "shared-bank-conflicts",
                Category::SharedBankConflicts,
                format!("{}% of shared-memory wavefronts come from bank conflicts.", fmt_num(c)),
                "Pad shared arrays (for example a [32][33] tile) or change the index pattern so the threads of a warp hit different banks.",
                vec!["shared_bank_conflict_pct"],
                Some(c),
            );
        }
    }

    // Divergence.
    let mut thread_divergence = false;
    if let Some(a) = v(&f.active_threads_per_warp) {
        // Lanes missing because the block is not a multiple of 32 are the block-size rule's, not divergence:
        // compare against the most threads a warp of this block can have active.
        let full = v(&f.block_threads)
            .filter(|b| *b > 0.0)
            .map(|b| (b / (b / t::WARP_SIZE).ceil()).min(t::WARP_SIZE))
            .unwrap_or(t::WARP_SIZE);
        if a < t::DIVERGENCE_ACTIVE_THREADS * full / t::WARP_SIZE {
            thread_divergence = true;
            let mut facts = vec!["active_threads_per_warp"];
            if f.branch_uniform_pct.is_some() {
                facts.push("branch_uniform_pct");
            }
            push(
                "thread-divergence",
                Category::Divergence,
                format!("Warps run with {} of 32 threads active on average.", fmt_num(a)),
                "Make branch conditions uniform across a warp (branch on warp index, sort or compact work) and avoid per-thread early exits.",
                facts,
                Some(100.0 * (1.0 - a / full)),
            );
        }
    }

    // Divergent branches (branch targets not uniform across the warp).
    if let Some(u) = v(&f.branch_uniform_pct) {
        // When the divergent-target count is known, it must be non-zero (a one-thread warp reports 0% uniform).
        let diverged = v(&f.divergent_branch_targets).is_none_or(|d| d > 0.0);
        if u < t::BRANCH_UNIFORM_PCT && !thread_divergence && diverged {
            let mut facts = vec!["branch_uniform_pct"];
            if f.divergent_branch_targets.is_some() {
                facts.push("divergent_branch_targets");
            }
            push(
                "divergent-branches",
                Category::Divergence,
                format!("Only {}% of branch targets are uniform across the warp: warps diverge.", fmt_num(u)),
                "Make branch conditions uniform across a warp (for example, index so that active threads are contiguous: tid < stride instead of tid % (2*stride) == 0).",
                facts,
                Some(100.0 - u),
            );
        }
    }

    // Occupancy limiter.
    if let (Some(th), Some(lim)) = (v(&f.theoretical_occupancy_pct), &f.occupancy_limit) {
        if th < t::LOW_THEORETICAL_OCCUPANCY_PCT {
            let (cat, suggestion) = match lim.limiter {
                Limiter::Registers => (Category::OccupancyRegisters, "Reduce registers per thread (__launch_bounds__, -maxrregcount, fewer live values) so more blocks fit per SM."),
                Limiter::SharedMemory => (Category::OccupancySharedMemory, "Use less shared memory per block (smaller tiles, fewer buffers) or raise the carveout so more blocks fit per SM."),
                _ => (Category::OccupancyOther, "Change the block size so more warps fit per SM."),
            };
            let mut facts = vec!["theoretical_occupancy_pct", "occupancy_limit_blocks_per_sm"];
            if lim.limiter == Limiter::Registers && f.registers_per_thread.is_some() {
                facts.push("registers_per_thread");
            }
            if lim.limiter == Limiter::SharedMemory && f.shared_mem_per_block_bytes.is_some() {
                facts.push("shared_mem_per_block_bytes");
            }
            push(
                "occupancy-limiter",
                cat,
                format!("Theoretical occupancy is {}%, limited by {}.", fmt_num(th), lim.limiter.label()),
                suggestion,
                facts,
                Some(100.0 - th),
            );
        }
    }
    if let (Some(th), Some(ach)) = (v(&f.theoretical_occupancy_pct), v(&f.achieved_occupancy_pct)) {
        if th - ach >= t::OCCUPANCY_GAP_PCT && !f.grid_blocks.as_ref().zip(f.sm_count.as_ref()).is_some_and(|(g, s)| g.value < s.value) {
            push(
                "achieved-occupancy-gap",
                Category::OccupancyOther,
                format!("Achieved occupancy is {}% against a theoretical {}%.", fmt_num(ach), fmt_num(th)),
                "Look for load imbalance between blocks and warps, and for a tail of partially filled waves.",
                vec!["achieved_occupancy_pct", "theoretical_occupancy_pct"],
                Some(100.0 * (th - ach) / th),
            );
        }
    }

    // Launch shape.
    if let (Some(g), Some(s)) = (v(&f.grid_blocks), v(&f.sm_count)) {
        if g < s {
            push(
                "grid-too-small",
                Category::GridTooSmall,
                format!("The grid has {} blocks for {} SMs, so part of the GPU stays idle.", fmt_num(g), fmt_num(s)),
                "Launch at least as many blocks as SMs (split the work further, or use smaller blocks).",
                vec!["grid_blocks", "sm_count"],
                Some(100.0 * (1.0 - g / s)),
            );
        }
    }
    if let Some(b) = v(&f.block_threads) {
        let rem = b % t::WARP_SIZE;
        if rem != 0.0 {
            let warps = (b / t::WARP_SIZE).ceil();
            push(
                "block-size-not-warp-multiple",
                Category::BlockSize,
                format!("Blocks have {} threads, not a multiple of 32, so every block wastes part of a warp.", fmt_num(b)),
                "Use a block size that is a multiple of 32 (128 or 256 are good defaults).",
                vec!["block_threads"],
                Some(100.0 * (t::WARP_SIZE - rem) / (warps * t::WARP_SIZE)),
            );
        }
    }
    if let Some(tail) = v(&f.tail_idle_pct) {
        if tail >= t::TAIL_IDLE_PCT {
            push(
                "tail-effect",
                Category::TailEffect,
                format!("The last wave leaves {}% of its slots idle (tail effect).", fmt_num(tail)),
                "Adjust the grid so the number of blocks is a multiple of the blocks that fit on the GPU at once, or use a grid-stride loop.",
                vec!["tail_idle_pct", "waves_per_sm"],
                Some(tail * 0.5),
            );
        }
    }

    // Spilling.
    if let Some(sp) = v(&f.spill_instructions) {
        if sp > 0.0 {
            let mut facts = vec!["spill_instructions"];
            if f.local_memory_sectors.is_some() {
                facts.push("local_memory_sectors");
            }
            push(
                "register-spilling",
                Category::RegisterSpilling,
                format!("{} instructions spill registers to local memory.", fmt_num(sp)),
                "Lower register pressure (fewer live values, smaller unrolling) or allow more registers per thread.",
                facts,
                None,
            );
        }
    }

    // Pipes: FP64, tensor cores, atomics.
    if let Some(p) = v(&f.fp64_pipe_pct) {
        if p >= t::FP64_BUSY_PCT {
            push(
                "fp64-pipe",
                Category::Fp64,
                format!("The FP64 pipe is {}% busy and limits the kernel.", fmt_num(p)),
                "Use FP32 where the precision allows (FP64 throughput is a small fraction of FP32 on most GPUs).",
                vec!["fp64_pipe_pct"],
                // Rough upper bound: half the time the FP64 pipe is busy.
                Some(p * 0.5),
            );
        }
    }
    let compute_bound = f.bound.as_ref().is_some_and(|b| b.kind == BoundKind::Compute);
    if compute_bound {
        let fp = v(&f.roofline.fp32_flop).unwrap_or(0.0) + v(&f.roofline.fp16_flop).unwrap_or(0.0);
        let dp = v(&f.roofline.fp64_flop).unwrap_or(0.0);
        if let Some(tp) = v(&f.tensor_pipe_pct) {
            if tp < t::TENSOR_UNUSED_PCT && fp > 0.0 && fp > dp {
                let mut facts = vec!["tensor_pipe_pct", "sm_throughput_pct"];
                if f.roofline.fp32_flop.is_some() {
                    facts.push("fp32_flop");
                }
                push(
                    "tensor-cores-unused",
                    Category::TensorCoreUnused,
                    format!("The kernel is compute bound but the tensor pipe is only {}% busy.", fmt_num(tp)),
                    "Express the inner loop as matrix multiply-accumulate on tensor cores (WMMA/MMA, cuBLAS, CUTLASS) with FP16/BF16/TF32 inputs.",
                    facts,
                    // Rough upper bound: half the SM-busy time.
                    v(&f.sm_throughput_pct).map(|s| s * 0.5),
                );
            }
        }
    }
    if let Some(a) = v(&f.l2_atomic_busy_pct) {
        if a >= t::ATOMIC_BUSY_PCT {
            let mut facts = vec!["l2_atomic_busy_pct"];
            if f.atomic_requests.is_some() {
                facts.push("atomic_requests");
            }
            push(
                "atomic-contention",
                Category::AtomicsContention,
                format!("The L2 atomic unit is {}% busy: atomics contend.", fmt_num(a)),
                "Aggregate in registers or shared memory first (warp reductions), then issue one atomic per warp or block.",
                facts,
                // Rough upper bound: half the time the busiest L2 atomic unit is busy.
                Some(a * 0.5),
            );
        }
    }

    // Speed-of-light classification last: it is context for the problems above.
    if let Some(b) = &f.bound {
        let sm = v(&f.sm_throughput_pct).unwrap_or(0.0);
        let mem = v(&f.memory_throughput_pct).unwrap_or(0.0);
        match b.kind {
            BoundKind::Memory => {
                let unit = b.busiest_unit.unwrap_or("memory");
                push(
                    "sol-memory",
                    Category::MemoryBound,
                    format!("Memory throughput is {}% of peak, above compute at {}%; the busiest unit is {unit}.", fmt_num(mem), fmt_num(sm)),
                    "Move fewer bytes: reuse data through shared memory or registers, use smaller types, fuse kernels; check coalescing first.",
                    b.because.clone(),
                    None,
                );
            }
            BoundKind::Compute => push(
                "sol-compute",
                Category::ComputeBound,
                format!("Compute (SM) throughput is {}% of peak, above memory at {}%.", fmt_num(sm), fmt_num(mem)),
                "Do less work per result: cheaper instructions, tensor cores, fewer redundant computations.",
                b.because.clone(),
                None,
            ),
            BoundKind::Latency => {
                let mut facts = b.because.clone();
                let stall = f.stalls.first();
                let mut claim = format!(
                    "Neither compute ({}%) nor memory ({}%) reaches {}% of peak: the kernel is latency bound",
                    fmt_num(sm),
                    fmt_num(mem),
                    fmt_num(t::SOL_BUSY_PCT)
                );
                if let Some(s) = stall {
                    facts.push(s.cycles_per_issue.key);
                    claim.push_str(&format!("; warps stall most on {}", s.reason.replace('_', " ")));
                }
                claim.push('.');
                push(
                    "sol-latency",
                    Category::LatencyBound,
                    claim,
                    "Expose more parallelism (more warps per SM, more independent work per thread) and hide the top stall reason.",
                    facts,
                    None,
                );
            }
            BoundKind::GridTooSmall => {}
        }
    }

    // Specific problems by estimated speedup (unknown estimates after known ones); bound context last.
    out.sort_by(|a, b| {
        a.category
            .is_bound()
            .cmp(&b.category.is_bound())
            .then(b.estimated_speedup_pct.unwrap_or(-1.0).total_cmp(&a.estimated_speedup_pct.unwrap_or(-1.0)))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::derive;
    use crate::profile::{Launch, Metric, MetricValue};

    fn launch(metrics: &[(&str, f64)]) -> Launch {
        let mut l = Launch::default();
        for (n, v) in metrics {
            let unit = if n.contains("pct") { crate::profile::Unit::Percent } else { crate::profile::Unit::None };
            l.metrics.insert(
                n,
                Metric { value: MetricValue::Number(*v), unit: &unit, raw_value: &v.to_string(), raw_unit: "", label: None, section: None, origin: Default::default() },
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
        assert_eq!(fs[0].estimated_speedup_pct, Some(87.5));
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
        assert!(fs[0].facts.contains(&"registers_per_thread"));
    }

    #[test]
    fn categories_round_trip() {
        for c in Category::ALL {
            assert_eq!(Category::parse(c.as_str()), Some(c));
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::Value::String(c.as_str().into()));
        }
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
                assert!(facts.get(k).is_some(), "{} cites missing fact {k}", f.rule);
            }
        }
    }
}
