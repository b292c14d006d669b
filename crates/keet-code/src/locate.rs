//! Finding a kernel's definition: CUDA `__global__` functions and Python functions decorated as
//! Triton/Numba kernels, matched by the base name of the profile's kernel name (parameters and
//! namespaces pick between several), with the kernel's launch sites.

use crate::names::{self, ParamType, ProfileName};
use crate::parse::{self, start_line, text_of};
use crate::{CodeFile, Language};
use serde::Serialize;
use tree_sitter::{Node, Tree};

/// A kernel's definition as found in the user's sources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelCode {
    /// Index into the files slice given to [`locate`].
    pub file: usize,
    pub path: String,
    /// The definition's own name (`gemm` for `void ns::gemm<float, 128>(float*, int)`).
    pub name: String,
    pub language: Language,
    /// 1-based line of the signature, including `template <...>`, `extern "C"` and decorators.
    pub start_line: usize,
    /// 1-based, inclusive.
    pub end_line: usize,
    /// The whole definition, lines `start_line..=end_line`.
    pub text: String,
    /// Where the files launch it: CUDA `name<<<grid, block>>>(...)`, Triton `name[grid](...)`,
    /// Numba `name[blocks, threads](...)`.
    pub launch_sites: Vec<LaunchSite>,
    /// Which of several definitions was used and why, when there were several.
    pub note: Option<String>,
}

/// One launch of a kernel, with its configuration as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchSite {
    pub file: usize,
    pub path: String,
    /// 1-based line where the launch starts.
    pub line: usize,
    /// 1-based line where the launch ends (a launch may span lines).
    pub end_line: usize,
    /// The grid expression (`grid`, `(n + 255) / 256`; Triton: the whole `[...]` contents).
    pub grid: String,
    /// The block expression (CUDA, Numba); `None` for Triton, whose block is in the kernel.
    pub block: Option<String>,
    /// CUDA's third `<<<>>>` argument (dynamic shared memory bytes), if written.
    pub shared_bytes: Option<String>,
    /// CUDA's fourth `<<<>>>` argument (stream), if written.
    pub stream: Option<String>,
    /// 1-based lines in the launching function that declare or assign the variables the grid and
    /// block expressions use (`dim3 block(32, 32);`): an edit of the launch shape may change them.
    pub config_lines: Vec<usize>,
}

/// Why no definition was picked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotFound {
    #[error("no source files were given to search for the kernel")]
    NoFiles,
    #[error("no __global__, @triton.jit or @cuda.jit definition with the kernel's name is in the {files_searched} source files searched")]
    NoMatch { files_searched: usize },
    #[error("the kernel is defined in {} places ({}) and its name in the profile does not say which one ran", places.len(), list_places(places))]
    Several { places: Vec<(String, usize)> },
    #[error("{why}")]
    Library { why: String },
}

fn list_places(places: &[(String, usize)]) -> String {
    places.iter().map(|(path, line)| format!("{path}:{line}")).collect::<Vec<_>>().join(", ")
}

/// One kernel definition found in a file.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    pub file: usize,
    pub name: String,
    pub language: Language,
    pub start_line: usize,
    pub end_line: usize,
    /// Parameter types (CUDA only; Python parameters are untyped).
    pub params: Vec<ParamType>,
    /// Template parameter names (they accept any type).
    pub generic: Vec<String>,
    /// Enclosing namespaces and the declarator's own qualifier.
    pub scope: Vec<String>,
}

