//! Estimates: how much of a launch's time a fix can save, as an upper bound that physics allows.
//!
//! Each category states which units its fix relieves ([`relieves`]). A fix that does not reduce a
//! unit's work cannot make the launch faster than that unit allows, so its estimate is capped at the
//! headroom `100 - utilisation` of the busiest unit it does not relieve ([`cap`]). No fix of a
//! launch's code can remove the fixed cost of launching it either ([`thresholds::LAUNCH_FLOOR_NS`]).
//! The formulas, their metrics and their calibration against measured twin kernels are written up in
//! `docs/estimates.md`; each function below names its section there.

use super::regime::utilisation;
use super::thresholds as t;
use super::Category;
use crate::facts::{FactKey, Facts};
use serde::Serialize;

/// Which units' work a fix reduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relieves {
    /// Launch shape, occupancy, latency hiding: the same work on every unit.
    Nothing,
    /// SM pipelines (instructions).
    Sm,
    /// Shared memory: the SM's MIO pipe and the L1/TEX data banks it shares with L1.
    SmAndL1,
    /// Memory traffic (L1, L2, DRAM).
    Memory,
}

pub fn relieves(c: Category) -> Relieves {
    use Category::*;
    match c {
        OccupancyRegisters | OccupancySharedMemory | OccupancyOther | GridTooSmall | TailEffect | BlockSize | LatencyBound => {
            Relieves::Nothing
        }
        SharedBankConflicts => Relieves::SmAndL1,
        Divergence | Fp64 | TensorCoreUnused | ComputeBound => Relieves::Sm,
        MemoryCoalescing | RegisterSpilling | AtomicsContention | MemoryBound => Relieves::Memory,
    }
}

/// Whether a fix that relieves `rel` reduces the work of `unit` ("SM", "DRAM", "L2", "L1/TEX", "memory").
pub fn relieves_unit(rel: Relieves, unit: &str) -> bool {
    match rel {
        Relieves::Nothing => false,
        Relieves::Sm => unit == "SM",
        Relieves::SmAndL1 => unit == "SM" || unit == "L1/TEX",
        Relieves::Memory => unit != "SM",
    }
}

/// The ceiling on any estimate for category `c`, and what sets it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cap {
    /// Most the fix can save, % of the launch's time.
    pub pct: f64,
    /// The unit whose headroom sets the cap ("DRAM", "SM", "launch cost", ...).
    pub unit: String,
    /// That unit's utilisation, % of peak (for the launch cost: its share of the duration).
    pub unit_pct: f64,
}

