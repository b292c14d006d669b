//! The families of derived facts, one function each: throughput, unified memory, occupancy, issue and
//! divergence, global access pattern, shared memory, launch shape, stalls, local memory, atomics,
//! pipes, clock and roofline. Each reads the metrics it needs (in order of preference) and fills its
//! fields of [`Facts`]; a fact whose metrics are missing stays `None`.

use super::{derived, Artifact, Evidence, Fact, FactKey, Facts, Limiter, OccupancyLimit, Reader, Roofline, Stall, MAX_PCT_OF_PEAK};
use crate::profile::Unit;

/// Speed of light: SM, memory, DRAM, L1 and L2 throughput (elapsed-based first).
pub(super) fn throughput(r: &Reader, f: &mut Facts) {
    f.duration_ns = r.spec(FactKey::DurationNs);
    f.sm_throughput_pct = r.spec(FactKey::SmThroughputPct);
    f.memory_throughput_pct = r.spec(FactKey::MemoryThroughputPct);
    f.dram_throughput_pct = r.spec(FactKey::DramThroughputPct);
    f.l1_throughput_pct = r.spec(FactKey::L1ThroughputPct);
    f.l2_throughput_pct = r.spec(FactKey::L2ThroughputPct);
    // DRAM from the DRAM table alone (read and write shares of peak add up to the throughput).
    if f.dram_throughput_pct.is_none() {
        if let Some((sum, ev)) =
            r.sum(&["dram__bytes_read.sum.pct_of_peak_sustained_elapsed", "dram__bytes_write.sum.pct_of_peak_sustained_elapsed"])
        {
            if sum <= MAX_PCT_OF_PEAK {
                f.dram_throughput_pct = derived(FactKey::DramThroughputPct, "DRAM throughput (read + write)", "%", sum, ev);
            }
        }
    }
    // L2 from the memory chart's L2 counters when the speed-of-light breakdown is missing.
    if f.l2_throughput_pct.is_none() {
        f.l2_throughput_pct = r.pct(
            FactKey::L2ThroughputPct,
            "L2 cache throughput (L2 sectors / xbar)",
            &[
                "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
                "lts__t_sectors_op_read.sum.pct_of_peak_sustained_elapsed",
                "lts__lts2xbar_cycles_active.avg.pct_of_peak_sustained_elapsed",
                "lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed",
            ],
        );
    }
}

/// Integrated GPUs (Jetson) share one memory with the CPU: their `dram__` counters read 0 however
/// many bytes move, so a DRAM throughput of 0 is no measurement. It is set aside (with the reason) and
/// the memory limit is read from L2/xbar; ncu's combined memory throughput then stands for memory.
pub(super) fn unified_memory(r: &Reader, f: &mut Facts) {
    let integrated = r.num(&["device__attribute_integrated"]).is_some_and(|(v, _)| v >= 1.0);
    let Some(dram) = f.dram_throughput_pct.as_ref() else { return };
    if dram.value > 0.0 {
        return;
    }
    let dram_bytes_zero = r.sum(&["dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum"]).is_none_or(|(b, _)| b <= 0.0);
    let l2_moved = f.l2_throughput_pct.as_ref().is_some_and(|l| l.value >= 1.0)
        || r.sum(&["lts__t_sectors.sum", "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum"])
            .is_some_and(|(s, _)| s > 0.0)
        || f.memory_throughput_pct.as_ref().is_some_and(|m| m.value >= 1.0);
    if integrated || (dram_bytes_zero && l2_moved) {
        let d = f.dram_throughput_pct.take().expect("checked above");
        r.set_aside(Artifact {
            metric: d.evidence.first().map(|e| e.metric.clone()).unwrap_or_default(),
            value: d.value,
            reason: "DRAM counters read 0 while L2 moved data: unified memory (an integrated GPU such as Jetson) does not count \
                     its DRAM traffic there, so the memory limit is read from L2/xbar"
                .into(),
        });
    }
}

/// Memory throughput when the speed-of-light section is missing: the busiest memory unit measured.
pub(super) fn combined_memory(f: &mut Facts) {
    if f.memory_throughput_pct.is_none() {
        let best = [&f.dram_throughput_pct, &f.l2_throughput_pct]
            .into_iter()
            .flatten()
            .chain(f.l1_throughput_pct.iter().filter(|x| x.evidence.iter().all(|e| e.metric.contains("elapsed"))))
            .max_by(|a, b| a.value.total_cmp(&b.value));
        if let Some(b) = best {
            f.memory_throughput_pct =
                derived(FactKey::MemoryThroughputPct, "Memory throughput (busiest memory unit measured)", "%", b.value, b.evidence.clone());
        }
    }
}

