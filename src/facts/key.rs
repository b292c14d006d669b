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

    /// Fields of `Facts` that templates read and that are no fact key (`facts.stalls`, `facts.roofline`).
    const FACTS_FIELDS: &[&str] = &["bound", "stalls", "occupancy_limit", "artifacts", "roofline"];

    /// Every key a table names that is no [`FactKey`], each as "FILE: unknown fact key `KEY`". Tables
    /// (`.toml`) name keys in a condition's `fact` and `other` (`expert/comparisons.toml`), in arrays
    /// of fields ending in `facts` (`expert/sets.toml`) and as `{key}` placeholders of a `hint`
    /// (`expert/mechanisms.toml`); templates (`.jinja`) as `facts.KEY`, `facts.roofline.KEY` or
    /// `facts["KEY"]`.
    fn unknown_keys(file: &str, text: &str) -> Vec<String> {
        let mut named: Vec<String> = Vec::new();
        if file.ends_with(".toml") {
            let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{file} does not parse: {e}"));
            toml_keys(&toml::Value::Table(table), &mut named);
        } else if file.ends_with(".jinja") {
            template_keys(text, &mut named);
        }
        named.into_iter().filter(|name| name.parse::<FactKey>().is_err()).map(|name| format!("{file}: unknown fact key `{name}`")).collect()
    }

    fn toml_keys(value: &toml::Value, named: &mut Vec<String>) {
        let strings = |value: &toml::Value| -> Vec<String> {
            match value {
                toml::Value::String(text) => vec![text.clone()],
                toml::Value::Array(items) => items.iter().filter_map(|item| item.as_str().map(str::to_string)).collect(),
                _ => Vec::new(),
            }
        };
        match value {
            toml::Value::Table(table) => {
                for (field, inner) in table {
                    let is_condition = table.contains_key("fact") && (field == "fact" || field == "other");
                    if is_condition || field.ends_with("facts") {
                        named.extend(strings(inner));
                    } else if field == "hint" {
                        named.extend(strings(inner).iter().flat_map(|hint| placeholders(hint)));
                    }
                    toml_keys(inner, named);
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|item| toml_keys(item, named)),
            _ => {}
        }
    }

    /// The names between `{` and `}` in a hint.
    fn placeholders(hint: &str) -> Vec<String> {
        hint.split('{').skip(1).filter_map(|part| part.split_once('}')).map(|(name, _)| name.to_string()).collect()
    }

    fn template_keys(text: &str, named: &mut Vec<String>) {
        let access =
            regex::Regex::new(r#"\bfacts(?:\.([a-z0-9_]+)(?:\.([a-z0-9_]+))?|\[["']([a-z0-9_]+)["']\])"#).expect("pattern compiles");
        for found in access.captures_iter(text) {
            let field = found.get(1).or(found.get(3)).map_or("", |m| m.as_str());
            match (field, found.get(2)) {
                ("roofline", Some(key)) => named.push(key.as_str().to_string()),
                (field, _) if FACTS_FIELDS.contains(&field) => {}
                (field, _) => named.push(field.to_string()),
            }
        }
    }

    /// Every file of `dir` (relative to the crate root), with its path and contents.
    fn files_of(dir: &str) -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir)).expect("table directory").map(|e| e.expect("entry").path()).collect();
        paths.sort();
        paths
            .into_iter()
            .filter(|path| path.is_file())
            .map(|path| {
                let name = path.strip_prefix(root).unwrap_or(&path).display().to_string();
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                (name, text)
            })
            .collect()
    }

    #[test]
    fn every_key_the_tables_and_templates_name_is_a_fact_key() {
        let mut unknown = Vec::new();
        let mut files = 0;
        for dir in ["expert", "prompts", "src/render/templates"] {
            for (file, text) in files_of(dir) {
                files += 1;
                unknown.extend(unknown_keys(&file, &text));
            }
        }
        assert!(files >= 20, "the tables and templates were not found ({files} files)");
        assert!(unknown.is_empty(), "{}", unknown.join("\n"));
    }

    #[test]
    fn a_misspelt_key_is_reported_with_its_file() {
        let comparisons = "[[comparison]]\nwhen = [{ fact = \"dram_throughput\", op = \"<\", other = \"sm_count\" }]\n";
        assert_eq!(unknown_keys("expert/comparisons.toml", comparisons), ["expert/comparisons.toml: unknown fact key `dram_throughput`"]);
        let sets = "[thresholds]\ncompared_facts = [\"dram_bytes\", \"l2_hit_pct\"]\nwhy.other = \"not a key\"\n";
        assert_eq!(unknown_keys("expert/sets.toml", sets), ["expert/sets.toml: unknown fact key `l2_hit_pct`"]);
        let hints = "[[link]]\nhint = \"{waves_per_sm} waves on {sm_cnt} SMs\"\n";
        assert_eq!(unknown_keys("expert/mechanisms.toml", hints), ["expert/mechanisms.toml: unknown fact key `sm_cnt`"]);
        let template =
            "{{ a.facts.registers_per_thread.value }} {{ a.facts.stalls }} {{ f.facts.roofline.pct_of_rof }} {{ facts[\"grid\"] }}";
        assert_eq!(unknown_keys("t.jinja", template), ["t.jinja: unknown fact key `pct_of_rof`", "t.jinja: unknown fact key `grid`"]);
    }

    #[test]
    fn serialises_as_its_string_form() {
        assert_eq!(serde_json::to_string(&FactKey::DramBytes).unwrap(), "\"dram_bytes\"");
        assert_eq!(serde_json::from_str::<FactKey>("\"stall_barrier\"").unwrap(), FactKey::StallBarrier);
        assert!(serde_json::from_str::<FactKey>("\"stall_bariier\"").is_err());
    }
}
