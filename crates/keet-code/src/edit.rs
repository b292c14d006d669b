//! Checking a model-proposed edit before keet shows it: the `before` lines must be in the kernel
//! (or at a launch site, for launch-shape fixes), the edited file must still parse, every name the
//! new lines use must exist, and the change must be of a kind the finding allows.

use crate::classify::{self, EditKind, Side};
use crate::parse::{self, squash, text_of};
use crate::{CodeFile, KernelCode, Language};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use tree_sitter::{Node, Tree};

/// An edit as the model proposes it: lines of the kernel as they are, and what replaces them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Edit {
    pub before: String,
    pub after: String,
}

/// An edit that passed every check, ready to show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckedEdit {
    pub path: String,
    /// 1-based line of the file where the replaced lines start.
    pub start_line: usize,
    /// The replaced lines as they are in the file.
    pub before_lines: Vec<String>,
    /// The new lines, indented to fit the file.
    pub after_lines: Vec<String>,
    /// Every kind of change found (sorted); at least one of them was allowed.
    pub kinds: Vec<EditKind>,
    /// A unified diff of the file (`--- a/PATH`, `+++ b/PATH`, 3 lines of context).
    pub unified_diff: String,
}

/// Why an edit is not shown: one sentence the model can act on when asked again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditRefusal {
    #[error("before and after are the same")]
    Unchanged,
    #[error("the 'before' is empty: quote the lines of the kernel that the edit replaces")]
    EmptyBefore,
    #[error("the kernel's file {path} is not among the source files")]
    KernelFileMissing { path: String },
    #[error("the 'before' lines are not in {path}")]
    NotInFile { path: String },
    #[error("the 'before' lines occur {count} times in kernel {kernel}; quote enough lines that they occur once")]
    Ambiguous { kernel: String, count: usize },
    #[error("the edit changes a line outside kernel {kernel} (lines {start_line}-{end_line}){}", if *launch_sites_allowed { " and its launch sites" } else { "" })]
    OutsideKernel { kernel: String, start_line: usize, end_line: usize, line: usize, launch_sites_allowed: bool },
    #[error("after the edit the kernel does not parse (error near line {line})")]
    DoesNotParse { line: usize },
    #[error("'{name}' is neither declared in the kernel nor in the edit")]
    UnknownIdentifier { name: String },
    #[error("the edit removes the declaration of '{name}', which the code still uses")]
    RemovesDeclaration { name: String },
    #[error("the edit declares '{name}' a second time; change its declaration instead")]
    Redeclares { name: String },
    #[error("after the edit the kernel no longer uses its parameter '{name}': a faster kernel must compute the same result")]
    DropsParameter { name: String },
    #[error("the edit changes {}, but this fix must change {}", describe(changed, " and "), describe(allowed, " or "))]
    WrongKind { changed: Vec<EditKind>, allowed: Vec<EditKind> },
}

fn describe(kinds: &[EditKind], joiner: &str) -> String {
    if kinds.is_empty() {
        return "nothing keet recognises".to_string();
    }
    kinds.iter().map(|kind| kind.describe()).collect::<Vec<_>>().join(joiner)
}

/// Where the `before` lines were found: file index and 0-based first and last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    file: usize,
    first: usize,
    last: usize,
}

