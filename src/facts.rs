//! Facts: the numbers an expert reads first, derived from one launch's raw metrics.
//!
//! Every [`Fact`] carries its provenance: the raw metrics it was computed from, with their values
//! and units exactly as the profile wrote them. A fact whose metrics are missing is absent
//! (`None`), never guessed. Metric names tried for each fact are listed in order of preference:
//! the name Nsight Compute's sections use first, then older or alternative names.

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
    pub key: &'static str,
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
    /// SM throughput is the highest and at least [`crate::rules::thresholds::SOL_BUSY_PCT`].
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
    pub because: Vec<&'static str>,
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
            &self.roofline.fp64_flop,
            &self.roofline.fp32_flop,
            &self.roofline.fp16_flop,
            &self.roofline.dram_bytes,
            &self.roofline.arithmetic_intensity,
            &self.roofline.achieved_flop_per_s,
            &self.roofline.peak_fp32_flop_per_s,
            &self.roofline.peak_dram_bytes_per_s,
            &self.roofline.pct_of_roof,
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
    pub fn get(&self, key: &str) -> Option<&Fact> {
        self.all().into_iter().find(|f| f.key == key)
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

/// Reads metrics from a launch, remembering which ones were used.
struct Reader<'a> {
    launch: &'a Launch,
    /// Percentages skipped as measurement artefacts (above 100% of peak).
    artifacts: std::cell::RefCell<Vec<Artifact>>,
}

impl<'a> Reader<'a> {
    /// First present numeric metric among `names`, with its evidence.
    fn num(&self, names: &[&str]) -> Option<(f64, Evidence)> {
        names.iter().find_map(|n| {
            let m = self.launch.metrics.get(*n)?;
            let v = m.as_f64()?;
            Some((v, evidence(n, m, v)))
        })
    }

    /// A fact copied from one metric.
    fn fact(&self, key: &'static str, label: &'static str, unit: &'static str, names: &[&str]) -> Option<Fact> {
        let (v, e) = self.num(names)?;
        Some(Fact { key, label, value: v, unit, evidence: vec![e] })
    }

    /// A fact copied from one metric, converted when the metric's unit needs it.
    fn fact_unit(&self, key: &'static str, label: &'static str, unit: &'static str, names: &[&str], want: &Unit) -> Option<Fact> {
        let f = self.fact(key, label, unit, names)?;
        let m = self.launch.metrics.get(&f.evidence[0].metric)?;
        // Units that disagree with what the fact needs mean a different quantity: no fact.
        if m.unit != want && *m.unit != Unit::None {
            return None;
        }
        Some(f)
    }
}

