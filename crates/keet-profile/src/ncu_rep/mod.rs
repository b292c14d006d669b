//! Native reader for Nsight Compute's binary `.ncu-rep` report.
//!
//! # Layout
//!
//! ```text
//! "NVR\0"  u32le n  FileHeader[n]
//! repeated until end of file:
//!     u32le n  BlockHeader[n]
//!     payload[BlockHeader.PayloadSize]:
//!         NumSources x (u32le n  SourceData[n])      -- modules: cubin (its line table), source files
//!         NumResults x (u32le n  ProfileResult[n])   -- one per kernel launch
//!         anything else (range results, ...)         -- skipped
//! ```
//!
//! All integers of the framing are little-endian; the messages are protobuf (see [`proto`]).
//! Metric names are indices into one string table per report, which block headers build up: the
//! first result block usually carries most of it, and later (result-less) blocks may append names
//! that results in any block use (`h800-sglang/fa2_fwd.ncu-rep`). So the reader walks every block
//! header first, gathering the table, and reads the results after.
//!
//! Source records describe the loaded modules; with `ncu --import-source yes` they embed the
//! kernels' source files, which a result names through its module reference ([`embedded`]).
//! The launches' files are resolved once every block is read.
//!
//! # Reports cut off mid-write
//!
//! When the file ends inside a block (ncu killed by a job time limit), the launches whose result
//! messages are complete are kept and returned in [`ProfileError::Truncated`] with the byte
//! offset where the file ends, the incomplete block and the record it was in; see
//! [`super::salvage`].
//!
//! # Robustness
//!
//! Every length is checked against the bytes that remain before anything is sliced, so a corrupt
//! or hostile file gives [`ProfileError::Report`] (or [`ProfileError::Truncated`] when complete
//! launches come before the cut) with the byte offset and what was expected, never
//! a panic or an allocation sized by an untrusted length. Unknown protobuf fields are skipped, so
//! newer ncu versions keep working as long as the fields keet reads keep their numbers.
//!
//! # Values and units
//!
//! Reports store values in ncu's base units (ns, bytes, cycles, bytes/s, %...) without a unit per
//! metric; the unit is inferred from the metric name ([`infer::unit_for_metric`]), `raw_unit` is
//! empty. Launch IDs are the result's position in the report (ncu's `ID` column).

mod embedded;
pub mod infer;
mod lines;
pub mod proto;
mod source;

use super::{
    At, Launch, Metric, MetricValue, MetricsBuilder, NcuRuleResult, NcuRuleType, Origin, Profile, ProfileError, Result, SourceKind, Unit,
};
use prost::Message;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// The 4-byte magic every report starts with.
pub const MAGIC: &[u8; 4] = b"NVR\0";

/// Parses a whole report already in memory (`path` is only used in messages).
pub fn read(path: &Path, bytes: &[u8]) -> Result<Profile> {
    Parser { path, bytes }.run()
}

struct Parser<'a> {
    path: &'a Path,
    bytes: &'a [u8],
}

