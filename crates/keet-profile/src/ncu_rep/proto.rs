//! Hand-written protobuf messages for the parts of the `.ncu-rep` format that keet reads.
//!
//! Field numbers follow Nsight Compute's `extras/FileFormat/*.proto` (ProfilerReport.proto,
//! ProfilerResultsCommon.proto, ProfilerSection.proto, RuleResults.proto) and were checked against
//! the corpus reports (ncu 2022.x to 2025.x). Only the fields keet uses are declared: prost skips
//! every other field, so newer versions that add fields still decode. Text is declared as `bytes`
//! so that one invalid UTF-8 sequence degrades to a replacement character instead of failing the
//! whole message.

/// `FileHeader`: the protobuf right after the `NVR\0` magic.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FileHeader {
    #[prost(uint32, tag = "1")]
    pub version: u32,
}

/// `BlockHeader`: describes the payload that follows it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BlockHeader {
    #[prost(uint32, tag = "1")]
    pub num_sources: u32,
    #[prost(uint32, tag = "2")]
    pub num_results: u32,
    /// Metric names; `ProfileMetricResult::name_id` indexes it. Empty in most blocks: the last
    /// non-empty table stays in force.
    #[prost(message, optional, tag = "4")]
    pub string_table: Option<StringTable>,
    #[prost(uint64, tag = "5")]
    pub payload_size: u64,
    #[prost(message, optional, tag = "6")]
    pub process: Option<ProcessInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StringTable {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub strings: Vec<Vec<u8>>,
}

/// The profiled process (`BlockHeader.Process`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessInfo {
    #[prost(uint64, optional, tag = "1")]
    pub process_id: Option<u64>,
    #[prost(bytes = "vec", tag = "2")]
    pub host_name: Vec<u8>,
    /// Executable path as the target saw it (`/usr/bin/python3.11`, `C:\...\app.exe`).
    #[prost(bytes = "vec", tag = "3")]
    pub executable: Vec<u8>,
}

/// `Uint64x3`: grid / block dimensions.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Uint64x3 {
    #[prost(uint64, tag = "1")]
    pub x: u64,
    #[prost(uint64, tag = "2")]
    pub y: u64,
    #[prost(uint64, tag = "3")]
    pub z: u64,
}

/// `ProfileResult`: one profiled kernel launch.
///
/// Metric results, sections and rule results are kept as raw records and decoded one by one
/// (see [`ProfileMetricResult`], [`ProfilerSection`], [`RuleResult`]): a record this reader does
/// not understand (a field that changed type in a newer ncu) then costs that record only, not the
/// whole launch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileResult {
    #[prost(bytes = "vec", tag = "5")]
    pub kernel_mangled_name: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    pub kernel_function_name: Vec<u8>,
    #[prost(bytes = "vec", tag = "7")]
    pub kernel_demangled_name: Vec<u8>,
    #[prost(message, optional, tag = "10")]
    pub grid_size: Option<Uint64x3>,
    #[prost(message, optional, tag = "11")]
    pub block_size: Option<Uint64x3>,
    /// Encoded [`ProfileMetricResult`]s.
    #[prost(bytes = "bytes", repeated, tag = "13")]
    pub metric_results: Vec<prost::bytes::Bytes>,
    /// Encoded [`ProfilerSection`]s.
    #[prost(bytes = "bytes", repeated, tag = "17")]
    pub sections: Vec<prost::bytes::Bytes>,
    /// Encoded [`RuleResult`]s.
    #[prost(bytes = "bytes", repeated, tag = "19")]
    pub rule_results: Vec<prost::bytes::Bytes>,
    #[prost(uint64, optional, tag = "22")]
    pub context_id: Option<u64>,
    #[prost(uint64, optional, tag = "23")]
    pub stream_id: Option<u64>,
    /// `Source`: the module the kernel belongs to, as a reference to a [`SourceData`] record.
    #[prost(message, optional, tag = "15")]
    pub source: Option<SourceReference>,
}

/// `ProfileResult.Source`: a `SourceData` message of which a result only sets `Reference`.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct SourceReference {
    #[prost(uint64, tag = "1")]
    pub reference: u64,
}

/// `SourceData`: one record of a block's `NumSources` part, describing one loaded module. The
/// first record of a module carries its cubin (`Binary`) and, with `ncu --import-source yes`,
/// the source files the compiler saw; later records with the same `Reference` may only list
/// more of its functions (field 9, not read). Fields 8 and 9 are not in the older public
/// `.proto` files: their layout was read from the corpus reports and checked against
/// `ncu_report`'s `action.source_files()`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceData {
    /// The module's identity; [`SourceReference::reference`] points here.
    #[prost(uint64, tag = "1")]
    pub reference: u64,
    /// The cubin (ELF), when the record carries one.
    #[prost(bytes = "bytes", tag = "4")]
    pub binary: prost::bytes::Bytes,
    #[prost(message, optional, tag = "8")]
    pub files: Option<SourceFileList>,
}

