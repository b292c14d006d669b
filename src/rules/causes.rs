//! The rules, one function each: each reads the facts and returns a typed [`Candidate`] (what it
//! found, the facts it rests on, its raw estimate and the values its words need), or nothing. The
//! estimate is bounded, the candidates ranked and only then are words rendered (see `super`).
//! [`RULES`] is the catalogue, in no particular order.

use super::estimate;
use super::kind::KernelKind;
use super::regime;
use super::text;
use super::thresholds as t;
use super::{fmt_num, Category};
use crate::facts::{BoundKind, Fact, FactKey, Facts, Limiter};
use serde_json::json;

/// One rule's finding before it is bounded, ranked and put in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Which rule fired ("uncoalesced-global", ...): its words are `expert/findings.toml [rule]`.
    pub rule: &'static str,
    pub category: Category,
    /// Keys of the facts the finding rests on.
    pub facts: Vec<FactKey>,
    /// The rule's estimate, % of the launch's time, before the physical bound ([`estimate::cap`]).
    pub raw_estimate: Option<f64>,
    /// The values its words need (the template's variables).
    pub vars: serde_json::Value,
    /// A specific fix to prefer (`fix.<origin>_<variant>`).
    pub variant: Option<&'static str>,
    /// The kernel's design decides this (library, generated, warp-specialised): info, no estimate.
    pub by_design: bool,
}

impl Candidate {
    fn new(rule: &'static str, category: Category, facts: Vec<FactKey>, raw_estimate: Option<f64>, vars: serde_json::Value) -> Self {
        Candidate { rule, category, facts, raw_estimate, vars, variant: None, by_design: false }
    }
}

/// What every rule reads: the facts, what the kernel is, and the regime's units.
pub struct Ctx<'a> {
    pub f: &'a Facts,
    pub kind: &'a KernelKind,
    pub regime: Option<BoundKind>,
    /// The busiest unit measured: `(unit, pct, fact key)`.
    pub busiest: Option<(&'static str, f64, FactKey)>,
    /// The busiest memory unit measured.
    pub busiest_mem: Option<(&'static str, f64, FactKey)>,
}

impl<'a> Ctx<'a> {
    pub fn new(f: &'a Facts, kind: &'a KernelKind) -> Self {
        let units = regime::utilisation(f);
        Ctx {
            f,
            kind,
            regime: f.bound.as_ref().map(|x| x.kind),
            busiest: units.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)),
            busiest_mem: regime::busiest_memory(f),
        }
    }
}

fn v(f: &Option<Fact>) -> Option<f64> {
    f.as_ref().map(|f| f.value)
}

/// A rule: the facts in, at most one candidate out.
pub type Rule = fn(&Ctx) -> Option<Candidate>;

/// Every rule keet runs.
pub const RULES: &[Rule] = &[
    uncoalesced_global,
    shared_bank_conflicts,
    divergence,
    occupancy_limiter,
    achieved_occupancy_gap,
    launch_shape,
    block_size,
    tail_effect,
    local_memory,
    fp64_pipe,
    tensor_cores_unused,
    atomic_contention,
    regime_finding,
];

/// Every candidate for one launch, citing only facts that exist.
pub fn candidates(ctx: &Ctx) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = RULES.iter().filter_map(|rule| rule(ctx)).collect();
    for c in &mut out {
        c.facts.retain(|k| ctx.f.get(*k).is_some());
    }
    out
}