/// Per-report state carried from block to block.
#[derive(Default)]
struct State {
    strings: Vec<String>,
    process: Option<proto::ProcessInfo>,
    launches: Vec<Launch>,
    unknown_name_ids: usize,
    valueless_metrics: usize,
    /// Of those, the ones with per-instance values (series such as `pmsampling:*`).
    valueless_with_instances: usize,
    duplicate_metrics: usize,
    /// Metric / section / rule records that did not decode and were skipped.
    bad_records: usize,
    /// Launches whose source view exceeded `source::MAX_CELLS` and was left out.
    oversized_source_views: usize,
    /// The source records read so far (modules, their embedded source files).
    embedded: embedded::Embedded,
    /// Per launch (same order as `launches`): the module reference of its result.
    module_refs: Vec<Option<u64>>,
    /// Per launch: the kernel's first PC, the instance value of `launch__function_pcs` (its
    /// scalar value is not the address in every report).
    function_starts: Vec<Option<u64>>,
    skipped_payload_bytes: usize,
    /// Blocks read so far.
    blocks: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, offset: usize, message: impl Into<String>) -> ProfileError {
        ProfileError::Report { path: self.path.to_owned(), offset: offset as u64, message: message.into() }
    }

    /// Reads the u32 length at `off`, which must lie before `end`.
    fn length(&self, off: usize, end: usize, what: &dyn Fn() -> String) -> Result<usize> {
        let avail = end.saturating_sub(off);
        if avail < 4 {
            return Err(self.err(off, format!("truncated: expected the 4-byte length of {}, found {avail} byte(s)", what())));
        }
        let b = &self.bytes[off..off + 4];
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    /// The `len` bytes at `off`, which must end by `end`.
    fn slice(&self, off: usize, len: u64, end: usize, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        let avail = end.saturating_sub(off);
        if len > avail as u64 {
            return Err(self.err(off, format!("{} needs {len} bytes but only {avail} remain", what())));
        }
        Ok(&self.bytes[off..off + len as usize])
    }

    fn decode<M: Message + Default, B: prost::bytes::Buf>(&self, off: usize, data: B, what: &dyn Fn() -> String) -> Result<M> {
        let len = data.remaining();
        M::decode(data).map_err(|e| self.err(off, format!("{} ({len} bytes) is not valid protobuf: {e}", what())))
    }

    fn run(&self) -> Result<Profile> {
        let total = self.bytes.len();
        if !self.bytes.starts_with(MAGIC) {
            return Err(self.err(0, "not an ncu-rep report: expected the magic bytes \"NVR\\0\""));
        }
        let mut off = MAGIC.len();
        let n = self.length(off, total, &|| "the file header".into())?;
        off += 4;
        let data = self.slice(off, n as u64, total, &|| "the file header".into())?;
        let header: proto::FileHeader = self.decode(off, data, &|| "the file header".into())?;
        off += n;

        // Pass 1: every block's frame, and the string table they add to.
        let (frames, strings, cut) = self.frames(off)?;
        let mut st = State { strings, ..State::default() };
        let mut cut = cut;
        // Pass 2: the records of each block.
        for frame in frames {
            if let Some(c) = self.block(frame, &mut st)? {
                cut = Some(c);
                break;
            }
        }
        let blocks = st.blocks;

        let mut notes = vec![format!("ncu-rep format version {}, {blocks} block(s)", header.version)];
        let source_files = resolve_source_files(&mut st, &mut notes);
        if st.skipped_payload_bytes > 0 {
            notes.push(format!("skipped {} payload byte(s) of other records (range results...)", st.skipped_payload_bytes));
        }
        if st.unknown_name_ids > 0 {
            notes.push(format!(
                "skipped {} metric value(s) whose name index is outside the string table ({} name(s){})",
                st.unknown_name_ids,
                st.strings.len(),
                if cut.is_some() { "; the file ends early, later blocks may have held the names" } else { "" }
            ));
        }
        if st.valueless_metrics > 0 {
            notes.push(format!(
                "{} metric(s) are stored without a value ({} with instance values only, e.g. pmsampling:* series; {} \
                 empty): Nsight Compute lists them, keet does not keep them as metrics",
                st.valueless_metrics,
                st.valueless_with_instances,
                st.valueless_metrics - st.valueless_with_instances
            ));
        }
        if st.bad_records > 0 {
            notes.push(format!("skipped {} metric/section/rule record(s) that did not decode", st.bad_records));
        }
        if st.oversized_source_views > 0 {
            notes.push(format!(
                "left out the source view of {} launch(es): more than {} per-instruction values",
                st.oversized_source_views,
                source::MAX_CELLS
            ));
        }
        if st.duplicate_metrics > 0 {
            notes.push(format!("kept the first of {} duplicated metric name(s)", st.duplicate_metrics));
        }
        if let Some(c) = cut {
            if st.launches.is_empty() {
                return Err(ProfileError::Report {
                    path: self.path.to_owned(),
                    offset: c.offset,
                    message: format!(
                        "the file ends early at byte {total}: {} (block {} is incomplete); no kernel launch is complete before it",
                        c.message, c.block
                    ),
                });
            }
            let message = format!(
                "{} (block {} is incomplete); kept the {} launch(es) whose results are complete",
                c.message,
                c.block,
                st.launches.len()
            );
            notes.push(format!("the file ends early at byte {total}: {message}"));
            let recovered = Profile { path: self.path.to_owned(), kind: SourceKind::NcuRep, launches: st.launches, notes, source_files };
            return Err(ProfileError::Truncated {
                path: self.path.to_owned(),
                at: At::Byte(total as u64),
                message,
                launches: recovered.launches.len(),
                recovered: Box::new(recovered),
            });
        }
        if st.launches.is_empty() {
            return Err(ProfileError::Empty {
                path: self.path.to_owned(),
                message: format!("the report has {blocks} block(s) but no profile result (kernel launch)"),
            });
        }
        Ok(Profile { path: self.path.to_owned(), kind: SourceKind::NcuRep, launches: st.launches, notes, source_files })
    }

    /// Walks the block frames from `off` to the end of the file without reading the payloads,
    /// and gathers the string table: each block header may add names to it (later blocks append
    /// to the table, and a result may use a name that a later block adds), so names are only
    /// resolved once every header has been read.
    ///
    /// A frame that runs past the end of the file ends the walk: a block whose header is
    /// complete but whose payload is cut is kept (clipped to the file) with the [`Cut`], so its
    /// complete results can still be read.
    fn frames(&self, mut off: usize) -> Result<(Vec<Frame>, Vec<String>, Option<Cut>)> {
        let total = self.bytes.len();
        let mut frames = Vec::new();
        let mut strings = Vec::new();
        let mut block = 0usize;
        while off < total {
            let what_hdr = || format!("block {block} header");
            let start = off;
            let header_bytes = self.length(off, total, &what_hdr).and_then(|n| self.slice(off + 4, n as u64, total, &what_hdr));
            let header_bytes = match header_bytes {
                Ok(b) => b,
                Err(e) => {
                    let cut = Cut::from_error(block, start, e);
                    return Ok((frames, strings, Some(cut)));
                }
            };
            off += 4;
            let mut header: proto::BlockHeader = self.decode(off, header_bytes, &what_hdr)?;
            off += header_bytes.len();
            if let Some(table) = header.string_table.take() {
                strings.extend(table.strings.into_iter().map(lossy));
            }
            let payload_start = off;
            let what_payload = || format!("block {block} payload (PayloadSize)");
            if let Err(e) = self.slice(off, header.payload_size, total, &what_payload) {
                frames.push(Frame { index: block, header, payload_start, end: total });
                return Ok((frames, strings, Some(Cut::from_error(block, start, e))));
            }
            let end = off + header.payload_size as usize;
            frames.push(Frame { index: block, header, payload_start, end });
            off = end;
            block += 1;
        }
        Ok((frames, strings, None))
    }

    /// Reads one block's records. In a block cut short by the end of the file the records
    /// before the cut are read and the first incomplete one ends the block: the [`Cut`] is
    /// returned. In a complete block a record that does not fit is an error (a corrupt file).
    fn block(&self, frame: Frame, st: &mut State) -> Result<Option<Cut>> {
        let Frame { index: block, header, payload_start, end } = frame;
        st.blocks = block + 1;
        let clipped = ((end - payload_start) as u64) < header.payload_size;
        let cut = |e: ProfileError, start: usize| -> Result<Option<Cut>> {
            if clipped {
                Ok(Some(Cut::from_error(block, start, e)))
            } else {
                Err(e)
            }
        };
        if header.process.is_some() {
            st.process = header.process;
        }

        let mut p = payload_start;
        for i in 0..header.num_sources {
            let what = || format!("block {block} source record {i} of {}", header.num_sources);
            let data = match self.length(p, end, &what).and_then(|n| self.slice(p + 4, n as u64, end, &what)) {
                Ok(d) => d,
                Err(e) => return cut(e, p),
            };
            st.embedded.add(p + 4, data);
            p += 4 + data.len();
        }
        for i in 0..header.num_results {
            let what = || format!("block {block} profile result {i} of {}", header.num_results);
            let data = match self.length(p, end, &what).and_then(|n| self.slice(p + 4, n as u64, end, &what)) {
                Ok(d) => d,
                Err(e) => return cut(e, p),
            };
            let n = data.len();
            // One copy into a shared buffer; the metric/section/rule records are then zero-copy slices.
            let result: proto::ProfileResult = self.decode(p + 4, prost::bytes::Bytes::copy_from_slice(data), &what)?;
            let origin = (u32::try_from(block).unwrap_or(u32::MAX), i);
            st.module_refs.push(result.source.map(|s| s.reference));
            let launch = build_launch(st.launches.len() as u64, result, origin, st);
            st.launches.push(launch);
            st.function_starts.resize(st.launches.len(), None);
            p += 4 + n;
        }
        if clipped {
            // Every announced record is complete; what is cut is the rest of the payload.
            let e = self.err(
                end,
                format!("block {block} payload (PayloadSize) needs {} bytes but only {} remain", header.payload_size, end - payload_start),
            );
            st.skipped_payload_bytes += end - p;
            return Ok(Some(Cut::from_error(block, payload_start, e)));
        }
        st.skipped_payload_bytes += end - p;
        Ok(None)
    }
}

