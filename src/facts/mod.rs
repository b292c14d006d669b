//! Facts: the numbers an expert reads first, derived from one launch's raw metrics.
//!
//! Every [`Fact`] carries its provenance: the raw metrics it was computed from, with their values
//! and units exactly as the profile wrote them. A fact whose metrics are missing is absent
//! (`None`), never guessed. Metric names tried for each fact are listed in order of preference:
//! the name Nsight Compute's sections use first, then older or alternative names.

pub mod catalogue;
mod families;
mod key;

pub(crate) use families::stall_key;
pub use key::{FactKey, UnknownFactKey};

use crate::profile::{Launch, Metric, Unit};
use serde::Serialize;

/// One raw metric a fact rests on, as the profile wrote it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub metric: String,
    /// Normalised value (the unit is `unit`).
    pub value: f64,
    pub unit: String,
    pub raw_value: String,
    pub raw_unit: String,
    pub origin: String,
}

/// A derived number with its unit and the metrics it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    /// Stable identifier, e.g. `sm_throughput_pct` (used by rules, prompts and the validator).
    pub key: FactKey,
    /// Human label, e.g. "Compute (SM) throughput".
    pub label: &'static str,
    pub value: f64,
    /// Unit of `value`: "ns", "%", "byte", "byte/sector", "FLOP/byte", ...
    pub unit: &'static str,
    /// The raw metrics used; for a value copied from one metric there is exactly one.
    pub evidence: Vec<Evidence>,
}

impl Fact {
    /// True when the value is a raw metric's own value (not computed from several).
    pub fn is_raw(&self) -> bool {
        self.evidence.len() == 1 && (self.evidence[0].value - self.value).abs() <= 1e-9 * self.value.abs().max(1.0)
    }
}

/// Where the time goes, in Nsight Compute's speed-of-light terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoundKind {
    /// SM throughput is the highest and at least the busy threshold (`rules::thresholds::SOL_BUSY_PCT`).
    Compute,
    /// Memory throughput is the highest and at least the busy threshold.
    Memory,
    /// Neither SM nor memory throughput reaches the busy threshold: the kernel waits on latency.
    Latency,
    /// Fewer blocks than SMs (or under one wave at low throughput): the GPU is not filled.
    GridTooSmall,
    /// A launch of a few microseconds that does not fill one wave: launch overhead and latency dominate.
    Launch,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bound {
    pub kind: BoundKind,
    /// The busiest unit measured ("SM", "DRAM", "L2", "L1/TEX", or "memory" when only ncu's combined
    /// memory throughput is known), by elapsed-based % of peak.
    pub busiest_unit: Option<&'static str>,
    /// Its utilisation, % of peak (capped at 100).
    pub busiest_pct: Option<f64>,
    /// The facts the classification used (keys).
    pub because: Vec<FactKey>,
}

/// What limits theoretical occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limiter {
    Registers,
    SharedMemory,
    Warps,
    Blocks,
    Barriers,
}