/// Uncoalesced global access: wasted sectors, costing time only as far as the memory system is what
/// the launch waits on ([`estimate::coalescing`]).
pub fn uncoalesced_global(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let est = estimate::coalescing(f)?;
    if est.waste_pct < t::EXCESSIVE_SECTORS_PCT {
        return None;
    }
    let mut facts = vec![];
    let mut parts = vec![];
    let mut dirs = vec![];
    if let Some(e) = v(&f.global_excessive_sectors_pct) {
        facts.push(FactKey::GlobalExcessiveSectorsPct);
        parts.push(format!("{}% of global sectors are excessive", fmt_num(e)));
    }
    for (key, val, what, dir) in [
        (FactKey::GlobalLoadBytesPerSector, v(&f.global_load_bytes_per_sector), "loads use", "loads"),
        (FactKey::GlobalStoreBytesPerSector, v(&f.global_store_bytes_per_sector), "stores use", "stores"),
    ] {
        // Every direction whose waste alone reaches the reporting threshold is named.
        if let Some(x) = val.filter(|x| *x > 0.0 && *x < 32.0 * (1.0 - t::EXCESSIVE_SECTORS_PCT / 100.0)) {
            facts.push(key);
            parts.push(format!("{what} {} of 32 bytes per sector", fmt_num(x)));
            dirs.push(dir);
        }
    }
    let spr_only = est.from_sectors_per_request;
    for (fact, what, dir) in
        [(&f.global_load_sectors_per_request, "loads need", "loads"), (&f.global_store_sectors_per_request, "stores need", "stores")]
    {
        let limit =
            if spr_only { t::IDEAL_SECTORS_PER_REQUEST / (1.0 - t::EXCESSIVE_SECTORS_PCT / 100.0) } else { t::MAX_SECTORS_PER_REQUEST };
        if let Some(x) = fact.as_ref().filter(|x| x.value > limit) {
            facts.push(x.key);
            // Say which counters the ratio came from when they are not L1's own.
            let source = x.label.find('(').map(|i| format!(" {}", &x.label[i..])).unwrap_or_default();
            parts.push(format!("{what} {} sectors per request{source}", fmt_num(x.value)));
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    for k in [FactKey::GlobalLoadSectors, FactKey::GlobalStoreSectors] {
        if f.get(k).is_some() && facts.iter().any(|x| x.as_str().starts_with(&k.as_str()[..10])) {
            facts.push(k);
        }
    }
    if spr_only {
        parts.push(format!("{} is ideal for 4-byte words (8- and 16-byte accesses need 8 and 16)", fmt_num(t::IDEAL_SECTORS_PER_REQUEST)));
    }
    if est.global_share_pct < 100.0 {
        facts.push(FactKey::LocalTrafficPct);
    }
    if let Some(k) = est.unit_key {
        facts.push(k);
    }
    if est.stall_share_pct.is_some() {
        facts.push(FactKey::StallMemorySharePct);
    }
    if est.l1_hit_pct.is_some() {
        facts.push(FactKey::L1HitRatePct);
    }
    if parts.is_empty() {
        parts.push(format!("{}% of the global sectors moved carry no useful bytes", fmt_num(est.waste_pct)));
    }
    let dir = match dirs.as_slice() {
        ["loads"] => "loads",
        ["stores"] => "stores",
        _ => "memory accesses",
    };
    Some(Candidate::new(
        "uncoalesced-global",
        Category::MemoryCoalescing,
        facts,
        Some(est.estimate_pct),
        json!({
            "dir": dir, "detail": parts.join(", "), "waste": est.waste_pct, "global_share": est.global_share_pct,
            "unit": est.unit, "unit_pct": est.unit_pct, "unit_measured": est.unit_key.is_some(), "stall_share": est.stall_share_pct, "saturated": est.stall_share_pct.is_none() && est.unit_pct >= t::SOL_SATURATED_PCT,
            "l1_hit": est.l1_hit_pct,
        }),
    ))
}

/// Shared-memory bank conflicts: one shared-pipe cycle per extra wavefront ([`estimate::bank_conflicts`]),
/// on the same scale as every other cause: the share of elapsed time it can explain.
pub fn shared_bank_conflicts(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let c = v(&f.shared_bank_conflict_pct).filter(|c| *c >= t::BANK_CONFLICT_PCT)?;
    let est = estimate::shared_conflicts(f, c);
    let mut facts = vec![FactKey::SharedBankConflictPct];
    if est.per_sm.is_some() {
        facts.extend([FactKey::SharedExcessWavefronts, FactKey::ElapsedCycles]);
    }
    if est.stall_share_pct.is_some() {
        facts.push(FactKey::StallSharedSharePct);
    }
    Some(Candidate::new(
        "shared-bank-conflicts",
        Category::SharedBankConflicts,
        facts,
        est.estimate_pct,
        json!({
            "excess": v(&f.shared_excess_wavefronts).or(v(&f.shared_bank_conflicts)).unwrap_or(0.0),
            "conflict_pct": c,
            "excess_per_sm": est.per_sm,
            "cycles": v(&f.elapsed_cycles),
            "pipe_share": est.pipe_share_pct,
            "stall_share": est.stall_share_pct,
            "one_block": est.one_block_per_sm,
        }),
    ))
}

/// Divergence: idle lanes of the average warp instruction, or else divergent branch targets.
pub fn divergence(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    if let Some(a) = v(&f.active_threads_per_warp) {
        // Lanes missing because the block is not a multiple of 32 are the block-size rule's, not divergence.
        let full =
            v(&f.block_threads).filter(|b| *b > 0.0).map(|b| (b / (b / t::WARP_SIZE).ceil()).min(t::WARP_SIZE)).unwrap_or(t::WARP_SIZE);
        if a < t::DIVERGENCE_ACTIVE_THREADS * full / t::WARP_SIZE {
            let mut facts = vec![FactKey::ActiveThreadsPerWarp];
            if f.branch_uniform_pct.is_some() {
                facts.push(FactKey::BranchUniformPct);
            }
            // Idle lanes cost issue time: a launch that issues rarely (latency-, grid- or pipe-bound)
            // loses only that share of its time to them.
            let issue = v(&f.issue_slots_busy_pct);
            if issue.is_some() {
                facts.push(FactKey::IssueSlotsBusyPct);
            }
            return Some(Candidate::new(
                "thread-divergence",
                Category::Divergence,
                facts,
                Some(estimate::inactive_lanes(a, full, issue)),
                json!({"active": a, "full": full, "idle_pct": 100.0 * (1.0 - a / full), "issue_pct": issue}),
            ));
        }
    }
    let d = v(&f.divergent_branch_pct)?;
    // When the divergent-target count is known, it must be non-zero (a one-thread warp reports 0% uniform).
    let diverged = v(&f.divergent_branch_targets).is_none_or(|d| d > 0.0);
    (d > 100.0 - t::BRANCH_UNIFORM_PCT && diverged).then(|| {
        Candidate::new(
            "divergent-branches",
            Category::Divergence,
            vec![FactKey::DivergentBranchPct],
            Some(estimate::divergent_branches(d)),
            json!({"divergent": d, "factor": t::DIVERGENT_BRANCH_COST}),
        )
    })
}

/// Occupancy limiter: by design for library, generated and warp-specialised kernels. Only when the
/// grid could fill more blocks per SM than the limiter allows: otherwise the grid limits occupancy.
pub fn occupancy_limiter(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let (th, lim) = (v(&f.theoretical_occupancy_pct)?, f.occupancy_limit.as_ref()?);
    let grid_fills_limit = match (v(&f.grid_blocks), v(&f.sm_count)) {
        (Some(g), Some(s)) => g > s * lim.blocks_per_sm.value,
        _ => true,
    };
    if th >= t::LOW_THEORETICAL_OCCUPANCY_PCT || !grid_fills_limit {
        return None;
    }
    let (cat, variant) = match lim.limiter {
        Limiter::Registers => (Category::OccupancyRegisters, "registers"),
        Limiter::SharedMemory => (Category::OccupancySharedMemory, "shared"),
        _ => (Category::OccupancyOther, "other"),
    };
    let mut facts = vec![FactKey::TheoreticalOccupancyPct, FactKey::OccupancyLimitBlocksPerSm];
    let registers = (lim.limiter == Limiter::Registers).then(|| v(&f.registers_per_thread)).flatten();
    let smem = (lim.limiter == Limiter::SharedMemory).then(|| v(&f.shared_mem_per_block_bytes)).flatten();
    if registers.is_some() {
        facts.push(FactKey::RegistersPerThread);
    }
    if smem.is_some() {
        facts.push(FactKey::SharedMemPerBlockBytes);
    }
    let mut c = Candidate::new(
        "occupancy-limiter",
        cat,
        facts,
        Some(estimate::occupancy(th)),
        json!({
            "theoretical": th, "limiter": lim.limiter.label(), "registers": registers, "smem": smem,
            "blocks": lim.blocks_per_sm.value, "idle": 100.0 - th, "warp_specialized": ctx.kind.warp_specialized,
        }),
    );
    c.variant = Some(variant);
    c.by_design = ctx.kind.occupancy_by_design();
    Some(c)
}

fn grid_short(f: &Facts) -> Option<bool> {
    f.grid_blocks.as_ref().zip(f.sm_count.as_ref()).map(|(g, s)| g.value < s.value)
}

/// Achieved below theoretical occupancy. Under one wave or a short grid, the grid explains the gap;
/// a launch of a few microseconds ramps up and down.
pub fn achieved_occupancy_gap(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let (th, ach) = (v(&f.theoretical_occupancy_pct)?, v(&f.achieved_occupancy_pct)?);
    let under_a_wave = v(&f.waves_per_sm).is_some_and(|w| w < 1.0);
    if th - ach < t::OCCUPANCY_GAP_PCT || grid_short(f) == Some(true) || under_a_wave || ctx.regime == Some(BoundKind::Launch) {
        return None;
    }
    let mut c = Candidate::new(
        "achieved-occupancy-gap",
        Category::OccupancyOther,
        vec![FactKey::AchievedOccupancyPct, FactKey::TheoreticalOccupancyPct],
        Some(estimate::occupancy_gap(th, ach)),
        json!({"achieved": ach, "theoretical": th}),
    );
    c.by_design = ctx.kind.occupancy_by_design();
    Some(c)
}

/// How short the grid falls: fewer blocks than SMs (the idle SMs' share), or a block on every SM but
/// under [`t::GRID_FEW_WAVES`] waves (the empty block slots' share). `(raw estimate, waves when that
/// is the reason)`.
fn grid_shortfall(f: &Facts) -> Option<(f64, Option<f64>)> {
    if let (Some(true), Some(g), Some(s)) = (grid_short(f), v(&f.grid_blocks), v(&f.sm_count)) {
        return Some((estimate::grid(g, s), None));
    }
    let w = v(&f.waves_per_sm).filter(|w| *w > 0.0 && *w < t::GRID_FEW_WAVES)?;
    f.grid_blocks.as_ref()?;
    Some((estimate::few_waves(w), Some(w)))
}

/// Launch shape: a launch of a few microseconds is launch-bound whatever its shape; otherwise fewer
/// blocks than SMs leave SMs idle, and under half a wave leaves most of every SM's block slots empty.
pub fn launch_shape(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let duration_us = v(&f.duration_ns).map(|d| d / 1000.0);
    let shortfall = grid_shortfall(f);
    let grid_facts = |facts: &mut Vec<FactKey>, waves: Option<f64>| {
        facts.extend([FactKey::GridBlocks, FactKey::SmCount]);
        if waves.is_some() {
            facts.push(FactKey::WavesPerSm);
        }
    };
    if ctx.regime == Some(BoundKind::Launch) {
        let (cat, raw, waves) = match shortfall {
            Some((raw, waves)) => (Category::GridTooSmall, raw, waves),
            None => (Category::LatencyBound, 100.0 - ctx.busiest.map_or(0.0, |b| b.1), None),
        };
        let mut facts = vec![FactKey::DurationNs];
        if cat == Category::GridTooSmall {
            grid_facts(&mut facts, waves);
        }
        if let Some(bu) = ctx.busiest {
            facts.push(bu.2);
        }
        return Some(Candidate::new(
            "launch-bound",
            cat,
            facts,
            Some(raw),
            json!({"duration_us": duration_us.unwrap_or(0.0), "grid": v(&f.grid_blocks), "sms": v(&f.sm_count), "waves": waves, "busiest": ctx.busiest.map(|b| b.1)}),
        ));
    }
    let (raw, waves) = shortfall?;
    let (g, s) = (v(&f.grid_blocks), v(&f.sm_count));
    let floor_capped = estimate::cap(Category::GridTooSmall, f).is_some_and(|c| c.unit == "launch cost" && c.pct < raw);
    let mut facts = vec![];
    grid_facts(&mut facts, waves);
    Some(Candidate::new(
        "grid-too-small",
        Category::GridTooSmall,
        facts,
        Some(raw),
        json!({
            "grid": g, "sms": s, "idle_pct": raw, "idle_sms": s.zip(g).map(|(s, g)| s - g), "waves": waves,
            "floor_capped": floor_capped, "duration_us": duration_us.unwrap_or(0.0),
        }),
    ))
}

/// A block size that is not a multiple of the warp size.
pub fn block_size(ctx: &Ctx) -> Option<Candidate> {
    let threads = v(&ctx.f.block_threads)?;
    let rem = threads % t::WARP_SIZE;
    (rem != 0.0).then(|| {
        Candidate::new(
            "block-size-not-warp-multiple",
            Category::BlockSize,
            vec![FactKey::BlockThreads],
            Some(estimate::block_size(threads)),
            json!({"threads": threads, "idle_lanes": t::WARP_SIZE - rem}),
        )
    })
}

/// The last partial wave.
pub fn tail_effect(ctx: &Ctx) -> Option<Candidate> {
    let (tail, w) = (v(&ctx.f.tail_idle_pct)?, v(&ctx.f.waves_per_sm)?);
    (tail >= t::TAIL_IDLE_PCT).then(|| {
        Candidate::new(
            "tail-effect",
            Category::TailEffect,
            vec![FactKey::TailIdlePct, FactKey::WavesPerSm],
            Some(estimate::tail_on(w, ctx.busiest.map_or(0.0, |b| b.1))),
            json!({"waves": w, "tail": tail, "busiest": ctx.busiest.map(|b| b.1), "busiest_unit": ctx.busiest.map(|b| b.0)}),
        )
    })
}

/// Local memory: spilled registers or per-thread arrays in local memory. Fires on spill instructions,
/// or when local memory is a large share of the traffic (a register-tiled kernel whose accumulators
/// are indexed at run time lives in local memory without a single "spill"). Its estimate is the local
/// share of the busiest memory unit's time that the launch waits on ([`estimate::local_memory`]).
pub fn local_memory(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let spills = v(&f.spill_instructions).filter(|s| *s > 0.0);
    let share = v(&f.local_traffic_pct).filter(|s| *s >= t::LOCAL_TRAFFIC_PCT);
    if spills.is_none() && share.is_none() {
        return None;
    }
    let est = estimate::local_memory(f);
    let mut facts = vec![];
    for k in [FactKey::SpillInstructions, FactKey::LocalMemoryInstructions, FactKey::LocalMemorySectors, FactKey::LocalTrafficPct] {
        if f.get(k).is_some() {
            facts.push(k);
        }
    }
    if let Some(e) = &est {
        facts.extend(e.unit_key);
        if e.stall_share_pct.is_some() {
            facts.push(FactKey::StallMemorySharePct);
        }
    }
    Some(Candidate::new(
        "register-spilling",
        Category::RegisterSpilling,
        facts,
        est.as_ref().map(|e| e.estimate_pct),
        json!({
            "spills": spills,
            "local_inst": v(&f.local_memory_instructions),
            "local_share": v(&f.local_traffic_pct),
            "unit": est.as_ref().map(|e| e.unit),
            "unit_pct": est.as_ref().map(|e| e.unit_pct),
            "stall_share": est.as_ref().and_then(|e| e.stall_share_pct),
        }),
    ))
}

/// FP64: the FP64 pipe busy, or, on a GPU with few FP64 units, the FP64 pipe as busy as the SM itself
/// (the SM spends its time on FP64 arithmetic, and dependent FP64 instructions wait on the pipe even
/// below its peak). Moving the work to FP32 saves the pipe's time less what FP32 takes (1/ratio).
pub fn fp64_pipe(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let p = v(&f.fp64_pipe_pct)?;
    let ratio = v(&f.fp32_to_fp64_ratio).filter(|r| *r >= 1.0);
    let sm = v(&f.sm_throughput_pct);
    let sets_sm = sm.is_some_and(|s| p >= t::FP64_SETS_SM_MIN_PCT && p >= s - t::PIPE_IS_SM_PCT);
    let slow = ratio.is_some_and(|r| r >= t::FP64_SLOW_RATIO);
    // Not on a memory-bound launch: there the memory unit, not the SM's FP64 work, sets the time.
    let limits = sets_sm && slow && ctx.regime != Some(BoundKind::Memory);
    if p < t::FP64_BUSY_PCT && !limits {
        return None;
    }
    let mut facts = vec![FactKey::Fp64PipePct];
    if ratio.is_some() {
        facts.push(FactKey::Fp32ToFp64Ratio);
    }
    if limits {
        facts.push(FactKey::SmThroughputPct);
    }
    let raw = estimate::fp64(p, ratio, limits);
    Some(Candidate::new("fp64-pipe", Category::Fp64, facts, Some(raw), json!({"pipe": p, "ratio": ratio, "sm": sm, "sets_sm": limits})))
}

/// Busiest pipes that carry a matrix multiply's work: FMA (FP32) and FP16.
const MATRIX_PIPES: &[&str] = &["FMA", "FP16"];

/// Whether the kernel's own evidence says its work is a matrix multiply: a GEMM, convolution or
/// attention kernel by its name, or, for a kernel of no known family, FMA-dominated FLOPs on a busiest
/// pipe measured as FMA or FP16, with operands staged through shared memory (tiles: shared wavefronts
/// measured). The dtype alone is no evidence (an FP16 elementwise kernel has nothing for tensor cores),
/// nor is FMA-heavy arithmetic alone (a polynomial in Horner form is all FMA and no matrix), nor a
/// metric that was not collected.
fn matrix_shaped(ctx: &Ctx) -> bool {
    use super::kind::Family;
    let f = ctx.f;
    let fma_heavy = v(&f.roofline.fma_flop_share_pct).is_some_and(|s| s >= t::MATRIX_FMA_SHARE_PCT);
    let matrix_pipe = f.busiest_pipe_pct.as_ref().is_some_and(|p| MATRIX_PIPES.iter().any(|m| p.label.contains(&format!("pipe: {m}"))));
    let not_matrix_pipe = f.busiest_pipe_pct.is_some() && !matrix_pipe;
    match ctx.kind.family {
        Family::Gemm | Family::Attention => !not_matrix_pipe,
        Family::Other => fma_heavy && matrix_pipe && f.shared_bank_conflict_pct.is_some(),
        _ => false,
    }
}

/// Tensor cores unused: only for compute-bound work that looks like a matrix multiply (FMA-dominated
/// FLOPs on an FMA or FP16 pipe). An ALU-, XU- or LSU-bound kernel, or one whose FLOPs are adds, is
/// not matrix work: tensor cores cannot help it.
pub fn tensor_cores_unused(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    if ctx.regime != Some(BoundKind::Compute) {
        return None;
    }
    let tp = v(&f.tensor_pipe_pct).filter(|tp| *tp < t::TENSOR_UNUSED_PCT)?;
    let fp = v(&f.roofline.fp32_flop).unwrap_or(0.0) + v(&f.roofline.fp16_flop).unwrap_or(0.0);
    let dp = v(&f.roofline.fp64_flop).unwrap_or(0.0);
    if fp <= 0.0 || fp <= dp {
        return None;
    }
    if !matrix_shaped(ctx) {
        return None;
    }
    let mut facts = vec![FactKey::TensorPipePct, FactKey::SmThroughputPct];
    for k in [FactKey::Fp32Flop, FactKey::FmaFlopSharePct, FactKey::BusiestPipePct] {
        if f.get(k).is_some() {
            facts.push(k);
        }
    }
    let s = v(&f.sm_throughput_pct).unwrap_or(0.0);
    Some(Candidate::new("tensor-cores-unused", Category::TensorCoreUnused, facts, Some(s * 0.5), json!({"sm": s, "tensor": tp})))
}

/// Contended global atomics: the L2 atomic unit busy, or (when its busiest slice was not collected)
/// the signature of every warp reducing into one address: atomics a visible share of the
/// instructions, one sector per request, the SMs nearly idle and the warps waiting on memory and drain.
pub fn atomic_contention(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let busy = v(&f.l2_atomic_busy_pct);
    let requests = v(&f.atomic_requests).filter(|r| *r > 0.0);
    let by_unit = busy.filter(|a| *a >= t::ATOMIC_BUSY_PCT);
    let waiting = v(&f.stall_memory_share_pct).unwrap_or(0.0) + v(&f.stall_drain_share_pct).unwrap_or(0.0);
    let by_stalls = requests.is_some()
        && matches!(ctx.regime, Some(BoundKind::Latency | BoundKind::GridTooSmall))
        && (f.stall_memory_share_pct.is_some() || f.stall_drain_share_pct.is_some())
        && waiting >= t::ATOMIC_WAIT_SHARE_PCT
        && v(&f.atomic_sectors_per_request).is_none_or(|s| s <= t::CONTENDED_SECTORS_PER_REQUEST)
        && match (requests, v(&f.warp_instructions)) {
            (Some(r), Some(i)) if i > 0.0 => 100.0 * r / i >= t::ATOMIC_INST_SHARE_PCT,
            _ => true,
        };
    if by_unit.is_none() && !by_stalls {
        return None;
    }
    let mut facts = vec![];
    for k in [
        FactKey::L2AtomicBusyPct,
        FactKey::AtomicRequests,
        FactKey::AtomicSectorsPerRequest,
        FactKey::WarpInstructions,
        FactKey::StallMemorySharePct,
        FactKey::StallDrainSharePct,
    ] {
        if f.get(k).is_some() {
            facts.push(k);
        }
    }
    let raw = estimate::atomics(by_unit, by_stalls.then_some(waiting));
    Some(Candidate::new(
        "atomic-contention",
        Category::AtomicsContention,
        facts,
        Some(raw),
        json!({"busy": busy, "requests": requests, "waiting": by_stalls.then_some(waiting), "sectors_per_request": v(&f.atomic_sectors_per_request)}),
    ))
}

/// The regime itself: memory-, compute- or latency-bound (launch- and grid-bound are [`launch_shape`]'s).
pub fn regime_finding(ctx: &Ctx) -> Option<Candidate> {
    let f = ctx.f;
    let sm = v(&f.sm_throughput_pct);
    match f.bound.as_ref()?.kind {
        BoundKind::Memory => {
            let (unit, pct, key) =
                ctx.busiest_mem.unwrap_or(("memory", v(&f.memory_throughput_pct).unwrap_or(0.0), FactKey::MemoryThroughputPct));
            let mut facts = vec![key];
            if f.sm_throughput_pct.is_some() {
                facts.push(FactKey::SmThroughputPct);
            }
            Some(Candidate::new(
                "sol-memory",
                Category::MemoryBound,
                facts,
                None,
                json!({"unit": unit, "unit_pct": pct, "sm": sm, "headroom": 100.0 - pct}),
            ))
        }
        BoundKind::Compute => {
            let s = sm.unwrap_or(0.0);
            let mut facts = vec![FactKey::SmThroughputPct];
            if f.memory_throughput_pct.is_some() {
                facts.push(FactKey::MemoryThroughputPct);
            }
            let pipe = f.busiest_pipe_pct.as_ref();
            if pipe.is_some() {
                facts.push(FactKey::BusiestPipePct);
            }
            let pipe_name = pipe.map(|p| p.label.trim_start_matches("Busiest SM pipe: ").to_string());
            Some(Candidate::new(
                "sol-compute",
                Category::ComputeBound,
                facts,
                None,
                json!({"sm": s, "mem": v(&f.memory_throughput_pct), "headroom": 100.0 - s, "pipe": pipe_name, "pipe_pct": pipe.map(|p| p.value)}),
            ))
        }
        BoundKind::Latency => {
            let (unit, pct, key) = ctx.busiest.unwrap_or(("none", 0.0, FactKey::MemoryThroughputPct));
            let mut facts = vec![key];
            let stall = f.stalls.first();
            if let Some(s) = stall {
                facts.push(s.cycles_per_issue.key);
            }
            Some(Candidate::new(
                "sol-latency",
                Category::LatencyBound,
                facts,
                Some(100.0 - pct),
                json!({
                    "unit": unit, "busiest": pct,
                    "stall": stall.map(|s| s.reason.replace('_', " ")),
                    "stall_share": stall.and_then(|s| s.share_pct).unwrap_or(0.0),
                    "stall_hint": stall.map(|s| text::stall_hint(&s.reason)).unwrap_or(""),
                }),
            ))
        }
        BoundKind::GridTooSmall | BoundKind::Launch => None,
    }
}