/// Finds the definition of the kernel that a profile names `kernel_name`.
pub fn locate(files: &[CodeFile], kernel_name: &str) -> Result<KernelCode, NotFound> {
    if files.is_empty() {
        return Err(NotFound::NoFiles);
    }
    let wanted = ProfileName::parse(kernel_name);
    let user_files: Vec<usize> = (0..files.len()).filter(|&index| !names::is_library_path(&files[index].path)).collect();
    let mut bases = vec![wanted.base.clone()];
    bases.extend(wanted.fallback_bases());
    for base in bases.iter().filter(|base| !base.is_empty()) {
        let found = definitions_named(files, &user_files, base);
        if found.is_empty() {
            continue;
        }
        let (definition, note) = pick(found, &wanted).map_err(|several| NotFound::Several {
            places: several.iter().map(|definition| (files[definition.file].path.clone(), definition.start_line)).collect(),
        })?;
        return Ok(kernel_code(files, &user_files, definition, note));
    }
    match names::library_reason(kernel_name.trim(), &wanted) {
        Some(why) => Err(NotFound::Library { why }),
        None => Err(NotFound::NoMatch { files_searched: user_files.len() }),
    }
}

/// The definitions named `base` in the user's (non-library) files.
fn definitions_named(files: &[CodeFile], user_files: &[usize], base: &str) -> Vec<Definition> {
    let mut found = Vec::new();
    for &index in user_files {
        let file = &files[index];
        let Some(language) = Language::of_path(&file.path) else { continue };
        if !file.text.contains(base) {
            continue;
        }
        let Some(tree) = parse::parse(language, &file.text) else { continue };
        found.extend(definitions(index, language, &file.text, &tree).into_iter().filter(|definition| definition.name == base));
    }
    found
}

/// Chooses among the definitions with the wanted name: the only one, else the one whose
/// parameters (then namespaces) the profile name matches.
fn pick(found: Vec<Definition>, wanted: &ProfileName) -> Result<(Definition, Option<String>), Vec<Definition>> {
    if found.len() == 1 {
        return Ok((found.into_iter().next().expect("one definition"), None));
    }
    let count = found.len();
    if let Some(params) = &wanted.params {
        let exact: Vec<&Definition> = found.iter().filter(|definition| params_match(definition, params)).collect();
        if let [only] = exact.as_slice() {
            let note = format!(
                "{count} definitions are named {}; used the one at line {} whose parameters match the profile's ({})",
                only.name,
                only.start_line,
                describe_params(params)
            );
            return Ok(((*only).clone(), Some(note)));
        }
    }
    if !wanted.scope.is_empty() {
        let scoped: Vec<&Definition> = found.iter().filter(|definition| definition.scope.ends_with(&wanted.scope)).collect();
        if let [only] = scoped.as_slice() {
            let note = format!("{count} definitions are named {}; used the one in namespace {}", only.name, wanted.scope.join("::"));
            return Ok(((*only).clone(), Some(note)));
        }
    }
    Err(found)
}

fn params_match(definition: &Definition, params: &[ParamType]) -> bool {
    definition.language == Language::Cuda
        && definition.params.len() == params.len()
        && definition.params.iter().zip(params).all(|(mine, theirs)| mine.accepts(theirs, &definition.generic))
}

fn describe_params(params: &[ParamType]) -> String {
    params.iter().map(|param| format!("{}{}", param.words.join(" "), param.marks)).collect::<Vec<_>>().join(", ")
}

/// Builds the result for the picked definition, with its text and launch sites.
fn kernel_code(files: &[CodeFile], user_files: &[usize], definition: Definition, note: Option<String>) -> KernelCode {
    let file = &files[definition.file];
    let bytes = parse::line_bytes(&file.text, definition.start_line, definition.end_line);
    let text = file.text.get(bytes).unwrap_or("").to_string();
    let launch_sites = user_files.iter().flat_map(|&index| launch_sites(index, &files[index], &definition.name)).collect();
    KernelCode {
        file: definition.file,
        path: file.path.clone(),
        name: definition.name,
        language: definition.language,
        start_line: definition.start_line,
        end_line: definition.end_line,
        text,
        launch_sites,
        note,
    }
}