impl Limiter {
    pub fn label(self) -> &'static str {
        match self {
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared memory",
            Limiter::Warps => "warps (block size)",
            Limiter::Blocks => "blocks per SM",
            Limiter::Barriers => "barriers",
        }
    }

    /// What the limit is, in the words a GPU programmer acts on ("the registers each thread uses").
    pub fn resource(self) -> &'static str {
        match self {
            Limiter::Registers => "the registers each thread uses",
            Limiter::SharedMemory => "the shared memory each block uses",
            Limiter::Warps => "the block size (warps per block against the SM's warp limit)",
            Limiter::Blocks => "the maximum number of resident blocks per SM",
            Limiter::Barriers => "the barriers each block uses",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OccupancyLimit {
    pub limiter: Limiter,
    /// Blocks per SM allowed by this resource (the smallest of the limits).
    pub blocks_per_sm: Fact,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stall {
    /// ncu's reason name: "long_scoreboard", "barrier", ...
    pub reason: String,
    /// Average warp cycles stalled on this reason per issued instruction.
    pub cycles_per_issue: Fact,
    /// Share of all stall cycles, percent (when the total is known).
    pub share_pct: Option<f64>,
}

/// All facts for one launch. Fields are `None` when the profile lacks the metrics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Facts {
    pub duration_ns: Option<Fact>,
    pub sm_throughput_pct: Option<Fact>,
    pub memory_throughput_pct: Option<Fact>,
    pub dram_throughput_pct: Option<Fact>,
    pub l1_throughput_pct: Option<Fact>,
    pub l2_throughput_pct: Option<Fact>,
    /// Share of global-load sectors served by L1 (re-reads L1 absorbs never reach L2 or DRAM).
    pub l1_hit_rate_pct: Option<Fact>,
    pub bound: Option<Bound>,
    pub achieved_occupancy_pct: Option<Fact>,
    pub theoretical_occupancy_pct: Option<Fact>,
    pub occupancy_limit: Option<OccupancyLimit>,
    pub registers_per_thread: Option<Fact>,
    pub shared_mem_per_block_bytes: Option<Fact>,
    /// Top stall reasons, largest first (at most 3).
    pub stalls: Vec<Stall>,
    pub warp_cycles_per_issue: Option<Fact>,
    pub issue_slots_busy_pct: Option<Fact>,
    /// Bytes used per 32-byte sector by global loads (32 = perfect).
    pub global_load_bytes_per_sector: Option<Fact>,
    pub global_store_bytes_per_sector: Option<Fact>,
    /// Sectors per global load request (4 = perfect for 4-byte words).
    pub global_load_sectors_per_request: Option<Fact>,
    pub global_store_sectors_per_request: Option<Fact>,
    /// Percent of global L2 sectors that an ideal access pattern would not need.
    pub global_excessive_sectors_pct: Option<Fact>,
    /// Percent of shared-memory wavefronts caused by bank conflicts.
    pub shared_bank_conflict_pct: Option<Fact>,
    pub shared_bank_conflicts: Option<Fact>,
    /// Average active (predicated-on) threads per executed warp instruction (32 = no divergence).
    pub active_threads_per_warp: Option<Fact>,
    pub branch_uniform_pct: Option<Fact>,
    pub divergent_branch_targets: Option<Fact>,
    pub block_threads: Option<Fact>,
    pub grid_blocks: Option<Fact>,
    pub sm_count: Option<Fact>,
    pub waves_per_sm: Option<Fact>,
    /// Percent of the last wave left idle (tail effect), when more than one wave runs.
    pub tail_idle_pct: Option<Fact>,
    pub spill_instructions: Option<Fact>,
    /// Local-memory sectors moved (spills or local arrays).
    pub local_memory_sectors: Option<Fact>,
    pub tensor_pipe_pct: Option<Fact>,
    pub fp64_pipe_pct: Option<Fact>,
    pub atomic_requests: Option<Fact>,
    pub l2_atomic_busy_pct: Option<Fact>,
    /// SM clock: elapsed cycles per second, or the device's rated clock.
    pub sm_clock_hz: Option<Fact>,
    /// Elapsed SM cycles (average over SMs), or duration x clock.
    pub elapsed_cycles: Option<Fact>,
    /// Shared-memory wavefronts beyond one per request: the bank conflicts' extra passes.
    pub shared_excess_wavefronts: Option<Fact>,
    /// Warp instructions executed.
    pub warp_instructions: Option<Fact>,
    /// Global load / store sectors moved through L1 (for the share of traffic an access pattern causes).
    pub global_load_sectors: Option<Fact>,
    pub global_store_sectors: Option<Fact>,
    /// Share of branch targets where the threads of a warp diverged (from the target counts).
    pub divergent_branch_pct: Option<Fact>,
    /// Local-memory instructions executed (spills and local arrays).
    pub local_memory_instructions: Option<Fact>,
    /// Local memory's share of the memory traffic (L2 sectors, else L1 sectors), percent.
    pub local_traffic_pct: Option<Fact>,
    /// Sectors per global atomic/reduction request (1: every thread of a warp hits one address).
    pub atomic_sectors_per_request: Option<Fact>,
    /// The busiest SM pipe, % of peak; its label names the pipe.
    pub busiest_pipe_pct: Option<Fact>,
    /// FP32 to FP64 throughput ratio of the GPU (32 or 64 on consumer GPUs, 2 on data-centre GPUs).
    pub fp32_to_fp64_ratio: Option<Fact>,
    /// Share of the waiting warps' stall cycles spent on global/local memory (long scoreboard + LG throttle).
    pub stall_memory_share_pct: Option<Fact>,
    /// ... on shared memory and the MIO queue (MIO throttle + short scoreboard).
    pub stall_shared_share_pct: Option<Fact>,
    /// ... draining stores and memory fences at exit (drain + membar).
    pub stall_drain_share_pct: Option<Fact>,
    pub roofline: Roofline,
    /// Values not used because they are measurement artefacts.
    pub artifacts: Vec<Artifact>,
}

/// Roofline position: FLOPs by precision, DRAM traffic, arithmetic intensity, achieved vs peak.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Roofline {
    pub fp64_flop: Option<Fact>,
    pub fp32_flop: Option<Fact>,
    pub fp16_flop: Option<Fact>,
    pub dram_bytes: Option<Fact>,
    /// FP32+FP64+FP16 FLOPs per DRAM byte.
    pub arithmetic_intensity: Option<Fact>,
    pub achieved_flop_per_s: Option<Fact>,
    pub peak_fp32_flop_per_s: Option<Fact>,
    pub peak_dram_bytes_per_s: Option<Fact>,
    /// Percent of the roofline ceiling at this intensity: min(peak FLOP/s, AI * peak bandwidth).
    pub pct_of_roof: Option<Fact>,
    /// Share of the FP32/FP16 FLOPs done by fused multiply-adds (matrix multiplies are nearly all FMA).
    pub fma_flop_share_pct: Option<Fact>,
}

