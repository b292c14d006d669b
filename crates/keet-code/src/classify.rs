//! What an edit changed: the kinds of change ([`EditKind`]) read off the syntax trees of the edited
//! lines before and after, by comparing which nodes of each family (subscripts, `__shared__`
//! declarations, loop headers, conditions, ...) the two sides hold.

use crate::parse::{self, base_identifier, squash, text_of};
use crate::Language;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use tree_sitter::Node;

/// A kind of change to a kernel. Names are kebab-case, as in `expert/edits.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EditKind {
    /// A subscript's index changed (an array other than a `__shared__` one).
    IndexExpression,
    /// A `__shared__` declaration's type or size changed (padding `[32][33]`).
    SharedDeclaration,
    /// A subscript of a `__shared__` array changed (swizzling, transposed access).
    SharedIndex,
    /// `__launch_bounds__` added or changed.
    LaunchBounds,
    /// A launch's grid expression, or a dim3 variable feeding it.
    GridComputation,
    /// A launch's block expression, or a dim3 variable feeding it.
    BlockShape,
    /// `double` → `float`, literal suffix `f`, `sqrt` → `sqrtf`, ...
    FloatPrecision,
    /// A loop's header (bounds, step) or an unrolling pragma.
    LoopStructure,
    /// An `if` or ternary condition.
    BranchCondition,
    /// Atomics replaced or moved (to a shared or warp-level reduction, `__shfl_*_sync`).
    AtomicScope,
    /// Vector types (float4, int4), `__ldg`, casts to wider types.
    MemoryLoadWidth,
    /// Fewer live locals, a lower `#pragma unroll` count, launch bounds.
    RegisterPressure,
    /// WMMA/MMA (tensor-core) use.
    TensorCore,
    /// A change none of the other kinds describes.
    Other,
}

impl EditKind {
    /// Every kind, in declaration order.
    pub const ALL: [EditKind; 14] = [
        EditKind::IndexExpression,
        EditKind::SharedDeclaration,
        EditKind::SharedIndex,
        EditKind::LaunchBounds,
        EditKind::GridComputation,
        EditKind::BlockShape,
        EditKind::FloatPrecision,
        EditKind::LoopStructure,
        EditKind::BranchCondition,
        EditKind::AtomicScope,
        EditKind::MemoryLoadWidth,
        EditKind::RegisterPressure,
        EditKind::TensorCore,
        EditKind::Other,
    ];

    /// Kinds that change a launch rather than the kernel (their edits may be at launch sites).
    pub fn is_launch_shape(self) -> bool {
        matches!(self, EditKind::GridComputation | EditKind::BlockShape)
    }

    /// What the kind changes, as the object of "the edit changes ...".
    pub fn describe(self) -> &'static str {
        match self {
            EditKind::IndexExpression => "an array index",
            EditKind::SharedDeclaration => "a __shared__ declaration",
            EditKind::SharedIndex => "the index of a __shared__ array",
            EditKind::LaunchBounds => "__launch_bounds__",
            EditKind::GridComputation => "the launch's grid",
            EditKind::BlockShape => "the launch's block shape",
            EditKind::FloatPrecision => "floating-point precision (types, literal suffixes, math functions)",
            EditKind::LoopStructure => "the loop bound or unrolling",
            EditKind::BranchCondition => "a branch condition",
            EditKind::AtomicScope => "where atomics happen (shared or warp-level reduction)",
            EditKind::MemoryLoadWidth => "the width of memory loads (vector types, __ldg)",
            EditKind::RegisterPressure => "register use (live locals, unroll count, launch bounds)",
            EditKind::TensorCore => "tensor-core (wmma/mma) use",
            EditKind::Other => "code that fits none of keet's edit kinds",
        }
    }
}

impl std::fmt::Display for EditKind {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = serde_plain_name(*self);
        formatter.write_str(&name)
    }
}

fn serde_plain_name(kind: EditKind) -> String {
    let debug = format!("{kind:?}");
    let mut name = String::new();
    for (index, character) in debug.chars().enumerate() {
        if character.is_uppercase() && index > 0 {
            name.push('-');
        }
        name.push(character.to_ascii_lowercase());
    }
    name
}