/// All kernel definitions in one parsed file.
pub(crate) fn definitions(file: usize, language: Language, text: &str, tree: &Tree) -> Vec<Definition> {
    let mut found = Vec::new();
    parse::walk(tree.root_node(), |node| {
        let definition = match (language, node.kind()) {
            (Language::Cuda, "function_definition") => cuda_definition(file, node, text),
            (Language::Python, "decorated_definition") => python_definition(file, node, text, tree),
            _ => None,
        };
        found.extend(definition);
        true
    });
    found
}

/// A CUDA `__global__` function definition.
fn cuda_definition(file: usize, node: Node, text: &str) -> Option<Definition> {
    let mut cursor = node.walk();
    let global = node
        .children(&mut cursor)
        .any(|child| child.kind() == "launch_bounds" || (child.kind() != "compound_statement" && text_of(child, text) == "__global__"));
    if !global {
        return None;
    }
    let declarator = node.child_by_field_name("declarator")?;
    let (function, name, mut scope) = declarator_name(declarator, text)?;
    let params = function.child_by_field_name("parameters").map(|list| parameter_types(list, text)).unwrap_or_default();
    let mut outer = node;
    let mut generic = Vec::new();
    while let Some(parent) = outer.parent() {
        match parent.kind() {
            "template_declaration" => generic.extend(template_parameters(parent, text)),
            "linkage_specification" => {}
            _ => break,
        }
        outer = parent;
    }
    scope.splice(0..0, enclosing_namespaces(node, text));
    let start = start_line(outer);
    Some(Definition { file, name, language: Language::Cuda, start_line: start, end_line: parse::end_line(node), params, generic, scope })
}

/// The function declarator, the base name and the declarator's own qualifier (`ns::gemm`).
fn declarator_name<'t>(declarator: Node<'t>, text: &str) -> Option<(Node<'t>, String, Vec<String>)> {
    let mut current = declarator;
    let mut function = None;
    let mut scope = Vec::new();
    for _ in 0..32 {
        match current.kind() {
            "identifier" | "field_identifier" => {
                return Some((function?, text_of(current, text).to_string(), scope));
            }
            "function_declarator" => function = Some(current),
            "qualified_identifier" => {
                if let Some(qualifier) = current.child_by_field_name("scope") {
                    scope.push(text_of(qualifier, text).to_string());
                }
                current = current.child_by_field_name("name")?;
                continue;
            }
            _ => {}
        }
        current = current.child_by_field_name("declarator").or_else(|| current.child_by_field_name("name"))?;
    }
    None
}

fn parameter_types(list: Node, text: &str) -> Vec<ParamType> {
    let mut cursor = list.walk();
    let params: Vec<Node> = list.named_children(&mut cursor).filter(|param| param.kind().contains("parameter_declaration")).collect();
    params
        .into_iter()
        .map(|param| {
            let end = param.child_by_field_name("default_value").map(|value| value.start_byte()).unwrap_or(param.end_byte());
            let mut written = text.get(param.start_byte()..end).unwrap_or("").to_string();
            if let Some(name) = param.child_by_field_name("declarator").and_then(|declarator| declared_identifier(declarator)) {
                let range = (name.start_byte() - param.start_byte())..(name.end_byte() - param.start_byte());
                if written.get(range.clone()).is_some() {
                    written.replace_range(range, " ");
                }
            }
            ParamType::parse(&written)
        })
        .collect()
}

/// The identifier a declarator declares (`a` in `*const a[4]`).
pub(crate) fn declared_identifier(declarator: Node) -> Option<Node> {
    let mut current = declarator;
    for _ in 0..32 {
        if current.kind() == "identifier" {
            return Some(current);
        }
        current = current.child_by_field_name("declarator")?;
    }
    None
}

fn template_parameters(template: Node, text: &str) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(list) = template.child_by_field_name("parameters") {
        let mut cursor = list.walk();
        for param in list.named_children(&mut cursor) {
            let mut inner = param.walk();
            let last = param.named_children(&mut inner).filter(|child| matches!(child.kind(), "type_identifier" | "identifier")).last();
            names.extend(last.map(|name| text_of(name, text).to_string()));
        }
    }
    names
}

