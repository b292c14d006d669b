//! The Nsight Compute GUI's raw export: transposed (one row per metric, one column per launch),
//! keys written `"name [unit]"`, usually with a UTF-8 BOM.
//!
//! The first row is `ID,<id0>,<id1>,...`. Identity rows ("Function Name", "Demangled Name",
//! "Mangled Name", "Process" = `[pid] name`, "Device Name", "Grid Size"/"Block Size" =
//! `"    1,    1,    1"`) fill the launch identity; every row is also kept as a metric: raw metric
//! names under their name, GUI-only rows ("Estimated Speedup", "Time"...) under their label.
//! Values may carry an instance count (`"0.05 {443}"`, or only `"{416}"` when there is no
//! aggregate); the count is dropped and a value-less cell is kept as text.

use super::{cell_metric, locale_of, parse_dim3, parse_u64, set_kernel_name, Header, Input, UnitCache};
use crate::names::looks_raw;
use crate::{Launch, Profile, Result, SourceKind};

pub(super) fn read<'a>(input: &mut Input<'a>, header: &Header<'a>, mut notes: Vec<String>, had_bom: bool) -> Result<Profile> {
    let rows = input.data_rows(header)?;
    let n = header.fields.len() - 1;
    let mut launches: Vec<Launch> = Vec::with_capacity(n);
    for f in &header.fields[1..] {
        let id = parse_u64(f)
            .ok_or_else(|| input.csv_error(header.line, format!("expected launch IDs after \"ID\", found {:?}", super::short(f))))?;
        launches.push(Launch { id, ..Default::default() });
    }
    let locale = locale_of(rows.iter().flat_map(|(_, f)| f.iter().skip(1).map(|s| strip_instances(s))));
    let mut units = UnitCache::new();
    // Per launch; a key given twice keeps its first row (the builder keeps the first push).
    let mut metrics: Vec<crate::MetricsBuilder> = (0..n).map(|_| crate::MetricsBuilder::new()).collect();
    for (line, f) in &rows {
        let key = f.first().map(|s| s.trim()).unwrap_or("");
        if key.is_empty() {
            continue;
        }
        if f.len() > n + 1 && f[n + 1..].iter().any(|s| !s.trim().is_empty()) {
            return Err(input.csv_error(
                *line,
                format!("expected {} value(s) (one per launch in the \"ID\" row) after {:?}, found {}", n, super::short(key), f.len() - 1),
            ));
        }
        let (name, raw_unit) = split_key(key);
        let norm = units.get(raw_unit);
        let is_raw_name = looks_raw(name);
        for (i, l) in launches.iter_mut().enumerate() {
            let Some(cell) = f.get(i + 1) else { continue };
            let cell = cell.trim();
            if cell.is_empty() {
                continue;
            }
            match name {
                // The full demangled signature wins over the short function name.
                "Demangled Name" => set_kernel_name(l, cell),
                "Function Name" if l.name.is_empty() => set_kernel_name(l, cell),
                "Mangled Name" => {
                    let keep = l.mangled_name.is_none();
                    if l.name.is_empty() {
                        set_kernel_name(l, cell);
                    }
                    if keep {
                        l.mangled_name = Some(cell.to_string());
                    }
                }
                "Process" => {
                    // "[28264] probe_ffma.exe"
                    if let Some(rest) = cell.strip_prefix('[') {
                        if let Some((pid, pname)) = rest.split_once(']') {
                            l.process_id = parse_u64(pid);
                            l.process_name = Some(pname.trim().to_string());
                        }
                    } else {
                        l.process_name = Some(cell.to_string());
                    }
                }
                "Device Name" => l.device_name = Some(cell.to_string()),
                "Grid Size" => l.grid_size = parse_dim3(cell),
                "Block Size" => l.block_size = parse_dim3(cell),
                "launch__context_id" => l.context_id = parse_u64(cell),
                "launch__stream_id" => l.stream_id = parse_u64(cell),
                "launch__device_id" => l.device_id = parse_u64(cell),
                _ => {}
            }
            let value = strip_instances(cell);
            let mut m = cell_metric(value, raw_unit, &norm, locale, *line);
            if value.is_empty() {
                m.value = crate::MetricValue::Text(cell);
            }
            m.raw_value = cell;
            if !is_raw_name {
                m.label = Some(name);
            }
            metrics[i].push(name, m);
        }
    }
    for (l, ms) in launches.iter_mut().zip(metrics) {
        l.metrics = ms.finish().0;
        // Keep the mangled name only when it differs from the name shown.
        if l.mangled_name.as_deref() == Some(l.name.as_str()) {
            l.mangled_name = None;
        }
        super::wide::fill_from_metrics(l);
    }
    input.skipped.notes(&mut notes);
    let _ = had_bom;
    Ok(Profile { path: input.path.to_owned(), kind: SourceKind::UiExportCsv, launches, notes, source_files: Vec::new() })
}

/// "gpu__time_duration.sum [us]" -> ("gpu__time_duration.sum", "us").
fn split_key(key: &str) -> (&str, &str) {
    if let Some(body) = key.strip_suffix(']') {
        if let Some(open) = body.rfind(" [") {
            return (body[..open].trim(), &body[open + 2..]);
        }
    }
    (key, "")
}

/// "0.05 {443}" -> "0.05"; "{416}" -> ""; anything else unchanged.
fn strip_instances(cell: &str) -> &str {
    let t = cell.trim();
    if let Some(body) = t.strip_suffix('}') {
        if let Some(open) = body.rfind('{') {
            if body[open + 1..].bytes().all(|b| b.is_ascii_digit()) {
                return body[..open].trim();
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_instances() {
        assert_eq!(split_key("gpu__time_duration.sum [us]"), ("gpu__time_duration.sum", "us"));
        assert_eq!(split_key("Block Size [block]"), ("Block Size", "block"));
        assert_eq!(split_key("launch__stack_size"), ("launch__stack_size", ""));
        assert_eq!(strip_instances("0.05 {443}"), "0.05");
        assert_eq!(strip_instances("{416}"), "");
        assert_eq!(strip_instances("2,484 {65}"), "2,484");
        assert_eq!(strip_instances("{x}"), "{x}");
    }
}