/// Checks `edit` against `kernel` (as [`crate::locate`] found it in `files`) and the kinds of
/// change the finding allows; see the module doc for the checks, made in that order.
pub fn check_edit(files: &[CodeFile], kernel: &KernelCode, edit: &Edit, allowed: &[EditKind]) -> Result<CheckedEdit, EditRefusal> {
    let before = comparable_lines(&edit.before);
    if before == comparable_lines(&edit.after) {
        return Err(EditRefusal::Unchanged);
    }
    if before.is_empty() {
        return Err(EditRefusal::EmptyBefore);
    }
    let kernel_file = kernel_file_index(files, kernel)?;
    let found = find_in_region(files, kernel, kernel_file, &before, allowed)?;
    let file = &files[found.file];
    let language = Language::of_path(&file.path).unwrap_or(kernel.language);
    let lines: Vec<&str> = file.text.split_inclusive('\n').collect();
    let after_lines = reindent(&edit.after, lines.get(found.first).copied().unwrap_or(""));
    let new_text = apply(&lines, found, &after_lines);
    let old_tree = parse::parse(language, &file.text).ok_or(EditRefusal::DoesNotParse { line: found.first + 1 })?;
    let new_tree = parse::parse(language, &new_text).ok_or(EditRefusal::DoesNotParse { line: found.first + 1 })?;
    check_parses(&old_tree, &new_tree, found, after_lines.len())?;
    let new_bytes = edited_bytes(&new_text, found.first, after_lines.len());
    check_identifiers(files, found.file, language, (&old_tree, &file.text), (&new_tree, &new_text), new_bytes.clone())?;
    let old_bytes = parse::line_bytes(&file.text, found.first + 1, found.last + 1);
    check_declarations(language, (&old_tree, &file.text, old_bytes.clone()), (&new_tree, &new_text, new_bytes.clone()))?;
    check_parameters_used(language, (&old_tree, &file.text, old_bytes.start), (&new_tree, &new_text, new_bytes.start))?;
    let old_side =
        Side { root: old_tree.root_node(), text: &file.text, bytes: parse::line_bytes(&file.text, found.first + 1, found.last + 1) };
    let new_side = Side { root: new_tree.root_node(), text: &new_text, bytes: new_bytes.clone() };
    let mut shared = kernel_shared_names(kernel);
    shared.extend(classify::shared_names(language, new_tree.root_node(), &new_text, new_bytes));
    let kinds = classify::classify(language, &old_side, &new_side, &shared, &block_names(kernel));
    if !kinds.iter().any(|kind| allowed.contains(kind)) {
        return Err(EditRefusal::WrongKind { changed: kinds, allowed: allowed.to_vec() });
    }
    let unified_diff = similar::TextDiff::from_lines(file.text.as_str(), new_text.as_str())
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{}", file.path.trim_start_matches('/')), &format!("b/{}", file.path.trim_start_matches('/')))
        .to_string();
    let before_lines = lines[found.first..=found.last].iter().map(|line| line.trim_end_matches(['\n', '\r']).to_string()).collect();
    Ok(CheckedEdit { path: file.path.clone(), start_line: found.first + 1, before_lines, after_lines, kinds, unified_diff })
}

/// The lines of a snippet as compared: whitespace squashed, blank lines dropped.
fn comparable_lines(snippet: &str) -> Vec<String> {
    snippet.lines().map(squash).filter(|line| !line.is_empty()).collect()
}

fn kernel_file_index(files: &[CodeFile], kernel: &KernelCode) -> Result<usize, EditRefusal> {
    if files.get(kernel.file).is_some_and(|file| file.path == kernel.path) {
        return Ok(kernel.file);
    }
    files.iter().position(|file| file.path == kernel.path).ok_or_else(|| EditRefusal::KernelFileMissing { path: kernel.path.clone() })
}

/// Finds the `before` lines in the kernel (and its launch sites when a launch-shape kind is
/// allowed): exactly one place inside, or the refusal that says why not.
fn find_in_region(
    files: &[CodeFile],
    kernel: &KernelCode,
    kernel_file: usize,
    before: &[String],
    allowed: &[EditKind],
) -> Result<Found, EditRefusal> {
    let launches_allowed = allowed.iter().any(|kind| kind.is_launch_shape());
    let mut region: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    region.entry(kernel_file).or_default().extend(kernel.start_line..=kernel.end_line);
    if launches_allowed {
        for site in &kernel.launch_sites {
            let file = files.iter().position(|file| file.path == site.path).unwrap_or(site.file);
            let lines = region.entry(file).or_default();
            lines.extend(site.line..=site.end_line);
            lines.extend(site.config_lines.iter().copied());
        }
    }
    let mut inside = Vec::new();
    let mut outside = Vec::new();
    for (&file, allowed_lines) in &region {
        let Some(code) = files.get(file) else { continue };
        let lines: Vec<&str> = code.text.split_inclusive('\n').collect();
        for (first, last) in find_lines(&lines, before) {
            let within = (first..=last).all(|line| lines[line].trim().is_empty() || allowed_lines.contains(&(line + 1)));
            let place = Found { file, first, last };
            if within {
                inside.push(place);
            } else {
                outside.push(place);
            }
        }
    }
    match (inside.as_slice(), outside.first()) {
        ([only], _) => Ok(*only),
        ([], Some(place)) => Err(EditRefusal::OutsideKernel {
            kernel: kernel.name.clone(),
            start_line: kernel.start_line,
            end_line: kernel.end_line,
            line: place.first + 1,
            launch_sites_allowed: launches_allowed,
        }),
        ([], None) => Err(EditRefusal::NotInFile { path: files[kernel_file].path.clone() }),
        (several, _) => Err(EditRefusal::Ambiguous { kernel: kernel.name.clone(), count: several.len() }),
    }
}

