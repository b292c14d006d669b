//! Source lines of SASS addresses, from a module's cubin: what ncu's Source page shows when a
//! kernel was compiled with `-lineinfo` (or `-G`).
//!
//! A report stores per-instruction counters by runtime PC ([`super::source`]) and the module's
//! cubin, an ELF file. Each kernel's code sits in its own section `.text.<mangled name>` at address
//! 0, and the DWARF line table (`.debug_line`) gives the file and line of each address. Its
//! addresses are relocations against those sections (`.rel.debug_line`), so the table is read after
//! the relocations are applied, each section at its own synthetic base (`section index + 1` in the
//! bits above [`OFFSET_BITS`]) plus the offset into it. A PC's offset in its kernel is the PC less
//! the kernel's first PC (`launch__function_pcs`).
//!
//! ELF parsing is the `object` crate's and DWARF parsing `gimli`'s: the same pair `addr2line` uses,
//! for formats keet has no reason to parse by hand.

use super::embedded::Embedded;
use crate::Launch;
use gimli::{EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol};
use std::collections::HashMap;

/// Bits of a synthetic address that hold the offset within a section.
const OFFSET_BITS: u32 = 40;

/// One row of a kernel's line table: from `offset` (bytes into the kernel's code) on, until the
/// next row, the code is `file`:`line`.
#[derive(Debug, Clone, PartialEq)]
struct LineRow {
    offset: u64,
    /// Index into [`ModuleLines::files`]; `None` past the end of a sequence.
    file: Option<usize>,
    line: u64,
}

/// The line tables of one cubin, per kernel (by mangled name).
#[derive(Debug, Default)]
pub(super) struct ModuleLines {
    files: Vec<String>,
    kernels: HashMap<String, Vec<LineRow>>,
    /// Each kernel's first PC where the cubin is loaded (its symbol's value; 0 in a cubin that is not).
    loaded_at: HashMap<String, u64>,
}

/// Why a cubin gives no lines.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(super) enum LinesError {
    #[error("the cubin is not an ELF file keet can read: {0}")]
    Elf(String),
    #[error("the cubin has no line table (compile with -lineinfo)")]
    NoLineTable,
    #[error("the cubin's line table does not decode: {0}")]
    Dwarf(String),
}

impl ModuleLines {
    /// The source file and 1-based line of the instruction `offset` bytes into kernel `mangled`.
    pub(super) fn line_at(&self, mangled: &str, offset: u64) -> Option<(&str, u64)> {
        let rows = self.kernels.get(mangled)?;
        let last = rows.partition_point(|r| r.offset <= offset).checked_sub(1)?;
        // Several rows at one address (inlined code): the first one, as Nsight Compute reads it.
        let row = &rows[rows.partition_point(|r| r.offset < rows[last].offset)];
        let file = self.files.get(row.file?)?;
        (row.line > 0).then_some((file.as_str(), row.line))
    }

    /// The kernel's first PC as the loaded cubin gives it.
    fn start_of(&self, mangled: &str) -> Option<u64> {
        self.loaded_at.get(mangled).copied().filter(|pc| *pc > 0)
    }
}

/// Gives the SASS rows of each launch's source view the file and line of their instruction, from
/// the cubin of the launch's module (`modules`: each launch's module reference; `starts`: each
/// launch's first PC, where the report gives it). Notes how many launches were mapped and why
/// others could not be.
pub(super) fn attach(
    launches: &mut [Launch],
    modules: &[Option<u64>],
    starts: &[Option<u64>],
    embedded: &Embedded,
    notes: &mut Vec<String>,
) {
    let mut tables: HashMap<u64, Result<ModuleLines, LinesError>> = HashMap::new();
    let (mut mapped, mut unmapped) = (0usize, Vec::<String>::new());
    for (index, (launch, module)) in launches.iter_mut().zip(modules).enumerate() {
        let Some(view) = launch.source.as_mut() else { continue };
        if view.rows.iter().all(|r| r.address.is_none() || r.line.is_some()) {
            continue;
        }
        let why = match (module, embedded.cubin_of(*module)) {
            (Some(reference), Some(cubin)) => match tables.entry(*reference).or_insert_with(|| read(cubin)) {
                Ok(lines) => match map_rows(starts.get(index).copied().flatten(), launch.mangled_name.as_deref(), lines, &mut view.rows) {
                    Ok(()) => {
                        mapped += 1;
                        continue;
                    }
                    Err(why) => why,
                },
                Err(e) => e.to_string(),
            },
            _ => "the report holds no cubin for its module".to_string(),
        };
        if !unmapped.contains(&why) {
            unmapped.push(why);
        }
    }
    if mapped > 0 {
        notes.push(format!("source lines of the SASS counters of {mapped} launch(es) read from their cubins' line tables"));
    }
    if !unmapped.is_empty() {
        notes.push(format!("SASS counters without source lines: {}", unmapped.join("; ")));
    }
}