/// One entry of `expert/edits.toml`: an edit kind that fixes a finding category, why, and where
/// NVIDIA documents it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertEdit {
    pub kind: EditKind,
    pub why: String,
    pub source: String,
    /// A before/after of the kind on generic code (no user's), shown to the model as a pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

/// The nodes of each family found in a range of a tree: the multisets compared between sides.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Features(BTreeMap<&'static str, Vec<String>>);

impl Features {
    fn add(&mut self, family: &'static str, value: impl Into<String>) {
        self.0.entry(family).or_default().push(value.into());
    }

    fn get(&self, family: &str) -> Vec<String> {
        let mut values = self.0.get(family).cloned().unwrap_or_default();
        values.sort();
        values
    }
}

/// The side of an edit that classification reads: a tree, its text and the edited bytes.
pub(crate) struct Side<'a> {
    pub root: Node<'a>,
    pub text: &'a str,
    pub bytes: Range<usize>,
}

/// The kinds of change between `before` and `after` (sorted, without duplicates; [`EditKind::Other`]
/// when the text changed but no family did). `shared` names the kernel's `__shared__` arrays and
/// `block_names` the variables used as a launch's block.
pub(crate) fn classify(
    language: Language,
    before: &Side,
    after: &Side,
    shared: &BTreeSet<String>,
    block_names: &BTreeSet<String>,
) -> Vec<EditKind> {
    let old = features(language, before, shared);
    let new = features(language, after, shared);
    let mut kinds = BTreeSet::new();
    let changed = |family: &str| old.get(family) != new.get(family);
    let simple: &[(&str, EditKind)] = &[
        ("subscript", EditKind::IndexExpression),
        ("shared-declaration", EditKind::SharedDeclaration),
        ("launch-bounds", EditKind::LaunchBounds),
        ("launch-bounds", EditKind::RegisterPressure),
        ("launch-grid", EditKind::GridComputation),
        ("launch-other", EditKind::GridComputation),
        ("launch-block", EditKind::BlockShape),
        ("loop-header", EditKind::LoopStructure),
        ("unroll", EditKind::LoopStructure),
        ("condition", EditKind::BranchCondition),
        ("atomics", EditKind::AtomicScope),
        ("wide-loads", EditKind::MemoryLoadWidth),
        ("tensor-core", EditKind::TensorCore),
    ];
    for (family, kind) in simple {
        if changed(family) {
            kinds.insert(*kind);
        }
    }
    if changed("shared-subscript") && reorders_or_swizzles(&old.get("shared-subscript"), &new.get("shared-subscript")) {
        kinds.insert(EditKind::SharedIndex);
    }
    if precision_lowered(&old, &new) {
        kinds.insert(EditKind::FloatPrecision);
    }
    let (old_dim3, new_dim3) = (old.get("dim3"), new.get("dim3"));
    for entry in old_dim3.iter().filter(|entry| !new_dim3.contains(entry)).chain(new_dim3.iter().filter(|entry| !old_dim3.contains(entry)))
    {
        let name = entry.split('=').next().unwrap_or("");
        kinds.insert(if block_names.contains(name) { EditKind::BlockShape } else { EditKind::GridComputation });
    }
    if unroll_lowered(&old.get("unroll"), &new.get("unroll")) || new.get("local").len() < old.get("local").len() {
        kinds.insert(EditKind::RegisterPressure);
    }
    let old_text = squash(before.text.get(before.bytes.clone()).unwrap_or(""));
    let new_text = squash(after.text.get(after.bytes.clone()).unwrap_or(""));
    if kinds.is_empty() && old_text != new_text {
        kinds.insert(EditKind::Other);
    }
    kinds.into_iter().collect()
}