/// Every place (0-based first and last line) where the non-blank `wanted` lines follow each other
/// among the non-blank lines of the file, compared with whitespace squashed.
fn find_lines(lines: &[&str], wanted: &[String]) -> Vec<(usize, usize)> {
    let non_blank: Vec<(usize, String)> =
        lines.iter().enumerate().map(|(index, line)| (index, squash(line))).filter(|(_, line)| !line.is_empty()).collect();
    if wanted.is_empty() || wanted.len() > non_blank.len() {
        return Vec::new();
    }
    (0..=non_blank.len() - wanted.len())
        .filter(|&start| wanted.iter().enumerate().all(|(offset, line)| &non_blank[start + offset].1 == line))
        .map(|start| (non_blank[start].0, non_blank[start + wanted.len() - 1].0))
        .collect()
}

/// The `after` lines indented to fit the file: the first non-blank line gets the indentation of
/// the first replaced line, the others keep their indentation relative to it.
fn reindent(after: &str, first_replaced: &str) -> Vec<String> {
    let raw: Vec<&str> = after.lines().collect();
    let first = raw.iter().position(|line| !line.trim().is_empty());
    let last = raw.iter().rposition(|line| !line.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else { return Vec::new() };
    let kept = &raw[first..=last];
    let width = |line: &str| line.chars().take_while(|c| c.is_whitespace()).map(|c| if c == '\t' { 4 } else { 1 }).sum::<usize>();
    let base = width(kept[0]) as isize;
    let target: String = first_replaced.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
    kept.iter()
        .map(|line| {
            if line.trim().is_empty() {
                return String::new();
            }
            let shift = width(line) as isize - base;
            let mut indent = target.clone();
            if shift > 0 {
                indent.push_str(&" ".repeat(shift as usize));
            } else {
                for _ in 0..shift.unsigned_abs() {
                    indent.pop();
                }
            }
            format!("{indent}{}", line.trim())
        })
        .collect()
}

/// The file's text with the found lines replaced by `after`.
fn apply(lines: &[&str], found: Found, after: &[String]) -> String {
    let last_line = lines.get(found.last).copied().unwrap_or("");
    let ending = if last_line.ends_with("\r\n") { "\r\n" } else { "\n" };
    let mut text: String = lines[..found.first].concat();
    for (index, line) in after.iter().enumerate() {
        text.push_str(line);
        let final_line = index + 1 == after.len();
        if !final_line || last_line.ends_with('\n') {
            text.push_str(ending);
        }
    }
    text.push_str(&lines[found.last + 1..].concat());
    text
}

/// The bytes of the new lines in the edited text (an empty range where lines were deleted).
fn edited_bytes(new_text: &str, first: usize, count: usize) -> std::ops::Range<usize> {
    if count == 0 {
        let at = parse::line_bytes(new_text, first + 1, first + 1).start;
        return at..at;
    }
    parse::line_bytes(new_text, first + 1, first + count)
}

/// Refuses an edit that adds ERROR or MISSING nodes, naming the first new one's line.
fn check_parses(old: &Tree, new: &Tree, found: Found, after_count: usize) -> Result<(), EditRefusal> {
    let old_errors = parse::error_lines(old);
    let new_errors = parse::error_lines(new);
    if new_errors.len() <= old_errors.len() {
        return Ok(());
    }
    let shift = after_count as isize - (found.last + 1 - found.first) as isize;
    let moved: Vec<usize> =
        old_errors.iter().map(|&line| if line > found.last + 1 { (line as isize + shift).max(1) as usize } else { line }).collect();
    let line = new_errors.iter().find(|line| !moved.contains(line)).or(new_errors.first()).copied().unwrap_or(found.first + 1);
    Err(EditRefusal::DoesNotParse { line })
}

/// Names any code may use without declaring them: C++/Python keywords-as-identifiers, CUDA
/// built-in variables and functions, common math and Python built-ins.
const BUILTINS: &[&str] = &[
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "min",
    "max",
    "abs",
    "sqrt",
    "sqrtf",
    "rsqrt",
    "rsqrtf",
    "exp",
    "expf",
    "exp2f",
    "log",
    "logf",
    "log2f",
    "sin",
    "sinf",
    "cos",
    "cosf",
    "tanh",
    "tanhf",
    "pow",
    "powf",
    "fabs",
    "fabsf",
    "fma",
    "fmaf",
    "floor",
    "floorf",
    "ceil",
    "ceilf",
    "fmin",
    "fminf",
    "fmax",
    "fmaxf",
    "erf",
    "erff",
    "printf",
    "assert",
    "sizeof",
    "nullptr",
    "NULL",
    "true",
    "false",
    "this",
    "INFINITY",
    "NAN",
    "FLT_MAX",
    "FLT_MIN",
    "DBL_MAX",
    "INT_MAX",
    "INT_MIN",
    "UINT_MAX",
    "make_float2",
    "make_float4",
    "make_int2",
    "make_int4",
    "make_uint4",
    "make_double2",
    "reinterpret_cast",
    "static_cast",
    "const_cast",
    "half",
    "nvcuda",
    "wmma",
    "cg",
    "cooperative_groups",
    "std",
    "range",
    "len",
    "int",
    "float",
    "bool",
    "print",
    "True",
    "False",
    "None",
    "tuple",
    "list",
    "zip",
    "enumerate",
    "isinstance",
    "round",
    "sum",
    "any",
    "all",
    "tl",
    "triton",
    "cuda",
    "numba",
    "np",
    "math",
    "self",
];

/// Refuses new lines that use a name neither in the sources nor declared by the edit itself.
fn check_identifiers(
    files: &[CodeFile],
    file: usize,
    language: Language,
    old: (&Tree, &str),
    new: (&Tree, &str),
    new_bytes: std::ops::Range<usize>,
) -> Result<(), EditRefusal> {
    let (new_tree, new_text) = new;
    let mut used = Vec::new();
    let mut declared = BTreeSet::new();
    parse::walk_range(new_tree.root_node(), new_bytes.clone(), |node| {
        if node.kind() != "identifier" || !new_bytes.contains(&node.start_byte()) || not_checked(node, language) {
            return;
        }
        let name = text_of(node, new_text).to_string();
        if is_declaration(node, language) {
            declared.insert(name);
        } else {
            used.push(name);
        }
    });
    let known = names_in_tree(old.0, old.1);
    let unknown = used.into_iter().find(|name| {
        !(known.contains(name.as_str())
            || declared.contains(name)
            || BUILTINS.contains(&name.as_str())
            || crate::classify::WIDE_TYPES.contains(&name.as_str())
            || name.starts_with("__")
            || name.starts_with("atomic")
            || files.iter().enumerate().any(|(index, code)| index != file && contains_word(&code.text, name)))
    });
    match unknown {
        Some(name) => Err(EditRefusal::UnknownIdentifier { name }),
        None => Ok(()),
    }
}

/// Every identifier in `bytes` of a tree, with whether it is declared there.
fn identifiers_in(language: Language, tree: &Tree, text: &str, bytes: std::ops::Range<usize>) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    parse::walk_range(tree.root_node(), bytes.clone(), |node| {
        if node.kind() == "identifier" && bytes.contains(&node.start_byte()) && !not_checked(node, language) {
            out.push((text_of(node, text).to_string(), is_declaration(node, language)));
        }
    });
    out
}

