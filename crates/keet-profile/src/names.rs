//! Maps details-page display labels ("Duration" in "GPU Speed Of Light Throughput") to raw metric
//! names (`gpu__time_duration.sum`), and back.
//!
//! `ncu --page details` prints what the GUI shows: a section's display name, an optional body item
//! label (a chart or table inside the section, "Body Item Label" column in newer versions) and the
//! metric's display label. Nsight Compute's section files (`sections/*.section`) declare each label
//! with its raw metric name (`Label: "Duration"`, `Name: "gpu__time_duration.sum"`); the table below
//! restates those facts, and every entry that `rtx3060-sassscope/details.csv` exercises was checked
//! against the raw page of the same launch (`raw.csv`, same values), see `tests/integration/csv_corpus.rs`.
//!
//! Besides the table, three label shapes are resolved by rule:
//! - breakdown tables ("Compute Throughput Breakdown"): `"{UNIT}: {Compound Name}"`, e.g.
//!   "L1: Lsuin Requests" is `l1tex__lsuin_requests.avg.pct_of_peak_sustained_elapsed`;
//! - the "Workload Distribution" suffix table repeats one label four times, in the order
//!   `.avg`, `.max`, `.min`, `.sum` (checked against the raw page);
//! - labels that carry the raw name, "Warp Stall Sampling (All Samples) (smsp__pcsamp_...)", or are
//!   raw names themselves.
//!
//! Section names may be given as display names or identifiers ("SpeedOfLight"); rule rows use the
//! identifier, metric rows the display name.

use std::borrow::Cow;

/// Section identifier -> display name, as in the section files.
pub const SECTIONS: &[(&str, &str)] = &[
    ("SpeedOfLight", "GPU Speed Of Light Throughput"),
    ("ComputeWorkloadAnalysis", "Compute Workload Analysis"),
    ("MemoryWorkloadAnalysis", "Memory Workload Analysis"),
    ("MemoryWorkloadAnalysis_Chart", "Memory Workload Analysis Chart"),
    ("MemoryWorkloadAnalysis_Tables", "Memory Workload Analysis Tables"),
    ("LaunchStats", "Launch Statistics"),
    ("Occupancy", "Occupancy"),
    ("SchedulerStats", "Scheduler Statistics"),
    ("WarpStateStats", "Warp State Statistics"),
    ("InstructionStats", "Instruction Statistics"),
    ("SourceCounters", "Source Counters"),
    ("WorkloadDistribution", "GPU and Memory Workload Distribution"),
    ("PmSampling", "PM Sampling"),
    ("SpeedOfLight_RooflineChart", "GPU Speed Of Light Roofline Chart"),
    ("Nvlink", "NVLink"),
    ("NumaAffinity", "NUMA Affinity"),
];

/// The section name ncu uses for `--metrics` rows.
pub const COMMAND_LINE_SECTION: &str = "Command line profiler metrics";

/// Display name of a section given either its identifier or its display name.
pub fn section_display_name(section: &str) -> &str {
    SECTIONS.iter().find(|(id, _)| *id == section).map(|(_, d)| *d).unwrap_or(section)
}

/// Identifier of a section given either its display name or its identifier.
pub fn section_identifier(section: &str) -> &str {
    SECTIONS.iter().find(|(_, d)| *d == section).map(|(id, _)| *id).unwrap_or(section)
}