/// The most a fix of category `c` can save: the headroom of the busiest unit it does not relieve,
/// and the launch's time above the fixed launch cost. `None` when nothing bounds it (no utilisation
/// and no duration measured).
pub fn cap(c: Category, f: &Facts) -> Option<Cap> {
    let mut best: Option<Cap> = None;
    let mut units: Vec<(&'static str, f64)> = utilisation(f).into_iter().map(|u| (u.0, u.1)).collect();
    // L1/TEX measured only in its "active" form still bounds a fix that does not relieve it (the form
    // is at least the elapsed one, so the bound stays on the safe side); the regime never reads it.
    if !units.iter().any(|u| u.0 == "L1/TEX") {
        if let Some(l1) = f.l1_throughput_pct.as_ref().filter(|x| x.value <= crate::facts::MAX_PCT_OF_PEAK) {
            units.push(("L1/TEX", l1.value.min(100.0)));
        }
    }
    for (unit, pct) in units {
        if relieves_unit_of(c, unit, f) {
            continue;
        }
        let c = Cap { pct: (100.0 - pct).max(0.0), unit: unit.to_string(), unit_pct: pct };
        if best.as_ref().is_none_or(|b| c.pct < b.pct) {
            best = Some(c);
        }
    }
    if let Some(d) = f.duration_ns.as_ref().map(|d| d.value).filter(|d| *d > 0.0) {
        let floor = (100.0 * (1.0 - t::LAUNCH_FLOOR_NS / d)).max(0.0);
        if best.as_ref().is_none_or(|b| floor < b.pct) {
            best = Some(Cap { pct: floor, unit: "launch cost".into(), unit_pct: 100.0 * (t::LAUNCH_FLOOR_NS / d).min(1.0) });
        }
    }
    best
}

/// Whether a fix of category `c` reduces the work of `unit` on this launch ([`relieves_unit`], and the
/// SM for a memory fix when the SM is busy on its memory-instruction path).
pub fn relieves_unit_of(c: Category, unit: &str, f: &Facts) -> bool {
    let rel = relieves(c);
    relieves_unit(rel, unit) || (rel == Relieves::Memory && unit == "SM" && sm_busy_on_memory_path(f))
}

/// Whether the SM's busy share is its memory-instruction path: the busiest pipe is the LSU and as busy
/// as the SM. Wasted sectors then load the SM too (each request returns one wavefront per sector through
/// L1 into the register file), so a fix of the memory traffic relieves the SM as well.
pub fn sm_busy_on_memory_path(f: &Facts) -> bool {
    let (Some(sm), Some(pipe)) = (v(&f.sm_throughput_pct), f.busiest_pipe_pct.as_ref()) else { return false };
    pipe.label.contains("pipe: LSU") && pipe.value >= sm - t::PIPE_IS_SM_PCT
}

/// `raw` capped by [`cap`], clamped to 0..=100.
pub fn bounded(c: Category, f: &Facts, raw: f64) -> f64 {
    let raw = raw.clamp(0.0, 100.0);
    cap(c, f).map_or(raw, |cap| raw.min(cap.pct))
}

fn v(x: &Option<crate::facts::Fact>) -> Option<f64> {
    x.as_ref().map(|x| x.value)
}

/// Number of SMs that run blocks: the grid's blocks, at most the SM count.
fn busy_sms(f: &Facts) -> Option<f64> {
    match (v(&f.grid_blocks), v(&f.sm_count)) {
        (Some(g), Some(s)) => Some(g.min(s).max(1.0)),
        (None, Some(s)) => Some(s),
        (Some(g), None) if g <= 1.0 => Some(1.0),
        _ => None,
    }
}

/// Shared-memory bank conflicts (docs/estimates.md, "shared-bank-conflicts"): each extra wavefront
/// costs one cycle of the SM's shared-memory pipe, so the extra wavefronts on one SM over the
/// elapsed cycles are the share of time they take when that pipe is on the critical path.
/// Returns `(estimate %, extra wavefronts per SM)`.
pub fn bank_conflicts(f: &Facts) -> Option<(f64, f64)> {
    let excess = v(&f.shared_excess_wavefronts)?;
    let per_sm = excess / busy_sms(f)?;
    let cycles = v(&f.elapsed_cycles).filter(|c| *c > 0.0)?;
    Some((100.0 * per_sm / cycles, per_sm))
}

/// Lanes idle in an average warp instruction (docs/estimates.md, "divergence"): a warp-uniform
/// version issues `active/full` of the instructions; the saving is that share of the issue time
/// when the issue rate is known, else of the whole time.
pub fn inactive_lanes(active: f64, full: f64, issue_pct: Option<f64>) -> f64 {
    let idle = (1.0 - active / full).max(0.0);
    100.0 * idle * issue_pct.map_or(1.0, |i| (i / 100.0).clamp(0.0, 1.0))
}

/// Divergent branch targets alone (docs/estimates.md, "divergence"): calibrated on measured twins.
pub fn divergent_branches(divergent_pct: f64) -> f64 {
    t::DIVERGENT_BRANCH_COST * divergent_pct
}

/// Wasted share of global sectors (docs/estimates.md, "memory-coalescing"): ncu's excessive sectors,
/// else per direction `1 - bytes used / 32`, weighted by the sectors each direction moves when the
/// counts are known, else (sectors per request alone) `1 - 4 / sectors per request`, 4 being what a
/// warp of 4-byte words needs. Returns `(waste %, from sectors per request alone)`.
pub fn coalescing_waste_source(f: &Facts) -> Option<(f64, bool)> {
    if let Some(e) = v(&f.global_excessive_sectors_pct) {
        return Some((e, false));
    }
    // 0 bytes per sector is no access through the LSU at all (TMA copies, no stores), not waste.
    let ld = v(&f.global_load_bytes_per_sector).filter(|b| *b > 0.0).map(|b| 1.0 - (b / 32.0).min(1.0));
    let st = v(&f.global_store_bytes_per_sector).filter(|b| *b > 0.0).map(|b| 1.0 - (b / 32.0).min(1.0));
    let (nl, ns) = (v(&f.global_load_sectors), v(&f.global_store_sectors));
    let waste = match (ld, st, nl, ns) {
        (Some(a), Some(b), Some(x), Some(y)) if x + y > 0.0 => (a * x + b * y) / (x + y),
        (Some(a), None, _, _) => a,
        (None, Some(b), _, _) => b,
        // Both directions but no counts: the loads usually dominate; the smaller waste is the safe side.
        (Some(a), Some(b), _, _) => a.min(b),
        (None, None, ..) => {
            let spr =
                [v(&f.global_load_sectors_per_request), v(&f.global_store_sectors_per_request)].into_iter().flatten().fold(0.0, f64::max);
            if spr > t::IDEAL_SECTORS_PER_REQUEST {
                return Some((100.0 * (1.0 - t::IDEAL_SECTORS_PER_REQUEST / spr), true));
            }
            return None;
        }
    };
    Some((100.0 * waste, false))
}

/// The wasted share of global sectors (see [`coalescing_waste_source`]).
pub fn coalescing_waste(f: &Facts) -> Option<f64> {
    coalescing_waste_source(f).map(|w| w.0)
}

/// How much of a memory unit's time the launch waits on (docs/estimates.md, "what the warps wait on"):
/// 1 when the unit is saturated (at or above `SOL_SATURATED_PCT`: its queue sets the pace), else the
/// share of the waiting warps' stall cycles spent on that kind of access, when stalls were collected.
/// Returns `(factor 0..=1, the stall share used %)`.
pub fn wait_factor(unit_pct: f64, stall_share_pct: Option<f64>) -> (f64, Option<f64>) {
    if unit_pct >= t::SOL_SATURATED_PCT {
        return (1.0, None);
    }
    match stall_share_pct {
        Some(s) => ((s / 100.0).clamp(0.0, 1.0), Some(s)),
        None => (1.0, None),
    }
}

/// A memory-traffic estimate: what share of the time a fix of some traffic can explain.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficEstimate {
    /// Share of the relevant sectors the fix removes, %.
    pub waste_pct: f64,
    /// Share of the memory traffic that is global (the rest is local memory), %.
    pub global_share_pct: f64,
    /// The busiest memory unit, its utilisation and fact key.
    pub unit: &'static str,
    pub unit_pct: f64,
    pub unit_key: Option<FactKey>,
    /// The stall share used (None: the unit is saturated, or no stalls were collected).
    pub stall_share_pct: Option<f64>,
    /// L1's hit rate, when the unit is beyond L1 (L2, DRAM) and the rate was measured: only the
    /// wasted sectors that miss in L1 load that unit.
    pub l1_hit_pct: Option<f64>,
    /// Whether the waste comes from sectors per request alone.
    pub from_sectors_per_request: bool,
    /// The estimate, % of the launch's time (before [`cap`]).
    pub estimate_pct: f64,
}