fn enclosing_namespaces(node: Node, text: &str) -> Vec<String> {
    let mut scope = Vec::new();
    let mut current = node;
    while let Some(parent) = current.parent() {
        if parent.kind() == "namespace_definition" {
            scope.insert(0, parent.child_by_field_name("name").map(|name| text_of(name, text).to_string()).unwrap_or_default());
        }
        current = parent;
    }
    scope
}

/// A Python function decorated as a Triton or Numba CUDA kernel.
fn python_definition(file: usize, node: Node, text: &str, tree: &Tree) -> Option<Definition> {
    let function = node.child_by_field_name("definition")?;
    let mut cursor = node.walk();
    let kernel = node.named_children(&mut cursor).filter(|child| child.kind() == "decorator").any(|decorator| {
        let expression = decorator.named_child(0);
        let callee = expression.map(|expr| if expr.kind() == "call" { expr.child_by_field_name("function").unwrap_or(expr) } else { expr });
        let written: String = callee.map(|callee| text_of(callee, text)).unwrap_or("").split_whitespace().collect();
        is_kernel_decorator(&written, tree, text)
    });
    if !kernel || function.kind() != "function_definition" {
        return None;
    }
    let name = text_of(function.child_by_field_name("name")?, text).to_string();
    Some(Definition {
        file,
        name,
        language: Language::Python,
        start_line: start_line(node),
        end_line: parse::end_line(node),
        params: Vec::new(),
        generic: Vec::new(),
        scope: Vec::new(),
    })
}

/// Whether a decorator (as written, without a call) makes a GPU kernel: `triton.jit`, `cuda.jit`,
/// `numba.cuda.jit`, or a bare `jit` imported from triton or numba.cuda.
fn is_kernel_decorator(written: &str, tree: &Tree, text: &str) -> bool {
    match written {
        "triton.jit" | "cuda.jit" | "numba.cuda.jit" => true,
        "jit" => imports_jit_from_gpu_module(tree, text),
        _ => false,
    }
}

fn imports_jit_from_gpu_module(tree: &Tree, text: &str) -> bool {
    let mut found = false;
    parse::walk(tree.root_node(), |node| {
        if node.kind() == "import_from_statement" {
            let module: String =
                node.child_by_field_name("module_name").map(|m| text_of(m, text)).unwrap_or("").split_whitespace().collect();
            let mut cursor = node.walk();
            let names_jit = node.children_by_field_name("name", &mut cursor).any(|name| text_of(name, text) == "jit");
            found |= names_jit && matches!(module.as_str(), "triton" | "numba.cuda");
        }
        matches!(node.kind(), "module" | "if_statement" | "block" | "try_statement")
    });
    found
}

/// The launches of the kernel named `name` in one file.
fn launch_sites(index: usize, file: &CodeFile, name: &str) -> Vec<LaunchSite> {
    let Some(language) = Language::of_path(&file.path) else { return Vec::new() };
    if !file.text.contains(name) {
        return Vec::new();
    }
    let Some(tree) = parse::parse(language, &file.text) else { return Vec::new() };
    let mut sites = Vec::new();
    parse::walk(tree.root_node(), |node| {
        let site = match (language, node.kind()) {
            (Language::Cuda, "call_expression") => cuda_launch(index, file, node, name),
            (Language::Python, "call") => python_launch(index, file, node, name),
            _ => None,
        };
        sites.extend(site);
        true
    });
    sites
}