impl Facts {
    /// Every fact present, in a stable order (for prompts, rendering and validation).
    pub fn all(&self) -> Vec<&Fact> {
        let mut v: Vec<&Fact> = [
            &self.duration_ns,
            &self.sm_throughput_pct,
            &self.memory_throughput_pct,
            &self.dram_throughput_pct,
            &self.l1_throughput_pct,
            &self.l2_throughput_pct,
            &self.l1_hit_rate_pct,
            &self.achieved_occupancy_pct,
            &self.theoretical_occupancy_pct,
            &self.registers_per_thread,
            &self.shared_mem_per_block_bytes,
            &self.warp_cycles_per_issue,
            &self.issue_slots_busy_pct,
            &self.global_load_bytes_per_sector,
            &self.global_store_bytes_per_sector,
            &self.global_load_sectors_per_request,
            &self.global_store_sectors_per_request,
            &self.global_excessive_sectors_pct,
            &self.shared_bank_conflict_pct,
            &self.shared_bank_conflicts,
            &self.active_threads_per_warp,
            &self.branch_uniform_pct,
            &self.divergent_branch_targets,
            &self.block_threads,
            &self.grid_blocks,
            &self.sm_count,
            &self.waves_per_sm,
            &self.tail_idle_pct,
            &self.spill_instructions,
            &self.local_memory_sectors,
            &self.tensor_pipe_pct,
            &self.fp64_pipe_pct,
            &self.atomic_requests,
            &self.l2_atomic_busy_pct,
            &self.sm_clock_hz,
            &self.elapsed_cycles,
            &self.shared_excess_wavefronts,
            &self.warp_instructions,
            &self.global_load_sectors,
            &self.global_store_sectors,
            &self.divergent_branch_pct,
            &self.local_memory_instructions,
            &self.local_traffic_pct,
            &self.atomic_sectors_per_request,
            &self.busiest_pipe_pct,
            &self.fp32_to_fp64_ratio,
            &self.stall_memory_share_pct,
            &self.stall_shared_share_pct,
            &self.stall_drain_share_pct,
            &self.roofline.fp64_flop,
            &self.roofline.fp32_flop,
            &self.roofline.fp16_flop,
            &self.roofline.dram_bytes,
            &self.roofline.arithmetic_intensity,
            &self.roofline.achieved_flop_per_s,
            &self.roofline.peak_fp32_flop_per_s,
            &self.roofline.peak_dram_bytes_per_s,
            &self.roofline.pct_of_roof,
            &self.roofline.fma_flop_share_pct,
        ]
        .into_iter()
        .flatten()
        .collect();
        if let Some(o) = &self.occupancy_limit {
            v.push(&o.blocks_per_sm);
        }
        v.extend(self.stalls.iter().map(|s| &s.cycles_per_issue));
        v
    }