/// Occupancy: achieved, theoretical, the resource limiting blocks per SM, registers and shared memory.
pub(super) fn occupancy(r: &Reader, f: &mut Facts) {
    f.achieved_occupancy_pct = r.spec(FactKey::AchievedOccupancyPct);
    f.theoretical_occupancy_pct = r.spec(FactKey::TheoreticalOccupancyPct);
    f.registers_per_thread = r.spec(FactKey::RegistersPerThread);
    f.shared_mem_per_block_bytes = r.spec(FactKey::SharedMemPerBlockBytes);
    // The resource allowing the fewest blocks per SM.
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
            blocks_per_sm: Fact {
                key: FactKey::OccupancyLimitBlocksPerSm,
                label: "Blocks per SM allowed by the limiter",
                value: v,
                unit: "block",
                evidence: vec![e],
            },
        });
    }
}

/// Issue rate, active lanes and branch divergence.
pub(super) fn issue_and_divergence(r: &Reader, f: &mut Facts) {
    f.warp_cycles_per_issue = r.spec(FactKey::WarpCyclesPerIssue);
    f.issue_slots_busy_pct = r.spec(FactKey::IssueSlotsBusyPct);
    f.active_threads_per_warp = r.spec(FactKey::ActiveThreadsPerWarp);
    f.branch_uniform_pct = r.spec(FactKey::BranchUniformPct);
    f.divergent_branch_targets = r.spec(FactKey::DivergentBranchTargets);
    f.warp_instructions = r.spec(FactKey::WarpInstructions);
    // Branch divergence from the target counts (when the `.pct` form was not collected).
    if let (Some((d, e1)), Some((u, e2))) = (
        r.num(&["smsp__sass_branch_targets_threads_divergent.sum", "smsp__branch_targets_threads_divergent"]),
        r.num(&["smsp__sass_branch_targets_threads_uniform.sum", "smsp__branch_targets_threads_uniform"]),
    ) {
        if d + u > 0.0 {
            f.divergent_branch_pct =
                derived(FactKey::DivergentBranchPct, "Divergent branch targets (share)", "%", 100.0 * d / (d + u), vec![e1, e2]);
        }
    } else if let Some(u) = &f.branch_uniform_pct {
        f.divergent_branch_pct =
            derived(FactKey::DivergentBranchPct, "Divergent branch targets (share)", "%", 100.0 - u.value, u.evidence.clone());
    }
}

/// Global access pattern: bytes used per sector, sectors per request, excessive sectors. Sectors per
/// request come from the first pair present: L1's sector and request counts, ncu's own ratio, or the
/// L2-side sectors (`lts__t_sectors_srcunit_tex_op_*`, `l1tex__m_*2xbar*`) over L1's request counts
/// when the L1 tables were not collected; the fact's label says which.
pub(super) fn access_pattern(r: &Reader, f: &mut Facts) {
    f.global_load_bytes_per_sector = r.spec(FactKey::GlobalLoadBytesPerSector);
    f.global_store_bytes_per_sector = r.spec(FactKey::GlobalStoreBytesPerSector);
    f.l1_hit_rate_pct = r.spec(FactKey::L1HitRatePct);
    // Bytes per sector as a percentage of the 32-byte sector (the `.pct` form of the same metric).
    for (slot, key, label, name) in [
        (
            &mut f.global_load_bytes_per_sector,
            FactKey::GlobalLoadBytesPerSector,
            "Bytes used per sector (global loads)",
            "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
        ),
        (
            &mut f.global_store_bytes_per_sector,
            FactKey::GlobalStoreBytesPerSector,
            "Bytes used per sector (global stores)",
            "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",
        ),
    ] {
        if slot.is_none() {
            if let Some((p, e)) = r.num(&[name]) {
                *slot = derived(key, label, "byte/sector", p * 32.0 / 100.0, vec![e]);
            }
        }
    }
    f.global_load_sectors = r.spec(FactKey::GlobalLoadSectors);
    f.global_store_sectors = r.spec(FactKey::GlobalStoreSectors);

    let (ld, st) = (FactKey::GlobalLoadSectorsPerRequest, FactKey::GlobalStoreSectorsPerRequest);
    f.global_load_sectors_per_request = load_sectors_per_request(r, ld);
    f.global_store_sectors_per_request = store_sectors_per_request(r, st);
    excessive_sectors(r, f);
}

/// L1's global load and store request counts, the denominators of sectors per request.
const LD_REQ: &[&str] = &["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"];
const ST_REQ: &[&str] = &["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"];