/// Whether a `__shared__` array's indices were swapped (`[x][y]` to `[y][x]`) or swizzled (`^`, `%`):
/// the index changes that move a warp's accesses to other banks. An offset (`[y + 1]`) is not one:
/// it moves the access, not the banks, and runs past the array's end.
fn reorders_or_swizzles(old: &[String], new: &[String]) -> bool {
    let parts = |indices: &str| -> Vec<String> {
        let mut all: Vec<String> = indices.split(['[', ']']).map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect();
        all.sort();
        all
    };
    let old_parts: Vec<Vec<String>> = old.iter().map(|o| parts(o)).collect();
    new.iter().filter(|n| !old.contains(n)).any(|n| n.contains('^') || n.contains('%') || old_parts.contains(&parts(n)))
}

/// Whether the edit computes in a lower precision: fewer `double`s (or more single/half types
/// without more `double`s), more `f`-suffixed literals in place of double ones, or single-precision
/// math functions in place of double ones. An edit that adds a `double` is no precision fix.
fn precision_lowered(old: &Features, new: &Features) -> bool {
    let count =
        |features: &Features, family: &str, wanted: &dyn Fn(&str) -> bool| features.get(family).iter().filter(|v| wanted(v)).count();
    let is_double = |v: &str| v == "double" || v == "double2";
    let is_narrow = |v: &str| !is_double(v);
    let doubles = (count(old, "float-types", &is_double), count(new, "float-types", &is_double));
    let narrow = (count(old, "float-types", &is_narrow), count(new, "float-types", &is_narrow));
    let single_literals = (count(old, "float-literals", &|v| v == "f"), count(new, "float-literals", &|v| v == "f"));
    let double_literals = (count(old, "float-literals", &|v| v == "d"), count(new, "float-literals", &|v| v == "d"));
    let single_math = |v: &str| v.ends_with('f') || v.starts_with("__");
    let math = (count(old, "math-calls", &single_math), count(new, "math-calls", &single_math));
    if doubles.1 > doubles.0 {
        return false;
    }
    doubles.1 < doubles.0
        || narrow.1 > narrow.0
        || (single_literals.1 > single_literals.0 && double_literals.1 < double_literals.0)
        || math.1 > math.0
}

/// Whether the unroll pragmas ask for less unrolling after the edit (a lower count, or a count
/// where there was full unrolling).
fn unroll_lowered(old: &[String], new: &[String]) -> bool {
    let count = |pragma: &String| pragma.split_whitespace().nth(1).and_then(|word| word.parse::<u64>().ok()).unwrap_or(u64::MAX);
    let old_total: u64 = old.iter().map(count).fold(0, u64::saturating_add);
    let new_total: u64 = new.iter().map(count).fold(0, u64::saturating_add);
    !new.is_empty() && new_total < old_total
}

/// The features of the nodes that start inside the side's byte range.
fn features(language: Language, side: &Side, shared: &BTreeSet<String>) -> Features {
    let mut found = Features::default();
    let range = side.bytes.clone();
    parse::walk_range(side.root, range.clone(), |node| {
        if range.contains(&node.start_byte()) {
            match language {
                Language::Cuda => cuda_features(node, side.text, shared, &mut found),
                Language::Python => python_features(node, side.text, shared, &mut found),
            }
        }
    });
    found
}

/// Math functions whose precision variant an edit may swap (`sqrt` ↔ `sqrtf`, `__expf`).
const MATH_FUNCTIONS: &[&str] = &[
    "sqrt",
    "sqrtf",
    "rsqrt",
    "rsqrtf",
    "exp",
    "expf",
    "__expf",
    "exp2",
    "exp2f",
    "log",
    "logf",
    "__logf",
    "log2",
    "log2f",
    "sin",
    "sinf",
    "__sinf",
    "cos",
    "cosf",
    "__cosf",
    "tan",
    "tanf",
    "tanh",
    "tanhf",
    "pow",
    "powf",
    "__powf",
    "fabs",
    "fabsf",
    "fma",
    "fmaf",
    "__fmaf_rn",
    "floor",
    "floorf",
    "ceil",
    "ceilf",
    "erf",
    "erff",
    "fmin",
    "fminf",
    "fmax",
    "fmaxf",
    "__fdividef",
    "__double2float_rn",
    "__float2half",
    "__half2float",
    "__float2bfloat16",
];
const FLOAT_TYPES: &[&str] = &["double", "float", "half", "__half", "half2", "__half2", "__nv_bfloat16", "__nv_bfloat162", "double2"];
/// Vector types a wider load uses (also names any code may use undeclared).
pub(crate) const WIDE_TYPES: &[&str] = &[
    "float2",
    "float4",
    "int2",
    "int4",
    "uint2",
    "uint4",
    "double2",
    "double4",
    "longlong2",
    "char4",
    "uchar4",
    "short4",
    "half2",
    "__half2",
];
const WIDE_LOADS: &[&str] = &["__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv", "make_float4", "make_int4", "make_float2"];
const TENSOR_CORE: &[&str] =
    &["wmma", "mma_sync", "load_matrix_sync", "store_matrix_sync", "fill_fragment", "fragment", "mma", "ldmatrix", "wgmma"];

