//! One test per failure pattern of the diagnosis on profiles it had never seen (issue 23), each on
//! synthetic metrics: the regime, the order of causes, and the bound on the estimate.

use super::regime::derive_facts;
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

fn est(fs: &[Finding], c: Category) -> Option<f64> {
    fs.iter().find(|x| x.category == c).and_then(|x| x.estimated_speedup_pct)
}

fn regime_of(f: &Facts) -> BoundKind {
    f.bound.as_ref().expect("a regime").kind
}

/// 1. A handful of blocks on many SMs with strided accesses: the grid leads, and the wasted sectors
///    cost at most their share of memory units that are nearly idle.
#[test]
fn tiny_grid_leads_over_coalescing() {
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 30_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 3.0),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 5.0),
        ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed", 5.0),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 4.0),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 2.0),
        ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 4.0),
        ("launch__grid_size", 8.0),
        ("launch__sm_count", 132.0),
        ("launch__block_size", 256.0),
    ]));
    assert_eq!(regime_of(&f), BoundKind::GridTooSmall);
    let fs = evaluate(&f);
    assert_eq!(fs[0].category, Category::GridTooSmall, "{fs:#?}");
    // 87.5% waste of a memory system at 5% of peak: at most 87.5% x 5%.
    let c = est(&fs, Category::MemoryCoalescing).expect("still reported");
    assert!(c <= 87.5 * 0.05 + 1e-9, "{c}");
    assert!(fs.iter().find(|x| x.category == Category::MemoryCoalescing).unwrap().severity <= Severity::Low || c < 10.0);

    // 32 blocks on 16 SMs, under one wave, memory idle: latency leads, not the strided loads.
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 40_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 8.0),
        ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed", 9.0),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 6.0),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 5.0),
        ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 8.0),
        ("launch__grid_size", 32.0),
        ("launch__sm_count", 16.0),
        ("launch__waves_per_multiprocessor", 0.25),
    ]));
    assert_eq!(regime_of(&f), BoundKind::Latency);
    let fs = evaluate(&f);
    assert_eq!(fs[0].category, Category::LatencyBound, "{fs:#?}");
    assert!(est(&fs, Category::MemoryCoalescing).unwrap() <= 75.0 * 0.09 + 1e-9);
}

/// 2. Only the memory chart: sectors per request from the L2-side sector counts over L1's requests,
///    said so, and a store pattern at 32 sectors per request is the cause of a memory-bound launch.
#[test]
fn coalescing_from_l2_side_counters() {
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 500_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 15.0),
        ("lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 72.0),
        ("lts__t_sectors_srcunit_tex_op_write.sum", 32e6),
        ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", 1e6),
        ("lts__t_sectors_srcunit_tex_op_read.sum", 4e6),
        ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", 1e6),
    ]));
    let st = f.global_store_sectors_per_request.as_ref().expect("from the L2 side");
    assert_eq!(st.value, 32.0);
    assert!(st.label.contains("L2-side") && st.evidence[0].metric == "lts__t_sectors_srcunit_tex_op_write.sum");
    assert_eq!(regime_of(&f), BoundKind::Memory);
    let fs = evaluate(&f);
    assert_eq!(fs[0].category, Category::MemoryCoalescing, "{fs:#?}");
    assert!(fs[0].claim.contains("L2-side"), "{}", fs[0].claim);
    // 1 - 4/32 of the sectors wasted, on L2 at 72%: 87.5% x 72%.
    approx::assert_relative_eq!(fs[0].estimated_speedup_pct.unwrap(), 87.5 * 0.72, epsilon = 1e-9);
    // The xbar byte counters give the same when the L2-side sectors are absent.
    let f = derive_facts(&launch(&[
        ("l1tex__m_l1tex2xbar_write_bytes.sum", 12.0 * 32.0 * 1e6),
        ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", 1e6),
    ]));
    let st = f.global_store_sectors_per_request.as_ref().unwrap();
    assert_eq!(st.value, 12.0);
    assert!(st.label.contains("xbar"));
    // No throughput measured: the words say so rather than inventing a utilisation.
    let fs = evaluate(&f);
    let c = fs.iter().find(|x| x.category == Category::MemoryCoalescing).expect("12 sectors per request");
    assert!(c.explanation.contains("no memory throughput was measured"), "{}", c.explanation);
}

