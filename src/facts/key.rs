//! Fact keys: [`FactKey`], the one list of every fact keet emits, with the stable string form that
//! JSON output, prompts, the expert tables (`expert/*.toml`) and the templates use. Code names a
//! fact by its variant, so a misspelt key does not compile; a key read from text (a table, a model's
//! citation) is parsed, and an unknown one is an [`UnknownFactKey`] error.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A key that names no fact keet emits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fact key `{0}` (the keys are listed in src/facts/key.rs)")]
pub struct UnknownFactKey(pub String);

/// Declares [`FactKey`] with its variants' string forms, and [`FactKey::ALL`] in declaration order.
macro_rules! fact_keys {
    ($($variant:ident = $name:literal,)*) => {
        /// The key of one fact: its stable identifier in rules, prompts, the validator and the JSON output.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum FactKey {
            $($variant,)*
        }

        impl FactKey {
            /// Every key, in declaration order.
            pub const ALL: &'static [FactKey] = &[$(FactKey::$variant,)*];

            /// The stable string form (`"sm_throughput_pct"`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(FactKey::$variant => $name,)*
                }
            }
        }
    };
}

fact_keys! {
    // Copied from one metric (the catalogue, [`super::catalogue::CATALOGUE`]).
    DurationNs = "duration_ns",
    SmThroughputPct = "sm_throughput_pct",
    MemoryThroughputPct = "memory_throughput_pct",
    DramThroughputPct = "dram_throughput_pct",
    L1ThroughputPct = "l1_throughput_pct",
    L2ThroughputPct = "l2_throughput_pct",
    L1HitRatePct = "l1_hit_rate_pct",
    AchievedOccupancyPct = "achieved_occupancy_pct",
    TheoreticalOccupancyPct = "theoretical_occupancy_pct",
    RegistersPerThread = "registers_per_thread",
    SharedMemPerBlockBytes = "shared_mem_per_block_bytes",
    WarpCyclesPerIssue = "warp_cycles_per_issue",
    IssueSlotsBusyPct = "issue_slots_busy_pct",
    GlobalLoadBytesPerSector = "global_load_bytes_per_sector",
    GlobalStoreBytesPerSector = "global_store_bytes_per_sector",
    ActiveThreadsPerWarp = "active_threads_per_warp",
    BranchUniformPct = "branch_uniform_pct",
    DivergentBranchTargets = "divergent_branch_targets",
    SpillInstructions = "spill_instructions",
    TensorPipePct = "tensor_pipe_pct",
    Fp64PipePct = "fp64_pipe_pct",
    L2AtomicBusyPct = "l2_atomic_busy_pct",
    GlobalLoadSectors = "global_load_sectors",
    GlobalStoreSectors = "global_store_sectors",
    WarpInstructions = "warp_instructions",
    SmCount = "sm_count",
    WavesPerSm = "waves_per_sm",
    Fp32ToFp64Ratio = "fp32_to_fp64_ratio",
    // Derived from several metrics or the launch's identity (the family functions).
    GlobalLoadSectorsPerRequest = "global_load_sectors_per_request",
    GlobalStoreSectorsPerRequest = "global_store_sectors_per_request",
    GlobalExcessiveSectorsPct = "global_excessive_sectors_pct",
    SharedBankConflictPct = "shared_bank_conflict_pct",
    SharedBankConflicts = "shared_bank_conflicts",
    SharedExcessWavefronts = "shared_excess_wavefronts",
    BlockThreads = "block_threads",
    GridBlocks = "grid_blocks",
    TailIdlePct = "tail_idle_pct",
    LocalMemorySectors = "local_memory_sectors",
    LocalMemoryInstructions = "local_memory_instructions",
    LocalTrafficPct = "local_traffic_pct",
    AtomicRequests = "atomic_requests",
    AtomicSectorsPerRequest = "atomic_sectors_per_request",
    SmClockHz = "sm_clock_hz",
    ElapsedCycles = "elapsed_cycles",
    DivergentBranchPct = "divergent_branch_pct",
    BusiestPipePct = "busiest_pipe_pct",
    StallMemorySharePct = "stall_memory_share_pct",
    StallSharedSharePct = "stall_shared_share_pct",
    StallDrainSharePct = "stall_drain_share_pct",
    OccupancyLimitBlocksPerSm = "occupancy_limit_blocks_per_sm",
    // The roofline's (`Facts::roofline`).
    Fp64Flop = "fp64_flop",
    Fp32Flop = "fp32_flop",
    Fp16Flop = "fp16_flop",
    FmaFlopSharePct = "fma_flop_share_pct",
    DramBytes = "dram_bytes",
    ArithmeticIntensity = "arithmetic_intensity",
    AchievedFlopPerS = "achieved_flop_per_s",
    PeakFp32FlopPerS = "peak_fp32_flop_per_s",
    PeakDramBytesPerS = "peak_dram_bytes_per_s",
    PctOfRoof = "pct_of_roof",
    // Warp stall cycles per issued instruction, one per stall reason ncu names (`Facts::stalls`); `StallOther` for a reason not listed.
    StallLongScoreboard = "stall_long_scoreboard",
    StallShortScoreboard = "stall_short_scoreboard",
    StallBarrier = "stall_barrier",
    StallMembar = "stall_membar",
    StallMioThrottle = "stall_mio_throttle",
    StallLgThrottle = "stall_lg_throttle",
    StallMathPipeThrottle = "stall_math_pipe_throttle",
    StallWait = "stall_wait",
    StallNotSelected = "stall_not_selected",
    StallNoInstruction = "stall_no_instruction",
    StallBranchResolving = "stall_branch_resolving",
    StallDispatchStall = "stall_dispatch_stall",
    StallDrain = "stall_drain",
    StallImcMiss = "stall_imc_miss",
    StallTexThrottle = "stall_tex_throttle",
    StallSleeping = "stall_sleeping",
    StallMisc = "stall_misc",
    StallGmma = "stall_gmma",
    StallOther = "stall_other",
}

impl FromStr for FactKey {
    type Err = UnknownFactKey;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        FactKey::ALL.iter().copied().find(|key| key.as_str() == name).ok_or_else(|| UnknownFactKey(name.to_string()))
    }
}

impl fmt::Display for FactKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Keys order by their string form, as the string keys they replace did (maps and sets keyed by fact).
impl Ord for FactKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for FactKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for FactKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FactKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_forms_are_unique_and_parse_back() {
        let mut names: Vec<&str> = FactKey::ALL.iter().map(|key| key.as_str()).collect();
        for key in FactKey::ALL {
            assert_eq!(key.as_str().parse::<FactKey>(), Ok(*key));
        }
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "two fact keys share a string form");
    }

    #[test]
    fn unknown_names_are_errors_naming_the_key() {
        let err = "sm_throughput".parse::<FactKey>().unwrap_err();
        assert_eq!(err, UnknownFactKey("sm_throughput".into()));
        assert!(err.to_string().contains("`sm_throughput`"));
    }

    #[test]
    fn serialises_as_its_string_form() {
        assert_eq!(serde_json::to_string(&FactKey::DramBytes).unwrap(), "\"dram_bytes\"");
        assert_eq!(serde_json::from_str::<FactKey>("\"stall_barrier\"").unwrap(), FactKey::StallBarrier);
        assert!(serde_json::from_str::<FactKey>("\"stall_bariier\"").is_err());
    }
}
