//! The catalogue of facts copied from one metric: each fact's key, label, unit and the metric names
//! tried for it, in order of preference (the name Nsight Compute's sections use first, then older or
//! alternative names). Facts computed from several metrics are derived by the family functions in
//! [`super::families`]; their keys are listed in [`DERIVED_KEYS`] so every key keet emits is here.

/// How a catalogued metric is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// The value as written.
    Copy,
    /// A percentage: a `pct_of_peak` value above [`super::MAX_PCT_OF_PEAK`] is a measurement
    /// artefact, set aside, and the next name is tried.
    Percent,
    /// A value whose unit must be this one (or none): a metric in another unit is another quantity.
    Nanoseconds,
    Bytes,
    Hertz,
}

/// One fact copied from one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactSpec {
    /// Stable identifier used by rules, prompts, the validator and the JSON output.
    pub key: &'static str,
    /// Human label.
    pub label: &'static str,
    /// Unit of the value.
    pub unit: &'static str,
    /// Metric names, in order of preference.
    pub metrics: &'static [&'static str],
    pub read: Read,
}

const fn spec(key: &'static str, label: &'static str, unit: &'static str, metrics: &'static [&'static str], read: Read) -> FactSpec {
    FactSpec { key, label, unit, metrics, read }
}

/// Every fact read from a single metric.
pub const CATALOGUE: &[FactSpec] = &[
    spec("duration_ns", "Duration", "ns", &["gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration"], Read::Nanoseconds),
    spec("sm_throughput_pct", "Compute (SM) throughput", "%", &["sm__throughput.avg.pct_of_peak_sustained_elapsed"], Read::Percent),
    spec(
        "memory_throughput_pct",
        "Memory throughput",
        "%",
        &["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
        Read::Percent,
    ),
    spec(
        "dram_throughput_pct",
        "DRAM throughput",
        "%",
        &[
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "FBSP.TriageCompute.dramc__throughput.avg.pct_of_peak_sustained_elapsed",
        ],
        Read::Percent,
    ),
    spec(
        "l1_throughput_pct",
        "L1/TEX cache throughput",
        "%",
        &["l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "l1tex__throughput.avg.pct_of_peak_sustained_active"],
        Read::Percent,
    ),
    spec("l2_throughput_pct", "L2 cache throughput", "%", &["lts__throughput.avg.pct_of_peak_sustained_elapsed"], Read::Percent),
    spec(
        "l1_hit_rate_pct",
        "L1 hit rate (global loads)",
        "%",
        &["l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct", "l1tex__t_sector_hit_rate.pct"],
        Read::Percent,
    ),
    spec("achieved_occupancy_pct", "Achieved occupancy", "%", &["sm__warps_active.avg.pct_of_peak_sustained_active"], Read::Percent),
    spec("theoretical_occupancy_pct", "Theoretical occupancy", "%", &["sm__maximum_warps_per_active_cycle_pct"], Read::Percent),
    spec("registers_per_thread", "Registers per thread", "register/thread", &["launch__registers_per_thread"], Read::Copy),
    spec(
        "shared_mem_per_block_bytes",
        "Shared memory per block",
        "byte",
        &["launch__shared_mem_per_block", "launch__shared_mem_per_block_static"],
        Read::Bytes,
    ),
    spec(
        "warp_cycles_per_issue",
        "Warp cycles per issued instruction",
        "cycle",
        &["smsp__average_warp_latency_per_inst_issued.ratio", "smsp__average_warps_active_per_inst_executed.ratio"],
        Read::Copy,
    ),
    spec(
        "issue_slots_busy_pct",
        "Issue slots busy",
        "%",
        &[
            "sm__inst_issued.avg.pct_of_peak_sustained_active",
            "smsp__issue_active.avg.pct_of_peak_sustained_active",
            "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
        ],
        Read::Percent,
    ),
    spec(
        "global_load_bytes_per_sector",
        "Bytes used per sector (global loads)",
        "byte/sector",
        &["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"],
        Read::Copy,
    ),
    spec(
        "global_store_bytes_per_sector",
        "Bytes used per sector (global stores)",
        "byte/sector",
        &["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"],
        Read::Copy,
    ),
    spec(
        "active_threads_per_warp",
        "Active threads per warp instruction",
        "thread",
        &["smsp__thread_inst_executed_pred_on_per_inst_executed.ratio", "smsp__thread_inst_executed_per_inst_executed.ratio"],
        Read::Copy,
    ),
    spec("branch_uniform_pct", "Uniform branch targets", "%", &["smsp__sass_average_branch_targets_threads_uniform.pct"], Read::Percent),
    spec(
        "divergent_branch_targets",
        "Divergent branch targets",
        "branch",
        &["smsp__sass_branch_targets_threads_divergent.sum", "smsp__branch_targets_threads_divergent"],
        Read::Copy,
    ),
    spec(
        "spill_instructions",
        "Register-spilling instructions",
        "inst",
        &["sass__inst_executed_register_spilling", "derived__local_spilling_requests"],
        Read::Copy,
    ),
    spec(
        "tensor_pipe_pct",
        "Tensor pipe utilisation",
        "%",
        &[
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
        ],
        Read::Percent,
    ),
    spec(
        "fp64_pipe_pct",
        "FP64 pipe utilisation",
        "%",
        &[
            "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
        ],
        Read::Percent,
    ),
    spec(
        "l2_atomic_busy_pct",
        "L2 atomic unit busy (busiest slice)",
        "%",
        // The busiest slice shows contention on one address; the average hides it.
        &[
            "lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed",
            "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed",
        ],
        Read::Percent,
    ),
    spec("global_load_sectors", "Global load sectors (L1)", "sector", &["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"], Read::Copy),
    spec("global_store_sectors", "Global store sectors (L1)", "sector", &["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"], Read::Copy),
    spec("warp_instructions", "Warp instructions executed", "inst", &["smsp__inst_executed.sum", "sm__inst_executed.sum"], Read::Copy),
    spec("sm_count", "SMs on the device", "SM", &["launch__sm_count", "device__attribute_multiprocessor_count"], Read::Copy),
    spec("waves_per_sm", "Waves per SM", "wave", &["launch__waves_per_multiprocessor"], Read::Copy),
    spec(
        "fp32_to_fp64_ratio",
        "FP32 to FP64 throughput ratio of the GPU",
        "ratio",
        &["device__attribute_single_to_double_precision_perf_ratio"],
        Read::Copy,
    ),
];

/// Keys of the facts computed from several metrics (or from the launch's identity), by family.
pub const DERIVED_KEYS: &[&str] = &[
    "global_load_sectors_per_request",
    "global_store_sectors_per_request",
    "global_excessive_sectors_pct",
    "shared_bank_conflict_pct",
    "shared_bank_conflicts",
    "shared_excess_wavefronts",
    "block_threads",
    "grid_blocks",
    "tail_idle_pct",
    "local_memory_sectors",
    "local_memory_instructions",
    "local_traffic_pct",
    "atomic_requests",
    "atomic_sectors_per_request",
    "sm_clock_hz",
    "elapsed_cycles",
    "divergent_branch_pct",
    "busiest_pipe_pct",
    "stall_memory_share_pct",
    "stall_shared_share_pct",
    "stall_drain_share_pct",
    "occupancy_limit_blocks_per_sm",
    "fp64_flop",
    "fp32_flop",
    "fp16_flop",
    "fma_flop_share_pct",
    "dram_bytes",
    "arithmetic_intensity",
    "achieved_flop_per_s",
    "peak_fp32_flop_per_s",
    "peak_dram_bytes_per_s",
    "pct_of_roof",
];

/// The catalogue entry for `key`.
pub fn spec_of(key: &str) -> Option<&'static FactSpec> {
    CATALOGUE.iter().find(|s| s.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        let mut keys: Vec<&str> = CATALOGUE.iter().map(|s| s.key).chain(DERIVED_KEYS.iter().copied()).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "a fact key is defined twice");
        assert!(CATALOGUE.iter().all(|s| !s.metrics.is_empty() && !s.label.is_empty()));
    }
}