/// 3. Every warp reduces into one address: red requests, one sector each, warps waiting on memory and
///    drain, SMs idle. Contended atomics lead; the same on CC 7.5's instruction counters; atomics spread
///    over many addresses (4 sectors per request, a sliver of the instructions) are not contention.
#[test]
fn contended_atomics_from_stalls() {
    let base = [
        ("gpu__time_duration.sum", 800_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 1.0),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 2.5),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 2.5),
        ("launch__grid_size", 4096.0),
        ("launch__sm_count", 80.0),
        ("launch__block_size", 256.0),
        ("smsp__inst_executed.sum", 600_000.0),
        ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 30.0),
        ("smsp__average_warps_issue_stalled_drain_per_issue_active.ratio", 60.0),
        ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", 4.0),
        ("smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio", 1.0),
    ];
    for counters in [
        // CC 8.x / 9.x: L1's request and sector counts.
        vec![("l1tex__t_requests_pipe_lsu_mem_global_op_red.sum", 32768.0), ("l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum", 32768.0)],
        // CC 7.5: the instruction counters only.
        vec![("smsp__inst_executed_op_global_red.sum", 32768.0)],
    ] {
        let mut m: Vec<(&str, f64)> = base.to_vec();
        m.extend(counters);
        let f = derive_facts(&launch(&m));
        assert_eq!(regime_of(&f), BoundKind::Latency);
        let fs = evaluate(&f);
        assert_eq!(fs[0].category, Category::AtomicsContention, "{fs:#?}");
        // The waiting share (94 of 94 waiting cycles on memory and drain), under the SM's headroom (99%).
        let e = fs[0].estimated_speedup_pct.unwrap();
        assert!(e > 90.0 && e <= 99.0, "{e}");
        assert!(fs[0].claim.contains("32768"), "{}", fs[0].claim);
    }
    // Atomics over many addresses: 4 sectors per request, 0.1% of the instructions.
    let mut m: Vec<(&str, f64)> = base.to_vec();
    m.retain(|x| x.0 != "smsp__inst_executed.sum");
    m.extend([
        ("smsp__inst_executed.sum", 3.2e7),
        ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", 32768.0),
        ("l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum", 4.0 * 32768.0),
    ]);
    let fs = evaluate(&derive_facts(&launch(&m)));
    assert!(est(&fs, Category::AtomicsContention).is_none(), "{fs:#?}");
}

/// 4. A register-tiled GEMM: bank conflicts and a smaller coalescing waste on one scale, the share of
///    elapsed time each can explain. Bank conflicts lead a launch bound on L1/shared.
#[test]
fn bank_conflicts_and_coalescing_on_one_scale() {
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 500_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 55.0),
        ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed", 73.0),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 40.0),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 10.0),
        ("memory_l1_wavefronts_shared", 1e8),
        ("memory_l1_wavefronts_shared_ideal", 6.3e7),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", 3.7e7),
        ("sm__cycles_elapsed.avg", 1.2e6),
        ("launch__grid_size", 1024.0),
        ("launch__sm_count", 128.0),
        ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 24.0),
        ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio", 8.0),
        ("smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio", 3.0),
        ("smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio", 1.0),
        ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 0.8),
        ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", 0.5),
        ("smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio", 2.0),
    ]));
    assert_eq!(regime_of(&f), BoundKind::Memory);
    let fs = evaluate(&f);
    assert_eq!(fs[0].category, Category::SharedBankConflicts, "{fs:#?}");
    let bank = est(&fs, Category::SharedBankConflicts).unwrap();
    // 3.7e7 / 128 SMs / 1.2e6 cycles = 24.1% of the time in replays, times the 75.5% of waiting spent on shared memory.
    approx::assert_relative_eq!(bank, 100.0 * 3.7e7 / 128.0 / 1.2e6 * (4.0 / 5.3), epsilon = 1e-6);
    if let Some(c) = est(&fs, Category::MemoryCoalescing) {
        assert!(c < bank, "coalescing {c} vs bank conflicts {bank}");
    }
}