/// Uncoalesced global access (docs/estimates.md, "memory-coalescing"): wasted sectors cost time only
/// as far as the memory system is what the launch waits on, so
/// `waste x global share of traffic x busiest memory unit's utilisation x wait factor`.
pub fn coalescing(f: &Facts) -> Option<TrafficEstimate> {
    let (waste, from_spr) = coalescing_waste_source(f)?;
    let global_share = v(&f.local_traffic_pct).map_or(100.0, |l| (100.0 - l).clamp(0.0, 100.0));
    let mem = super::regime::busiest_memory(f);
    let (unit, unit_pct, unit_key) = mem.map_or(("the memory system", 100.0, None), |m| (m.0, m.1, Some(m.2)));
    let (factor, stall) = wait_factor(unit_pct, v(&f.stall_memory_share_pct));
    // Re-reads of a wasted sector that hit in L1 never reach L2 or DRAM: beyond L1, only misses cost.
    // Only for a unit known to be beyond L1: ncu's combined "memory" throughput may be L1's own.
    let l1_hit = v(&f.l1_hit_rate_pct).filter(|_| matches!(unit, "L2" | "DRAM")).map(|h| h.clamp(0.0, 100.0));
    let reaching = l1_hit.map_or(1.0, |h| 1.0 - h / 100.0);
    let est = waste * reaching * (global_share / 100.0) * (unit_pct / 100.0) * factor;
    Some(TrafficEstimate {
        waste_pct: waste,
        global_share_pct: global_share,
        unit,
        unit_pct,
        unit_key,
        stall_share_pct: stall,
        l1_hit_pct: l1_hit,
        from_sectors_per_request: from_spr,
        estimate_pct: est,
    })
}