/// One block as framed in the file: its header (string table taken out) and payload range.
struct Frame {
    index: usize,
    header: proto::BlockHeader,
    payload_start: usize,
    /// End of the payload, or of the file when the payload is cut short.
    end: usize,
}

/// Where and how a report ends early.
struct Cut {
    /// Offset of the first byte the incomplete frame or record needed and did not get.
    offset: u64,
    block: usize,
    message: String,
}

impl Cut {
    fn from_error(block: usize, start: usize, e: ProfileError) -> Cut {
        match e {
            ProfileError::Report { offset, message, .. } => {
                Cut { offset, block, message: format!("{message} (the record starts at byte {start})") }
            }
            other => Cut { offset: start as u64, block, message: other.to_string() },
        }
    }
}

/// Gives each launch its embedded source files (its module may be described in any block) and
/// returns the profile's list; notes what was skipped.
fn resolve_source_files(st: &mut State, notes: &mut Vec<String>) -> Vec<crate::SourceFile> {
    for (launch, module) in st.launches.iter_mut().zip(&st.module_refs) {
        launch.source_files = st.embedded.files_of(*module);
    }
    lines::attach(&mut st.launches, &st.module_refs, &st.function_starts, &st.embedded, notes);
    std::mem::take(&mut st.embedded).finish(notes)
}