fn cuda_features(node: Node, text: &str, shared: &BTreeSet<String>, found: &mut Features) {
    let written = text_of(node, text);
    match node.kind() {
        "subscript_expression" => {
            // The outermost subscript only, whole: swapping `tile[x][y]` to `tile[y][x]` must differ.
            let inner_of_another = node.parent().is_some_and(|parent| {
                parent.kind() == "subscript_expression" && parent.child_by_field_name("argument").is_some_and(|arg| arg.id() == node.id())
            });
            if !inner_of_another {
                let base_node = node.child_by_field_name("argument");
                let base = base_node.map(|array| base_identifier(array, text)).unwrap_or("");
                let family = if shared.contains(base) { "shared-subscript" } else { "subscript" };
                // The indices only: reading another array at the same index is not an index change.
                let indices = match base_node {
                    Some(array) => index_part(array, node, text),
                    None => squash(written),
                };
                found.add(family, indices);
            }
        }
        "declaration" => cuda_declaration(node, text, found),
        "launch_bounds" => found.add("launch-bounds", squash(written)),
        "kernel_call_syntax" => {
            let mut cursor = node.walk();
            for (position, expr) in node.named_children(&mut cursor).enumerate() {
                let family = ["launch-grid", "launch-block"].get(position).copied().unwrap_or("launch-other");
                found.add(family, format!("{position}:{}", squash(text_of(expr, text))));
            }
        }
        "primitive_type" | "type_identifier" => {
            if FLOAT_TYPES.contains(&written) {
                found.add("float-types", written);
            }
            if WIDE_TYPES.contains(&written) {
                found.add("wide-loads", written);
            }
            if TENSOR_CORE.contains(&written) {
                found.add("tensor-core", written);
            }
        }
        "number_literal" => {
            let lower = written.to_ascii_lowercase();
            let floating = !lower.starts_with("0x") && (lower.contains('.') || lower.contains('e') || lower.ends_with('f'));
            if floating {
                found.add("float-literals", if lower.ends_with('f') { "f" } else { "d" });
            }
        }
        "call_expression" => cuda_call(node, text, found),
        "namespace_identifier" if TENSOR_CORE.contains(&written) => found.add("tensor-core", written),
        "string_literal" if written.contains("mma.sync") || written.contains("wgmma") || written.contains("ldmatrix") => {
            found.add("tensor-core", squash(written))
        }
        "for_statement" | "for_range_loop" => {
            let body = node.child_by_field_name("body").map(|body| body.start_byte()).unwrap_or(node.end_byte());
            found.add("loop-header", squash(text.get(node.start_byte()..body).unwrap_or("")));
        }
        "while_statement" | "do_statement" => {
            found.add("loop-header", node.child_by_field_name("condition").map(|cond| squash(text_of(cond, text))).unwrap_or_default());
        }
        "preproc_call" => {
            let argument = node.child_by_field_name("argument").map(|arg| squash(text_of(arg, text))).unwrap_or_default();
            let directive = node.child_by_field_name("directive").map(|dir| text_of(dir, text)).unwrap_or("");
            if directive == "#pragma" && argument.starts_with("unroll") {
                found.add("unroll", argument);
            }
        }
        "if_statement" | "conditional_expression" => {
            found.add("condition", node.child_by_field_name("condition").map(|cond| squash(text_of(cond, text))).unwrap_or_default());
        }
        _ => {}
    }
}