/// The bytes of the function around `byte` (the whole text outside any function: a launch site at
/// file scope).
fn enclosing_function(tree: &Tree, byte: usize, len: usize) -> std::ops::Range<usize> {
    let mut node = tree.root_node().descendant_for_byte_range(byte, byte);
    while let Some(current) = node {
        if current.kind() == "function_definition" {
            return current.start_byte()..current.end_byte();
        }
        node = current.parent();
    }
    0..len
}

/// The parameters of the function around `byte` that its body uses, and the names its body uses.
fn parameters_and_uses(language: Language, tree: &Tree, text: &str, byte: usize) -> (Vec<String>, BTreeSet<String>) {
    let function = enclosing_function(tree, byte, text.len());
    if function == (0..text.len()) {
        return (Vec::new(), BTreeSet::new());
    }
    let mut parameters = Vec::new();
    let mut uses = BTreeSet::new();
    parse::walk_range(tree.root_node(), function.clone(), |node| {
        if node.kind() != "identifier" || !function.contains(&node.start_byte()) || not_checked(node, language) {
            return;
        }
        let in_parameters =
            std::iter::successors(node.parent(), |n| n.parent()).take(6).any(|n| n.kind() == "parameter_list" || n.kind() == "parameters");
        let name = text_of(node, text).to_string();
        if in_parameters && is_declaration(node, language) {
            parameters.push(name);
        } else if !in_parameters {
            uses.insert(name);
        }
    });
    (parameters, uses)
}