/// (section display name, label, raw metric name). The first entry for a raw name is the one
/// [`label_for`] returns, so the most prominent place comes first.
pub const LABELS: &[(&str, &str, &str)] = &[
    // SpeedOfLight.section (header)
    ("GPU Speed Of Light Throughput", "Duration", "gpu__time_duration.sum"),
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("GPU Speed Of Light Throughput", "Memory Throughput", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("GPU Speed Of Light Throughput", "Elapsed Cycles", "gpc__cycles_elapsed.max"),
    ("GPU Speed Of Light Throughput", "L1/TEX Cache Throughput", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ("GPU Speed Of Light Throughput", "SM Active Cycles", "sm__cycles_active.avg"),
    ("GPU Speed Of Light Throughput", "L2 Cache Throughput", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("GPU Speed Of Light Throughput", "SM Frequency", "gpc__cycles_elapsed.avg.per_second"),
    ("GPU Speed Of Light Throughput", "DRAM Throughput", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("GPU Speed Of Light Throughput", "DRAM Frequency", "dram__cycles_elapsed.avg.per_second"),
    ("GPU Speed Of Light Throughput", "Waves Per SM", "launch__waves_per_multiprocessor"),
    // SpeedOfLight.section (GPU Throughput chart)
    ("GPU Speed Of Light Throughput", "Compute (SM) [%]", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("GPU Speed Of Light Throughput", "Memory [%]", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    // ComputeWorkloadAnalysis.section
    ("Compute Workload Analysis", "Executed Ipc Elapsed", "sm__inst_executed.avg.per_cycle_elapsed"),
    ("Compute Workload Analysis", "SM Busy", "sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Compute Workload Analysis", "Executed Ipc Active", "sm__inst_executed.avg.per_cycle_active"),
    ("Compute Workload Analysis", "Issue Slots Busy", "sm__inst_issued.avg.pct_of_peak_sustained_elapsed"),
    ("Compute Workload Analysis", "Issued Ipc Active", "sm__inst_issued.avg.per_cycle_active"),
    ("Compute Workload Analysis", "Max. Issued Slots Busy", "sm__inst_issued.max.pct_of_peak_sustained_elapsed"),
    // MemoryWorkloadAnalysis.section
    ("Memory Workload Analysis", "Memory Throughput", "dram__bytes.sum.per_second"),
    ("Memory Workload Analysis", "Mem Busy", "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Memory Workload Analysis", "L1/TEX Hit Rate", "l1tex__t_sector_hit_rate.pct"),
    ("Memory Workload Analysis", "Max Bandwidth", "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Memory Workload Analysis", "L2 Hit Rate", "lts__t_sector_hit_rate.pct"),
    ("Memory Workload Analysis", "Mem Pipes Busy", "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Memory Workload Analysis", "L2 Compression Input Sectors", "lts__gcomp_input_sectors.sum"),
    ("Memory Workload Analysis", "Local Memory Spilling Requests", "derived__local_spilling_requests"),
    ("Memory Workload Analysis", "L2 Compression Ratio", "lts__average_gcomp_output_sector_compression_achieved_rate.ratio"),
    ("Memory Workload Analysis", "Local Memory Spilling Request Overhead", "derived__local_spilling_requests_pct"),
    ("Memory Workload Analysis", "L2 Compression Success Rate", "lts__average_gcomp_input_sector_success_rate.pct"),
    ("Memory Workload Analysis", "L2 Persisting Size", "launch__persisting_l2_cache_size"),
    ("Memory Workload Analysis", "Instructions Executed", "inst_executed"),
    // LaunchStatistics.section
    ("Launch Statistics", "Grid Size", "launch__grid_size"),
    ("Launch Statistics", "Function Cache Configuration", "launch__func_cache_config"),
    ("Launch Statistics", "Cluster Size", "launch__cluster_size"),
    ("Launch Statistics", "Preferred Cluster Size", "launch__preferred_cluster_size"),
    ("Launch Statistics", "Registers Per Thread", "launch__registers_per_thread"),
    ("Launch Statistics", "Cluster Scheduling Policy", "launch__cluster_scheduling_policy"),
    ("Launch Statistics", "Static Shared Memory Per Block", "launch__shared_mem_per_block_static"),
    ("Launch Statistics", "Block Size", "launch__block_size"),
    ("Launch Statistics", "Dynamic Shared Memory Per Block", "launch__shared_mem_per_block_dynamic"),
    ("Launch Statistics", "Threads", "launch__thread_count"),
    ("Launch Statistics", "Driver Shared Memory Per Block", "launch__shared_mem_per_block_driver"),
    ("Launch Statistics", "Waves Per SM", "launch__waves_per_multiprocessor"),
    ("Launch Statistics", "Shared Memory Configuration Size", "launch__shared_mem_config_size"),
    ("Launch Statistics", "Uses Green Context", "launch__uses_green_context"),
    ("Launch Statistics", "Stack Size", "launch__stack_size"),
    ("Launch Statistics", "# SMs", "launch__sm_count"),
    ("Launch Statistics", "# TPCs", "launch__tpc_count"),
    ("Launch Statistics", "Enabled TPC IDs", "launch__tpc_enabled"),
    ("Launch Statistics", "Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("Launch Statistics", "Theoretical Occupancy", "sm__maximum_warps_per_active_cycle_pct"),
    // Occupancy.section
    ("Occupancy", "Theoretical Occupancy", "sm__maximum_warps_per_active_cycle_pct"),
    ("Occupancy", "Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("Occupancy", "Block Limit Registers", "launch__occupancy_limit_registers"),
    ("Occupancy", "Theoretical Active Warps per SM", "sm__maximum_warps_avg_per_active_cycle"),
    ("Occupancy", "Block Limit Shared Mem", "launch__occupancy_limit_shared_mem"),
    ("Occupancy", "Block Limit Warps", "launch__occupancy_limit_warps"),
    ("Occupancy", "Achieved Active Warps Per SM", "sm__warps_active.avg.per_cycle_active"),
    ("Occupancy", "Block Limit SM", "launch__occupancy_limit_blocks"),
    ("Occupancy", "Cluster Occupancy", "launch__occupancy_cluster_pct"),
    ("Occupancy", "Block Limit Barriers", "launch__occupancy_limit_barriers"),
    ("Occupancy", "Max Active Clusters", "launch__cluster_max_active"),
    ("Occupancy", "Max Cluster Size", "launch__cluster_max_potential_size"),
    ("Occupancy", "Overall GPU Occupancy", "launch__occupancy_cluster_gpu_pct"),
    ("Occupancy", "GPU Maximum Warps Per Scheduler", "smsp__warps_active.avg.peak_sustained"),
    ("Occupancy", "Theoretical Warps Per Scheduler", "smsp__maximum_warps_avg_per_active_cycle"),
    // Occupancy.section charts (body items): series and highlighted x values.
    ("Occupancy", "% Occupancy Per Register Count", "derived__pct_occupancy_per_register_count"),
    ("Occupancy", "% Occupancy Per Block Size", "derived__pct_occupancy_per_block_size"),
    ("Occupancy", "% Occupancy Per Shared Mem Size", "derived__pct_occupancy_per_shared_mem_size"),
    ("Occupancy", "% Occupancy Per Block Barriers Size", "derived__pct_occupancy_per_barrier_count"),
    ("Occupancy", "# Warps Per Register Count", "launch__occupancy_per_register_count"),
    ("Occupancy", "# Warps Per Block Size", "launch__occupancy_per_block_size"),
    ("Occupancy", "# Warps Per Shared Mem Size", "launch__occupancy_per_shared_mem_size"),
    ("Occupancy", "# Warps Per Block Barriers Size", "launch__occupancy_per_barrier_count"),
    ("Occupancy", "Active Clusters", "launch__occupancy_per_cluster_size"),
    ("Occupancy", "Registers Per Thread", "launch__registers_per_thread"),
    ("Occupancy", "Block Size", "launch__block_size"),
    ("Occupancy", "Shared Memory Per Block", "launch__shared_mem_per_block"),
    ("Occupancy", "Block Barrier Count", "launch__barrier_count"),
    ("Occupancy", "Cluster Size", "launch__cluster_size"),
    // SchedulerStats.section
    ("Scheduler Statistics", "Active Warps Per Scheduler", "smsp__warps_active.avg.per_cycle_active"),
    ("Scheduler Statistics", "Eligible Warps Per Scheduler", "smsp__warps_eligible.avg.per_cycle_active"),
    ("Scheduler Statistics", "Issued Warp Per Scheduler", "smsp__issue_active.avg.per_cycle_active"),
    ("Scheduler Statistics", "No Eligible", "smsp__issue_inst0.avg.pct_of_peak_sustained_active"),
    ("Scheduler Statistics", "One or More Eligible", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("Scheduler Statistics", "GPU Maximum Warps Per Scheduler", "smsp__warps_active.avg.peak_sustained"),
    ("Scheduler Statistics", "Theoretical Warps Per Scheduler", "smsp__maximum_warps_avg_per_active_cycle"),
    // WarpStateStatistics.section
    ("Warp State Statistics", "Warp Cycles Per Issued Instruction", "smsp__average_warp_latency_per_inst_issued.ratio"),
    ("Warp State Statistics", "Avg. Active Threads Per Warp", "smsp__thread_inst_executed_per_inst_executed.ratio"),
    ("Warp State Statistics", "Warp Cycles Per Executed Instruction", "smsp__average_warps_active_per_inst_executed.ratio"),
    ("Warp State Statistics", "Avg. Not Predicated Off Threads Per Warp", "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio"),
    ("Warp State Statistics", "Issued Warp Per Scheduler", "smsp__issue_active.avg.per_cycle_active"),
    ("Warp State Statistics", "Stall Drain", "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall IMC Miss", "smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Barrier", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall GMMA", "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Branch Resolving", "smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Membar", "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Short Scoreboard", "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Sleeping", "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Wait", "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall No Instruction", "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Math Pipe Throttle", "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Tex Throttle", "smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall LG Throttle", "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Dispatch Stall", "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Misc", "smsp__average_warps_issue_stalled_misc_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Not Selected", "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio"),
    ("Warp State Statistics", "Selected", "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall Long Scoreboard", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"),
    ("Warp State Statistics", "Stall MIO Throttle", "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"),
    // InstructionStatistics.section
    ("Instruction Statistics", "Executed Instructions", "smsp__inst_executed.sum"),
    ("Instruction Statistics", "Avg. Executed Instructions Per Scheduler", "smsp__inst_executed.avg"),
    ("Instruction Statistics", "Issued Instructions", "smsp__inst_issued.sum"),
    ("Instruction Statistics", "Avg. Issued Instructions Per Scheduler", "smsp__inst_issued.avg"),
    ("Instruction Statistics", "Instructions Executed", "inst_executed"),
    // WorkloadDistribution.section (header)
    ("GPU and Memory Workload Distribution", "Average SM Active Cycles", "sm__cycles_active.avg"),
    ("GPU and Memory Workload Distribution", "Average L1 Active Cycles", "l1tex__cycles_active.avg"),
    ("GPU and Memory Workload Distribution", "Average L2 Active Cycles", "lts__cycles_active.avg"),
    ("GPU and Memory Workload Distribution", "Average SMSP Active Cycles", "smsp__cycles_active.avg"),
    ("GPU and Memory Workload Distribution", "Average DRAM Active Cycles", "dram__cycles_active.avg"),
    ("GPU and Memory Workload Distribution", "Average MC Channel Active Cycles", "mcc__cycles_active.avg"),
    ("GPU and Memory Workload Distribution", "Total SM Elapsed Cycles", "sm__cycles_elapsed.sum"),
    ("GPU and Memory Workload Distribution", "Total L1 Elapsed Cycles", "l1tex__cycles_elapsed.sum"),
    ("GPU and Memory Workload Distribution", "Total L2 Elapsed Cycles", "lts__cycles_elapsed.sum"),
    ("GPU and Memory Workload Distribution", "Total SMSP Elapsed Cycles", "smsp__cycles_elapsed.sum"),
    ("GPU and Memory Workload Distribution", "Total DRAM Elapsed Cycles", "dram__cycles_elapsed.sum"),
    ("GPU and Memory Workload Distribution", "Total MC Channel Elapsed Cycles", "mcc__cycles_elapsed.sum"),
    // PmSampling.section
    ("PM Sampling", "Maximum Sampling Interval", "profiler__pmsampler_interval_time"),
    ("PM Sampling", "# Pass Groups", "profiler__pmsampler_pass_groups"),
    ("PM Sampling", "Maximum Buffer Size", "profiler__pmsampler_buffer_size_bytes"),
    ("PM Sampling", "Elapsed Cycles", "gpc__cycles_elapsed.max"),
    ("PM Sampling", "Duration", "gpu__time_duration.sum"),
    // SourceCounters.section (header metrics; checked against rtx3060 raw.csv)
    ("Source Counters", "Branch Instructions", "smsp__inst_executed_op_branch.sum"),
    ("Source Counters", "Branch Instructions Ratio", "derived__smsp__inst_executed_op_branch_pct"),
    ("Source Counters", "Branch Efficiency", "smsp__sass_average_branch_targets_threads_uniform.pct"),
    ("Source Counters", "Avg. Divergent Branches", "smsp__sass_branch_targets_threads_divergent.avg"),
    ("Source Counters", "Divergent Branches", "smsp__sass_branch_targets_threads_divergent.sum"),
    ("Source Counters", "# Samples", "smsp__pcsamp_sample_count"),
    ("Source Counters", "Elapsed Cycles", "gpc__cycles_elapsed.max"),
    ("Source Counters", "Instructions Executed", "inst_executed"),
    ("Source Counters", "Executed Instructions", "inst_executed"),
    ("Source Counters", "Thread Instructions Executed", "thread_inst_executed"),
    ("Source Counters", "Predicated-On Thread Instructions Executed", "thread_inst_executed_true"),
    ("Source Counters", "Avg. Threads Executed", "derived__avg_thread_executed"),
    ("Source Counters", "Avg. Predicated-On Threads Executed", "derived__avg_thread_executed_true"),
    ("Source Counters", "Avg. Predicated-On Threads Unexecuted", "derived__avg_thread_unexecuted_true"),
    ("Source Counters", "L1 Active Cycles", "l1tex__cycles_active.sum"),
    ("Source Counters", "L1 Elapsed Cycles", "l1tex__cycles_elapsed.sum"),
    ("Source Counters", "L2 Active Cycles", "lts__cycles_active.sum"),
    ("Source Counters", "L2 Elapsed Cycles", "lts__cycles_elapsed.sum"),
    ("Source Counters", "Address Space", "memory_type"),
    ("Source Counters", "Access Operation", "memory_access_type"),
    ("Source Counters", "Access Size", "memory_access_size_type"),
    ("Source Counters", "L1 Tag Requests Global", "memory_l1_tag_requests_global"),
    ("Source Counters", "L1 Conflicts Shared N-Way", "derived__memory_l1_conflicts_shared_nway"),
    ("Source Counters", "L1 Wavefronts Shared", "memory_l1_wavefronts_shared"),
    ("Source Counters", "L1 Wavefronts Shared Ideal", "memory_l1_wavefronts_shared_ideal"),
    ("Source Counters", "L1 Wavefronts Shared Excessive", "derived__memory_l1_wavefronts_shared_excessive"),
    ("Source Counters", "L2 Theoretical Sectors Global", "memory_l2_theoretical_sectors_global"),
    ("Source Counters", "L2 Theoretical Sectors Global Ideal", "memory_l2_theoretical_sectors_global_ideal"),
    ("Source Counters", "L2 Theoretical Sectors Global Excessive", "derived__memory_l2_theoretical_sectors_global_excessive"),
    ("Source Counters", "L2 Theoretical Sectors Local", "memory_l2_theoretical_sectors_local"),
];

/// Short stall labels of older Source Counters pages ("stall_long_sb") -> pc-sampling metric suffix.
const SHORT_STALLS: &[(&str, &str)] = &[
    ("barrier", "barrier"),
    ("branch_resolving", "branch_resolving"),
    ("dispatch", "dispatch_stall"),
    ("drain", "drain"),
    ("imc", "imc_miss"),
    ("lg", "lg_throttle"),
    ("long_sb", "long_scoreboard"),
    ("math", "math_pipe_throttle"),
    ("membar", "membar"),
    ("mio", "mio_throttle"),
    ("misc", "misc"),
    ("no_inst", "no_instructions"),
    ("not_selected", "not_selected"),
    ("selected", "selected"),
    ("short_sb", "short_scoreboard"),
    ("sleep", "sleeping"),
    ("sleeping", "sleeping"),
    ("tex", "tex_throttle"),
    ("wait", "wait"),
    ("gmma", "gmma"),
];

/// Suffixes of the "Workload Distribution" table, in the order the details page prints them.
const WORKLOAD_SUFFIXES: [&str; 4] = [".avg", ".max", ".min", ".sum"];

/// "Workload Distribution" base labels -> metric base names.
const WORKLOAD_BASES: &[(&str, &str)] = &[
    ("SM Active Cycles", "sm__cycles_active"),
    ("SMSP Active Cycles", "smsp__cycles_active"),
    ("L1 Active Cycles", "l1tex__cycles_active"),
    ("L2 Active Cycles", "lts__cycles_active"),
    ("DRAM Active Cycles", "dram__cycles_active"),
    ("MC Channel Active Cycles", "mcc__cycles_active"),
];

/// Breakdown unit prefix -> metric unit.
const BREAKDOWN_UNITS: &[(&str, &str)] = &[
    ("SM", "sm"),
    ("SMSP", "smsp"),
    ("L1", "l1tex"),
    ("L2", "lts"),
    ("DRAM", "dram"),
    ("FBPA", "fbpa"),
    ("GPU", "gpu"),
    ("IDC", "idc"),
    ("GPC", "gpc"),
    ("TPC", "tpc"),
    ("LTC", "ltc"),
    ("XBAR", "xbar"),
    ("MCC", "mcc"),
];

/// True when `s` looks like a raw metric name (`unit__counter.rollup...`, no spaces).
pub fn looks_raw(s: &str) -> bool {
    s.contains("__") && !s.contains(' ') && s.bytes().all(|b| b.is_ascii_graphic())
}

/// Resolves a details-page row to its raw metric name.
///
/// `occurrence` is 0 for the first row with this (section, body label, label) in a launch, 1 for the
/// second, and so on (used by suffix tables that repeat a label).
pub fn raw_name(section: &str, body_label: &str, label: &str, occurrence: usize) -> Option<Cow<'static, str>> {
    let label = label.trim();
    let section = section_display_name(section.trim());
    let body = body_label.trim();
    if section == COMMAND_LINE_SECTION || looks_raw(label) {
        return Some(Cow::Owned(label.to_string()));
    }
    // "Warp Stall Sampling (All Samples) (smsp__pcsamp_warps_issue_stalled_barrier)"
    if let Some(open) = label.rfind('(') {
        if let Some(inner) = label[open + 1..].strip_suffix(')') {
            if looks_raw(inner) {
                return Some(Cow::Owned(inner.to_string()));
            }
        }
    }
    if body.ends_with("Throughput Breakdown") {
        if let Some(name) = breakdown_name(label) {
            return Some(Cow::Owned(name));
        }
    }
    if body == "Workload Distribution" {
        if let Some((_, base)) = WORKLOAD_BASES.iter().find(|(l, _)| *l == label) {
            let suffix = WORKLOAD_SUFFIXES.get(occurrence)?;
            return Some(Cow::Owned(format!("{base}{suffix}")));
        }
    }
    if section == "Source Counters" {
        if let Some(stall) = label.strip_prefix("stall_") {
            let (short, not_issued) = match stall.strip_suffix(" (Not Issued)") {
                Some(s) => (s, true),
                None => (stall, false),
            };
            if let Some((_, full)) = SHORT_STALLS.iter().find(|(s, _)| *s == short) {
                let suffix = if not_issued { "_not_issued" } else { "" };
                return Some(Cow::Owned(format!("smsp__pcsamp_warps_issue_stalled_{full}{suffix}")));
            }
        }
    }
    LABELS.iter().find(|(s, l, _)| *s == section && *l == label).map(|(_, _, raw)| Cow::Borrowed(*raw))
}

/// "L1: M Xbar2l1tex Read Sectors" -> `l1tex__m_xbar2l1tex_read_sectors.avg.pct_of_peak_sustained_elapsed`.
fn breakdown_name(label: &str) -> Option<String> {
    let (unit, compound) = label.split_once(": ")?;
    let (_, mut prefix) = BREAKDOWN_UNITS.iter().find(|(u, _)| *u == unit.trim())?;
    let words: Vec<String> = compound.split_whitespace().map(|w| w.to_ascii_lowercase()).collect();
    if words.is_empty() || words.iter().any(|w| !w.bytes().all(|b| b.is_ascii_alphanumeric())) {
        return None;
    }
    // "DRAM: Dram Sectors" is the frame-buffer partition counter.
    if prefix == "dram" && words[0] == "dram" {
        prefix = "fbpa";
    }
    Some(format!("{prefix}__{}.avg.pct_of_peak_sustained_elapsed", words.join("_")))
}

/// Display label (and section display name) for a raw metric name, when a section file names it.
pub fn label_for(raw: &str) -> Option<(&'static str, &'static str)> {
    LABELS.iter().find(|(_, _, r)| *r == raw).map(|(s, l, _)| (*s, *l))
}

/// Display label for a raw metric name, or the raw name itself.
pub fn display_label(raw: &str) -> Cow<'_, str> {
    match label_for(raw) {
        Some((_, l)) => Cow::Borrowed(l),
        None => Cow::Borrowed(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lookup() {
        assert_eq!(raw_name("GPU Speed Of Light Throughput", "", "Duration", 0).as_deref(), Some("gpu__time_duration.sum"));
        assert_eq!(raw_name("SpeedOfLight", "", "Duration", 0).as_deref(), Some("gpu__time_duration.sum"));
        assert_eq!(raw_name("Memory Workload Analysis", "", "Memory Throughput", 0).as_deref(), Some("dram__bytes.sum.per_second"));
        assert_eq!(
            raw_name("GPU Speed Of Light Throughput", "", "Memory Throughput", 0).as_deref(),
            Some("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
        );
        assert_eq!(raw_name("Nope", "", "Duration", 0), None);
    }

    #[test]
    fn rule_shaped_labels() {
        assert_eq!(
            raw_name("GPU Speed Of Light Throughput", "Memory Throughput Breakdown", "DRAM: Dram Sectors", 0).as_deref(),
            Some("fbpa__dram_sectors.avg.pct_of_peak_sustained_elapsed")
        );
        assert_eq!(
            raw_name("GPU Speed Of Light Throughput", "Compute Throughput Breakdown", "SM: Mio2rf Writeback Active", 0).as_deref(),
            Some("sm__mio2rf_writeback_active.avg.pct_of_peak_sustained_elapsed")
        );
        let wd = |i| raw_name("GPU and Memory Workload Distribution", "Workload Distribution", "L2 Active Cycles", i);
        assert_eq!(wd(0).as_deref(), Some("lts__cycles_active.avg"));
        assert_eq!(wd(3).as_deref(), Some("lts__cycles_active.sum"));
        assert_eq!(wd(4), None);
        assert_eq!(
            raw_name("Source Counters", "", "Warp Stall Sampling (All Samples) (smsp__pcsamp_warps_issue_stalled_wait)", 0).as_deref(),
            Some("smsp__pcsamp_warps_issue_stalled_wait")
        );
        assert_eq!(
            raw_name("Source Counters", "", "stall_long_sb (Not Issued)", 0).as_deref(),
            Some("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued")
        );
        assert_eq!(raw_name(COMMAND_LINE_SECTION, "", "dram__bytes.sum", 0).as_deref(), Some("dram__bytes.sum"));
    }

    #[test]
    fn reverse_lookup() {
        assert_eq!(label_for("gpu__time_duration.sum"), Some(("GPU Speed Of Light Throughput", "Duration")));
        assert_eq!(display_label("launch__block_size"), "Block Size");
        assert_eq!(display_label("foo__bar"), "foo__bar");
        assert_eq!(section_identifier("Launch Statistics"), "LaunchStats");
        assert_eq!(section_display_name("WarpStateStats"), "Warp State Statistics");
    }
}