/// The index expressions of a (possibly nested) subscript: `[i][j]` of `tile[i][j]`.
fn index_part(array: Node, subscript: Node, text: &str) -> String {
    let mut innermost = array;
    while innermost.kind() == "subscript_expression" {
        match innermost.child_by_field_name("argument") {
            Some(inner) => innermost = inner,
            None => break,
        }
    }
    squash(text.get(innermost.end_byte()..subscript.end_byte()).unwrap_or(""))
}

fn cuda_declaration(node: Node, text: &str, found: &mut Features) {
    let mut cursor = node.walk();
    let is_shared = node
        .children(&mut cursor)
        .any(|child| matches!(child.kind(), "type_qualifier" | "storage_class_specifier") && text_of(child, text) == "__shared__");
    let written = squash(text_of(node, text));
    if is_shared {
        found.add("shared-declaration", written);
        return;
    }
    let type_name = node.child_by_field_name("type").map(|kind| text_of(kind, text)).unwrap_or("");
    if type_name == "dim3" {
        let mut inner = node.walk();
        for declarator in node.children_by_field_name("declarator", &mut inner) {
            let name = crate::locate::declared_identifier(declarator).map(|name| text_of(name, text)).unwrap_or("");
            found.add("dim3", format!("{name}={}", squash(text_of(declarator, text))));
        }
    }
    let mut inner = node.walk();
    for _ in node.children_by_field_name("declarator", &mut inner) {
        found.add("local", written.clone());
    }
}

fn cuda_call(node: Node, text: &str, found: &mut Features) {
    let name = node.child_by_field_name("function").map(|function| callee(function, text)).unwrap_or("");
    if MATH_FUNCTIONS.contains(&name) {
        found.add("math-calls", name);
    }
    if name.starts_with("atomic") || name.starts_with("__shfl") || name.starts_with("__reduce_") || name == "reduce" {
        found.add("atomics", name);
    }
    if WIDE_LOADS.contains(&name) {
        found.add("wide-loads", name);
    }
    if TENSOR_CORE.contains(&name) {
        found.add("tensor-core", name);
    }
}

/// The called name: `sqrtf` for `sqrtf(x)`, `load_matrix_sync` for `wmma::load_matrix_sync(...)`,
/// `reinterpret_cast` for `reinterpret_cast<float4 *>(p)`.
fn callee<'a>(function: Node, text: &'a str) -> &'a str {
    let mut current = function;
    for _ in 0..16 {
        match current.kind() {
            "qualified_identifier" | "template_function" => match current.child_by_field_name("name") {
                Some(name) => current = name,
                None => break,
            },
            _ => break,
        }
    }
    text_of(current, text)
}

fn python_features(node: Node, text: &str, shared: &BTreeSet<String>, found: &mut Features) {
    let written = text_of(node, text);
    match node.kind() {
        "subscript" => {
            let base = node.child_by_field_name("value").map(|value| base_identifier(value, text)).unwrap_or("");
            let mut cursor = node.walk();
            let index: Vec<String> =
                node.children_by_field_name("subscript", &mut cursor).map(|index| squash(text_of(index, text))).collect();
            let family = if shared.contains(base) { "shared-subscript" } else { "subscript" };
            found.add(family, format!("{base}[{}]", index.join(", ")));
        }
        "call" => {
            let function: String =
                node.child_by_field_name("function").map(|function| text_of(function, text)).unwrap_or("").split_whitespace().collect();
            if function.ends_with("shared.array") {
                found.add("shared-declaration", squash(written));
            } else if function.contains("atomic") {
                found.add("atomics", function);
            } else if function.ends_with(".dot") {
                found.add("tensor-core", function);
            } else if ["math.sqrt", "math.exp", "math.log", "tl.sqrt", "tl.exp", "tl.log"].contains(&function.as_str()) {
                found.add("math-calls", function);
            }
        }
        "attribute" => {
            let last = written.rsplit('.').next().unwrap_or("");
            if ["float64", "float32", "float16", "bfloat16"].contains(&last) {
                found.add("float-types", last);
            }
        }
        "for_statement" => {
            let body = node.child_by_field_name("body").map(|body| body.start_byte()).unwrap_or(node.end_byte());
            found.add("loop-header", squash(text.get(node.start_byte()..body).unwrap_or("")));
        }
        "while_statement" | "if_statement" | "elif_clause" => {
            let family = if node.kind() == "while_statement" { "loop-header" } else { "condition" };
            found.add(family, node.child_by_field_name("condition").map(|cond| squash(text_of(cond, text))).unwrap_or_default());
        }
        "conditional_expression" => found.add("condition", node.named_child(1).map(|cond| squash(text_of(cond, text))).unwrap_or_default()),
        "assignment" => found.add("local", squash(written)),
        _ => {}
    }
}