/// Local memory (docs/estimates.md, "register-spilling"): removing it removes its share of the traffic,
/// so `local share x busiest memory unit's utilisation x wait factor`. `None` without the local share.
pub fn local_memory(f: &Facts) -> Option<TrafficEstimate> {
    let share = v(&f.local_traffic_pct)?;
    let (unit, unit_pct, unit_key) = super::regime::busiest_memory(f).map(|m| (m.0, m.1, Some(m.2)))?;
    let (factor, stall) = wait_factor(unit_pct, v(&f.stall_memory_share_pct));
    Some(TrafficEstimate {
        waste_pct: share,
        global_share_pct: 100.0 - share,
        unit,
        unit_pct,
        unit_key,
        stall_share_pct: stall,
        l1_hit_pct: None,
        from_sectors_per_request: false,
        estimate_pct: share * unit_pct / 100.0 * factor,
    })
}

/// A bank-conflict estimate, on the same scale as every other cause.
#[derive(Debug, Clone, PartialEq)]
pub struct ConflictEstimate {
    /// Extra wavefronts per busy SM (when cycles were measured).
    pub per_sm: Option<f64>,
    /// The extra wavefronts' share of the elapsed cycles, % (or the conflicting share of the SM's work).
    pub pipe_share_pct: Option<f64>,
    /// The shared-memory stall share used (None: L1/shared is saturated, one block per SM, or no stalls were collected).
    pub stall_share_pct: Option<f64>,
    /// Every SM runs at most one block: the replays are on the block's critical path.
    pub one_block_per_sm: bool,
    pub estimate_pct: Option<f64>,
}

/// Shared-memory bank conflicts (docs/estimates.md, "shared-bank-conflicts"): the extra wavefronts'
/// share of the elapsed cycles ([`bank_conflicts`]), or without cycles the conflicting share of the
/// SM's work, times the wait factor on shared memory (MIO throttle + short scoreboard) unless L1/TEX
/// (where shared memory lives) is saturated.
pub fn shared_conflicts(f: &Facts, conflict_pct: f64) -> ConflictEstimate {
    let measured = bank_conflicts(f);
    let pipe = measured.map(|m| m.0).or_else(|| v(&f.sm_throughput_pct).map(|s| conflict_pct * s / 100.0));
    let l1 = v(&f.l1_throughput_pct).or(v(&f.sm_throughput_pct)).unwrap_or(0.0).min(100.0);
    // One block per SM: its warps meet at every barrier, so a warp held back by replays holds back the
    // block, and the waiting at the barrier is waiting on the replays. They are on the critical path.
    let one_block = one_block_per_sm(f);
    let (factor, stall) = if one_block { (1.0, None) } else { wait_factor(l1, v(&f.stall_shared_share_pct)) };
    ConflictEstimate {
        per_sm: measured.map(|m| m.1),
        pipe_share_pct: pipe,
        stall_share_pct: stall,
        one_block_per_sm: one_block,
        estimate_pct: pipe.map(|p| p * factor),
    }
}

/// Whether every SM runs at most one block of the grid (blocks <= SMs).
pub fn one_block_per_sm(f: &Facts) -> bool {
    matches!((v(&f.grid_blocks), v(&f.sm_count)), (Some(g), Some(s)) if g <= s)
}

/// FP64 (docs/estimates.md, "fp64"): the FP64 pipe's busy share, less what the same work costs in FP32
/// (1/ratio of it on this GPU; half when the ratio is unknown). When the pipe is what the SM spends its
/// time on (`sets_sm`) on a GPU with few FP64 units, the launch's time is the FP64 work's, busy or
/// waiting on it: all of it but the 1/ratio FP32 would take.
pub fn fp64(pipe_pct: f64, fp32_to_fp64_ratio: Option<f64>, sets_sm: bool) -> f64 {
    match fp32_to_fp64_ratio {
        Some(r) if r >= 1.0 && sets_sm => 100.0 * (1.0 - 1.0 / r),
        Some(r) if r >= 1.0 => pipe_pct * (1.0 - 1.0 / r),
        _ => pipe_pct * 0.5,
    }
}