/// Sectors over requests as a sectors-per-request fact, when both counts are present and
/// positive; `bytes`: the numerator counts bytes (32 to a sector).
fn sector_ratio(r: &Reader, key: FactKey, label: &'static str, num: &[&str], den: &[&str], bytes: bool) -> Option<Fact> {
    let (n, en) = r.num(num)?;
    let (d, ed) = r.num(den)?;
    if d <= 0.0 || n <= 0.0 {
        return None;
    }
    let sectors = if bytes { n / 32.0 } else { n };
    derived(key, label, "sector/request", sectors / d, vec![en, ed])
}

/// Sectors per global load request (fact key `ld`), from the first source present (see [`access_pattern`]).
fn load_sectors_per_request(r: &Reader, ld: FactKey) -> Option<Fact> {
    sector_ratio(r, ld, "Sectors per global load request", &["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"], LD_REQ, false)
        .or_else(|| {
            r.fact(
                ld,
                "Sectors per global load request",
                "sector/request",
                &["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"],
            )
        })
        .or_else(|| {
            sector_ratio(
                r,
                ld,
                "Sectors per global load request (L2-side sectors: lts__t_sectors_srcunit_tex_op_read)",
                &["lts__t_sectors_srcunit_tex_op_read.sum"],
                LD_REQ,
                false,
            )
        })
        .or_else(|| {
            sector_ratio(
                r,
                ld,
                "Sectors per global load request (xbar sectors: l1tex__m_xbar2l1tex_read_sectors)",
                &["l1tex__m_xbar2l1tex_read_sectors.sum", "l1tex__m_xbar2l1tex_read_sectors_mem_global_op_ld.sum"],
                LD_REQ,
                false,
            )
        })
        .or_else(|| {
            sector_ratio(
                r,
                ld,
                "Sectors per global load request (xbar bytes / 32: l1tex__m_xbar2l1tex_read_bytes)",
                &["l1tex__m_xbar2l1tex_read_bytes.sum", "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_ld.sum"],
                LD_REQ,
                true,
            )
        })
}

/// Sectors per global store request (fact key `st`), from the first source present (see [`access_pattern`]).
fn store_sectors_per_request(r: &Reader, st: FactKey) -> Option<Fact> {
    sector_ratio(r, st, "Sectors per global store request", &["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"], ST_REQ, false)
        .or_else(|| {
            r.fact(
                st,
                "Sectors per global store request",
                "sector/request",
                &["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"],
            )
        })
        .or_else(|| {
            sector_ratio(
                r,
                st,
                "Sectors per global store request (L2-side sectors: lts__t_sectors_srcunit_tex_op_write)",
                &["lts__t_sectors_srcunit_tex_op_write.sum"],
                ST_REQ,
                false,
            )
        })
        .or_else(|| {
            sector_ratio(
                r,
                st,
                "Sectors per global store request (xbar sectors: l1tex__m_l1tex2xbar_write_sectors)",
                &["l1tex__m_l1tex2xbar_write_sectors.sum", "l1tex__m_l1tex2xbar_write_sectors_mem_global_op_st.sum"],
                ST_REQ,
                false,
            )
        })
        .or_else(|| {
            sector_ratio(
                r,
                st,
                "Sectors per global store request (xbar bytes / 32: l1tex__m_l1tex2xbar_write_bytes)",
                &["l1tex__m_l1tex2xbar_write_bytes.sum", "l1tex__m_l1tex2xbar_write_bytes_mem_global_op_st.sum"],
                ST_REQ,
                true,
            )
        })
}

/// Excessive global sectors: the share of the L2's theoretical global sectors beyond the ideal.
fn excessive_sectors(r: &Reader, f: &mut Facts) {
    if let (Some((ex, e1)), Some((tot, e2))) =
        (r.num(&["derived__memory_l2_theoretical_sectors_global_excessive"]), r.num(&["memory_l2_theoretical_sectors_global"]))
    {
        // The excessive count is written in bytes by recent ncu versions, the total in sectors (32 bytes).
        let ex_sectors = if e1.unit == "byte" { ex / 32.0 } else { ex };
        if tot > 0.0 {
            f.global_excessive_sectors_pct =
                derived(FactKey::GlobalExcessiveSectorsPct, "Excessive global sectors", "%", 100.0 * ex_sectors / tot, vec![e1, e2]);
        }
    }
}