/// The names of the `__shared__` arrays (CUDA) or `cuda.shared.array`s (Numba) in a range.
pub(crate) fn shared_names(language: Language, root: Node, text: &str, bytes: Range<usize>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    parse::walk_range(root, bytes, |node| match (language, node.kind()) {
        (Language::Cuda, "declaration") => {
            let mut cursor = node.walk();
            let is_shared = node.children(&mut cursor).any(|child| text_of(child, text) == "__shared__");
            let mut inner = node.walk();
            let declarators: Vec<Node> = node.children_by_field_name("declarator", &mut inner).collect();
            for declarator in declarators.into_iter().filter(|_| is_shared) {
                names.extend(crate::locate::declared_identifier(declarator).map(|name| text_of(name, text).to_string()));
            }
        }
        (Language::Python, "assignment") => {
            let right: String =
                node.child_by_field_name("right").map(|right| text_of(right, text)).unwrap_or("").split_whitespace().collect();
            if right.contains("shared.array(") {
                names.extend(node.child_by_field_name("left").map(|left| text_of(left, text).to_string()));
            }
        }
        _ => {}
    });
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATEGORIES: [&str; 16] = [
        "compute-bound",
        "memory-bound",
        "latency-bound",
        "grid-too-small",
        "block-size",
        "tail-effect",
        "occupancy-registers",
        "occupancy-shared-memory",
        "occupancy-other",
        "memory-coalescing",
        "shared-bank-conflicts",
        "divergence",
        "register-spilling",
        "tensor-core-unused",
        "fp64",
        "atomics-contention",
    ];

    #[test]
    fn expert_edits_name_kinds_for_every_category() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../expert/edits.toml");
        let text = std::fs::read_to_string(path).expect("expert/edits.toml");
        let table: BTreeMap<String, Vec<ExpertEdit>> = toml::from_str(&text).expect("every entry and kind name deserialises");
        for category in CATEGORIES {
            let entries = table.get(category).unwrap_or_else(|| panic!("{category} has no entry"));
            assert!(!entries.is_empty(), "{category}");
            for entry in entries {
                assert!(entry.kind != EditKind::Other, "{category}: 'other' fixes nothing");
                assert!(entry.why.ends_with('.') && entry.why.len() > 40, "{category}/{}: why is one sentence", entry.kind);
                assert!(
                    ["CUDA C++ Best Practices Guide, ", "CUDA C++ Programming Guide, ", "Nsight Compute Kernel Profiling Guide, "]
                        .iter()
                        .any(|guide| entry.source.starts_with(guide)),
                    "{category}/{}: {}",
                    entry.kind,
                    entry.source
                );
            }
        }
        let unknown: Vec<&String> = table.keys().filter(|key| !CATEGORIES.contains(&key.as_str())).collect();
        assert!(unknown.is_empty(), "categories keet does not have: {unknown:?}");
    }

    #[test]
    fn kind_names_are_kebab_case_both_ways() {
        for kind in EditKind::ALL {
            let name = kind.to_string();
            let parsed: EditKind = toml::from_str::<BTreeMap<String, EditKind>>(&format!("k = \"{name}\"")).expect("kind")["k"];
            assert_eq!(parsed, kind);
        }
        assert_eq!(EditKind::SharedDeclaration.to_string(), "shared-declaration");
        assert_eq!(EditKind::MemoryLoadWidth.to_string(), "memory-load-width");
    }
}