/// Contended atomics (docs/estimates.md, "atomics-contention"): half the busiest L2 slice's atomic busy
/// time, or, when contention shows in the stalls, the share of stall cycles waiting on memory and drain.
pub fn atomics(l2_atomic_busy_pct: Option<f64>, waiting_share_pct: Option<f64>) -> f64 {
    let by_unit = l2_atomic_busy_pct.map_or(0.0, |a| a * 0.5);
    let by_wait = waiting_share_pct.unwrap_or(0.0);
    by_unit.max(by_wait)
}

/// Occupancy (docs/estimates.md, "occupancy"): more warps can at most fill the empty warp slots.
pub fn occupancy(theoretical_pct: f64) -> f64 {
    100.0 - theoretical_pct
}

/// Achieved below theoretical occupancy (docs/estimates.md, "occupancy"): the empty share of the slots the launch could fill.
pub fn occupancy_gap(theoretical_pct: f64, achieved_pct: f64) -> f64 {
    100.0 * (theoretical_pct - achieved_pct).max(0.0) / theoretical_pct.max(1e-9)
}

/// Too few blocks (docs/estimates.md, "grid-too-small"): the idle SMs' share.
pub fn grid(blocks: f64, sms: f64) -> f64 {
    100.0 * (1.0 - blocks / sms).max(0.0)
}

/// Under half a wave with a block on every SM (docs/estimates.md, "grid-too-small"): the empty share
/// of the block slots; more, smaller blocks fill them and hide latency, up to the busiest unit's peak.
pub fn few_waves(waves: f64) -> f64 {
    100.0 * (1.0 - waves).clamp(0.0, 1.0)
}

/// Tail effect (docs/estimates.md, "tail-effect"): perfectly balanced waves would take `waves`
/// wave-times instead of `ceil(waves)`.
pub fn tail(waves: f64) -> f64 {
    if waves <= 1.0 {
        return 0.0;
    }
    100.0 * (waves.ceil() - waves) / waves.ceil()
}

/// The tail's cost on a launch whose busiest unit is at `busiest_pct` (docs/estimates.md, "tail-effect"):
/// the blocks of a partial last wave share that unit with fewer others and run faster by up to the
/// share the full waves left them, so only the latency-bound part of the time, `1 - busiest`, is idle
/// slots waiting on a full wave's time.
pub fn tail_on(waves: f64, busiest_pct: f64) -> f64 {
    tail(waves) * (1.0 - busiest_pct.clamp(0.0, 100.0) / 100.0)
}