/// Sets each row's file and line (`start`: the kernel's first PC by `launch__function_pcs`); `Err`
/// says why none could be set.
fn map_rows(start: Option<u64>, mangled: Option<&str>, lines: &ModuleLines, rows: &mut [crate::SourceRow]) -> Result<(), String> {
    let mangled = mangled.ok_or("the launch has no mangled name")?;
    // The loaded cubin's own address first, then the report's.
    let start = lines.start_of(mangled).or(start).ok_or("neither the cubin nor the report gives the kernel's first address")?;
    if !lines.kernels.contains_key(mangled) {
        return Err("the cubin's line table has no rows for the kernel".into());
    }
    let mut any = false;
    for row in rows.iter_mut().filter(|r| r.line.is_none()) {
        let pc = row.address.as_deref().and_then(|a| u64::from_str_radix(a.trim().trim_start_matches("0x"), 16).ok());
        if let Some((file, line)) = pc.and_then(|pc| pc.checked_sub(start)).and_then(|offset| lines.line_at(mangled, offset)) {
            row.file = Some(file.to_string());
            row.line = Some(line);
            any = true;
        }
    }
    if any {
        Ok(())
    } else {
        Err("no SASS address falls in the kernel's line table".into())
    }
}

/// Reads the line tables of `cubin`.
pub(super) fn read(cubin: &[u8]) -> Result<ModuleLines, LinesError> {
    // `object` reads the headers in place and needs them 8-byte aligned; a cubin cut out of a
    // record may not be.
    let mut copy = Vec::new();
    let cubin = if cubin.as_ptr().align_offset(8) == 0 {
        cubin
    } else {
        copy.resize(cubin.len() + 8, 0u8);
        let shift = copy.as_ptr().align_offset(8);
        copy[shift..shift + cubin.len()].copy_from_slice(cubin);
        &copy[shift..shift + cubin.len()]
    };
    let elf = object::File::parse(cubin).map_err(|e| LinesError::Elf(e.to_string()))?;
    let section = elf.section_by_name(".debug_line").ok_or(LinesError::NoLineTable)?;
    let mut table = section.uncompressed_data().map_err(|e| LinesError::Elf(e.to_string()))?.into_owned();
    relocate(&elf, &mut table);
    let names: HashMap<usize, String> =
        elf.sections().filter_map(|s| Some((s.index().0, s.name().ok()?.strip_prefix(".text.")?.to_string()))).collect();
    let endian = if elf.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let mut lines = ModuleLines::default();
    read_programs(EndianSlice::new(&table, endian), &names, &mut lines).map_err(|e| LinesError::Dwarf(e.to_string()))?;
    for rows in lines.kernels.values_mut() {
        rows.sort_by_key(|r| r.offset);
    }
    for symbol in elf.symbols().filter(|s| s.kind() == object::SymbolKind::Text) {
        if let Ok(name) = symbol.name() {
            lines.loaded_at.insert(name.to_string(), symbol.address());
        }
    }
    Ok(lines)
}