fn cuda_launch(index: usize, file: &CodeFile, node: Node, name: &str) -> Option<LaunchSite> {
    let mut cursor = node.walk();
    let syntax = node.children(&mut cursor).find(|child| child.kind() == "kernel_call_syntax")?;
    let function = node.child_by_field_name("function")?;
    if callee_name(function, &file.text) != name {
        return None;
    }
    let mut inner = syntax.walk();
    let config: Vec<Node> = syntax.named_children(&mut inner).collect();
    let written = |position: usize| config.get(position).map(|expr| parse::squash(text_of(*expr, &file.text)));
    let config_lines = feeding_lines(node, &config, &file.text);
    Some(LaunchSite {
        file: index,
        path: file.path.clone(),
        line: start_line(node),
        end_line: parse::end_line(node),
        grid: written(0).unwrap_or_default(),
        block: written(1),
        shared_bytes: written(2),
        stream: written(3),
        config_lines,
    })
}

fn python_launch(index: usize, file: &CodeFile, node: Node, name: &str) -> Option<LaunchSite> {
    let function = node.child_by_field_name("function")?;
    if function.kind() != "subscript" {
        return None;
    }
    let value = function.child_by_field_name("value")?;
    let called = text_of(value, &file.text).rsplit('.').next().unwrap_or("");
    if called != name {
        return None;
    }
    let mut cursor = function.walk();
    let config: Vec<Node> = function.children_by_field_name("subscript", &mut cursor).collect();
    let text = &file.text;
    let numba_style = config.len() >= 2;
    let grid = if numba_style {
        parse::squash(text_of(config[0], text))
    } else {
        config.iter().map(|expr| parse::squash(text_of(*expr, text))).collect::<Vec<_>>().join(", ")
    };
    Some(LaunchSite {
        file: index,
        path: file.path.clone(),
        line: start_line(node),
        end_line: parse::end_line(node),
        grid,
        block: if numba_style { Some(parse::squash(text_of(config[1], text))) } else { None },
        shared_bytes: None,
        stream: None,
        config_lines: feeding_lines(node, &config, text),
    })
}

/// The base name of a launched function: `gemm` for `ns::gemm<float, 16>`.
fn callee_name<'a>(function: Node, text: &'a str) -> &'a str {
    let mut current = function;
    for _ in 0..32 {
        match current.kind() {
            "identifier" | "field_identifier" => return text_of(current, text),
            "qualified_identifier" | "template_function" => match current.child_by_field_name("name") {
                Some(name) => current = name,
                None => break,
            },
            "field_expression" => match current.child_by_field_name("field") {
                Some(field) => current = field,
                None => break,
            },
            _ => break,
        }
    }
    ""
}