/// Refuses an edit after which the kernel no longer uses a parameter it used: reading `d_out`
/// where it read `d_in` computes something else, however fast.
fn check_parameters_used(language: Language, old: (&Tree, &str, usize), new: (&Tree, &str, usize)) -> Result<(), EditRefusal> {
    let (old_parameters, old_uses) = parameters_and_uses(language, old.0, old.1, old.2);
    let (_, new_uses) = parameters_and_uses(language, new.0, new.1, new.2);
    match old_parameters.into_iter().find(|p| old_uses.contains(p) && !new_uses.contains(p)) {
        Some(name) => Err(EditRefusal::DropsParameter { name }),
        None => Ok(()),
    }
}

/// Refuses an edit that drops a declaration the rest of its function still uses, or declares again
/// a name the function already declares (two `__shared__` arrays of one name do not compile)., or declares again a
/// name the file already declares (two `__shared__` arrays of one name do not compile).
fn check_declarations(
    language: Language,
    old: (&Tree, &str, std::ops::Range<usize>),
    new: (&Tree, &str, std::ops::Range<usize>),
) -> Result<(), EditRefusal> {
    let (old_tree, old_text, old_bytes) = old;
    let old_bytes_start = old_bytes.start;
    let (new_tree, new_text, new_bytes) = new;
    let removed = identifiers_in(language, old_tree, old_text, old_bytes);
    let added = identifiers_in(language, new_tree, new_text, new_bytes.clone());
    let everywhere_new = identifiers_in(language, new_tree, new_text, enclosing_function(new_tree, new_bytes.start, new_text.len()));
    let declared_count = |ids: &[(String, bool)], name: &str| ids.iter().filter(|(n, declared)| *declared && n == name).count();
    for (name, _) in removed.iter().filter(|(_, declared)| *declared) {
        let redeclared = declared_count(&added, name) > 0;
        let still_used = everywhere_new.iter().any(|(n, declared)| !declared && n == name);
        if !redeclared && still_used && declared_count(&everywhere_new, name) == 0 {
            return Err(EditRefusal::RemovesDeclaration { name: name.clone() });
        }
    }
    let everywhere_old = identifiers_in(language, old_tree, old_text, enclosing_function(old_tree, old_bytes_start, old_text.len()));
    for (name, _) in added.iter().filter(|(_, declared)| *declared) {
        let before = declared_count(&everywhere_old, name);
        if before > 0 && declared_count(&everywhere_new, name) > before {
            return Err(EditRefusal::Redeclares { name: name.clone() });
        }
    }
    Ok(())
}

/// Identifiers whose existence is not this check's business: qualified names, member names,
/// keyword-argument names.
fn not_checked(node: Node, language: Language) -> bool {
    let Some(parent) = node.parent() else { return false };
    let is_field = |field: &str| parent.child_by_field_name(field).is_some_and(|child| child.id() == node.id());
    match language {
        Language::Cuda => parent.kind() == "qualified_identifier" || parent.kind().starts_with("preproc") && !is_field("name"),
        Language::Python => {
            (parent.kind() == "attribute" && is_field("attribute")) || (parent.kind() == "keyword_argument" && is_field("name"))
        }
    }
}

/// Whether an identifier is being declared (a variable, parameter, macro or loop target).
fn is_declaration(node: Node, language: Language) -> bool {
    let mut child = node;
    for _ in 0..8 {
        let Some(parent) = child.parent() else { return false };
        let is_field = |field: &str| parent.child_by_field_name(field).is_some_and(|found| found.id() == child.id());
        match (language, parent.kind()) {
            (Language::Cuda, "init_declarator" | "array_declarator" | "pointer_declarator" | "reference_declarator")
                if is_field("declarator") =>
            {
                child = parent
            }
            (Language::Cuda, "declaration" | "parameter_declaration" | "for_range_loop") => return is_field("declarator"),
            (Language::Cuda, "preproc_def" | "preproc_function_def") => return is_field("name"),
            (Language::Cuda, "preproc_params") => return true,
            (Language::Python, "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list_splat_pattern") => child = parent,
            (Language::Python, "assignment" | "for_statement" | "for_in_clause") => return is_field("left"),
            (Language::Python, "named_expression") => return is_field("name"),
            (Language::Python, "parameters" | "lambda_parameters" | "default_parameter" | "typed_parameter" | "as_pattern_target") => {
                return true
            }
            _ => return false,
        }
    }
    false
}