/// Applies the relocations of `.debug_line`: each address becomes its target section's synthetic
/// base plus its offset from the symbol. The cubins a report stores are mostly already loaded
/// (symbols and addresses hold runtime PCs), so the offset is the address written in place less the
/// symbol's value; in a cubin that is not, the symbol's value is 0 and the same difference is the
/// addend. RELA entries carry the offset as their addend.
///
/// The entries are read here rather than through `object`'s relocation iterator: in some reports
/// the relocation section's link names `.debug_line` instead of the symbol table, and its symbol
/// indices are then those of the cubin's one symbol table.
fn relocate(elf: &object::File, table: &mut [u8]) {
    for (rela, data) in [(false, ".rel.debug_line"), (true, ".rela.debug_line")]
        .into_iter()
        .filter_map(|(rela, name)| Some((rela, elf.section_by_name(name)?.data().ok()?)))
    {
        let entry_size = if rela { 24 } else { 16 };
        for entry in data.chunks_exact(entry_size) {
            let word = |at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().unwrap_or([0; 8]));
            let (at, info) = (word(0), word(8));
            let Ok(symbol) = elf.symbol_by_index(object::SymbolIndex((info >> 32) as usize)) else { continue };
            let Some(target) = symbol.section_index() else { continue };
            let Some(slot) = usize::try_from(at).ok().and_then(|at| table.get_mut(at..at.checked_add(8)?)) else { continue };
            let written = u64::from_le_bytes(slot.try_into().unwrap_or([0; 8]));
            let offset = if rela { word(16) } else { written.wrapping_sub(symbol.address()) };
            let base = ((target.0 as u64) + 1) << OFFSET_BITS;
            slot.copy_from_slice(&base.wrapping_add(offset).to_le_bytes());
        }
    }
}