/// Shared-memory bank conflicts: wavefronts beyond the ideal, or the conflict counters.
pub(super) fn shared_memory(r: &Reader, f: &mut Facts) {
    if let (Some((w, e1)), Some((ideal, e2))) = (r.num(&["memory_l1_wavefronts_shared"]), r.num(&["memory_l1_wavefronts_shared_ideal"])) {
        if w > 0.0 {
            f.shared_bank_conflict_pct = derived(
                FactKey::SharedBankConflictPct,
                "Shared-memory wavefronts from bank conflicts",
                "%",
                100.0 * (w - ideal).max(0.0) / w,
                vec![e1, e2],
            );
        }
    } else if let (Some((c, e1)), Some((w, e2))) =
        (r.num(&["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"]), r.num(&["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]))
    {
        if w > 0.0 {
            f.shared_bank_conflict_pct = derived(
                FactKey::SharedBankConflictPct,
                "Shared-memory wavefronts from bank conflicts",
                "%",
                100.0 * c.min(w) / w,
                vec![e1, e2],
            );
        }
    }
    f.shared_excess_wavefronts = r
        .fact(
            FactKey::SharedExcessWavefronts,
            "Shared-memory wavefronts from bank conflicts",
            "wavefront",
            &["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"],
        )
        .or_else(|| {
            let (w, e1) = r.num(&["memory_l1_wavefronts_shared"])?;
            let (ideal, e2) = r.num(&["memory_l1_wavefronts_shared_ideal"])?;
            derived(
                FactKey::SharedExcessWavefronts,
                "Shared-memory wavefronts beyond the ideal",
                "wavefront",
                (w - ideal).max(0.0),
                vec![e1, e2],
            )
        });
    f.shared_bank_conflicts = match (
        r.num(&["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]),
        r.num(&["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]),
    ) {
        (Some((a, e1)), Some((b, e2))) => {
            derived(FactKey::SharedBankConflicts, "Shared-memory bank conflicts (ld+st)", "conflict", a + b, vec![e1, e2])
        }
        _ => r.fact(
            FactKey::SharedBankConflicts,
            "Shared-memory bank conflicts",
            "conflict",
            &["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"],
        ),
    };
}

/// Launch shape: block and grid size, SMs, waves and the tail of the last wave.
pub(super) fn launch_shape(r: &Reader, f: &mut Facts) {
    let launch = r.launch;
    // A launch has at least one thread and one block: zeros (as stored for some launches) are no shape.
    f.block_threads =
        r.fact(FactKey::BlockThreads, "Threads per block", "thread", &["launch__block_size"]).filter(|x| x.value > 0.0).or_else(|| {
            launch.block_size.filter(|b| b.iter().all(|x| *x > 0)).map(|b| Fact {
                key: FactKey::BlockThreads,
                label: "Threads per block",
                value: (b[0] * b[1] * b[2]) as f64,
                unit: "thread",
                evidence: vec![shape_evidence("Block Size", b)],
            })
        });
    f.grid_blocks =
        r.fact(FactKey::GridBlocks, "Blocks in the grid", "block", &["launch__grid_size"]).filter(|x| x.value > 0.0).or_else(|| {
            launch.grid_size.filter(|g| g.iter().all(|x| *x > 0)).map(|g| Fact {
                key: FactKey::GridBlocks,
                label: "Blocks in the grid",
                value: (g[0] * g[1] * g[2]) as f64,
                unit: "block",
                evidence: vec![shape_evidence("Grid Size", g)],
            })
        });
    f.sm_count = r.spec(FactKey::SmCount);
    f.waves_per_sm = r.spec(FactKey::WavesPerSm);
    if let Some(w) = &f.waves_per_sm {
        if w.value > 1.0 {
            let full = w.value.ceil();
            let idle = 100.0 * (full - w.value) / full;
            if idle > 0.0 {
                f.tail_idle_pct = derived(FactKey::TailIdlePct, "Idle share of the last wave (tail effect)", "%", idle, w.evidence.clone());
            }
        }
    }
}

/// Reasons a warp waits that say it was ready to issue: not stalls on anything the code can change.
const READY: &[&str] = &["selected", "not_selected", "dispatch_stall"];

/// Stalls: cycles per issued instruction by reason (the top three), and the shares of the waiting
/// warps' stall cycles that each kind of fix relieves (memory, shared memory, drain).
/// The forms in which a report may carry warp stall reasons, `(prefix, suffix, label, unit)`, in order
/// of preference: WarpStateStats' cycles per issued instruction, then the share of active warps stalled
/// (older ncu versions and hand-picked `--metrics` lists), then the PC sampling counts (SourceCounters).
/// Only the first form present is read; the shares of stall cycles are the same quantity in each.
const STALL_FORMS: &[(&str, &str, &str, &str)] = &[
    ("smsp__average_warps_issue_stalled_", "_per_issue_active.ratio", "Stall cycles per issued instruction", "cycle"),
    ("smsp__warp_issue_stalled_", "_per_warp_active.pct", "Active warps stalled on this reason", "%"),
    ("smsp__pcsamp_warps_issue_stalled_", "", "PC samples of warps stalled on this reason", "sample"),
];

/// One form's stall reasons with their values (ready-to-issue reasons included, `selected` not).
fn stall_form(r: &Reader, form: &(&str, &str, &'static str, &'static str)) -> Vec<Stall> {
    let mut out = Vec::new();
    for (name, m) in &r.launch.metrics {
        let Some(reason) = name.strip_prefix(form.0).and_then(|s| s.strip_suffix(form.1)) else { continue };
        if reason == "selected" || reason.ends_with("_not_issued") || reason.contains('.') {
            continue;
        }
        if let Some(v) = m.as_f64().filter(|v| *v > 0.0) {
            let ev = super::evidence(name, m, v);
            let fact = Fact { key: stall_key(reason), label: form.2, value: v, unit: form.3, evidence: vec![ev] };
            out.push(Stall { reason: reason.to_string(), cycles_per_issue: fact, share_pct: None });
        }
    }
    out
}

pub(super) fn stalls(r: &Reader, f: &mut Facts) {
    let mut stalls: Vec<Stall> = STALL_FORMS.iter().map(|form| stall_form(r, form)).find(|s| !s.is_empty()).unwrap_or_default();
    let waiting: Vec<(String, f64, Evidence)> = stalls
        .iter()
        .filter(|s| !READY.contains(&s.reason.as_str()))
        .map(|s| (s.reason.clone(), s.cycles_per_issue.value, s.cycles_per_issue.evidence[0].clone()))
        .collect();
    let total: f64 = stalls.iter().map(|s| s.cycles_per_issue.value).sum();
    stalls.sort_by(|a, b| b.cycles_per_issue.value.total_cmp(&a.cycles_per_issue.value).then(a.reason.cmp(&b.reason)));
    stalls.truncate(3);
    if total > 0.0 {
        for s in &mut stalls {
            s.share_pct = Some(100.0 * s.cycles_per_issue.value / total);
        }
    }
    f.stalls = stalls;
    let waiting_total: f64 = waiting.iter().map(|w| w.1).sum();
    if waiting_total > 0.0 {
        let share = |key, label, reasons: &[&str]| {
            let part: Vec<&(String, f64, Evidence)> = waiting.iter().filter(|w| reasons.contains(&w.0.as_str())).collect();
            let v: f64 = part.iter().map(|w| w.1).sum();
            // Evidence: the reasons counted, then every waiting reason (the denominator).
            let mut ev: Vec<Evidence> = part.iter().map(|w| w.2.clone()).collect();
            ev.extend(waiting.iter().filter(|w| !reasons.contains(&w.0.as_str())).map(|w| w.2.clone()));
            derived(key, label, "%", 100.0 * v / waiting_total, ev)
        };
        f.stall_memory_share_pct = share(
            FactKey::StallMemorySharePct,
            "Waiting on global/local memory (long scoreboard + LG throttle), share of stall cycles",
            &["long_scoreboard", "lg_throttle"],
        );
        f.stall_shared_share_pct = share(
            FactKey::StallSharedSharePct,
            "Waiting on shared memory / MIO (MIO throttle + short scoreboard), share of stall cycles",
            &["mio_throttle", "short_scoreboard"],
        );
        f.stall_drain_share_pct = share(
            FactKey::StallDrainSharePct,
            "Waiting on store drain and fences (drain + membar), share of stall cycles",
            &["drain", "membar"],
        );
    }
}

/// Local memory (spills and local arrays): its instructions, sectors, and its share of the traffic.
pub(super) fn local_memory(r: &Reader, f: &mut Facts) {
    f.spill_instructions = r.spec(FactKey::SpillInstructions);
    f.local_memory_sectors =
        match (r.num(&["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"]), r.num(&["l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"])) {
            (Some((a, e1)), Some((b, e2))) => {
                derived(FactKey::LocalMemorySectors, "Local-memory sectors (ld+st)", "sector", a + b, vec![e1, e2])
            }
            (Some((a, e)), None) | (None, Some((a, e))) => {
                derived(FactKey::LocalMemorySectors, "Local-memory sectors", "sector", a, vec![e])
            }
            _ => None,
        };
    let ld = r.num(&["sass__inst_executed_local_loads", "smsp__sass_inst_executed_op_local_ld.sum", "smsp__inst_executed_op_local_ld.sum"]);
    let st =
        r.num(&["sass__inst_executed_local_stores", "smsp__sass_inst_executed_op_local_st.sum", "smsp__inst_executed_op_local_st.sum"]);
    f.local_memory_instructions = match (ld, st) {
        (Some((a, e1)), Some((b, e2))) => {
            derived(FactKey::LocalMemoryInstructions, "Local-memory instructions (ld+st)", "inst", a + b, vec![e1, e2])
        }
        (Some((a, e)), None) | (None, Some((a, e))) => {
            derived(FactKey::LocalMemoryInstructions, "Local-memory instructions", "inst", a, vec![e])
        }
        _ => None,
    };
    // Share of traffic: L2's theoretical sectors by space, else L1's sectors.
    f.local_traffic_pct = match (r.num(&["memory_l2_theoretical_sectors_local"]), r.num(&["memory_l2_theoretical_sectors_global"])) {
        (Some((l, e1)), Some((g, e2))) if l + g > 0.0 => {
            derived(FactKey::LocalTrafficPct, "Local memory's share of L2 sectors", "%", 100.0 * l / (l + g), vec![e1, e2])
        }
        _ => {
            let local = f.local_memory_sectors.as_ref();
            let global: Vec<&Fact> = [&f.global_load_sectors, &f.global_store_sectors].into_iter().flatten().collect();
            match local {
                Some(l) if !global.is_empty() => {
                    let g: f64 = global.iter().map(|x| x.value).sum();
                    let mut ev = l.evidence.clone();
                    ev.extend(global.iter().flat_map(|x| x.evidence.clone()));
                    (l.value + g > 0.0)
                        .then(|| {
                            derived(
                                FactKey::LocalTrafficPct,
                                "Local memory's share of L1 sectors",
                                "%",
                                100.0 * l.value / (l.value + g),
                                ev,
                            )
                        })
                        .flatten()
                }
                _ => None,
            }
        }
    };
}

/// Global atomics and reductions: requests (the counters differ between CC 7.x and 8.x/9.x; the first
/// present per operation is used) and sectors per request.
pub(super) fn atomics(r: &Reader, f: &mut Facts) {
    f.l2_atomic_busy_pct = r.spec(FactKey::L2AtomicBusyPct);
    let atom = r.num(&[
        "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
        "smsp__inst_executed_op_global_atom.sum",
        "smsp__sass_inst_executed_op_global_atom.sum",
        "sm__sass_inst_executed_op_global_atom.sum",
    ]);
    let red = r.num(&[
        "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
        "smsp__inst_executed_op_global_red.sum",
        "smsp__sass_inst_executed_op_global_red.sum",
        "sm__sass_inst_executed_op_global_red.sum",
    ]);
    let parts: Vec<(f64, Evidence)> = [atom, red].into_iter().flatten().collect();
    if !parts.is_empty() {
        let requests: f64 = parts.iter().map(|p| p.0).sum();
        f.atomic_requests = derived(
            FactKey::AtomicRequests,
            "Global atomic/reduction requests",
            "request",
            requests,
            parts.iter().map(|p| p.1.clone()).collect(),
        );
        if requests > 0.0 {
            if let Some((sectors, mut ev)) =
                r.sum(&["l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum"])
            {
                ev.extend(parts.into_iter().map(|p| p.1));
                if sectors > 0.0 {
                    f.atomic_sectors_per_request = derived(
                        FactKey::AtomicSectorsPerRequest,
                        "Sectors per global atomic/reduction request",
                        "sector/request",
                        sectors / requests,
                        ev,
                    );
                }
            }
        }
    }
}

/// The SM pipes keet reads, with the busiest-pipe label for each.
const PIPES: &[(&str, &str)] = &[
    ("alu", "Busiest SM pipe: ALU (integer, logic, FP32 compare and min/max)"),
    ("fma", "Busiest SM pipe: FMA (FP32 add/multiply/FMA, integer multiply-add)"),
    ("fmaheavy", "Busiest SM pipe: FMA heavy (FP32 FMA, integer multiply-add)"),
    ("fp64", "Busiest SM pipe: FP64"),
    ("fp16", "Busiest SM pipe: FP16"),
    ("tensor", "Busiest SM pipe: tensor"),
    ("xu", "Busiest SM pipe: XU (transcendentals, conversions, integer division and modulo)"),
    ("lsu", "Busiest SM pipe: LSU (global, local and shared memory instructions)"),
    ("adu", "Busiest SM pipe: ADU (address divergence, branches)"),
    ("uniform", "Busiest SM pipe: uniform datapath"),
];

/// The busiest SM pipe, by the higher of its cycles-active and instructions-executed shares of peak
/// (elapsed-based first), as ncu's HighPipeUtilization rule reads them.
pub(super) fn pipes(r: &Reader, f: &mut Facts) {
    f.tensor_pipe_pct = r.spec(FactKey::TensorPipePct);
    f.fp64_pipe_pct = r.spec(FactKey::Fp64PipePct);
    f.fp32_to_fp64_ratio = r.spec(FactKey::Fp32ToFp64Ratio);
    let mut best: Option<Fact> = None;
    for (pipe, label) in PIPES {
        let forms = [
            format!("sm__pipe_{pipe}_cycles_active.avg.pct_of_peak_sustained_elapsed"),
            format!("sm__inst_executed_pipe_{pipe}.avg.pct_of_peak_sustained_elapsed"),
            format!("sm__pipe_{pipe}_cycles_active.avg.pct_of_peak_sustained_active"),
            format!("sm__inst_executed_pipe_{pipe}.avg.pct_of_peak_sustained_active"),
        ];
        let mut here: Option<(f64, Evidence)> = None;
        for (i, name) in forms.iter().enumerate() {
            // The active forms only when no elapsed form of this pipe exists.
            if i >= 2 && here.is_some() {
                break;
            }
            if let Some((v, e)) = r.num(&[name]).filter(|(v, _)| *v <= MAX_PCT_OF_PEAK) {
                if here.as_ref().is_none_or(|h| v > h.0) {
                    here = Some((v, e));
                }
            }
        }
        if let Some((v, e)) = here {
            if best.as_ref().is_none_or(|b| v > b.value) {
                best = Some(Fact { key: FactKey::BusiestPipePct, label, value: v, unit: "%", evidence: vec![e] });
            }
        }
    }
    f.busiest_pipe_pct = best.filter(|b| b.value > 0.0);
}

/// SM clock and elapsed cycles, for estimates in cycles.
pub(super) fn clock(r: &Reader, f: &mut Facts) {
    f.sm_clock_hz = r
        .fact_unit(
            FactKey::SmClockHz,
            "SM clock",
            "Hz",
            &["sm__cycles_elapsed.avg.per_second", "gpc__cycles_elapsed.avg.per_second"],
            &Unit::Hertz,
        )
        .or_else(|| {
            // The device's rated clock; CUDA's attribute is in kHz (1e5..1e7 for any GPU made), a normalised Hz value is >= 1e8.
            let (v, e) = r.num(&["device__attribute_clock_rate"])?;
            let hz = if v < 1e7 { v * 1e3 } else { v };
            derived(FactKey::SmClockHz, "SM clock (device rating)", "Hz", hz, vec![e])
        });
    f.elapsed_cycles =
        r.fact(FactKey::ElapsedCycles, "Elapsed SM cycles", "cycle", &["sm__cycles_elapsed.avg", "sm__cycles_elapsed.max"]).or_else(|| {
            let (d, c) = (f.duration_ns.as_ref()?, f.sm_clock_hz.as_ref()?);
            let mut ev = d.evidence.clone();
            ev.extend(c.evidence.clone());
            derived(FactKey::ElapsedCycles, "Elapsed SM cycles (duration x clock)", "cycle", d.value * 1e-9 * c.value, ev)
        });
}

pub(crate) fn stall_key(reason: &str) -> FactKey {
    match reason {
        "long_scoreboard" => FactKey::StallLongScoreboard,
        "short_scoreboard" => FactKey::StallShortScoreboard,
        "barrier" => FactKey::StallBarrier,
        "membar" => FactKey::StallMembar,
        "mio_throttle" => FactKey::StallMioThrottle,
        "lg_throttle" => FactKey::StallLgThrottle,
        "math_pipe_throttle" => FactKey::StallMathPipeThrottle,
        "wait" => FactKey::StallWait,
        "not_selected" => FactKey::StallNotSelected,
        "no_instruction" => FactKey::StallNoInstruction,
        "branch_resolving" => FactKey::StallBranchResolving,
        "dispatch_stall" => FactKey::StallDispatchStall,
        "drain" => FactKey::StallDrain,
        "imc_miss" => FactKey::StallImcMiss,
        "tex_throttle" => FactKey::StallTexThrottle,
        "sleeping" => FactKey::StallSleeping,
        "misc" => FactKey::StallMisc,
        "gmma" => FactKey::StallGmma,
        _ => FactKey::StallOther,
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

/// FLOPs of fused multiply-adds for one precision (2 per FMA).
fn fma_flops(r: &Reader, p: char) -> Option<(f64, Vec<Evidence>)> {
    let sum = format!("smsp__sass_thread_inst_executed_op_{p}fma_pred_on.sum");
    let sm_sum = format!("sm__sass_thread_inst_executed_op_{p}fma_pred_on.sum");
    if let Some((v, e)) = r.num(&[&sum, &sm_sum]) {
        return Some((2.0 * v, vec![e]));
    }
    let rate = format!("smsp__sass_thread_inst_executed_op_{p}fma_pred_on.sum.per_cycle_elapsed");
    let (v, e1) = r.num(&[&rate])?;
    let (c, e2) = r.num(&["smsp__cycles_elapsed.avg"])?;
    Some((2.0 * v * c, vec![e1, e2]))
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

/// Roofline: FLOPs by precision, DRAM bytes, intensity, achieved against peak, and the FMA share.
pub(super) fn roofline(r: &Reader, duration: Option<&Fact>) -> Roofline {
    let mut rf = Roofline::default();
    let mk = |key, label, unit, (v, ev): (f64, Vec<Evidence>)| derived(key, label, unit, v, ev);
    rf.fp64_flop = flops(r, 'd').and_then(|x| mk(FactKey::Fp64Flop, "FP64 FLOPs", "FLOP", x));
    rf.fp32_flop = flops(r, 'f').and_then(|x| mk(FactKey::Fp32Flop, "FP32 FLOPs", "FLOP", x));
    rf.fp16_flop = flops(r, 'h').and_then(|x| mk(FactKey::Fp16Flop, "FP16 FLOPs", "FLOP", x));
    // FMA FLOPs' share of the FP32/FP16 FLOPs: a matrix multiply is nearly all FMA.
    let fma: Vec<(f64, Vec<Evidence>)> = ['f', 'h'].into_iter().filter_map(|p| fma_flops(r, p)).collect();
    let fp = rf.fp32_flop.as_ref().map_or(0.0, |x| x.value) + rf.fp16_flop.as_ref().map_or(0.0, |x| x.value);
    if !fma.is_empty() && fp > 0.0 {
        let v: f64 = fma.iter().map(|x| x.0).sum();
        let ev: Vec<Evidence> = [&rf.fp32_flop, &rf.fp16_flop].into_iter().flatten().flat_map(|x| x.evidence.clone()).collect();
        rf.fma_flop_share_pct = derived(FactKey::FmaFlopSharePct, "FMA share of FP32/FP16 FLOPs", "%", 100.0 * v / fp, ev);
    }
    rf.dram_bytes = r.fact_unit(FactKey::DramBytes, "DRAM bytes", "byte", &["dram__bytes.sum"], &Unit::Bytes).or_else(|| {
        let (rd, e1) = r.num(&["dram__bytes_read.sum"])?;
        let (wr, e2) = r.num(&["dram__bytes_write.sum"])?;
        derived(FactKey::DramBytes, "DRAM bytes (read+write)", "byte", rd + wr, vec![e1, e2])
    });
    let total_flop: Option<(f64, Vec<Evidence>)> = {
        let parts: Vec<&Fact> = [&rf.fp64_flop, &rf.fp32_flop, &rf.fp16_flop].into_iter().flatten().collect();
        (!parts.is_empty()).then(|| (parts.iter().map(|f| f.value).sum(), parts.iter().flat_map(|f| f.evidence.clone()).collect()))
    };
    if let (Some((fl, ev)), Some(bytes)) = (&total_flop, &rf.dram_bytes) {
        if bytes.value > 0.0 {
            let mut e = ev.clone();
            e.extend(bytes.evidence.clone());
            rf.arithmetic_intensity =
                derived(FactKey::ArithmeticIntensity, "Arithmetic intensity (DRAM)", "FLOP/byte", fl / bytes.value, e);
        }
    }
    if let (Some((fl, ev)), Some(d)) = (&total_flop, duration) {
        if d.value > 0.0 {
            let mut e = ev.clone();
            e.extend(d.evidence.clone());
            rf.achieved_flop_per_s = derived(FactKey::AchievedFlopPerS, "Achieved FLOP/s", "FLOP/s", fl / (d.value * 1e-9), e);
        }
    }
    if let (Some((p, e1)), Some((hz, e2))) =
        (r.num(&["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"]), r.num(&["sm__cycles_elapsed.avg.per_second"]))
    {
        rf.peak_fp32_flop_per_s = derived(FactKey::PeakFp32FlopPerS, "Peak FP32 FLOP/s", "FLOP/s", 2.0 * p * hz, vec![e1, e2]);
    }
    if let (Some((p, e1)), Some((hz, e2))) = (r.num(&["dram__bytes.sum.peak_sustained"]), r.num(&["dram__cycles_elapsed.avg.per_second"])) {
        rf.peak_dram_bytes_per_s = derived(FactKey::PeakDramBytesPerS, "Peak DRAM bandwidth", "byte/s", p * hz, vec![e1, e2]);
    }
    if let (Some(ai), Some(ach), Some(pf), Some(pb)) =
        (&rf.arithmetic_intensity, &rf.achieved_flop_per_s, &rf.peak_fp32_flop_per_s, &rf.peak_dram_bytes_per_s)
    {
        let roof = pf.value.min(ai.value * pb.value);
        if roof > 0.0 {
            let mut e = ach.evidence.clone();
            e.extend(pf.evidence.clone());
            e.extend(pb.evidence.clone());
            rf.pct_of_roof = derived(FactKey::PctOfRoof, "Share of the roofline ceiling", "%", 100.0 * ach.value / roof, e);
        }
    }
    rf
}