/// Every name-like token in a tree (identifiers, types, fields, namespaces).
fn names_in_tree<'a>(tree: &'a Tree, text: &'a str) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    parse::walk(tree.root_node(), |node| {
        if node.kind().ends_with("identifier") {
            names.insert(text_of(node, text));
        }
        true
    });
    names
}

/// Whether `word` occurs in `text` as a whole identifier.
fn contains_word(text: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = text[at + word.len()..].chars().next().is_none_or(|c| !is_ident(c));
        before && after
    })
}

/// The `__shared__` array names declared in the kernel.
fn kernel_shared_names(kernel: &KernelCode) -> BTreeSet<String> {
    match parse::parse(kernel.language, &kernel.text) {
        Some(tree) => classify::shared_names(kernel.language, tree.root_node(), &kernel.text, 0..kernel.text.len()),
        None => BTreeSet::new(),
    }
}

/// The variables used in the kernel's launches' block expressions.
fn block_names(kernel: &KernelCode) -> BTreeSet<String> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    kernel
        .launch_sites
        .iter()
        .filter_map(|site| site.block.as_deref())
        .flat_map(|block| block.split(|c: char| !is_ident(c)).filter(|word| !word.is_empty()).map(str::to_string).collect::<Vec<_>>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate;

    fn tiles() -> Vec<CodeFile> {
        vec![CodeFile { path: "tests/fixtures/tiles.cu".into(), text: include_str!("../tests/fixtures/tiles.cu").into() }]
    }

    fn check(kernel: &str, before: &str, after: &str, allowed: &[EditKind]) -> Result<CheckedEdit, EditRefusal> {
        let files = tiles();
        let kernel = locate(&files, kernel).expect("fixture kernel");
        check_edit(&files, &kernel, &Edit { before: before.into(), after: after.into() }, allowed)
    }

    const BANKS: &[EditKind] = &[EditKind::SharedDeclaration, EditKind::SharedIndex];

    #[test]
    fn padding_the_shared_tile_is_a_shared_declaration_edit() {
        let checked =
            check("setColReadCol(int*)", "__shared__ int tile[BDIMX][BDIMY];", "__shared__ int tile[BDIMX][BDIMY + 1];", BANKS).unwrap();
        assert_eq!(checked.kinds, vec![EditKind::SharedDeclaration]);
        assert_eq!((checked.path.as_str(), checked.start_line), ("tests/fixtures/tiles.cu", 19));
        assert_eq!(checked.before_lines, vec!["    __shared__ int tile[BDIMX][BDIMY];"]);
        assert_eq!(checked.after_lines, vec!["    __shared__ int tile[BDIMX][BDIMY + 1];"]);
        let expected = "\
--- a/tests/fixtures/tiles.cu
+++ b/tests/fixtures/tiles.cu
@@ -16,7 +16,7 @@
 
 __global__ void setColReadCol(int *out)
 {
-    __shared__ int tile[BDIMX][BDIMY];
+    __shared__ int tile[BDIMX][BDIMY + 1];
     unsigned int idx = threadIdx.y * blockDim.x + threadIdx.x;
     tile[threadIdx.x][threadIdx.y] = idx;
     __syncthreads();
";
        assert_eq!(checked.unified_diff, expected);
    }

    #[test]
    fn swapping_a_shared_index_is_a_shared_index_edit_and_indentation_does_not_matter() {
        let before = "unsigned int idx = threadIdx.y * blockDim.x + threadIdx.x;\n\n  tile[threadIdx.x][threadIdx.y]   = idx;";
        let after = "unsigned int idx = threadIdx.y * blockDim.x + threadIdx.x;\ntile[threadIdx.y][threadIdx.x] = idx;";
        let checked = check("setColReadCol", before, after, BANKS).unwrap();
        assert_eq!(checked.kinds, vec![EditKind::SharedIndex]);
        assert_eq!(checked.after_lines[1], "    tile[threadIdx.y][threadIdx.x] = idx;");
    }

    #[test]
    fn an_edit_that_drops_a_used_declaration_or_declares_a_name_again_is_refused() {
        // What the default model proposed for a real column-read kernel: the index line replaced
        // by a second tile declaration.
        let refused = check(
            "setColReadCol",
            "unsigned int idx = threadIdx.y * blockDim.x + threadIdx.x;",
            "__shared__ int tile[BDIMX][BDIMY + 1];",
            BANKS,
        )
        .unwrap_err();
        assert_eq!(refused.to_string(), "the edit removes the declaration of 'idx', which the code still uses");
        let again = check(
            "setColReadCol",
            "tile[threadIdx.x][threadIdx.y] = idx;",
            "__shared__ int tile[BDIMX][BDIMY + 1];\ntile[threadIdx.x][threadIdx.y] = idx;",
            BANKS,
        )
        .unwrap_err();
        assert_eq!(again.to_string(), "the edit declares 'tile' a second time; change its declaration instead");
    }

    #[test]
    fn an_edit_that_reads_another_array_or_adds_a_double_is_refused() {
        // What the default model proposed for a real streaming kernel: read the output where it
        // read the input, through a cast to double.
        let refused = check(
            "scaleDouble",
            "data[i] = sqrt(data[i]) * 2.0;",
            "double *other = reinterpret_cast<double *>(data);\ndata[i] = sqrt(other[i]) * 2.0;",
            &[EditKind::FloatPrecision, EditKind::IndexExpression],
        )
        .unwrap_err();
        assert!(matches!(refused, EditRefusal::WrongKind { .. }), "{refused}");
        let single =
            check("scaleDouble", "data[i] = sqrt(data[i]) * 2.0;", "data[i] = sqrtf(data[i]) * 2.0f;", &[EditKind::FloatPrecision]);
        assert_eq!(single.unwrap().kinds, vec![EditKind::FloatPrecision]);
        let dropped = check(
            "setColReadCol",
            "out[idx] += tile[threadIdx.x][threadIdx.y];",
            "idx += tile[threadIdx.x][threadIdx.y];",
            &[EditKind::Other],
        );
        assert_eq!(
            dropped.unwrap_err().to_string(),
            "after the edit the kernel no longer uses its parameter 'out': a faster kernel must compute the same result"
        );
    }

    #[test]
    fn an_index_offset_is_no_bank_conflict_fix_but_a_swap_or_swizzle_is() {
        let offset = check("setColReadCol", "tile[threadIdx.x][threadIdx.y] = idx;", "tile[threadIdx.x][threadIdx.y + 1] = idx;", BANKS);
        assert!(matches!(offset.unwrap_err(), EditRefusal::WrongKind { .. }));
        let swizzle =
            check("setColReadCol", "tile[threadIdx.x][threadIdx.y] = idx;", "tile[threadIdx.x][threadIdx.y ^ threadIdx.x] = idx;", BANKS);
        assert_eq!(swizzle.unwrap().kinds, vec![EditKind::SharedIndex]);
    }

    #[test]
    fn refusals_say_what_to_fix() {
        let refusal = |before: &str, after: &str| check("setColReadCol", before, after, BANKS).unwrap_err().to_string();
        assert_eq!(refusal("  __syncthreads();", "__syncthreads();  "), "before and after are the same");
        assert_eq!(
            refusal("__shared__ int tile[32][32];", "__shared__ int tile[32][33];"),
            "the 'before' lines are not in tests/fixtures/tiles.cu"
        );
        assert_eq!(refusal("int *d_out;", "int *d_out = nullptr;"), "the edit changes a line outside kernel setColReadCol (lines 17-26)");
        assert_eq!(
            refusal("tile[threadIdx.x][threadIdx.y] = idx;", "tile[threadIdx.x][threadIdx.y + ] = idx;"),
            "after the edit the kernel does not parse (error near line 21)"
        );
        assert_eq!(
            refusal("tile[threadIdx.x][threadIdx.y] = idx;", "tile[tileIdx][threadIdx.y] = idx;"),
            "'tileIdx' is neither declared in the kernel nor in the edit"
        );
        assert_eq!(
            refusal("for (int rep = 0; rep < 4; ++rep) {", "for (int rep = 0; rep < 1; ++rep) {"),
            "the edit changes the loop bound or unrolling, but this fix must change a __shared__ declaration or the index of a __shared__ array"
        );
        assert_eq!(refusal("", "__syncthreads();"), "the 'before' is empty: quote the lines of the kernel that the edit replaces");
    }

    #[test]
    fn names_declared_by_the_edit_are_known() {
        let before = "tile[threadIdx.x][threadIdx.y] = idx;";
        let after = "unsigned int col = threadIdx.y;\ntile[threadIdx.x][col] = idx;";
        // The same index through a new name: known names, though no bank-conflict fix.
        assert_eq!(check("setColReadCol", before, after, &[EditKind::Other]).unwrap().kinds, vec![EditKind::Other]);
    }

    #[test]
    fn float_precision_edits_are_classified() {
        let checked =
            check("scaleDouble", "data[i] = sqrt(data[i]) * 2.0;", "data[i] = sqrtf(data[i]) * 2.0f;", &[EditKind::FloatPrecision])
                .unwrap();
        assert_eq!(checked.kinds, vec![EditKind::FloatPrecision]);
        let types = check(
            "scaleDouble",
            "__global__ void scaleDouble(double *data, int n)",
            "__global__ void scaleDouble(float *data, int n)",
            &[EditKind::FloatPrecision],
        );
        assert_eq!(types.unwrap().kinds, vec![EditKind::FloatPrecision]);
    }

    #[test]
    fn branch_and_loop_edits_are_classified() {
        let branch = check("scaleDouble", "if (i < n) {", "if (i < n && i >= 0) {", &[EditKind::BranchCondition]).unwrap();
        assert_eq!(branch.kinds, vec![EditKind::BranchCondition]);
        let unroll = check(
            "setColReadCol",
            "for (int rep = 0; rep < 4; ++rep) {",
            "#pragma unroll\nfor (int rep = 0; rep < 4; ++rep) {",
            &[EditKind::LoopStructure],
        );
        assert_eq!(unroll.unwrap().kinds, vec![EditKind::LoopStructure]);
    }

    #[test]
    fn launch_shape_edits_are_allowed_only_for_launch_kinds() {
        let before = "dim3 block(BDIMX, BDIMY);";
        let after = "dim3 block(BDIMX, 8);";
        let checked = check("setColReadCol", before, after, &[EditKind::BlockShape]).unwrap();
        assert_eq!((checked.start_line, checked.kinds.clone()), (43, vec![EditKind::BlockShape]));
        let grid =
            check("setColReadCol", "dim3 grid(1, 1);", "dim3 grid(2, 1);", &[EditKind::GridComputation, EditKind::BlockShape]).unwrap();
        assert_eq!(grid.kinds, vec![EditKind::GridComputation]);
        let refused = check("setColReadCol", before, after, BANKS).unwrap_err();
        assert!(matches!(refused, EditRefusal::OutsideKernel { line: 43, .. }));
        let launch = check(
            "scaleDouble",
            "scaleDouble<<<(n + 255) / 256, 256>>>(d_data, n);",
            "scaleDouble<<<(n + 127) / 128, 128>>>(d_data, n);",
            &[EditKind::BlockShape],
        );
        assert_eq!(launch.unwrap().kinds, vec![EditKind::GridComputation, EditKind::BlockShape]);
    }

    #[test]
    fn lines_that_occur_twice_in_the_kernel_are_ambiguous() {
        let files = vec![CodeFile { path: "gemm.cuh".into(), text: include_str!("../tests/fixtures/gemm.cuh").into() }];
        let kernel = locate(&files, "gemm").unwrap();
        let edit = Edit { before: "__syncthreads();".into(), after: "__syncwarp();".into() };
        let refused = check_edit(&files, &kernel, &edit, &[EditKind::Other]).unwrap_err();
        assert_eq!(refused.to_string(), "the 'before' lines occur 2 times in kernel gemm; quote enough lines that they occur once");
    }

    #[test]
    fn python_kernels_are_checked_too() {
        let files = vec![CodeFile { path: "softmax.py".into(), text: include_str!("../tests/fixtures/softmax_triton.py").into() }];
        let kernel = locate(&files, "softmax_kernel").unwrap();
        let edit = Edit { before: "mask = offs < n_cols".into(), after: "mask = (offs < n_cols) & (row >= 0)".into() };
        let checked = check_edit(&files, &kernel, &edit, &[EditKind::Other]).unwrap();
        assert_eq!(checked.after_lines, vec!["    mask = (offs < n_cols) & (row >= 0)"]);
        let unknown = Edit { before: "num = tl.exp(x)".into(), after: "num = tl.exp(x - bias)".into() };
        assert_eq!(
            check_edit(&files, &kernel, &unknown, &[EditKind::Other]).unwrap_err(),
            EditRefusal::UnknownIdentifier { name: "bias".into() }
        );
    }
}