/// Block size not a multiple of 32 (docs/estimates.md, "block-size"): idle lanes of the issued ones.
pub fn block_size(threads: f64) -> f64 {
    let warps = (threads / t::WARP_SIZE).ceil();
    100.0 * (warps * t::WARP_SIZE - threads) / (warps * t::WARP_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Fact, Facts};

    fn fact(key: FactKey, value: f64) -> Option<Fact> {
        Some(Fact { key, label: key.as_str(), value, unit: "", evidence: vec![] })
    }

    fn facts(sm: f64, dram: f64, duration_ns: f64) -> Facts {
        Facts {
            sm_throughput_pct: fact(FactKey::SmThroughputPct, sm),
            dram_throughput_pct: fact(FactKey::DramThroughputPct, dram),
            duration_ns: fact(FactKey::DurationNs, duration_ns),
            ..Facts::default()
        }
    }

    #[test]
    fn caps_follow_the_units_a_fix_relieves() {
        let f = facts(46.5, 91.7, 239_008.0);
        // Occupancy relieves nothing: DRAM at 91.7% leaves 8.3%.
        let c = cap(Category::OccupancyOther, &f).unwrap();
        assert_eq!(c.unit, "DRAM");
        approx::assert_relative_eq!(c.pct, 8.3, epsilon = 1e-9);
        // Bank conflicts relieve the SM: DRAM still bounds them.
        approx::assert_relative_eq!(bounded(Category::SharedBankConflicts, &f, 50.0), 8.3, epsilon = 1e-9);
        // Coalescing relieves memory: the SM's headroom (53.5%) bounds it.
        approx::assert_relative_eq!(bounded(Category::MemoryCoalescing, &f, 70.0), 53.5, epsilon = 1e-9);
        approx::assert_relative_eq!(bounded(Category::MemoryCoalescing, &f, 20.0), 20.0, epsilon = 1e-9);
    }

    #[test]
    fn launch_cost_bounds_short_launches() {
        // A 2.5 us launch: no fix of its code removes the 1.5 us launch cost.
        let f = facts(0.1, 0.5, 2500.0);
        let c = cap(Category::GridTooSmall, &f).unwrap();
        assert_eq!(c.unit, "launch cost");
        approx::assert_relative_eq!(c.pct, 40.0, epsilon = 1e-9);
        // Long launches are bounded by units only.
        assert_eq!(cap(Category::GridTooSmall, &facts(10.0, 20.0, 1e6)).unwrap().unit, "DRAM");
    }

    #[test]
    fn bank_conflicts_cost_a_cycle_per_extra_wavefront() {
        // smemSquare setColReadCol on an RTX 4090: 1984 extra wavefronts, one block, 2560 ns at 2.52 GHz;
        // the padded twin is 32.5% faster.
        let f = Facts {
            shared_excess_wavefronts: fact(FactKey::SharedExcessWavefronts, 1984.0),
            grid_blocks: fact(FactKey::GridBlocks, 1.0),
            sm_count: fact(FactKey::SmCount, 128.0),
            elapsed_cycles: fact(FactKey::ElapsedCycles, 2560.0 * 2.52),
            ..Facts::default()
        };
        let (est, per_sm) = bank_conflicts(&f).unwrap();
        assert_eq!(per_sm, 1984.0);
        assert!((est - 30.75).abs() < 0.1, "{est}");
        // Spread over 128 SMs the same count is 1/128 of the cost.
        let f = Facts { grid_blocks: fact(FactKey::GridBlocks, 4096.0), ..f };
        assert!(bank_conflicts(&f).unwrap().0 < 0.3);
    }

    #[test]
    fn formulas() {
        approx::assert_relative_eq!(inactive_lanes(8.0, 32.0, None), 75.0);
        approx::assert_relative_eq!(inactive_lanes(8.0, 32.0, Some(40.0)), 30.0);
        approx::assert_relative_eq!(divergent_branches(9.68), 29.04, epsilon = 1e-9);
        approx::assert_relative_eq!(occupancy(18.75), 81.25);
        approx::assert_relative_eq!(occupancy_gap(100.0, 74.45), 25.55, epsilon = 1e-9);
        approx::assert_relative_eq!(grid(96.0, 132.0), 27.27, epsilon = 0.01);
        approx::assert_relative_eq!(tail(1.25), 37.5);
        approx::assert_relative_eq!(tail(78.77), 0.29, epsilon = 0.01);
        assert_eq!(tail(0.7), 0.0);
        approx::assert_relative_eq!(block_size(100.0), 21.875);
    }

    #[test]
    fn coalescing_weights_directions_by_traffic() {
        // One badly strided store stream among many coalesced loads is not a coalescing problem.
        let f = Facts {
            global_load_bytes_per_sector: fact(FactKey::GlobalLoadBytesPerSector, 32.0),
            global_store_bytes_per_sector: fact(FactKey::GlobalStoreBytesPerSector, 4.0),
            global_load_sectors: fact(FactKey::GlobalLoadSectors, 1e6),
            global_store_sectors: fact(FactKey::GlobalStoreSectors, 1e3),
            ..Facts::default()
        };
        assert!(coalescing_waste(&f).unwrap() < 0.1);
        // A direction with 0 bytes per sector moved nothing through the LSU (TMA): no waste, no finding.
        let tma = Facts { global_load_bytes_per_sector: fact(FactKey::GlobalLoadBytesPerSector, 0.0), ..Facts::default() };
        assert_eq!(coalescing_waste(&tma), None);
        // ncu's excessive-sectors share wins when present.
        let f = Facts { global_excessive_sectors_pct: fact(FactKey::GlobalExcessiveSectorsPct, 0.0), ..f };
        assert_eq!(coalescing_waste(&f), Some(0.0));
        // 32 sectors per request with nothing else known: 4 would do for 4-byte words.
        let f = Facts { global_load_sectors_per_request: fact(FactKey::GlobalLoadSectorsPerRequest, 32.0), ..Facts::default() };
        assert_eq!(coalescing_waste(&f), Some(87.5));
    }
}