/// Reads every line program of the section in turn, keeping the rows of kernel sections.
fn read_programs(data: EndianSlice<RunTimeEndian>, sections: &HashMap<usize, String>, lines: &mut ModuleLines) -> gimli::Result<()> {
    let debug_line = gimli::DebugLine::from(data);
    let mut file_ids: HashMap<String, usize> = HashMap::new();
    let mut offset = 0usize;
    while offset < data.len() {
        let program = debug_line.program(gimli::DebugLineOffset(offset), 8, None, None)?;
        let header = program.header();
        let next = offset.saturating_add(header.unit_length()).saturating_add(header.format().initial_length_size().into());
        let mut rows = program.rows();
        while let Some((header, row)) = rows.next_row()? {
            let address = row.address();
            let Some(kernel) = usize::try_from(address >> OFFSET_BITS).ok().and_then(|s| s.checked_sub(1)).and_then(|s| sections.get(&s))
            else {
                continue;
            };
            let file = if row.end_sequence() {
                None
            } else {
                row.file(header).map(|entry| {
                    let path = file_path(header, entry);
                    let next_id = file_ids.len();
                    *file_ids.entry(path.clone()).or_insert_with(|| {
                        lines.files.push(path);
                        next_id
                    })
                })
            };
            let line = row.line().map_or(0, |l| l.get());
            let offset = address & ((1u64 << OFFSET_BITS) - 1);
            lines.kernels.entry(kernel.clone()).or_default().push(LineRow { offset, file, line });
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(())
}

/// A file entry's path as Nsight Compute shows it: its directory joined to its name (unless the
/// name is absolute), then [`normalise`]d.
fn file_path(
    header: &gimli::LineProgramHeader<EndianSlice<RunTimeEndian>>,
    entry: &gimli::FileEntry<EndianSlice<RunTimeEndian>>,
) -> String {
    let text = |value: gimli::AttributeValue<EndianSlice<RunTimeEndian>>| match value {
        gimli::AttributeValue::String(s) => s.to_string_lossy().into_owned(),
        _ => String::new(),
    };
    let name = normalise(&text(entry.path_name()));
    if name.starts_with('/') || name.as_bytes().get(1) == Some(&b':') {
        return name;
    }
    match entry.directory(header).map(|d| normalise(&text(d))).filter(|d| !d.is_empty() && d != ".") {
        Some(dir) => normalise(&format!("{dir}/{name}")),
        None => name,
    }
}

/// A path with forward slashes (a Windows compiler writes `C:\\Users\\...`, backslashes
/// doubled), and `.` and `..` resolved lexically (`/usr/local/cuda/bin/../targets` ->
/// `/usr/local/cuda/targets`).
fn normalise(path: &str) -> String {
    let slashed = path.replace("\\\\", "/").replace('\\', "/");
    let mut parts: Vec<&str> = Vec::new();
    for (i, part) in slashed.split('/').enumerate() {
        match part {
            "" | "." if i > 0 => {}
            ".." if parts.last().is_some_and(|p| !p.is_empty() && *p != "." && *p != ".." && !p.ends_with(':')) => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_give_the_line_up_to_the_next_row() {
        let mut lines = ModuleLines { files: vec!["/src/k.cu".into()], ..Default::default() };
        lines.kernels.insert(
            "_Z1kPf".into(),
            vec![
                LineRow { offset: 0, file: Some(0), line: 38 },
                LineRow { offset: 0x10, file: Some(0), line: 40 },
                LineRow { offset: 0x40, file: Some(0), line: 0 },
                LineRow { offset: 0x60, file: None, line: 0 },
            ],
        );
        assert_eq!(lines.line_at("_Z1kPf", 0), Some(("/src/k.cu", 38)));
        assert_eq!(lines.line_at("_Z1kPf", 0x30), Some(("/src/k.cu", 40)));
        assert_eq!(lines.line_at("_Z1kPf", 0x40), None, "line 0: no source line");
        assert_eq!(lines.line_at("_Z1kPf", 0x70), None, "past the end of the sequence");
        assert_eq!(lines.line_at("_Z1other", 0), None);
    }

    #[test]
    fn paths_read_as_nsight_compute_shows_them() {
        assert_eq!(
            normalise("/usr/local/cuda/bin/../targets/x86_64-linux/include/crt/mma.hpp"),
            "/usr/local/cuda/targets/x86_64-linux/include/crt/mma.hpp"
        );
        assert_eq!(normalise(r"C:\\Users\\me\\src\/k.cu"), "C:/Users/me/src/k.cu");
        assert_eq!(normalise(r"C:\Users\me\k.cu"), "C:/Users/me/k.cu");
        assert_eq!(normalise("a/./b//c.cu"), "a/b/c.cu");
        assert_eq!(normalise("../x/../y.cu"), "../y.cu");
        assert_eq!(normalise("int.jl"), "int.jl");
    }

    /// The first cubin stored in a report, found by its ELF magic and cut at its section headers.
    fn first_cubin(report: &[u8]) -> Option<&[u8]> {
        let start = report.windows(4).position(|w| w == b"\x7fELF")?;
        let elf = &report[start..];
        let word = |at: usize, len: usize| elf.get(at..at + len).map(|b| b.iter().rev().fold(0u64, |acc, x| acc << 8 | u64::from(*x)));
        let end = word(0x28, 8)? as usize + word(0x3c, 2)? as usize * word(0x3a, 2)? as usize;
        elf.get(..end)
    }

    /// A real cubin (from `../shared`, read in place) maps its kernel's first instruction to the
    /// line ncu shows; and no corruption of it panics.
    #[test]
    fn a_real_cubin_reads_and_corrupt_ones_never_panic() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/rtxa2000-sample/addConstDouble.ncu-rep");
        let Ok(report) = std::fs::read(&path) else {
            eprintln!("SKIPPED: {} is not here", path.display());
            return;
        };
        let cubin = first_cubin(&report).expect("the report stores a cubin");
        let lines = read(cubin).expect("its line table reads");
        let (file, line) = lines.line_at("_Z14addConstDoubleiPddS_", 0).expect("the first instruction has a line");
        assert!(file.ends_with("uncoalescedGlobalAccesses.cu") && line == 38, "{file}:{line}");
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..400 {
            let mut bad = cubin.to_vec();
            for _ in 0..1 + round % 8 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let at = (state >> 33) as usize % bad.len();
                bad[at] = (state >> 13) as u8;
            }
            if round % 50 == 0 {
                bad.truncate((state >> 40) as usize % bad.len());
            }
            if let Ok(lines) = read(&bad) {
                let _ = lines.line_at("_Z14addConstDoubleiPddS_", (state >> 20) % 0x200);
            }
        }
    }

    #[test]
    fn a_cubin_that_is_not_elf_or_has_no_line_table_says_so() {
        assert!(matches!(read(b"not an elf"), Err(LinesError::Elf(_))));
        assert!(matches!(read(&[]), Err(LinesError::Elf(_))));
    }
}