/// A percentage fact: the first of `names` that is present and physically possible. A percentage of
/// peak above [`MAX_PCT_OF_PEAK`] is a measurement artefact (ncu's `pct_of_peak_sustained_active` on
/// launches of a few microseconds, where "active" cycles are few): it is recorded in
/// [`Facts::artifacts`] and the next name is tried.
fn pct(key: &'static str, label: &'static str, r: &Reader, names: &[&str]) -> Option<Fact> {
    for (i, name) in names.iter().enumerate() {
        let Some(f) = r.fact_unit(key, label, "%", &[name], &Unit::Percent) else { continue };
        if name.contains("pct_of_peak") && f.value > MAX_PCT_OF_PEAK {
            r.artifacts.borrow_mut().push(Artifact {
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

/// Percent of peak above which a value is a measurement artefact, not a throughput.
pub const MAX_PCT_OF_PEAK: f64 = 100.5;

/// A metric value keet did not use because it cannot be physically true.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Artifact {
    pub metric: String,
    pub value: f64,
    pub reason: String,
}

fn derived(key: &'static str, label: &'static str, unit: &'static str, value: f64, evidence: Vec<Evidence>) -> Option<Fact> {
    value.is_finite().then_some(Fact { key, label, value, unit, evidence })
}

/// The launch's duration in ns, alone (cheaper than [`derive`]).
pub fn derive_duration(launch: &Launch) -> Option<f64> {
    let r = Reader { launch, artifacts: Default::default() };
    r.fact_unit("duration_ns", "Duration", "ns", DURATION, &Unit::Nanoseconds).map(|f| f.value)
}

const DURATION: &[&str] = &["gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration"];

/// Derives every fact for one launch.
pub fn derive(launch: &Launch) -> Facts {
    let r = Reader { launch, artifacts: Default::default() };
    let mut f = Facts {
        duration_ns: r.fact_unit("duration_ns", "Duration", "ns", DURATION, &Unit::Nanoseconds),
        sm_throughput_pct: pct("sm_throughput_pct", "Compute (SM) throughput", &r, &["sm__throughput.avg.pct_of_peak_sustained_elapsed"]),
        memory_throughput_pct: pct(
            "memory_throughput_pct",
            "Memory throughput",
            &r,
            &["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
        ),
        dram_throughput_pct: pct(
            "dram_throughput_pct",
            "DRAM throughput",
            &r,
            &[
                "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                "FBSP.TriageCompute.dramc__throughput.avg.pct_of_peak_sustained_elapsed",
            ],
        ),
        l1_throughput_pct: pct(
            "l1_throughput_pct",
            "L1/TEX cache throughput",
            &r,
            &["l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "l1tex__throughput.avg.pct_of_peak_sustained_active"],
        ),
        l2_throughput_pct: pct("l2_throughput_pct", "L2 cache throughput", &r, &["lts__throughput.avg.pct_of_peak_sustained_elapsed"]),
        achieved_occupancy_pct: pct("achieved_occupancy_pct", "Achieved occupancy", &r, &["sm__warps_active.avg.pct_of_peak_sustained_active"]),
        theoretical_occupancy_pct: pct("theoretical_occupancy_pct", "Theoretical occupancy", &r, &["sm__maximum_warps_per_active_cycle_pct"]),
        registers_per_thread: r.fact("registers_per_thread", "Registers per thread", "register/thread", &["launch__registers_per_thread"]),
        shared_mem_per_block_bytes: r.fact_unit(
            "shared_mem_per_block_bytes",
            "Shared memory per block",
            "byte",
            &["launch__shared_mem_per_block", "launch__shared_mem_per_block_static"],
            &Unit::Bytes,
        ),
        warp_cycles_per_issue: r.fact(
            "warp_cycles_per_issue",
            "Warp cycles per issued instruction",
            "cycle",
            &["smsp__average_warp_latency_per_inst_issued.ratio", "smsp__average_warps_active_per_inst_executed.ratio"],
        ),
        issue_slots_busy_pct: pct(
            "issue_slots_busy_pct",
            "Issue slots busy",
            &r,
            &[
                "sm__inst_issued.avg.pct_of_peak_sustained_active",
                "smsp__issue_active.avg.pct_of_peak_sustained_active",
                "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
            ],
        ),
        global_load_bytes_per_sector: r.fact(
            "global_load_bytes_per_sector",
            "Bytes used per sector (global loads)",
            "byte/sector",
            &["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"],
        ),
        global_store_bytes_per_sector: r.fact(
            "global_store_bytes_per_sector",
            "Bytes used per sector (global stores)",
            "byte/sector",
            &["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"],
        ),
        // (Older collections give the same quantity as a percentage of the 32-byte sector: see below.)
        active_threads_per_warp: r.fact(
            "active_threads_per_warp",
            "Active threads per warp instruction",
            "thread",
            &[
                "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
                "smsp__thread_inst_executed_per_inst_executed.ratio",
            ],
        ),
        branch_uniform_pct: pct("branch_uniform_pct", "Uniform branch targets", &r, &["smsp__sass_average_branch_targets_threads_uniform.pct"]),
        divergent_branch_targets: r.fact(
            "divergent_branch_targets",
            "Divergent branch targets",
            "branch",
            &["smsp__sass_branch_targets_threads_divergent.sum", "smsp__branch_targets_threads_divergent"],
        ),
        spill_instructions: r.fact(
            "spill_instructions",
            "Register-spilling instructions",
            "inst",
            &["sass__inst_executed_register_spilling", "derived__local_spilling_requests"],
        ),
        tensor_pipe_pct: pct(
            "tensor_pipe_pct",
            "Tensor pipe utilisation",
            &r,
            &[
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
            ],
        ),
        fp64_pipe_pct: pct(
            "fp64_pipe_pct",
            "FP64 pipe utilisation",
            &r,
            &["sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active", "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active"],
        ),
        l2_atomic_busy_pct: pct(
            "l2_atomic_busy_pct",
            "L2 atomic unit busy (busiest slice)",
            &r,
            // The busiest slice shows contention on one address; the average hides it.
            &["lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed", "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed"],
        ),
        ..Facts::default()
    };

    // Bytes per sector as a percentage of the 32-byte sector (the `.pct` form of the same metric).
    for (slot, key, label, name) in [
        (&mut f.global_load_bytes_per_sector, "global_load_bytes_per_sector", "Bytes used per sector (global loads)", "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"),
        (&mut f.global_store_bytes_per_sector, "global_store_bytes_per_sector", "Bytes used per sector (global stores)", "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct"),
    ] {
        if slot.is_none() {
            if let Some((p, e)) = r.num(&[name]) {
                *slot = derived(key, label, "byte/sector", p * 32.0 / 100.0, vec![e]);
            }
        }
    }

    // Coalescing: sectors per request.
    let ratio = |key, label, unit, num: &[&str], den: &[&str]| -> Option<Fact> {
        let (n, en) = r.num(num)?;
        let (d, ed) = r.num(den)?;
        if d <= 0.0 {
            return None;
        }
        derived(key, label, unit, n / d, vec![en, ed])
    };
    f.global_load_sectors_per_request = ratio(
        "global_load_sectors_per_request",
        "Sectors per global load request",
        "sector/request",
        &["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
        &["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
    );
    f.global_store_sectors_per_request = ratio(
        "global_store_sectors_per_request",
        "Sectors per global store request",
        "sector/request",
        &["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"],
        &["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"],
    );
    // The same quantities as ncu's own `.ratio` metrics (Memory Workload Analysis tables, `--metrics` subsets).
    if f.global_load_sectors_per_request.is_none() {
        f.global_load_sectors_per_request = r.fact(
            "global_load_sectors_per_request",
            "Sectors per global load request",
            "sector/request",
            &["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"],
        );
    }
    if f.global_store_sectors_per_request.is_none() {
        f.global_store_sectors_per_request = r.fact(
            "global_store_sectors_per_request",
            "Sectors per global store request",
            "sector/request",
            &["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"],
        );
    }
    f.global_load_sectors = r.fact("global_load_sectors", "Global load sectors (L1)", "sector", &["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]);
    f.global_store_sectors = r.fact("global_store_sectors", "Global store sectors (L1)", "sector", &["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"]);
    f.warp_instructions = r.fact("warp_instructions", "Warp instructions executed", "inst", &["smsp__inst_executed.sum", "sm__inst_executed.sum"]);

    // DRAM from the DRAM table alone (read and write shares of peak add up to the throughput).
    if f.dram_throughput_pct.is_none() {
        let parts: Vec<(f64, Evidence)> = ["dram__bytes_read.sum.pct_of_peak_sustained_elapsed", "dram__bytes_write.sum.pct_of_peak_sustained_elapsed"]
            .iter()
            .filter_map(|n| r.num(&[n]))
            .collect();
        if !parts.is_empty() {
            let sum: f64 = parts.iter().map(|p| p.0).sum();
            if sum <= MAX_PCT_OF_PEAK {
                f.dram_throughput_pct = derived(
                    "dram_throughput_pct",
                    "DRAM throughput (read + write)",
                    "%",
                    sum,
                    parts.into_iter().map(|p| p.1).collect(),
                );
            }
        }
    }
    // Memory throughput: when the speed-of-light section is missing, the busiest memory unit measured.
    if f.memory_throughput_pct.is_none() {
        let best = [&f.dram_throughput_pct, &f.l2_throughput_pct]
            .into_iter()
            .flatten()
            .chain(f.l1_throughput_pct.iter().filter(|x| x.evidence.iter().all(|e| e.metric.contains("elapsed"))))
            .max_by(|a, b| a.value.total_cmp(&b.value));
        if let Some(b) = best {
            f.memory_throughput_pct =
                derived("memory_throughput_pct", "Memory throughput (busiest memory unit measured)", "%", b.value, b.evidence.clone());
        }
    }

    // Clock and elapsed cycles, for estimates in cycles.
    f.sm_clock_hz = r
        .fact_unit("sm_clock_hz", "SM clock", "Hz", &["sm__cycles_elapsed.avg.per_second", "gpc__cycles_elapsed.avg.per_second"], &Unit::Hertz)
        .or_else(|| {
            // The device's rated clock; CUDA's attribute is in kHz (1e5..1e7 for any GPU made), a normalised Hz value is >= 1e8.
            let (v, e) = r.num(&["device__attribute_clock_rate"])?;
            let hz = if v < 1e7 { v * 1e3 } else { v };
            derived("sm_clock_hz", "SM clock (device rating)", "Hz", hz, vec![e])
        });
    f.elapsed_cycles = r.fact("elapsed_cycles", "Elapsed SM cycles", "cycle", &["sm__cycles_elapsed.avg", "sm__cycles_elapsed.max"]).or_else(|| {
        let (d, c) = (f.duration_ns.as_ref()?, f.sm_clock_hz.as_ref()?);
        let mut ev = d.evidence.clone();
        ev.extend(c.evidence.clone());
        derived("elapsed_cycles", "Elapsed SM cycles (duration x clock)", "cycle", d.value * 1e-9 * c.value, ev)
    });

    // Branch divergence from the target counts (when the `.pct` form was not collected).
    if let (Some((d, e1)), Some((u, e2))) = (
        r.num(&["smsp__sass_branch_targets_threads_divergent.sum", "smsp__branch_targets_threads_divergent"]),
        r.num(&["smsp__sass_branch_targets_threads_uniform.sum", "smsp__branch_targets_threads_uniform"]),
    ) {
        if d + u > 0.0 {
            f.divergent_branch_pct = derived("divergent_branch_pct", "Divergent branch targets (share)", "%", 100.0 * d / (d + u), vec![e1, e2]);
        }
    } else if let Some(u) = &f.branch_uniform_pct {
        f.divergent_branch_pct = derived("divergent_branch_pct", "Divergent branch targets (share)", "%", 100.0 - u.value, u.evidence.clone());
    }
    if let (Some((ex, e1)), Some((tot, e2))) =
        (r.num(&["derived__memory_l2_theoretical_sectors_global_excessive"]), r.num(&["memory_l2_theoretical_sectors_global"]))
    {
        // The excessive count is written in bytes by recent ncu versions, the total in sectors (32 bytes).
        let ex_sectors = if e1.unit == "byte" { ex / 32.0 } else { ex };
        if tot > 0.0 {
            f.global_excessive_sectors_pct =
                derived("global_excessive_sectors_pct", "Excessive global sectors", "%", 100.0 * ex_sectors / tot, vec![e1, e2]);
        }
    }

    // Shared-memory bank conflicts: wavefronts beyond the ideal, or the conflict counters.
    if let (Some((w, e1)), Some((ideal, e2))) = (r.num(&["memory_l1_wavefronts_shared"]), r.num(&["memory_l1_wavefronts_shared_ideal"])) {
        if w > 0.0 {
            f.shared_bank_conflict_pct = derived(
                "shared_bank_conflict_pct",
                "Shared-memory wavefronts from bank conflicts",
                "%",
                100.0 * (w - ideal).max(0.0) / w,
                vec![e1, e2],
            );
        }
    } else if let (Some((c, e1)), Some((w, e2))) = (
        r.num(&["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"]),
        r.num(&["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]),
    ) {
        if w > 0.0 {
            f.shared_bank_conflict_pct = derived(
                "shared_bank_conflict_pct",
                "Shared-memory wavefronts from bank conflicts",
                "%",
                100.0 * c.min(w) / w,
                vec![e1, e2],
            );
        }
    }
    f.shared_excess_wavefronts = r
        .fact("shared_excess_wavefronts", "Shared-memory wavefronts from bank conflicts", "wavefront", &["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"])
        .or_else(|| {
            let (w, e1) = r.num(&["memory_l1_wavefronts_shared"])?;
            let (ideal, e2) = r.num(&["memory_l1_wavefronts_shared_ideal"])?;
            derived("shared_excess_wavefronts", "Shared-memory wavefronts beyond the ideal", "wavefront", (w - ideal).max(0.0), vec![e1, e2])
        });
    f.shared_bank_conflicts = match (
        r.num(&["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]),
        r.num(&["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]),
    ) {
        (Some((a, e1)), Some((b, e2))) => derived("shared_bank_conflicts", "Shared-memory bank conflicts (ld+st)", "conflict", a + b, vec![e1, e2]),
        _ => r.fact("shared_bank_conflicts", "Shared-memory bank conflicts", "conflict", &["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"]),
    };

    // Launch shape.
    // A launch has at least one thread and one block: zeros (as stored for some launches) are no shape.
    f.block_threads = r.fact("block_threads", "Threads per block", "thread", &["launch__block_size"]).filter(|x| x.value > 0.0).or_else(|| {
        launch.block_size.filter(|b| b.iter().all(|x| *x > 0)).map(|b| Fact {
            key: "block_threads",
            label: "Threads per block",
            value: (b[0] * b[1] * b[2]) as f64,
            unit: "thread",
            evidence: vec![shape_evidence("Block Size", b)],
        })
    });
    f.grid_blocks = r.fact("grid_blocks", "Blocks in the grid", "block", &["launch__grid_size"]).filter(|x| x.value > 0.0).or_else(|| {
        launch.grid_size.filter(|g| g.iter().all(|x| *x > 0)).map(|g| Fact {
            key: "grid_blocks",
            label: "Blocks in the grid",
            value: (g[0] * g[1] * g[2]) as f64,
            unit: "block",
            evidence: vec![shape_evidence("Grid Size", g)],
        })
    });
    f.sm_count = r.fact("sm_count", "SMs on the device", "SM", &["launch__sm_count", "device__attribute_multiprocessor_count"]);
    f.waves_per_sm = r.fact("waves_per_sm", "Waves per SM", "wave", &["launch__waves_per_multiprocessor"]);
    if let Some(w) = &f.waves_per_sm {
        if w.value > 1.0 {
            let full = w.value.ceil();
            let idle = 100.0 * (full - w.value) / full;
            if idle > 0.0 {
                f.tail_idle_pct = derived("tail_idle_pct", "Idle share of the last wave (tail effect)", "%", idle, w.evidence.clone());
            }
        }
    }

    // Occupancy limiter: the resource allowing the fewest blocks per SM.
    let limits = [
        (Limiter::Registers, "launch__occupancy_limit_registers"),
        (Limiter::SharedMemory, "launch__occupancy_limit_shared_mem"),
        (Limiter::Warps, "launch__occupancy_limit_warps"),
        (Limiter::Blocks, "launch__occupancy_limit_blocks"),
        (Limiter::Barriers, "launch__occupancy_limit_barriers"),
    ];
    let mut best: Option<(Limiter, f64, Evidence)> = None;
    for (lim, name) in limits {
        if let Some((v, e)) = r.num(&[name]) {
            // Ties: keep the first in the list (registers before shared memory before warps...), as ncu does.
            if best.as_ref().is_none_or(|(_, b, _)| v < *b) {
                best = Some((lim, v, e));
            }
        }
    }
    if let Some((limiter, v, e)) = best {
        f.occupancy_limit = Some(OccupancyLimit {
            limiter,
            blocks_per_sm: Fact { key: "occupancy_limit_blocks_per_sm", label: "Blocks per SM allowed by the limiter", value: v, unit: "block", evidence: vec![e] },
        });
    }

    // Stalls: cycles per issued instruction by reason.
    let mut stalls: Vec<Stall> = Vec::new();
    for (name, m) in &launch.metrics {
        let Some(reason) = name
            .strip_prefix("smsp__average_warps_issue_stalled_")
            .and_then(|s| s.strip_suffix("_per_issue_active.ratio"))
        else {
            continue;
        };
        if reason == "selected" || reason.ends_with("_not_issued") {
            continue;
        }
        if let Some(v) = m.as_f64() {
            if v > 0.0 {
                stalls.push(Stall {
                    reason: reason.to_string(),
                    cycles_per_issue: Fact { key: stall_key(reason), label: "Stall cycles per issued instruction", value: v, unit: "cycle", evidence: vec![evidence(name, m, v)] },
                    share_pct: None,
                });
            }
        }
    }
    let total: f64 = stalls.iter().map(|s| s.cycles_per_issue.value).sum();
    stalls.sort_by(|a, b| b.cycles_per_issue.value.total_cmp(&a.cycles_per_issue.value).then(a.reason.cmp(&b.reason)));
    stalls.truncate(3);
    if total > 0.0 {
        for s in &mut stalls {
            s.share_pct = Some(100.0 * s.cycles_per_issue.value / total);
        }
    }
    f.stalls = stalls;

    // Local memory traffic and atomics.
    f.local_memory_sectors = match (
        r.num(&["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"]),
        r.num(&["l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"]),
    ) {
        (Some((a, e1)), Some((b, e2))) => derived("local_memory_sectors", "Local-memory sectors (ld+st)", "sector", a + b, vec![e1, e2]),
        (Some((a, e)), None) | (None, Some((a, e))) => derived("local_memory_sectors", "Local-memory sectors", "sector", a, vec![e]),
        _ => None,
    };
    {
        let parts: Vec<(f64, Evidence)> = ["l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"]
            .iter()
            .filter_map(|n| r.num(&[n]))
            .collect();
        if !parts.is_empty() {
            let sum = parts.iter().map(|p| p.0).sum();
            f.atomic_requests = derived("atomic_requests", "Global atomic/reduction requests", "request", sum, parts.into_iter().map(|p| p.1).collect());
        }
    }

    f.roofline = roofline(&r, f.duration_ns.as_ref());
    f.artifacts = r.artifacts.take();
    f.bound = classify(&f);
    f
}

/// Fact keys for the stall reasons keet knows (others share a generic key).
fn stall_key(reason: &str) -> &'static str {
    match reason {
        "long_scoreboard" => "stall_long_scoreboard",
        "short_scoreboard" => "stall_short_scoreboard",
        "barrier" => "stall_barrier",
        "membar" => "stall_membar",
        "mio_throttle" => "stall_mio_throttle",
        "lg_throttle" => "stall_lg_throttle",
        "math_pipe_throttle" => "stall_math_pipe_throttle",
        "wait" => "stall_wait",
        "not_selected" => "stall_not_selected",
        "no_instruction" => "stall_no_instruction",
        "branch_resolving" => "stall_branch_resolving",
        "dispatch_stall" => "stall_dispatch_stall",
        "drain" => "stall_drain",
        "imc_miss" => "stall_imc_miss",
        "tex_throttle" => "stall_tex_throttle",
        "sleeping" => "stall_sleeping",
        "misc" => "stall_misc",
        "gmma" => "stall_gmma",
        _ => "stall_other",
    }
}

fn shape_evidence(label: &str, d: [u64; 3]) -> Evidence {
    Evidence {
        metric: label.to_string(),
        value: (d[0] * d[1] * d[2]) as f64,
        unit: String::new(),
        raw_value: format!("({}, {}, {})", d[0], d[1], d[2]),
        raw_unit: String::new(),
        origin: "launch identity".into(),
    }
}

/// Counts thread-level FLOPs for one precision: add + mul + 2 x fma.
fn flops(r: &Reader, p: char) -> Option<(f64, Vec<Evidence>)> {
    let mut total = 0.0;
    let mut ev = Vec::new();
    let mut any = false;
    for (op, weight) in [("add", 1.0), ("mul", 1.0), ("fma", 2.0)] {
        let sum = format!("smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum");
        let sm_sum = format!("sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum");
        if let Some((v, e)) = r.num(&[&sum, &sm_sum]) {
            total += weight * v;
            ev.push(e);
            any = true;
            continue;
        }
        // Rate per elapsed SMSP cycle times elapsed SMSP cycles (what the roofline section collects).
        let rate = format!("smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum.per_cycle_elapsed");
        if let (Some((v, e1)), Some((c, e2))) = (r.num(&[&rate]), r.num(&["smsp__cycles_elapsed.avg"])) {
            total += weight * v * c;
            ev.push(e1);
            if !ev.iter().any(|x| x.metric == e2.metric) {
                ev.push(e2);
            }
            any = true;
        }
    }
    any.then_some((total, ev))
}

fn roofline(r: &Reader, duration: Option<&Fact>) -> Roofline {
    let mut rf = Roofline::default();
    let mk = |key, label, unit, (v, ev): (f64, Vec<Evidence>)| derived(key, label, unit, v, ev);
    rf.fp64_flop = flops(r, 'd').and_then(|x| mk("fp64_flop", "FP64 FLOPs", "FLOP", x));
    rf.fp32_flop = flops(r, 'f').and_then(|x| mk("fp32_flop", "FP32 FLOPs", "FLOP", x));
    rf.fp16_flop = flops(r, 'h').and_then(|x| mk("fp16_flop", "FP16 FLOPs", "FLOP", x));
    rf.dram_bytes = r.fact_unit("dram_bytes", "DRAM bytes", "byte", &["dram__bytes.sum"], &Unit::Bytes).or_else(|| {
        let (rd, e1) = r.num(&["dram__bytes_read.sum"])?;
        let (wr, e2) = r.num(&["dram__bytes_write.sum"])?;
        derived("dram_bytes", "DRAM bytes (read+write)", "byte", rd + wr, vec![e1, e2])
    });
    let total_flop: Option<(f64, Vec<Evidence>)> = {
        let parts: Vec<&Fact> = [&rf.fp64_flop, &rf.fp32_flop, &rf.fp16_flop].into_iter().flatten().collect();
        (!parts.is_empty()).then(|| (parts.iter().map(|f| f.value).sum(), parts.iter().flat_map(|f| f.evidence.clone()).collect()))
    };
    if let (Some((fl, ev)), Some(bytes)) = (&total_flop, &rf.dram_bytes) {
        if bytes.value > 0.0 {
            let mut e = ev.clone();
            e.extend(bytes.evidence.clone());
            rf.arithmetic_intensity = derived("arithmetic_intensity", "Arithmetic intensity (DRAM)", "FLOP/byte", fl / bytes.value, e);
        }
    }
    if let (Some((fl, ev)), Some(d)) = (&total_flop, duration) {
        if d.value > 0.0 {
            let mut e = ev.clone();
            e.extend(d.evidence.clone());
            rf.achieved_flop_per_s = derived("achieved_flop_per_s", "Achieved FLOP/s", "FLOP/s", fl / (d.value * 1e-9), e);
        }
    }
    if let (Some((p, e1)), Some((hz, e2))) =
        (r.num(&["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"]), r.num(&["sm__cycles_elapsed.avg.per_second"]))
    {
        rf.peak_fp32_flop_per_s = derived("peak_fp32_flop_per_s", "Peak FP32 FLOP/s", "FLOP/s", 2.0 * p * hz, vec![e1, e2]);
    }
    if let (Some((p, e1)), Some((hz, e2))) = (r.num(&["dram__bytes.sum.peak_sustained"]), r.num(&["dram__cycles_elapsed.avg.per_second"])) {
        rf.peak_dram_bytes_per_s = derived("peak_dram_bytes_per_s", "Peak DRAM bandwidth", "byte/s", p * hz, vec![e1, e2]);
    }
    if let (Some(ai), Some(ach), Some(pf), Some(pb)) = (&rf.arithmetic_intensity, &rf.achieved_flop_per_s, &rf.peak_fp32_flop_per_s, &rf.peak_dram_bytes_per_s) {
        let roof = pf.value.min(ai.value * pb.value);
        if roof > 0.0 {
            let mut e = ach.evidence.clone();
            e.extend(pf.evidence.clone());
            e.extend(pb.evidence.clone());
            rf.pct_of_roof = derived("pct_of_roof", "Share of the roofline ceiling", "%", 100.0 * ach.value / roof, e);
        }
    }
    rf
}

/// Speed-of-light classification: the launch's regime (see [`crate::rules::thresholds`] for the numbers).
///
/// Uses elapsed-based percentages only (an artefact above 100% never enters), each unit capped at 100%.
/// Order of decision: a launch of a few microseconds that does not fill one wave is launch-bound;
/// otherwise a grid with fewer blocks than SMs at low throughput is grid-bound; a busiest unit under
/// the busy threshold means latency-bound; else throughput-bound on the busiest unit (SM or a memory unit).
fn classify(f: &Facts) -> Option<Bound> {
    use crate::rules::thresholds::{SOL_BUSY_PCT, SOL_LOW_PCT, TINY_LAUNCH_NS};
    let units = utilisation(f);
    let duration = f.duration_ns.as_ref().map(|d| d.value);
    if units.is_empty() && duration.is_none() {
        return None;
    }
    let busiest = units.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
    let top = busiest.map(|b| b.1).unwrap_or(0.0);
    let mut because: Vec<&'static str> = units.iter().map(|u| u.2).collect();
    let grid_short = match (&f.grid_blocks, &f.sm_count) {
        (Some(g), Some(s)) => Some(g.value < s.value),
        _ => None,
    };
    let under_a_wave = grid_short.or_else(|| f.waves_per_sm.as_ref().map(|w| w.value < 1.0));
    let mk = |kind, because: Vec<&'static str>| Bound { kind, busiest_unit: busiest.map(|b| b.0), busiest_pct: busiest.map(|b| b.1), because };
    if let Some(d) = duration {
        if d < TINY_LAUNCH_NS && top < SOL_BUSY_PCT && under_a_wave != Some(false) {
            because.push("duration_ns");
            if grid_short.is_some() {
                because.extend(["grid_blocks", "sm_count"]);
            }
            return Some(mk(BoundKind::Launch, because));
        }
    }
    if units.is_empty() {
        return None;
    }
    if top < SOL_LOW_PCT && grid_short == Some(true) {
        because.extend(["grid_blocks", "sm_count"]);
        return Some(mk(BoundKind::GridTooSmall, because));
    }
    if top < SOL_BUSY_PCT {
        return Some(mk(BoundKind::Latency, because));
    }
    let kind = if busiest.is_some_and(|b| b.0 == "SM") { BoundKind::Compute } else { BoundKind::Memory };
    Some(mk(kind, because))
}

/// The measured units and their elapsed-based utilisation, % of peak capped at 100: `(unit, pct, fact key)`.
/// "memory" (ncu's combined memory throughput) stands in only when no single memory unit was measured.
pub fn utilisation(f: &Facts) -> Vec<(&'static str, f64, &'static str)> {
    let elapsed = |x: &Fact| x.evidence.iter().all(|e| !e.metric.contains("sustained_active"));
    let mut v: Vec<(&'static str, f64, &'static str)> = [
        (&f.sm_throughput_pct, "SM"),
        (&f.dram_throughput_pct, "DRAM"),
        (&f.l2_throughput_pct, "L2"),
        (&f.l1_throughput_pct, "L1/TEX"),
    ]
    .into_iter()
    .filter_map(|(x, n)| x.as_ref().filter(|x| elapsed(x)).map(|x| (n, x.value.min(100.0), x.key)))
    .collect();
    if !v.iter().any(|u| u.0 != "SM") {
        if let Some(m) = f.memory_throughput_pct.as_ref().filter(|x| elapsed(x)) {
            v.push(("memory", m.value.min(100.0), m.key));
        }
    } else if let Some(m) = f.memory_throughput_pct.as_ref().filter(|x| elapsed(x)) {
        // ncu's memory throughput is the busiest of its memory units; keep it when it is higher than the ones measured.
        if v.iter().filter(|u| u.0 != "SM").all(|u| u.1 < m.value.min(100.0) - 0.5) {
            v.push(("memory", m.value.min(100.0), m.key));
        }
    }
    v
}

#[cfg(test)]
mod tests {
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
        let f = derive(&Launch::default());
        assert_eq!(f.count(), 0);
        assert!(f.bound.is_none());
    }

    #[test]
    fn memory_bound_names_busiest_unit() {
        let l = launch(&[
            ("gpu__time_duration.sum", 5.0, "usecond"),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 20.0, "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 91.0, "%"),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 91.0, "%"),
            ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 40.0, "%"),
        ]);
        let f = derive(&l);
        assert_eq!(f.duration_ns.as_ref().unwrap().value, 5000.0);
        let b = f.bound.unwrap();
        assert_eq!(b.kind, BoundKind::Memory);
        assert_eq!(b.busiest_unit, Some("DRAM"));
    }

    #[test]
    fn small_grid_and_latency() {
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 2.0, "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 1.0, "%"),
            ("launch__grid_size", 1.0, ""),
            ("launch__sm_count", 28.0, ""),
        ]);
        assert_eq!(derive(&l).bound.unwrap().kind, BoundKind::GridTooSmall);
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 30.0, "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 40.0, "%"),
            ("launch__grid_size", 1000.0, ""),
            ("launch__sm_count", 28.0, ""),
        ]);
        assert_eq!(derive(&l).bound.unwrap().kind, BoundKind::Latency);
    }

    #[test]
    fn occupancy_limiter_is_smallest_limit() {
        let l = launch(&[
            ("launch__occupancy_limit_registers", 2.0, "block"),
            ("launch__occupancy_limit_shared_mem", 8.0, "block"),
            ("launch__occupancy_limit_warps", 4.0, "block"),
            ("launch__occupancy_limit_blocks", 16.0, "block"),
        ]);
        let o = derive(&l).occupancy_limit.unwrap();
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
        let f = derive(&l);
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
        let f = derive(&l);
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
        let f = derive(&l);
        assert_eq!(f.dram_throughput_pct.as_ref().unwrap().value, 66.26);
        assert_eq!(f.memory_throughput_pct.as_ref().unwrap().value, 66.26);
        assert_eq!(f.global_store_sectors_per_request.as_ref().unwrap().value, 4.0);
        let b = f.bound.unwrap();
        assert_eq!((b.kind, b.busiest_unit), (BoundKind::Memory, Some("DRAM")));
        // An "active" percentage above 100 is set aside; the elapsed one is used.
        let l = launch(&[
            ("l1tex__throughput.avg.pct_of_peak_sustained_active", 208.3, "%"),
            ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed", 0.4, "%"),
        ]);
        let f = derive(&l);
        assert_eq!(f.l1_throughput_pct.as_ref().unwrap().value, 0.4);
        assert!(f.artifacts.is_empty(), "the elapsed form is preferred, the artefact never read");
        let l = launch(&[("l1tex__throughput.avg.pct_of_peak_sustained_active", 208.3, "%")]);
        let f = derive(&l);
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
        let f = derive(&l);
        approx::assert_relative_eq!(f.sm_clock_hz.as_ref().unwrap().value, 2.52e9);
        approx::assert_relative_eq!(f.elapsed_cycles.as_ref().unwrap().value, 6451.2, epsilon = 1e-6);
        approx::assert_relative_eq!(f.divergent_branch_pct.as_ref().unwrap().value, 9.677, epsilon = 1e-3);
    }

    #[test]
    fn wrong_unit_is_not_a_fact() {
        let l = launch(&[("gpu__time_duration.sum", 3.0, "byte")]);
        assert!(derive(&l).duration_ns.is_none());
    }
}