/// 5. Estimates against measured twins: the naive SGEMM (row index on threadIdx.x; the coalesced twin
///    saved 15.5%) and a barrier-bound reduction whose coalescing fix saved 3%.
#[test]
fn coalescing_estimates_follow_what_warps_wait_on() {
    // RTX 4090 sgemm_naive: 84.9% excessive sectors, L1 60.8%, long scoreboard 48% of stall cycles.
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 51_019_040.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 34.07),
        ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed", 60.75),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 2.11),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 0.1),
        ("derived__memory_l2_theoretical_sectors_global_excessive", 7_523_532_800.0),
        ("memory_l2_theoretical_sectors_global", 8_866_758_656.0),
        ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 15.53),
        ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", 13.83),
        ("smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio", 2.58),
    ]));
    let e = est(&evaluate(&f), Category::MemoryCoalescing).unwrap();
    let saved = 15.5;
    assert!(e >= saved - 10.0 && e <= (2.0 * saved).max(saved + 15.0), "{e}");
    // A barrier-bound reduction with half its sectors wasted on a busy L2: the warps wait at the barrier.
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 200_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 30.0),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 70.0),
        ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 16.0),
        ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", 8.0),
        ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 1.0),
        ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", 1.0),
    ]));
    let e = est(&evaluate(&f), Category::MemoryCoalescing).unwrap();
    assert!(e < 10.0, "{e}");
    // A single block whose conflicts hide behind the barrier: removing them saves little.
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 20_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 1.0),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", 4000.0),
        ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", 6000.0),
        ("sm__cycles_elapsed.avg", 40_000.0),
        ("launch__grid_size", 1.0),
        ("launch__sm_count", 80.0),
        ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", 9.0),
        ("smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio", 0.5),
        ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 0.5),
    ]));
    let e = est(&evaluate(&f), Category::SharedBankConflicts).unwrap();
    // 10% of the cycles are replays, but only 5% of the waiting is on shared memory.
    approx::assert_relative_eq!(e, 10.0 * 0.05, epsilon = 1e-9);
}

/// 6. Unified memory (Jetson): DRAM counters read 0, the limit shows on L2. Memory-bound on L2, with
///    the DRAM zero set aside, not latency-bound.
#[test]
fn unified_memory_is_memory_bound_on_l2() {
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 900_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 20.0),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 81.0),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 0.0),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 81.0),
        ("dram__bytes_read.sum", 0.0),
        ("dram__bytes_write.sum", 0.0),
    ]));
    assert_eq!(regime_of(&f), BoundKind::Memory);
    let fs = evaluate(&f);
    assert_eq!(fs[0].category, Category::MemoryBound, "{fs:#?}");
    assert!(fs[0].claim.starts_with("L2 is at 81%"), "{}", fs[0].claim);
    assert!(!fs.iter().any(|x| x.category == Category::LatencyBound));
}

/// 7. Pipes and precision: an ALU-bound reduction is compute-bound without tensor cores in sight; an
///    FP64 chain on a 1:32 GPU is FP64-bound; local memory traffic is spilling, not coalescing.
#[test]
fn pipes_precision_and_local_memory() {
    // Sum reduction: FADDs only, the ALU pipe busiest.
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 1_700_000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 69.5),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 62.7),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 18.4),
        ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 0.0),
        ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed", 53.0),
        ("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed", 62.7),
        ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed", 27.0),
        ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 3.3e7),
        ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 0.0),
    ]));
    assert_eq!(regime_of(&f), BoundKind::Compute);
    let fs = evaluate(&f);
    assert!(!fs.iter().any(|x| x.category == Category::TensorCoreUnused), "{fs:#?}");
    assert_eq!(fs[0].category, Category::ComputeBound);
    assert!(fs[0].claim.contains("LSU"), "the busiest pipe is named: {}", fs[0].claim);

    // FP64 chain on a 1:32 GPU: the FP64 pipe's busy time less 1/32 of it, under DRAM's headroom.
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 145_440.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 82.7),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 63.5),
        ("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed", 82.7),
        ("device__attribute_single_to_double_precision_perf_ratio", 32.0),
    ]));
    let fs = evaluate(&f);
    assert_eq!(fs[0].category, Category::Fp64, "{fs:#?}");
    approx::assert_relative_eq!(fs[0].estimated_speedup_pct.unwrap(), 100.0 - 63.5, epsilon = 1e-9);
    assert!(fs[0].explanation.contains("1/32"), "{}", fs[0].explanation);

    // Accumulators in local memory: 97% of the L2 sectors are local; the strided global stores are 3%.
    let f = derive_facts(&launch(&[
        ("gpu__time_duration.sum", 8_853_344.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 3.6),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 79.7),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 40.5),
        ("memory_l2_theoretical_sectors_local", 194_368_160.0),
        ("memory_l2_theoretical_sectors_global", 5_072_864.0),
        ("derived__memory_l2_theoretical_sectors_global_excessive", 3_580_448.0),
        ("sass__inst_executed_local_loads", 9_342_752.0),
        ("sass__inst_executed_local_stores", 4_764_320.0),
    ]));
    let fs = evaluate(&f);
    assert_eq!(fs[0].category, Category::RegisterSpilling, "{fs:#?}");
    let spill = fs[0].estimated_speedup_pct.unwrap();
    approx::assert_relative_eq!(spill, 100.0 * 194_368_160.0 / (194_368_160.0 + 5_072_864.0) * 0.797, epsilon = 1e-6);
    let coal = est(&fs, Category::MemoryCoalescing).unwrap();
    assert!(coal < 2.0, "the strided global accesses are 2.5% of the traffic: {coal}");
}