    /// Looks a fact up by key.
    pub fn get(&self, key: FactKey) -> Option<&Fact> {
        self.all().into_iter().find(|f| f.key == key)
    }

    /// Looks a fact up by a key read as text (a model's citation, a word of its prose); `None` when
    /// the name is no fact key or the fact is absent. Code that names a fact uses [`Facts::get`].
    pub fn get_named(&self, name: &str) -> Option<&Fact> {
        self.get(name.parse().ok()?)
    }

    /// Number of facts present.
    pub fn count(&self) -> usize {
        self.all().len()
    }
}

fn evidence(name: &str, m: Metric<'_>, value: f64) -> Evidence {
    Evidence {
        metric: name.to_string(),
        value,
        unit: m.unit.symbol(),
        raw_value: m.raw_value.to_string(),
        raw_unit: m.raw_unit.to_string(),
        origin: m.origin.to_string(),
    }
}

/// Reads metrics from a launch, remembering the values set aside as artefacts.
pub(crate) struct Reader<'a> {
    pub(crate) launch: &'a Launch,
    /// Percentages skipped as measurement artefacts (above 100% of peak).
    artifacts: std::cell::RefCell<Vec<Artifact>>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(launch: &'a Launch) -> Self {
        Reader { launch, artifacts: Default::default() }
    }

    /// First present numeric metric among `names`, with its evidence.
    pub(crate) fn num(&self, names: &[&str]) -> Option<(f64, Evidence)> {
        names.iter().find_map(|n| {
            let m = self.launch.metrics.get(n)?;
            let v = m.as_f64()?;
            Some((v, evidence(n, m, v)))
        })
    }

    /// Sum of the present metrics among `names` (each counted once), with their evidence.
    pub(crate) fn sum(&self, names: &[&str]) -> Option<(f64, Vec<Evidence>)> {
        let parts: Vec<(f64, Evidence)> = names.iter().filter_map(|n| self.num(&[n])).collect();
        (!parts.is_empty()).then(|| (parts.iter().map(|p| p.0).sum(), parts.into_iter().map(|p| p.1).collect()))
    }

    /// A fact copied from one metric.
    pub(crate) fn fact(&self, key: FactKey, label: &'static str, unit: &'static str, names: &[&str]) -> Option<Fact> {
        let (v, e) = self.num(names)?;
        Some(Fact { key, label, value: v, unit, evidence: vec![e] })
    }

    /// A fact copied from one metric, when the metric's unit is `want` (or none).
    fn fact_unit(&self, key: FactKey, label: &'static str, unit: &'static str, names: &[&str], want: &Unit) -> Option<Fact> {
        let f = self.fact(key, label, unit, names)?;
        let m = self.launch.metrics.get(&f.evidence[0].metric)?;
        // Units that disagree with what the fact needs mean a different quantity: no fact.
        if m.unit != want && *m.unit != Unit::None {
            return None;
        }
        Some(f)
    }

    /// A percentage fact: the first of `names` that is present and physically possible. A percentage of
    /// peak above [`MAX_PCT_OF_PEAK`] is a measurement artefact (ncu's `pct_of_peak_sustained_active` on
    /// launches of a few microseconds, where "active" cycles are few): it is recorded in
    /// [`Facts::artifacts`] and the next name is tried.
    pub(crate) fn pct(&self, key: FactKey, label: &'static str, names: &[&str]) -> Option<Fact> {
        for (i, name) in names.iter().enumerate() {
            let Some(f) = self.fact_unit(key, label, "%", &[name], &Unit::Percent) else { continue };
            if name.contains("pct_of_peak") && f.value > MAX_PCT_OF_PEAK {
                self.set_aside(Artifact {
                    metric: name.to_string(),
                    value: f.value,
                    reason: if names[i + 1..].is_empty() {
                        "above 100% of peak: a measurement artefact; no other form of this quantity in the profile".into()
                    } else {
                        "above 100% of peak: a measurement artefact; the elapsed-based or next form is used instead".into()
                    },
                });
                continue;
            }
            return Some(f);
        }
        None
    }

    /// The catalogued fact `key` (see [`catalogue::CATALOGUE`]).
    pub(crate) fn spec(&self, key: FactKey) -> Option<Fact> {
        let s = catalogue::spec_of(key).unwrap_or_else(|| panic!("fact {key} is not in the catalogue"));
        match s.read {
            catalogue::Read::Copy => self.fact(s.key, s.label, s.unit, s.metrics),
            catalogue::Read::Percent => self.pct(s.key, s.label, s.metrics),
            catalogue::Read::Nanoseconds => self.fact_unit(s.key, s.label, s.unit, s.metrics, &Unit::Nanoseconds),
            catalogue::Read::Bytes => self.fact_unit(s.key, s.label, s.unit, s.metrics, &Unit::Bytes),
            catalogue::Read::Hertz => self.fact_unit(s.key, s.label, s.unit, s.metrics, &Unit::Hertz),
        }
    }

    pub(crate) fn set_aside(&self, a: Artifact) {
        self.artifacts.borrow_mut().push(a);
    }
}