/// `SourceData` field 8: the embedded source files.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceFileList {
    #[prost(message, repeated, tag = "1")]
    pub files: Vec<EmbeddedFile>,
}

/// One embedded source file: its path and its content (bytes; usually UTF-8).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EmbeddedFile {
    #[prost(bytes = "vec", tag = "1")]
    pub path: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub text: Vec<u8>,
}

/// `ProfileMetricResult`: a metric name (string-table index) and its value. The per-instance
/// values (field 3) are not declared, so prost skips them without decoding.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileMetricResult {
    #[prost(uint32, tag = "1")]
    pub name_id: u32,
    #[prost(message, optional, tag = "2")]
    pub value: Option<ProfileMetricValue>,
}

/// A [`ProfileMetricResult`] read with its per-instance values: for source-level metrics
/// (`inst_executed`, `smsp__pcsamp_*`...) the instance key is the SASS address (PC).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileMetricInstances {
    #[prost(uint32, tag = "1")]
    pub name_id: u32,
    #[prost(message, repeated, tag = "3")]
    pub instances: Vec<MetricInstance>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MetricInstance {
    #[prost(message, optional, tag = "1")]
    pub key: Option<ProfileMetricValue>,
    #[prost(message, optional, tag = "2")]
    pub value: Option<ProfileMetricValue>,
}

/// `ProfileMetricValue`: a oneof; the type of one metric can differ between ncu versions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileMetricValue {
    #[prost(oneof = "MetricValueKind", tags = "1, 2, 3, 4, 5")]
    pub kind: Option<MetricValueKind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum MetricValueKind {
    #[prost(bytes, tag = "1")]
    String(Vec<u8>),
    #[prost(float, tag = "2")]
    Float(f32),
    #[prost(double, tag = "3")]
    Double(f64),
    #[prost(uint32, tag = "4")]
    Uint32(u32),
    #[prost(uint64, tag = "5")]
    Uint64(u64),
}

/// `ProfilerSection`: the section definition stored with each result; keet only reads the
/// header metrics to give metrics their display label and section.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfilerSection {
    #[prost(bytes = "vec", tag = "1")]
    pub identifier: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub display_name: Vec<u8>,
    #[prost(message, optional, tag = "4")]
    pub header: Option<ProfilerSectionHeader>,
    /// The source-level metrics this section shows in the source view (`SourceCounters`, ncu
    /// 2024+): metric name (or `group:...`) and column label.
    #[prost(message, repeated, tag = "13")]
    pub source_metrics: Vec<SourceMetricList>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceMetricList {
    #[prost(message, repeated, tag = "1")]
    pub metrics: Vec<ProfilerSectionMetric>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfilerSectionHeader {
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<ProfilerSectionMetric>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfilerSectionMetric {
    #[prost(bytes = "vec", tag = "1")]
    pub name: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub label: Vec<u8>,
}

/// `RuleResult`: the outcome of one ncu rule for this launch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuleResult {
    #[prost(bytes = "vec", tag = "1")]
    pub identifier: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub display_name: Vec<u8>,
    #[prost(message, optional, tag = "3")]
    pub body: Option<RuleResultBody>,
    #[prost(bytes = "vec", tag = "4")]
    pub section_identifier: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RuleResultBody {
    #[prost(message, repeated, tag = "1")]
    pub items: Vec<RuleResultBodyItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RuleResultBodyItem {
    #[prost(message, optional, tag = "1")]
    pub message: Option<RuleResultMessage>,
    #[prost(message, optional, tag = "10")]
    pub speedup: Option<RuleResultSpeedup>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RuleResultMessage {
    #[prost(bytes = "vec", tag = "1")]
    pub text: Vec<u8>,
    /// 0 none, 1 ok (INF), 2 warning (WRN), 3 error (ERR), 4 optimization (OPT).
    #[prost(int32, tag = "2")]
    pub kind: i32,
    /// Short title ("Small Grid"), newer versions only.
    #[prost(bytes = "vec", tag = "4")]
    pub title: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RuleResultSpeedup {
    /// 1 local, 2 global.
    #[prost(int32, tag = "1")]
    pub kind: i32,
    /// Estimated speedup in percent.
    #[prost(double, optional, tag = "2")]
    pub value: Option<f64>,
}