fn lossy(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn non_empty(b: Vec<u8>) -> Option<String> {
    if b.is_empty() {
        None
    } else {
        Some(lossy(b))
    }
}

/// The text and numeric value of one stored metric value.
/// The value and its text: `None` for a text value (the text is the value).
fn metric_value(kind: proto::MetricValueKind) -> (Option<f64>, String) {
    use proto::MetricValueKind as K;
    match kind {
        K::String(s) => (None, lossy(s)),
        K::Float(v) => {
            // Shortest decimal of the f32, so 33.33f32 reads as 33.33, not 33.3300018.
            let text = v.to_string();
            (Some(text.parse().unwrap_or(v as f64)), text)
        }
        K::Double(v) => (Some(v), v.to_string()),
        K::Uint32(v) => (Some(v as f64), v.to_string()),
        K::Uint64(v) => (Some(v as f64), v.to_string()),
    }
}

fn build_launch(id: u64, r: proto::ProfileResult, origin: (u32, u32), st: &mut State) -> Launch {
    let sections: Vec<proto::ProfilerSection> =
        r.sections.iter().filter_map(|b| proto::ProfilerSection::decode(b.clone()).map_err(|_| st.bad_records += 1).ok()).collect();
    // Display label and section for the metrics named in section headers (first one wins).
    let mut labels: HashMap<&[u8], (&[u8], &[u8])> = HashMap::new();
    // Source-view columns the report asks for: (metric name or `group:...`, column label).
    let mut source_columns: Vec<(&[u8], &[u8])> = Vec::new();
    let mut source_names: HashSet<&[u8]> = HashSet::new();
    for s in &sections {
        if let Some(h) = &s.header {
            for m in &h.metrics {
                if !m.name.is_empty() {
                    labels.entry(m.name.as_slice()).or_insert((m.label.as_slice(), s.display_name.as_slice()));
                }
            }
        }
        for m in s.source_metrics.iter().flat_map(|l| &l.metrics) {
            if !m.name.is_empty() && source_columns.len() < source::MAX_COLUMNS && source_names.insert(m.name.as_slice()) {
                source_columns.push((m.name.as_slice(), m.label.as_slice()));
            }
        }
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();

    let mut builder = MetricsBuilder::new();
    builder.report_origin(origin.0, origin.1);
    let mut per_pc: Vec<(String, BTreeMap<u64, f64>)> = Vec::new();
    for raw in &r.metric_results {
        let Ok(m) = proto::ProfileMetricResult::decode(raw.clone()) else {
            st.bad_records += 1;
            continue;
        };
        let Some(name) = st.strings.get(m.name_id as usize) else {
            st.unknown_name_ids += 1;
            continue;
        };
        if name == "launch__function_pcs" {
            st.function_starts.resize(st.launches.len(), None);
            st.function_starts.push(source::first_instance_u64(raw));
        }
        if source::is_source_metric(name, &source_names) {
            if let Some(values) = source::instances_by_pc(raw) {
                per_pc.push((name.clone(), values));
            }
        }
        let Some(kind) = m.value.and_then(|v| v.kind) else {
            st.valueless_metrics += 1;
            if proto::ProfileMetricInstances::decode(raw.clone()).is_ok_and(|m| !m.instances.is_empty()) {
                st.valueless_with_instances += 1;
            }
            continue;
        };
        let (number, raw_value) = metric_value(kind);
        let (value, unit) = match number {
            Some(v) => (MetricValue::Number(v), infer::unit_for_metric(name)),
            None => (MetricValue::Text(&raw_value), Unit::None),
        };
        let (label, section) = match labels.get(name.as_bytes()) {
            Some((l, s)) => (text(l), text(s)),
            None => (String::new(), String::new()),
        };
        let metric = Metric {
            value,
            unit: &unit,
            raw_value: &raw_value,
            raw_unit: "",
            label: Some(label.as_str()).filter(|s| !s.is_empty()),
            section: Some(section.as_str()).filter(|s| !s.is_empty()),
            origin: Origin::Report { block: origin.0, result: origin.1 },
        };
        // A name stored twice keeps its first value.
        builder.push(name, metric);
    }
    let (metrics, duplicates) = builder.finish();
    st.duplicate_metrics += duplicates;
    let source = source::view(&source_columns, per_pc, &metrics).unwrap_or_else(|_cells| {
        st.oversized_source_views += 1;
        None
    });

    let num = |k: &str| metrics.get(k).and_then(|m| m.as_f64());
    let int = |k: &str| num(k).filter(|v| *v >= 0.0 && v.fract() == 0.0).map(|v| v as u64);
    let dims = |d: Option<proto::Uint64x3>, prefix: &str| {
        d.map(|d| [d.x, d.y, d.z])
            .or_else(|| Some([int(&format!("{prefix}_x"))?, int(&format!("{prefix}_y"))?, int(&format!("{prefix}_z"))?]))
    };
    let grid_size = dims(r.grid_size, "launch__grid_dim");
    let block_size = dims(r.block_size, "launch__block_dim");
    let compute_capability = match (int("device__attribute_compute_capability_major"), int("device__attribute_compute_capability_minor")) {
        (Some(a), Some(b)) => Some(format!("{a}.{b}")),
        _ => None,
    };
    let device_name = match metrics.get("device__attribute_display_name").map(|m| m.value) {
        Some(MetricValue::Text(s)) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    };
    let device_id = int("device__attribute_device_index").or_else(|| int("launch__device_id"));
    let context_id = r.context_id.or_else(|| int("launch__context_id"));
    let stream_id = r.stream_id.or_else(|| int("launch__stream_id"));

    let process_id = st.process.as_ref().and_then(|p| p.process_id);
    let process_name = st.process.as_ref().and_then(|p| {
        let exe = String::from_utf8_lossy(&p.executable);
        let base = exe.rsplit(['/', '\\']).next().unwrap_or("");
        (!base.is_empty()).then(|| base.to_string())
    });

    let ncu_rules = rules(&r.rule_results, &mut st.bad_records);

    let mangled_name = non_empty(r.kernel_mangled_name);
    let name = non_empty(r.kernel_demangled_name)
        .or_else(|| non_empty(r.kernel_function_name))
        .or_else(|| mangled_name.clone())
        .unwrap_or_default();

    Launch {
        id,
        name,
        mangled_name,
        process_name,
        process_id,
        device_name,
        device_id,
        compute_capability,
        context_id,
        stream_id,
        block_size,
        grid_size,
        metrics,
        ncu_rules,
        source,
        source_files: Vec::new(), // resolved when every block is read
    }
}

/// One [`NcuRuleResult`] per rule message (a rule without messages produced no finding).
fn rules(results: &[prost::bytes::Bytes], bad_records: &mut usize) -> Vec<NcuRuleResult> {
    let mut out = Vec::new();
    for raw in results {
        let Ok(r) = proto::RuleResult::decode(raw.clone()) else {
            *bad_records += 1;
            continue;
        };
        let rule = lossy(r.identifier);
        let section = non_empty(r.section_identifier);
        for item in r.body.map(|b| b.items).unwrap_or_default() {
            let Some(msg) = item.message else { continue };
            if msg.text.is_empty() {
                continue;
            }
            let kind = match msg.kind {
                1 => NcuRuleType::Inf,
                2 => NcuRuleType::Wrn,
                3 => NcuRuleType::Err,
                4 => NcuRuleType::Opt,
                _ => NcuRuleType::Other,
            };
            let (speedup_type, speedup_pct) = match item.speedup {
                Some(s) => (
                    match s.kind {
                        1 => Some("local".to_string()),
                        2 => Some("global".to_string()),
                        _ => None,
                    },
                    s.value.filter(|v| v.is_finite()),
                ),
                None => (None, None),
            };
            out.push(NcuRuleResult {
                rule: rule.clone(),
                section: section.clone(),
                kind,
                message: render_markup(&String::from_utf8_lossy(&msg.text)),
                speedup_type,
                speedup_pct,
            });
        }
    }
    out
}

/// Renders ncu's inline rule-message markup the way the CLI does:
/// `@section:Id:Label@` -> `Label`, `@url:Label:https://...@` -> `Label (https://...)`.
/// Anything else is kept as written.
pub fn render_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let rendered = tail.find('@').and_then(|close| {
            let inner = &tail[..close];
            let r = if let Some(s) = inner.strip_prefix("section:") {
                s.split_once(':').map(|(_, label)| label.to_string())
            } else if let Some(u) = inner.strip_prefix("url:") {
                u.split_once(':').map(|(label, url)| format!("{label} ({url})"))
            } else {
                None
            };
            r.map(|r| (r, close))
        });
        match rendered {
            Some((r, close)) => {
                out.push_str(&r);
                rest = &tail[close + 1..];
            }
            None => {
                out.push('@');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::proto::*;
    use super::*;
    use prost::bytes::Bytes;
    use std::path::PathBuf;

    fn frame(out: &mut Vec<u8>, msg: &[u8]) {
        out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
        out.extend_from_slice(msg);
    }

    fn pc_value(pc: u64, v: u64) -> MetricInstance {
        MetricInstance {
            key: Some(ProfileMetricValue { kind: Some(MetricValueKind::Uint64(pc)) }),
            value: Some(ProfileMetricValue { kind: Some(MetricValueKind::Uint64(v)) }),
        }
    }

    fn metric(id: u32, kind: MetricValueKind) -> ProfileMetricResult {
        ProfileMetricResult { name_id: id, value: Some(ProfileMetricValue { kind: Some(kind) }) }
    }

    fn sample_result(kernel: &str, duration: f64) -> ProfileResult {
        ProfileResult {
            kernel_mangled_name: format!("_Z{}{kernel}Pf", kernel.len()).into_bytes(),
            kernel_function_name: kernel.as_bytes().to_vec(),
            kernel_demangled_name: format!("{kernel}(float *)").into_bytes(),
            grid_size: Some(Uint64x3 { x: 64, y: 2, z: 1 }),
            block_size: Some(Uint64x3 { x: 256, y: 1, z: 1 }),
            metric_results: [
                metric(0, MetricValueKind::Double(duration)),
                metric(1, MetricValueKind::Uint64(8)),
                metric(2, MetricValueKind::Uint32(6)),
                metric(3, MetricValueKind::String(b"NVIDIA Test GPU".to_vec())),
                metric(4, MetricValueKind::Float(33.33)),
                ProfileMetricResult { name_id: 5, value: None },
                metric(99, MetricValueKind::Uint64(1)),
                metric(0, MetricValueKind::Double(-1.0)), // duplicate: the first value wins
            ]
            .iter()
            .map(|m| Bytes::from(m.encode_to_vec()))
            .chain([
                // inst_executed: total 3 plus per-PC instances.
                Bytes::from(
                    [
                        metric(6, MetricValueKind::Uint64(3)).encode_to_vec(),
                        ProfileMetricInstances { name_id: 0, instances: vec![pc_value(0x7000_0010, 1), pc_value(0x7000_0000, 2)] }
                            .encode_to_vec(),
                    ]
                    .concat(),
                ),
                Bytes::from_static(b"\x0a\xff"), // truncated record: skipped, noted
            ])
            .collect(),
            sections: [ProfilerSection {
                identifier: b"SpeedOfLight".to_vec(),
                display_name: b"GPU Speed Of Light Throughput".to_vec(),
                header: Some(ProfilerSectionHeader {
                    metrics: vec![ProfilerSectionMetric { name: b"gpu__time_duration.sum".to_vec(), label: b"Duration".to_vec() }],
                }),
                source_metrics: vec![SourceMetricList {
                    metrics: vec![ProfilerSectionMetric { name: b"inst_executed".to_vec(), label: b"Instructions Executed".to_vec() }],
                }],
            }]
            .iter()
            .map(|m| Bytes::from(m.encode_to_vec()))
            .collect(),
            rule_results: [RuleResult {
                identifier: b"LaunchConfiguration".to_vec(),
                display_name: b"Launch Configuration".to_vec(),
                section_identifier: b"LaunchStats".to_vec(),
                body: Some(RuleResultBody {
                    items: vec![RuleResultBodyItem {
                        message: Some(RuleResultMessage {
                            text: b"Grid is small. See @section:LaunchStats:Launch Statistics@ and @url:Guide:https://x.y/z#a@.".to_vec(),
                            kind: 4,
                            title: b"Small Grid".to_vec(),
                        }),
                        speedup: Some(RuleResultSpeedup { kind: 2, value: Some(96.5) }),
                    }],
                }),
            }]
            .iter()
            .map(|m| Bytes::from(m.encode_to_vec()))
            .collect(),
            context_id: Some(1),
            stream_id: Some(7),
            source: None,
        }
    }

    /// A two-block report: the first block carries the string table, the second reuses it.
    fn sample_report() -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        frame(&mut out, &FileHeader { version: 7 }.encode_to_vec());
        let names = [
            "gpu__time_duration.sum",
            "device__attribute_compute_capability_major",
            "device__attribute_compute_capability_minor",
            "device__attribute_display_name",
            "sm__throughput.avg.pct_of_peak_sustained_elapsed",
            "launch__no_value",
            "inst_executed",
        ];
        let process = ProcessInfo { process_id: Some(4242), host_name: b"127.0.0.1".to_vec(), executable: b"/usr/bin/app".to_vec() };
        for (i, (kernel, dur)) in [("first", 1952.0), ("second", 12.5)].into_iter().enumerate() {
            let mut payload = Vec::new();
            frame(&mut payload, b"\x08\x01\x22\x03ELF"); // a source record, skipped
            frame(&mut payload, &sample_result(kernel, dur).encode_to_vec());
            payload.extend_from_slice(b"range-result-bytes");
            let header = BlockHeader {
                num_sources: 1,
                num_results: 1,
                string_table: (i == 0).then(|| StringTable { strings: names.iter().map(|s| s.as_bytes().to_vec()).collect() }),
                payload_size: payload.len() as u64,
                process: Some(process.clone()),
            };
            frame(&mut out, &header.encode_to_vec());
            out.extend_from_slice(&payload);
        }
        out
    }

    fn parse(bytes: &[u8]) -> Result<Profile> {
        read(&PathBuf::from("t.ncu-rep"), bytes)
    }

    fn offset_of(e: &ProfileError) -> u64 {
        match e {
            ProfileError::Report { offset, .. } => *offset,
            other => panic!("expected a Report error, got {other:?}"),
        }
    }

    #[test]
    fn parses_synthetic_report() {
        let p = parse(&sample_report()).unwrap();
        assert_eq!(p.kind, SourceKind::NcuRep);
        assert_eq!(p.launches.len(), 2);
        let l = &p.launches[0];
        assert_eq!(l.id, 0);
        assert_eq!(p.launches[1].id, 1);
        assert_eq!(l.name, "first(float *)");
        assert_eq!(l.mangled_name.as_deref(), Some("_Z5firstPf"));
        assert_eq!(l.grid_size, Some([64, 2, 1]));
        assert_eq!(l.block_size, Some([256, 1, 1]));
        assert_eq!(l.compute_capability.as_deref(), Some("8.6"));
        assert_eq!(l.device_name.as_deref(), Some("NVIDIA Test GPU"));
        assert_eq!(l.process_id, Some(4242));
        assert_eq!(l.process_name.as_deref(), Some("app"));
        assert_eq!((l.context_id, l.stream_id), (Some(1), Some(7)));
        let d = &l.metrics.get("gpu__time_duration.sum").unwrap();
        assert_eq!(d.as_f64(), Some(1952.0));
        assert_eq!(d.unit, Unit::Nanoseconds);
        assert_eq!(d.label, Some("Duration"));
        assert_eq!(d.section, Some("GPU Speed Of Light Throughput"));
        assert_eq!(d.origin.to_string(), "block 0, result 0");
        let pct = &l.metrics.get("sm__throughput.avg.pct_of_peak_sustained_elapsed").unwrap();
        assert_eq!(pct.as_f64(), Some(33.33));
        assert_eq!(pct.unit, Unit::Percent);
        assert_eq!(pct.raw_value, "33.33");
        assert!(!l.metrics.contains_key("launch__no_value"));
        // Second block: string table reused.
        let d2 = &p.launches[1].metrics.get("gpu__time_duration.sum").unwrap();
        assert_eq!(d2.as_f64(), Some(12.5));
        assert_eq!(d2.origin.to_string(), "block 1, result 0");
        assert_eq!(l.ncu_rules.len(), 1);
        let r = &l.ncu_rules[0];
        assert_eq!(r.rule, "LaunchConfiguration");
        assert_eq!(r.section.as_deref(), Some("LaunchStats"));
        assert_eq!(r.kind, NcuRuleType::Opt);
        assert_eq!(r.message, "Grid is small. See Launch Statistics and Guide (https://x.y/z#a).");
        assert_eq!(r.speedup_type.as_deref(), Some("global"));
        assert_eq!(r.speedup_pct, Some(96.5));
        assert!(p.notes.iter().any(|n| n.contains("outside the string table")), "{:?}", p.notes);
        assert!(p.notes.iter().any(|n| n.contains("did not decode")), "{:?}", p.notes);
        assert!(p.notes.iter().any(|n| n.contains("duplicated")), "{:?}", p.notes);
        assert!(p.notes.iter().any(|n| n.starts_with("read 2 embedded binary record(s)")), "{:?}", p.notes);
        assert!(p.source_files.is_empty() && l.source_files.is_empty());
        assert_eq!(l.metrics.get("inst_executed").unwrap().as_f64(), Some(3.0));
        let src = l.source.as_ref().expect("source view");
        assert_eq!(src.view, "sass");
        assert_eq!(src.columns, ["Instructions Executed"]);
        assert_eq!(src.rows.len(), 2);
        assert_eq!(src.rows[0].address.as_deref(), Some("0x70000000"));
        assert_eq!(src.rows[0].values, [Some(2.0)]);
        assert_eq!(src.rows[1].address.as_deref(), Some("0x70000010"));
        assert_eq!(src.rows[1].values, [Some(1.0)]);
    }

    /// Where each sample result's frame ends in `full` (the launch is complete from there on).
    fn result_ends(full: &[u8]) -> Vec<usize> {
        [("first", 1952.0), ("second", 12.5)]
            .iter()
            .map(|(k, d)| {
                let enc = sample_result(k, *d).encode_to_vec();
                let at = full.windows(enc.len()).position(|w| w == enc.as_slice()).expect("result in report");
                at + enc.len()
            })
            .collect()
    }

    #[test]
    fn every_truncation_keeps_the_complete_launches() {
        let full = sample_report();
        let ends = result_ends(&full);
        let whole = parse(&full).unwrap();
        for len in 0..full.len() {
            let complete = ends.iter().filter(|&&e| e <= len).count();
            match parse(&full[..len]) {
                Err(e @ ProfileError::Report { .. }) => {
                    assert_eq!(complete, 0, "prefix of {len} bytes lost complete launches: {e}");
                    let off = offset_of(&e);
                    assert!(off <= len as u64, "offset {off} beyond input of {len} bytes: {e}");
                    assert!(e.to_string().contains(&format!("at byte {off}")), "{e}");
                }
                Err(ProfileError::Truncated { at, launches, recovered, message, .. }) => {
                    assert_eq!(at, At::Byte(len as u64));
                    assert_eq!(launches, complete, "prefix of {len} bytes: {message}");
                    assert_eq!(recovered.launches.len(), complete);
                    assert!(message.contains("block "), "{message}");
                    for (a, b) in recovered.launches.iter().zip(&whole.launches) {
                        assert_eq!((a.id, &a.name, a.metrics.len()), (b.id, &b.name, b.metrics.len()));
                    }
                    assert!(recovered.notes.iter().any(|n| n.contains("ends early")), "{:?}", recovered.notes);
                }
                // A cut exactly between blocks leaves a shorter but valid report.
                Ok(p) => assert_eq!(p.launches.len(), complete, "prefix of {len} bytes"),
                Err(ProfileError::Empty { .. }) => assert_eq!(complete, 0),
                Err(e) => panic!("prefix of {len} bytes: unexpected error kind {e:?}"),
            }
        }
    }

    #[test]
    fn later_blocks_append_to_the_string_table() {
        // Block 0: names 0..2 and a result that also uses name 2, which block 1 adds; block 1:
        // no result, one more name; block 2: a result using all three.
        let mut out = MAGIC.to_vec();
        frame(&mut out, &FileHeader { version: 7 }.encode_to_vec());
        let result = |kernel: &str| ProfileResult {
            kernel_function_name: kernel.as_bytes().to_vec(),
            metric_results: [
                metric(0, MetricValueKind::Double(5.0)),
                metric(1, MetricValueKind::Uint64(7)),
                metric(2, MetricValueKind::String(b"late".to_vec())),
            ]
            .iter()
            .map(|m| Bytes::from(m.encode_to_vec()))
            .collect(),
            ..Default::default()
        };
        let table = |names: &[&str]| StringTable { strings: names.iter().map(|s| s.as_bytes().to_vec()).collect() };
        for (names, kernel) in [
            (&["gpu__time_duration.sum", "launch__registers_per_thread"][..], Some("a")),
            (&["late__name"][..], None),
            (&[][..], Some("b")),
        ] {
            let mut payload = Vec::new();
            if let Some(k) = kernel {
                frame(&mut payload, &result(k).encode_to_vec());
            }
            let header = BlockHeader {
                num_results: kernel.is_some() as u32,
                string_table: Some(table(names)),
                payload_size: payload.len() as u64,
                ..Default::default()
            };
            frame(&mut out, &header.encode_to_vec());
            out.extend_from_slice(&payload);
        }
        let p = parse(&out).unwrap();
        assert_eq!(p.launches.len(), 2);
        for l in &p.launches {
            assert_eq!(l.metrics.len(), 3, "{}: {:?}", l.name, l.metrics.keys().collect::<Vec<_>>());
            assert_eq!(l.metrics.get("late__name").unwrap().raw_value, "late");
            assert_eq!(l.metrics.get("launch__registers_per_thread").unwrap().as_f64(), Some(7.0));
        }
        assert!(!p.notes.iter().any(|n| n.contains("outside the string table")), "{:?}", p.notes);
    }

    #[test]
    fn bad_magic_and_lengths_name_the_offset() {
        let e = parse(b"NVX\0....").unwrap_err();
        assert_eq!(offset_of(&e), 0);

        let e = parse(b"NVR\0\x02\x00").unwrap_err();
        assert_eq!(offset_of(&e), 4);
        assert!(e.to_string().contains("4-byte length of the file header"), "{e}");

        let mut huge = b"NVR\0".to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        let e = parse(&huge).unwrap_err();
        assert_eq!(offset_of(&e), 8);
        assert!(e.to_string().contains("needs 4294967295 bytes but only 0 remain"), "{e}");

        // A block header claiming a payload larger than the file.
        let mut r = b"NVR\0".to_vec();
        frame(&mut r, &FileHeader { version: 7 }.encode_to_vec());
        let at = r.len();
        frame(&mut r, &BlockHeader { num_results: 3, payload_size: 1 << 40, ..Default::default() }.encode_to_vec());
        let e = parse(&r).unwrap_err();
        assert!(offset_of(&e) > at as u64);
        // The block is cut: the first record that does not fit is named.
        assert!(e.to_string().contains("block 0 profile result 0 of 3") && e.to_string().contains("ends early"), "{e}");

        // More results announced than the payload holds.
        let mut r = b"NVR\0".to_vec();
        frame(&mut r, &FileHeader { version: 7 }.encode_to_vec());
        frame(&mut r, &BlockHeader { num_results: u32::MAX, payload_size: 6, ..Default::default() }.encode_to_vec());
        let payload_at = r.len();
        frame(&mut r, &[0x08, 0x01]);
        let e = parse(&r).unwrap_err();
        assert_eq!(offset_of(&e), payload_at as u64 + 6);
        assert!(e.to_string().contains("profile result 1 of 4294967295"), "{e}");

        // Garbage protobuf inside a result.
        let mut r = b"NVR\0".to_vec();
        frame(&mut r, &FileHeader { version: 7 }.encode_to_vec());
        frame(&mut r, &BlockHeader { num_results: 1, payload_size: 7, ..Default::default() }.encode_to_vec());
        let payload_at = r.len();
        frame(&mut r, &[0xff, 0xff, 0xff]);
        let e = parse(&r).unwrap_err();
        assert_eq!(offset_of(&e), payload_at as u64 + 4);
        assert!(e.to_string().contains("not valid protobuf"), "{e}");
    }

    /// One source record: module `reference`, an optional cubin, `(path, text)` files.
    fn source_record(reference: u64, binary: &'static [u8], files: &[(&str, &[u8])]) -> Vec<u8> {
        let files = files.iter().map(|(p, t)| EmbeddedFile { path: p.as_bytes().to_vec(), text: t.to_vec() }).collect();
        let data = SourceData { reference, binary: Bytes::from_static(binary), files: Some(SourceFileList { files }) };
        let mut out = data.encode_to_vec();
        out.extend_from_slice(b"\x4a\x03\x0a\x01k"); // field 9 (function list): not read
        out
    }

    /// A block of `sources` (encoded records) and results for `(kernel, module reference)`.
    fn source_block(out: &mut Vec<u8>, sources: &[Vec<u8>], results: &[(&str, Option<u64>)], names: bool) {
        let mut payload = Vec::new();
        for record in sources {
            frame(&mut payload, record);
        }
        for (kernel, module) in results {
            let result = ProfileResult {
                kernel_function_name: kernel.as_bytes().to_vec(),
                source: module.map(|reference| SourceReference { reference }),
                ..Default::default()
            };
            frame(&mut payload, &result.encode_to_vec());
        }
        let header = BlockHeader {
            num_sources: sources.len() as u32,
            num_results: results.len() as u32,
            string_table: names.then(|| StringTable { strings: vec![b"gpu__time_duration.sum".to_vec()] }),
            payload_size: payload.len() as u64,
            ..Default::default()
        };
        frame(out, &header.encode_to_vec());
        out.extend_from_slice(&payload);
    }

    #[test]
    fn reads_embedded_source_files() {
        let mut out = MAGIC.to_vec();
        frame(&mut out, &FileHeader { version: 7 }.encode_to_vec());
        let kernel_cu: &[u8] = b"__global__ void k() {}\n";
        let header = b"// caf\xe9 (Latin-1)\n";
        let block0 = [
            source_record(7, b"\x7fELF", &[("/src/k.cu", kernel_cu), ("/src/h.cuh", header)]),
            source_record(7, b"", &[]),                                // more functions of module 7
            source_record(9, b"\x7fELF", &[("/src/k.cu", kernel_cu)]), // the same file in module 9
            b"\x0a\xff".to_vec(),                                      // cut inside field 1: not protobuf
        ];
        source_block(&mut out, &block0, &[("a", Some(7)), ("b", Some(9)), ("c", None), ("d", Some(11))], true);
        let garbled_at = out.windows(2).rposition(|w| w == b"\x0a\xff").unwrap() as u64;
        // Module 11 is described after the launch that uses it.
        source_block(&mut out, &[source_record(11, b"", &[("C:/late.cu", b"int x;")])], &[], false);
        let p = parse(&out).unwrap();

        let paths: Vec<&str> = p.source_files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["/src/k.cu", "/src/h.cuh", "C:/late.cu"]);
        assert_eq!(p.source_files[0].text, "__global__ void k() {}\n");
        assert_eq!(p.source_files[1].text, "// caf\u{fffd} (Latin-1)\n");
        let files: Vec<&[usize]> = p.launches.iter().map(|l| l.source_files.as_slice()).collect();
        assert_eq!(files, [&[0, 1][..], &[0], &[], &[2]]);
        let note = |needle: &str| p.notes.iter().any(|n| n.contains(needle));
        assert!(note("embedded source file /src/h.cuh is not UTF-8 (first invalid byte at offset 6 of the file)"), "{:?}", p.notes);
        assert!(note("read 2 embedded binary record(s)"), "{:?}", p.notes);
        let undecoded = format!("skipped 1 embedded source record(s) that did not decode (the first at byte {garbled_at}:");
        assert!(note(&undecoded), "{undecoded:?} not in {:?}", p.notes);
        assert!(!note("twice"), "{:?}", p.notes);
    }

    #[test]
    fn empty_report_is_an_error() {
        let mut r = b"NVR\0".to_vec();
        frame(&mut r, &FileHeader { version: 7 }.encode_to_vec());
        frame(&mut r, &BlockHeader::default().encode_to_vec());
        assert!(matches!(parse(&r), Err(ProfileError::Empty { .. })));
    }

    #[test]
    fn garbage_never_panics() {
        let valid = sample_report();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..3000 {
            let mut b = valid.clone();
            let flips = 1 + (next() % 8) as usize;
            for _ in 0..flips {
                let i = (next() as usize) % b.len();
                b[i] = next() as u8;
            }
            if round % 3 == 0 {
                let cut = (next() as usize) % b.len();
                b.truncate(cut.max(4));
            }
            b[..4].copy_from_slice(MAGIC);
            let _ = parse(&b);
        }
        for len in [4usize, 5, 8, 64, 1000] {
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            b[..4].copy_from_slice(MAGIC);
            let _ = parse(&b);
        }
    }

    #[test]
    fn markup_rendering() {
        assert_eq!(render_markup("a @section:X:Y Z@ b"), "a Y Z b");
        assert_eq!(render_markup("@url:G:https://a.b/c@"), "G (https://a.b/c)");
        assert_eq!(render_markup("50 @ 3 GHz @ home"), "50 @ 3 GHz @ home");
        assert_eq!(render_markup("trailing @"), "trailing @");
    }
}