/// Percent of peak above which a value is a measurement artefact, not a throughput.
pub const MAX_PCT_OF_PEAK: f64 = 100.5;

/// A metric value keet did not use because it cannot be physically true (or does not measure what
/// its name says on this GPU).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Artifact {
    pub metric: String,
    pub value: f64,
    pub reason: String,
}

pub(crate) fn derived(key: FactKey, label: &'static str, unit: &'static str, value: f64, evidence: Vec<Evidence>) -> Option<Fact> {
    value.is_finite().then_some(Fact { key, label, value, unit, evidence })
}

/// The launch's duration in ns, alone (cheaper than [`measure`]).
pub fn derive_duration(launch: &Launch) -> Option<f64> {
    Reader::new(launch).spec(FactKey::DurationNs).map(|f| f.value)
}

/// Every fact of one launch, family by family; the regime ([`Facts::bound`]) is left to the rules
/// (`crate::rules::regime`), which call this and classify.
pub fn measure(launch: &Launch) -> Facts {
    let r = Reader::new(launch);
    let mut f = Facts::default();
    families::throughput(&r, &mut f);
    families::unified_memory(&r, &mut f);
    families::combined_memory(&mut f);
    families::occupancy(&r, &mut f);
    families::issue_and_divergence(&r, &mut f);
    families::access_pattern(&r, &mut f);
    families::shared_memory(&r, &mut f);
    families::launch_shape(&r, &mut f);
    families::stalls(&r, &mut f);
    families::local_memory(&r, &mut f);
    families::atomics(&r, &mut f);
    families::pipes(&r, &mut f);
    families::clock(&r, &mut f);
    f.roofline = families::roofline(&r, f.duration_ns.as_ref());
    f.artifacts = r.artifacts.take();
    if f.artifacts.iter().any(|a| a.reason.contains("unified memory")) {
        // The DRAM byte counters read 0 there too: no DRAM bytes, no intensity against them.
        f.roofline.dram_bytes = None;
        f.roofline.arithmetic_intensity = None;
        f.roofline.pct_of_roof = None;
    }
    f
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile::MetricValue;

    pub(crate) fn launch(metrics: &[(&str, f64, &str)]) -> Launch {
        let mut l = Launch { name: "k".into(), ..Default::default() };
        for (n, v, u) in metrics {
            let (fac, unit) = crate::profile::units::normalize_unit(u);
            l.metrics.insert(
                n,
                Metric {
                    value: MetricValue::Number(v * fac),
                    unit: &unit,
                    raw_value: &v.to_string(),
                    raw_unit: u,
                    label: None,
                    section: None,
                    origin: Default::default(),
                },
            );
        }
        l
    }

    #[test]
    fn missing_metrics_give_no_facts() {
        let f = measure(&Launch::default());
        assert_eq!(f.count(), 0);
    }

    #[test]
    fn occupancy_limiter_is_smallest_limit() {
        let l = launch(&[
            ("launch__occupancy_limit_registers", 2.0, "block"),
            ("launch__occupancy_limit_shared_mem", 8.0, "block"),
            ("launch__occupancy_limit_warps", 4.0, "block"),
            ("launch__occupancy_limit_blocks", 16.0, "block"),
        ]);
        let o = measure(&l).occupancy_limit.unwrap();
        assert_eq!(o.limiter, Limiter::Registers);
        assert_eq!(o.blocks_per_sm.value, 2.0);
    }

    #[test]
    fn stalls_sorted_with_share_and_tail_effect() {
        let l = launch(&[
            ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 6.0, ""),
            ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", 3.0, ""),
            ("smsp__average_warps_issue_stalled_selected_per_issue_active.ratio", 1.0, ""),
            ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", 1.0, ""),
            ("launch__waves_per_multiprocessor", 1.25, ""),
        ]);
        let f = measure(&l);
        assert_eq!(f.stalls[0].reason, "long_scoreboard");
        assert!((f.stalls[0].share_pct.unwrap() - 60.0).abs() < 1e-9);
        assert_eq!(f.stalls.len(), 3);
        assert!((f.tail_idle_pct.unwrap().value - 37.5).abs() < 1e-9);
    }

    #[test]
    fn roofline_from_rates() {
        let l = launch(&[
            ("gpu__time_duration.sum", 1000.0, "nsecond"),
            ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed", 10.0, ""),
            ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed", 0.0, ""),
            ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed", 0.0, ""),
            ("smsp__cycles_elapsed.avg", 100.0, "cycle"),
            ("dram__bytes.sum", 1000.0, "byte"),
        ]);
        let f = measure(&l);
        assert_eq!(f.roofline.fp32_flop.as_ref().unwrap().value, 2000.0);
        assert_eq!(f.roofline.arithmetic_intensity.as_ref().unwrap().value, 2.0);
        approx::assert_relative_eq!(f.roofline.achieved_flop_per_s.as_ref().unwrap().value, 2e9, max_relative = 1e-12);
    }

    #[test]
    fn fallbacks_and_artifacts() {
        // The DRAM table alone (readWriteOffset_ca): read + write shares of peak make the DRAM throughput.
        let l = launch(&[
            ("gpu__time_duration.sum", 206_080.0, "nsecond"),
            ("dram__bytes_read.sum.pct_of_peak_sustained_elapsed", 66.26, "%"),
            ("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio", 4.0, "sector/request"),
        ]);
        let f = measure(&l);
        assert_eq!(f.dram_throughput_pct.as_ref().unwrap().value, 66.26);
        assert_eq!(f.memory_throughput_pct.as_ref().unwrap().value, 66.26);
        assert_eq!(f.global_store_sectors_per_request.as_ref().unwrap().value, 4.0);
        // An "active" percentage above 100 is set aside; the elapsed one is used.
        let l = launch(&[
            ("l1tex__throughput.avg.pct_of_peak_sustained_active", 208.3, "%"),
            ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed", 0.4, "%"),
        ]);
        let f = measure(&l);
        assert_eq!(f.l1_throughput_pct.as_ref().unwrap().value, 0.4);
        assert!(f.artifacts.is_empty(), "the elapsed form is preferred, the artefact never read");
        let l = launch(&[("l1tex__throughput.avg.pct_of_peak_sustained_active", 208.3, "%")]);
        let f = measure(&l);
        assert!(f.l1_throughput_pct.is_none());
        assert_eq!(f.artifacts[0].metric, "l1tex__throughput.avg.pct_of_peak_sustained_active");
    }

    #[test]
    fn clock_cycles_and_divergent_share() {
        let l = launch(&[
            ("gpu__time_duration.sum", 2560.0, "nsecond"),
            ("device__attribute_clock_rate", 2_520_000.0, ""),
            ("smsp__branch_targets_threads_divergent", 3_145_728.0, ""),
            ("smsp__branch_targets_threads_uniform", 29_360_128.0, ""),
        ]);
        let f = measure(&l);
        approx::assert_relative_eq!(f.sm_clock_hz.as_ref().unwrap().value, 2.52e9);
        approx::assert_relative_eq!(f.elapsed_cycles.as_ref().unwrap().value, 6451.2, epsilon = 1e-6);
        approx::assert_relative_eq!(f.divergent_branch_pct.as_ref().unwrap().value, 9.677, epsilon = 1e-3);
    }

    #[test]
    fn wrong_unit_is_not_a_fact() {
        let l = launch(&[("gpu__time_duration.sum", 3.0, "byte")]);
        assert!(measure(&l).duration_ns.is_none());
    }
}
