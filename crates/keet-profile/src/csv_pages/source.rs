//! `--page source`: per-instruction / per-source-line counters of one kernel.
//!
//! Shape: a preamble (`"Kernel Name","k"` for the SASS view; `"File Path","..."` and
//! `"Function Name","k"` for CUDA views), then a header starting with `"Address"` (SASS view) or
//! `"Line No"` (CUDA / CUDA+SASS views; the second `"Source"` column is the SASS text), then rows.
//! In the CUDA+SASS view a row with a line number is a source line and the rows under it with an
//! address (and an empty line number) are its SASS instructions; they get the line number of the
//! source line above them.
//!
//! A source export holds one kernel's view, so the result is a profile with a single launch
//! (ID 0, the kernel name from the preamble) whose `source` is set; [`attach_source`] moves it to
//! the matching launch of a profile read from another export.

use super::{set_kernel_name, Header, Input};
use crate::units::{parse_number, NumberLocale};
use crate::{Launch, Profile, Result, SourceKind, SourceRow, SourceView};

/// Columns that describe the row rather than count something.
const NON_COUNTERS: &[&str] = &["Address", "# Address", "Source", "Line No", "Line", "File", "File Path", "Function Name"];

pub(super) fn read<'a>(input: &mut Input<'a>, header: &Header<'a>, mut notes: Vec<String>) -> Result<Profile> {
    let rows = input.data_rows(header)?;
    let h: Vec<&str> = header.fields.iter().map(|s| s.trim()).collect();
    let c_line = h.iter().position(|&n| n == "Line No" || n == "Line");
    let c_addr = h.iter().position(|&n| n == "Address" || n == "# Address");
    let sources: Vec<usize> = h.iter().enumerate().filter(|(_, &n)| n == "Source").map(|(i, _)| i).collect();
    // CUDA text is the "Source" column before "Address"; SASS text the one after it.
    let (c_cuda, c_sass) = match (c_line, c_addr) {
        (Some(_), Some(a)) => (sources.iter().copied().find(|&i| i < a), sources.iter().copied().find(|&i| i > a)),
        (Some(_), None) => (sources.first().copied(), None),
        _ => (None, sources.first().copied()),
    };
    let view = match (c_line.is_some(), c_addr.is_some()) {
        (true, true) => "cuda,sass",
        (true, false) => "cuda",
        _ => "sass",
    };
    let counters: Vec<(usize, &str)> =
        h.iter().enumerate().filter(|(_, n)| !n.is_empty() && !NON_COUNTERS.contains(n)).map(|(i, n)| (i, *n)).collect();

    let pre = |k: &str| header.preamble.iter().find(|(n, _)| n == k).map(|(_, v)| v.trim().to_string());
    let file = pre("File Path");
    let kernel = pre("Kernel Name").or_else(|| pre("Function Name")).or_else(|| pre("Demangled Name")).or_else(|| pre("Mangled Name"));
    // Source counters are plain numbers; a decimal comma would show as "1,5".
    let locale = super::locale_of(rows.iter().flat_map(|(_, f)| counters.iter().filter_map(move |(i, _)| f.get(*i).map(|s| &**s))));

    let mut out = SourceView {
        view: view.to_string(),
        columns: counters.iter().map(|(_, n)| n.to_string()).collect(),
        rows: Vec::with_capacity(rows.len()),
    };
    let mut current_line: Option<u64> = None;
    for (_, f) in &rows {
        let get = |c: Option<usize>| c.and_then(|c| f.get(c)).map(|s| &**s).unwrap_or("");
        let line_no = super::parse_u64(get(c_line));
        let addr = get(c_addr).trim();
        let addr = (!addr.is_empty() && addr != "-").then(|| addr.to_string());
        let is_sass_row = addr.is_some() && line_no.is_none();
        if line_no.is_some() {
            current_line = line_no;
        }
        let text = if c_line.is_some() && !is_sass_row { get(c_cuda) } else { get(c_sass) };
        let values = counters.iter().map(|(i, _)| number(f.get(*i).map(|s| &**s).unwrap_or(""), locale)).collect();
        out.rows.push(SourceRow {
            file: if c_line.is_some() { file.clone() } else { None },
            line: if is_sass_row { current_line } else { line_no },
            address: addr,
            text: text.to_string(),
            values,
        });
    }
    input.skipped.notes(&mut notes);
    let mut launch = Launch::default();
    match &kernel {
        Some(k) => set_kernel_name(&mut launch, k),
        None => notes.push("the source page names no kernel (no \"Kernel Name\"/\"Function Name\" preamble)".to_string()),
    }
    if out.rows.is_empty() {
        return Ok(Profile {
            path: input.path.to_owned(),
            kind: SourceKind::SourceCsv,
            launches: Vec::new(),
            notes,
            source_files: Vec::new(),
        });
    }
    launch.source = Some(out);
    Ok(Profile { path: input.path.to_owned(), kind: SourceKind::SourceCsv, launches: vec![launch], notes, source_files: Vec::new() })
}

fn number(s: &str, locale: NumberLocale) -> Option<f64> {
    parse_number(s, locale).ok().flatten()
}

/// Attaches the source view of `source` (a profile read from a `--page source` export) to the
/// launch of `target` with the same kernel name (demangled or mangled). When several launches
/// match, the first one without a source view gets it. Returns the ID of the launch it was
/// attached to, or a message saying why not.
pub fn attach_source(target: &mut Profile, source: &Profile) -> std::result::Result<u64, String> {
    let Some(src) = source.launches.first() else {
        return Err(format!("{}: no source view", source.path.display()));
    };
    let Some(view) = &src.source else {
        return Err(format!("{}: no source view", source.path.display()));
    };
    if src.name.is_empty() {
        return Err(format!("{}: the source page names no kernel", source.path.display()));
    }
    let same = |l: &Launch| {
        l.name == src.name
            || (!src.name.is_empty() && l.mangled_name.as_deref() == Some(src.name.as_str()))
            || (src.mangled_name.is_some() && l.mangled_name == src.mangled_name)
            || short_name(&l.name) == short_name(&src.name)
    };
    let candidates: Vec<usize> = target.launches.iter().enumerate().filter(|(_, l)| same(l)).map(|(i, _)| i).collect();
    let Some(&i) = candidates.iter().find(|&&i| target.launches[i].source.is_none()).or(candidates.first()) else {
        return Err(format!(
            "{}: kernel {:?} of the source page matches no launch of {}",
            source.path.display(),
            src.name,
            target.path.display()
        ));
    };
    target.launches[i].source = Some(view.clone());
    Ok(target.launches[i].id)
}

/// "void ns::kernel<8>(int *, float)" -> "ns::kernel": the function name without return type,
/// template arguments or parameters, for matching a short preamble name against a full signature.
fn short_name(s: &str) -> &str {
    let s = s.trim();
    let s = s.strip_prefix("void ").unwrap_or(s);
    let end = s.find(['<', '(']).unwrap_or(s.len());
    s[..end].trim()
}