/// Lines of the enclosing function that declare or assign an identifier the launch configuration uses.
fn feeding_lines(launch: Node, config: &[Node], text: &str) -> Vec<usize> {
    let mut used = Vec::new();
    for expr in config {
        parse::walk(*expr, |node| {
            if node.kind() == "identifier" {
                used.push(text_of(node, text).to_string());
            }
            true
        });
    }
    let mut scope = launch;
    while let Some(parent) = scope.parent() {
        scope = parent;
        if parent.kind() == "function_definition" {
            break;
        }
    }
    let mut lines = Vec::new();
    parse::walk(scope, |node| {
        if node.start_byte() >= launch.start_byte() {
            return false;
        }
        let before_launch = node.end_byte() <= launch.start_byte();
        if let Some(declared) = assigned_name(node, text).filter(|_| before_launch) {
            if used.iter().any(|name| name == declared) {
                lines.extend(start_line(node)..=parse::end_line(node));
            }
        }
        true
    });
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// The variable a declaration (`dim3 block(32, 32);`) or assignment (`grid = ...`) sets.
fn assigned_name<'a>(node: Node, text: &'a str) -> Option<&'a str> {
    match node.kind() {
        "declaration" => {
            let declarator = node.child_by_field_name("declarator")?;
            let target = if declarator.kind() == "identifier" { Some(declarator) } else { declared_identifier(declarator) };
            target.map(|name| text_of(name, text))
        }
        "assignment_expression" | "assignment" => {
            let left = node.child_by_field_name("left")?;
            (left.kind() == "identifier").then(|| text_of(left, text))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> Vec<CodeFile> {
        let file = |path: &str, text: &str| CodeFile { path: path.to_string(), text: text.to_string() };
        vec![
            file("tests/fixtures/tiles.cu", include_str!("../tests/fixtures/tiles.cu")),
            file("tests/fixtures/gemm.cuh", include_str!("../tests/fixtures/gemm.cuh")),
            file("tests/fixtures/softmax_triton.py", include_str!("../tests/fixtures/softmax_triton.py")),
            file("tests/fixtures/saxpy_numba.py", include_str!("../tests/fixtures/saxpy_numba.py")),
        ]
    }

    fn names_of(files: &[CodeFile], name: &str) -> (String, usize, usize) {
        let kernel = locate(files, name).unwrap_or_else(|error| panic!("{name}: {error}"));
        (kernel.name, kernel.start_line, kernel.end_line)
    }

    #[test]
    fn finds_plain_and_demangled_names() {
        let files = fixtures();
        assert_eq!(names_of(&files, "setColReadCol"), ("setColReadCol".into(), 17, 26));
        assert_eq!(names_of(&files, "setColReadCol(int *)"), ("setColReadCol".into(), 17, 26));
        assert_eq!(names_of(&files, "void setColReadCol(int*)"), ("setColReadCol".into(), 17, 26));
        let kernel = locate(&files, "setColReadCol").unwrap();
        assert!(kernel.text.starts_with("__global__ void setColReadCol(int *out)"));
        assert!(kernel.text.trim_end().ends_with('}'));
        assert_eq!((kernel.file, kernel.language, kernel.note), (0, Language::Cuda, None));
    }

    #[test]
    fn finds_a_templated_kernel_in_a_namespace_from_the_template_line() {
        let files = fixtures();
        let kernel = locate(&files, "void ns::gemm<float, 16>(const float *, const float *, float *, int)").unwrap();
        assert_eq!((kernel.path.as_str(), kernel.start_line, kernel.end_line), ("tests/fixtures/gemm.cuh", 7, 23));
        assert!(kernel.text.starts_with("template <typename T, int TILE>"));
        assert_eq!(names_of(&files, "gemm").1, 7);
    }

    #[test]
    fn finds_extern_c_and_launch_bounds_kernels() {
        let files = fixtures();
        let add_one = locate(&files, "add_one").unwrap();
        assert_eq!((add_one.start_line, add_one.end_line), (27, 31));
        assert!(add_one.text.starts_with("extern \"C\" __global__"));
        let reduce = locate(&files, "reduce_sum(float const*, float*, int)").unwrap();
        assert_eq!((reduce.start_line, reduce.end_line), (45, 49));
        assert!(reduce.text.contains("__launch_bounds__(256, 2)"));
    }

    #[test]
    fn overloads_are_picked_by_parameters_or_refused() {
        let files = fixtures();
        let picked = locate(&files, "void fill(int *, int)").unwrap();
        assert_eq!(picked.start_line, 39);
        assert!(picked.note.unwrap().contains("line 39 whose parameters match"));
        assert_eq!(locate(&files, "fill(float*, int)").unwrap().start_line, 33);
        let several = locate(&files, "fill").unwrap_err();
        let places = vec![("tests/fixtures/gemm.cuh".to_string(), 33), ("tests/fixtures/gemm.cuh".to_string(), 39)];
        assert_eq!(several, NotFound::Several { places });
        assert!(several.to_string().contains("defined in 2 places (tests/fixtures/gemm.cuh:33, tests/fixtures/gemm.cuh:39)"));
    }

    #[test]
    fn finds_triton_and_numba_kernels() {
        let files = fixtures();
        let triton = locate(&files, "softmax_kernel").unwrap();
        assert_eq!((triton.language, triton.start_line, triton.end_line), (Language::Python, 7, 15));
        assert!(triton.text.starts_with("@triton.jit\ndef softmax_kernel("));
        assert_eq!(locate(&files, "softmax_kernel_0d1d2d3de").unwrap().start_line, 7);
        let numba =
            locate(&files, "_ZN8__main__6kernelB2v1B96cw51cXTLSUwv1sDUaKthqqNgQsFkmJSFAoqdRBAM_2bOf6MwqE5ArrayIfLi1E1C7mutable7alignedE")
                .unwrap();
        assert_eq!((numba.name.as_str(), numba.start_line, numba.end_line), ("kernel", 6, 10));
        // `softmax` is a plain function and `main` is not decorated: neither is a kernel.
        assert_eq!(locate(&files, "softmax"), Err(NotFound::NoMatch { files_searched: 4 }));
    }

    #[test]
    fn bare_jit_counts_only_when_imported_from_a_gpu_module() {
        let triton = CodeFile { path: "k.py".into(), text: "from triton import jit\n\n@jit\ndef k(x):\n    pass\n".into() };
        assert_eq!(locate(std::slice::from_ref(&triton), "k").unwrap().start_line, 3);
        let cpu = CodeFile { path: "k.py".into(), text: "from numba import jit\n\n@jit(nopython=True)\ndef k(x):\n    pass\n".into() };
        assert!(matches!(locate(&[cpu], "k"), Err(NotFound::NoMatch { .. })));
    }

    #[test]
    fn launch_sites_have_their_grid_and_block() {
        let files = fixtures();
        let sites = locate(&files, "setColReadCol").unwrap().launch_sites;
        assert_eq!(sites.len(), 1);
        assert_eq!((sites[0].line, sites[0].grid.as_str(), sites[0].block.as_deref()), (46, "grid", Some("block")));
        assert_eq!(sites[0].config_lines, vec![43, 44]);
        let gemm = &locate(&files, "gemm").unwrap().launch_sites[0];
        assert_eq!((gemm.line, gemm.grid.as_str(), gemm.block.as_deref()), (55, "blocks", Some("threads")));
        let reduce = &locate(&files, "reduce_sum").unwrap().launch_sites[0];
        assert_eq!(
            (reduce.grid.as_str(), reduce.block.as_deref(), reduce.shared_bytes.as_deref()),
            ("(n + 255) / 256", Some("256"), Some("0"))
        );
        let triton = &locate(&files, "softmax_kernel").unwrap().launch_sites[0];
        assert_eq!((triton.line, triton.grid.as_str(), triton.block.as_deref()), (21, "(rows,)", None));
        let numba = &locate(&files, "kernel").unwrap().launch_sites[0];
        assert_eq!((numba.line, numba.grid.as_str(), numba.block.as_deref()), (18, "(n + 255) // 256", Some("256")));
    }

    #[test]
    fn library_kernels_and_headers() {
        let files = fixtures();
        assert!(matches!(locate(&files, "ampere_sgemm_128x64_nn"), Err(NotFound::Library { .. })));
        assert!(matches!(
            locate(&files, "void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<float>>(Params)"),
            Err(NotFound::Library { .. })
        ));
        assert_eq!(locate(&[], "setColReadCol"), Err(NotFound::NoFiles));
        // A definition in a CUDA toolkit header is never a user's kernel.
        let header =
            CodeFile { path: "/usr/local/cuda-12.1/include/cub/k.cuh".into(), text: "__global__ void setColReadCol(int *out) {}\n".into() };
        assert_eq!(locate(&[header], "setColReadCol"), Err(NotFound::NoMatch { files_searched: 0 }));
        assert_eq!(
            NotFound::NoMatch { files_searched: 3 }.to_string(),
            "no __global__, @triton.jit or @cuda.jit definition with the kernel's name is in the 3 source files searched"
        );
    }
}
