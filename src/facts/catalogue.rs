//! The catalogue of facts copied from one metric: each fact's key, label, unit and the metric names
//! tried for it, in order of preference (the name Nsight Compute's sections use first, then older or
//! alternative names). Facts computed from several metrics are derived by the family functions in
//! [`super::families`]; every key keet emits, catalogued or derived, is a [`FactKey`].

use super::FactKey;

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
    pub key: FactKey,
    /// Human label.
    pub label: &'static str,
    /// Unit of the value.
    pub unit: &'static str,
    /// Metric names, in order of preference.
    pub metrics: &'static [&'static str],
    pub read: Read,
}

const fn spec(key: FactKey, label: &'static str, unit: &'static str, metrics: &'static [&'static str], read: Read) -> FactSpec {
    FactSpec { key, label, unit, metrics, read }
}

/// Every fact read from a single metric.
pub const CATALOGUE: &[FactSpec] = &[
    spec(
        FactKey::DurationNs,
        "Duration",
        "ns",
        &["gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration"],
        Read::Nanoseconds,
    ),
    spec(FactKey::SmThroughputPct, "Compute (SM) throughput", "%", &["sm__throughput.avg.pct_of_peak_sustained_elapsed"], Read::Percent),
    spec(
        FactKey::MemoryThroughputPct,
        "Memory throughput",
        "%",
        &["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
        Read::Percent,
    ),
    spec(
        FactKey::DramThroughputPct,
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
        FactKey::L1ThroughputPct,
        "L1/TEX cache throughput",
        "%",
        &["l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "l1tex__throughput.avg.pct_of_peak_sustained_active"],
        Read::Percent,
    ),
    spec(FactKey::L2ThroughputPct, "L2 cache throughput", "%", &["lts__throughput.avg.pct_of_peak_sustained_elapsed"], Read::Percent),
    spec(
        FactKey::L1HitRatePct,
        "L1 hit rate (global loads)",
        "%",
        &["l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct", "l1tex__t_sector_hit_rate.pct"],
        Read::Percent,
    ),
    spec(FactKey::AchievedOccupancyPct, "Achieved occupancy", "%", &["sm__warps_active.avg.pct_of_peak_sustained_active"], Read::Percent),
    spec(FactKey::TheoreticalOccupancyPct, "Theoretical occupancy", "%", &["sm__maximum_warps_per_active_cycle_pct"], Read::Percent),
    spec(FactKey::RegistersPerThread, "Registers per thread", "register/thread", &["launch__registers_per_thread"], Read::Copy),
    spec(
        FactKey::SharedMemPerBlockBytes,
        "Shared memory per block",
        "byte",
        &["launch__shared_mem_per_block", "launch__shared_mem_per_block_static"],
        Read::Bytes,
    ),
    spec(
        FactKey::WarpCyclesPerIssue,
        "Warp cycles per issued instruction",
        "cycle",
        &["smsp__average_warp_latency_per_inst_issued.ratio", "smsp__average_warps_active_per_inst_executed.ratio"],
        Read::Copy,
    ),
    spec(
        FactKey::IssueSlotsBusyPct,
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
        FactKey::GlobalLoadBytesPerSector,
        "Bytes used per sector (global loads)",
        "byte/sector",
        &["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"],
        Read::Copy,
    ),
    spec(
        FactKey::GlobalStoreBytesPerSector,
        "Bytes used per sector (global stores)",
        "byte/sector",
        &["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"],
        Read::Copy,
    ),
    spec(
        FactKey::ActiveThreadsPerWarp,
        "Active threads per warp instruction",
        "thread",
        &["smsp__thread_inst_executed_pred_on_per_inst_executed.ratio", "smsp__thread_inst_executed_per_inst_executed.ratio"],
        Read::Copy,
    ),
    spec(
        FactKey::BranchUniformPct,
        "Uniform branch targets",
        "%",
        &["smsp__sass_average_branch_targets_threads_uniform.pct"],
        Read::Percent,
    ),
    spec(
        FactKey::DivergentBranchTargets,
        "Divergent branch targets",
        "branch",
        &["smsp__sass_branch_targets_threads_divergent.sum", "smsp__branch_targets_threads_divergent"],
        Read::Copy,
    ),
    spec(
        FactKey::SpillInstructions,
        "Register-spilling instructions",
        "inst",
        &["sass__inst_executed_register_spilling", "derived__local_spilling_requests"],
        Read::Copy,
    ),
    spec(
        FactKey::TensorPipePct,
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
        FactKey::Fp64PipePct,
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
        FactKey::L2AtomicBusyPct,
        "L2 atomic unit busy (busiest slice)",
        "%",
        // The busiest slice shows contention on one address; the average hides it.
        &[
            "lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed",
            "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed",
        ],
        Read::Percent,
    ),
    spec(FactKey::GlobalLoadSectors, "Global load sectors (L1)", "sector", &["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"], Read::Copy),
    spec(
        FactKey::GlobalStoreSectors,
        "Global store sectors (L1)",
        "sector",
        &["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"],
        Read::Copy,
    ),
    spec(
        FactKey::WarpInstructions,
        "Warp instructions executed",
        "inst",
        &["smsp__inst_executed.sum", "sm__inst_executed.sum"],
        Read::Copy,
    ),
    spec(FactKey::SmCount, "SMs on the device", "SM", &["launch__sm_count", "device__attribute_multiprocessor_count"], Read::Copy),
    spec(FactKey::WavesPerSm, "Waves per SM", "wave", &["launch__waves_per_multiprocessor"], Read::Copy),
    spec(
        FactKey::Fp32ToFp64Ratio,
        "FP32 to FP64 throughput ratio of the GPU",
        "ratio",
        &["device__attribute_single_to_double_precision_perf_ratio"],
        Read::Copy,
    ),
];

/// The catalogue entry for `key` (`None` for a derived fact).
pub fn spec_of(key: FactKey) -> Option<&'static FactSpec> {
    CATALOGUE.iter().find(|s| s.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        let mut keys: Vec<FactKey> = CATALOGUE.iter().map(|s| s.key).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "a fact key is catalogued twice");
        assert!(CATALOGUE.iter().all(|s| !s.metrics.is_empty() && !s.label.is_empty()));
    }
}
