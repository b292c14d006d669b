//! Kernel names as profiles write them: splitting a demangled name (`void ns::gemm<float, 128>(float*,
//! int)`) or an Itanium-mangled one (Numba's `_ZN8__main__6kernelB2v1...`) into scope, base name and
//! parameter types, comparing parameter types, and recognising the names of library kernels.

/// A kernel name from a profile, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProfileName {
    /// The definition's own name: `gemm` for `void ns::gemm<float, 128>(float*, int)`.
    pub base: String,
    /// The enclosing namespaces/classes as written: `["ns"]`.
    pub scope: Vec<String>,
    /// The parameter types, when the name has a parameter list.
    pub params: Option<Vec<ParamType>>,
}

/// A parameter type, normalised for comparison: its words in order of appearance without
/// qualifiers that demanglers drop or move, and its pointer/reference marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamType {
    pub words: Vec<String>,
    pub marks: String,
}

/// Words that do not make two parameter types differ.
const IGNORED_WORDS: &[&str] = &["const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "class"];

impl ParamType {
    /// Normalises a parameter type as written (`const float *__restrict__`, `float const*`).
    pub fn parse(text: &str) -> ParamType {
        let mut words = Vec::new();
        let mut marks = String::new();
        let mut word = String::new();
        let mut depth = 0usize;
        for character in text.chars() {
            let in_template = depth > 0;
            match character {
                '<' => depth += 1,
                '>' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if in_template || character == '<' || character == '>' {
                word.push(character);
                continue;
            }
            if character.is_alphanumeric() || character == '_' || character == ':' {
                word.push(character);
                continue;
            }
            push_word(&mut words, &mut word);
            match character {
                '*' | '&' => marks.push(character),
                // An array parameter is a pointer in the mangled (and so the demangled) name.
                '[' => marks.push('*'),
                _ => {}
            }
        }
        push_word(&mut words, &mut word);
        ParamType { words, marks }
    }

    /// Whether a definition's parameter type (`self`, possibly using template parameters
    /// `generic`) accepts the profile's `other`.
    pub fn accepts(&self, other: &ParamType, generic: &[String]) -> bool {
        if self.marks != other.marks {
            return false;
        }
        if self.words.iter().any(|word| generic.contains(word)) {
            return self.words.iter().filter(|word| !generic.contains(word)).all(|word| other.words.contains(word));
        }
        let mut mine = self.words.clone();
        let mut theirs = other.words.clone();
        mine.sort();
        theirs.sort();
        mine == theirs
    }
}

fn push_word(words: &mut Vec<String>, word: &mut String) {
    if !word.is_empty() && !IGNORED_WORDS.contains(&word.as_str()) {
        let last = word.rsplit("::").next().unwrap_or(word.as_str()).to_string();
        words.push(last);
    }
    word.clear();
}

impl ProfileName {
    /// Takes apart a kernel name as a profile shows it.
    pub fn parse(name: &str) -> ProfileName {
        let name = name.trim().replace("(anonymous namespace)", "anonymous_namespace");
        if let Some(parts) = demangle_components(&name) {
            let mut scope = parts;
            let base = scope.pop().unwrap_or_default();
            return ProfileName { base, scope, params: None };
        }
        let (head, params) = split_parameters(&name);
        let head = strip_templates(head);
        let qualified = head.split_whitespace().last().unwrap_or("").trim_start_matches(['*', '&']);
        let mut scope: Vec<String> = qualified.split("::").filter(|part| !part.is_empty()).map(str::to_string).collect();
        let base = scope.pop().unwrap_or_default();
        let params = params.map(|list| split_top_level(list).iter().map(|param| ParamType::parse(param)).collect::<Vec<_>>());
        let params =
            params.map(|list| if list.len() == 1 && list[0].words == ["void"] && list[0].marks.is_empty() { Vec::new() } else { list });
        ProfileName { base, scope, params }
    }

    /// Names to try when the base name itself matches no definition: older Triton versions append
    /// a specialisation suffix (`add_kernel_0d1d2d3de`).
    pub fn fallback_bases(&self) -> Vec<String> {
        let mut bases = Vec::new();
        if let Some((stem, suffix)) = self.base.rsplit_once('_') {
            let specialisation = !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_digit() || matches!(c, 'd' | 'e' | 'c'));
            if specialisation && suffix.chars().any(|c| c.is_ascii_digit()) && !stem.is_empty() {
                bases.push(stem.to_string());
            }
        }
        bases
    }
}

/// Splits `head(params)` at the first parenthesis outside template brackets.
fn split_parameters(name: &str) -> (&str, Option<&str>) {
    let mut depth = 0i32;
    for (index, character) in name.char_indices() {
        match character {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth <= 0 => {
                let rest = &name[index + 1..];
                let close = matching_close(rest).unwrap_or(rest.len());
                return (&name[..index], Some(&rest[..close]));
            }
            _ => {}
        }
    }
    (name, None)
}

/// The index of the `)` closing a list whose `(` came just before `text`.
fn matching_close(text: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (index, character) in text.char_indices() {
        match character {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(index),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Removes every `<...>` group (nested ones too).
fn strip_templates(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for character in text.chars() {
        match character {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(character),
            _ => {}
        }
    }
    out
}

/// Splits a comma-separated list at commas outside brackets.
pub(crate) fn split_top_level(list: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    for character in list.chars() {
        match character {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            ',' if depth <= 0 => {
                parts.push(std::mem::take(&mut current).trim().to_string());
                continue;
            }
            _ => {}
        }
        current.push(character);
    }
    if !current.trim().is_empty() || !parts.is_empty() {
        parts.push(current.trim().to_string());
    }
    parts
}

/// The name components of an Itanium-mangled name (`_ZN8__main__6kernelB2v1E...` → `__main__`,
/// `kernel`; `_Z6kernelPf` → `kernel`); `None` if the name is not mangled.
fn demangle_components(name: &str) -> Option<Vec<String>> {
    let rest = name.strip_prefix("_Z")?;
    let (nested, mut rest) = match rest.strip_prefix('N') {
        Some(inner) => (true, inner),
        None => (false, rest),
    };
    let mut parts = Vec::new();
    while let Some((part, after)) = source_name(rest) {
        parts.push(part.to_string());
        rest = skip_abi_tags(after);
        if !nested {
            break;
        }
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts)
    }
}

/// One `<length><identifier>` component.
fn source_name(text: &str) -> Option<(&str, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let length: usize = text.get(..digits)?.parse().ok()?;
    let name = text.get(digits..digits + length)?;
    Some((name, &text[digits + length..]))
}

/// Skips `B<length><tag>` ABI tags (Numba writes `B2v1B96cw51...`).
fn skip_abi_tags(mut text: &str) -> &str {
    while let Some(after) = text.strip_prefix('B') {
        match source_name(after) {
            Some((_, rest)) => text = rest,
            None => break,
        }
    }
    text
}

/// Scopes and name prefixes of kernels that come from libraries, with the library's name.
const LIBRARY_SCOPES: &[(&str, &str)] = &[
    ("cutlass", "CUTLASS"),
    ("cub", "CUB"),
    ("thrust", "Thrust"),
    ("at", "PyTorch (ATen)"),
    ("c10", "PyTorch (c10)"),
    ("cudnn", "cuDNN"),
    ("cublas", "cuBLAS"),
    ("cublasLt", "cuBLASLt"),
    ("cutensor", "cuTENSOR"),
    ("flash", "FlashAttention"),
    ("pytorch_flash", "FlashAttention"),
    ("xformers", "xFormers"),
    ("transformer_engine", "Transformer Engine"),
    ("tensorrt_llm", "TensorRT-LLM"),
    ("cuda", "libcu++"),
    ("std", "the C++ standard library"),
    ("cuco", "cuCollections"),
    ("raft", "RAFT"),
    ("faiss", "Faiss"),
    ("flashinfer", "FlashInfer"),
    ("vllm", "vLLM"),
];

const LIBRARY_PREFIXES: &[(&str, &str)] = &[
    ("ampere_", "cuBLAS/cuDNN"),
    ("turing_", "cuBLAS/cuDNN"),
    ("volta_", "cuBLAS/cuDNN"),
    ("maxwell_", "cuBLAS/cuDNN"),
    ("hopper_", "cuBLAS/cuDNN"),
    ("xmma_", "cuBLAS/cuDNN (xmma)"),
    ("cutlass", "CUTLASS"),
    ("cublas", "cuBLAS"),
    ("cudnn", "cuDNN"),
    ("gemv2", "cuBLAS"),
    ("gemvx", "cuBLAS"),
    ("gemmk1", "cuBLAS"),
    ("gemmSN", "cuBLAS"),
    ("splitKreduce", "cuBLAS"),
    ("dot_kernel", "cuBLAS"),
    ("scal_kernel", "cuBLAS"),
    ("axpy_kernel", "cuBLAS"),
    ("nrm2_kernel", "cuBLAS"),
    ("reduce_1Block_kernel", "cuBLAS"),
    ("implicit_convolve", "cuDNN"),
    ("nchwToNhwc", "cuDNN"),
    ("nhwcToNchw", "cuDNN"),
    ("winograd", "cuDNN"),
    ("generateWinograd", "cuDNN"),
    ("regular_fft", "cuFFT"),
    ("vector_fft", "cuFFT"),
    ("ncclKernel", "NCCL"),
    ("ncclDevKernel", "NCCL"),
    ("fmha", "FlashAttention/cuDNN"),
    ("flash_fwd", "FlashAttention"),
    ("flash_bwd", "FlashAttention"),
    ("elementwise_kernel", "PyTorch (ATen)"),
    ("vectorized_elementwise_kernel", "PyTorch (ATen)"),
    ("unrolled_elementwise_kernel", "PyTorch (ATen)"),
];

/// Why `name` (as taken apart in `parsed`) looks like a library kernel, if it does.
pub(crate) fn library_reason(full: &str, parsed: &ProfileName) -> Option<String> {
    if let Some(first) = parsed.scope.first() {
        if let Some((scope, library)) = LIBRARY_SCOPES.iter().find(|(scope, _)| scope == first) {
            return Some(format!("'{full}' is a {library} kernel (namespace {scope}::); its source is not among your files"));
        }
    }
    let base = parsed.base.as_str();
    let arch_xmma = base.starts_with("sm") && base.contains("_xmma");
    if arch_xmma {
        return Some(format!("'{base}' is a cuBLAS/cuDNN kernel (an xmma kernel); its source is not among your files"));
    }
    let found = LIBRARY_PREFIXES.iter().find(|(prefix, _)| base.starts_with(prefix));
    found.map(|(prefix, library)| {
        format!("'{base}' is a {library} kernel (its name starts with '{prefix}'); its source is not among your files")
    })
}

/// Whether a path is a library header (CUDA toolkit, system or installed packages): never the
/// place of a user's kernel.
pub(crate) fn is_library_path(path: &str) -> bool {
    let path = path.replace('\\', "/");
    const MARKERS: &[&str] = &[
        "/usr/local/cuda",
        "/usr/include/",
        "/opt/nvidia/",
        "/site-packages/",
        "/dist-packages/",
        "/include/cub/",
        "/include/thrust/",
        "/include/cuda/",
        "/include/cutlass/",
        "/include/cute/",
        "/include/nv/",
        "/targets/x86_64-linux/include/",
        "/targets/sbsa-linux/include/",
    ];
    path.starts_with("/usr/local/cuda") || MARKERS.iter().any(|marker| path.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangled_names_are_taken_apart() {
        let name = ProfileName::parse("void ns::gemm<float, 128>(const float*, float *, int)");
        assert_eq!(name.base, "gemm");
        assert_eq!(name.scope, vec!["ns"]);
        let params = name.params.unwrap();
        assert_eq!(params.len(), 3);
        assert_eq!(params[0], ParamType { words: vec!["float".into()], marks: "*".into() });
        let plain = ProfileName::parse("setColReadCol");
        assert_eq!((plain.base.as_str(), plain.params), ("setColReadCol", None));
        let bare = ProfileName::parse("setColReadCol(int *)");
        assert_eq!(bare.params.unwrap().len(), 1);
        assert_eq!(ProfileName::parse("kernel(void)").params, Some(vec![]));
        assert_eq!(ProfileName::parse("(anonymous namespace)::k(int)").base, "k");
    }

    #[test]
    fn numba_mangled_names_give_the_function_name() {
        let name = ProfileName::parse(
            "_ZN8__main__6kernelB2v1B96cw51cXTLSUwv1sDUaKthqqNgQsFkmJSFAoqdRBAM_2bOf6MwqE5ArrayIfLi1E1C7mutable7alignedE",
        );
        assert_eq!(name.base, "kernel");
        assert_eq!(name.scope, vec!["__main__"]);
        assert_eq!(ProfileName::parse("_Z6squarePfi").base, "square");
        assert_eq!(ProfileName::parse("_Z").base, "_Z");
    }

    #[test]
    fn param_types_compare_without_qualifier_order() {
        let written = ParamType::parse("const float *__restrict__");
        assert!(written.accepts(&ParamType::parse("float const*"), &[]));
        assert!(!written.accepts(&ParamType::parse("int const*"), &[]));
        assert!(ParamType::parse("const T *").accepts(&ParamType::parse("float const*"), &["T".to_string()]));
    }

    #[test]
    fn library_names_are_recognised() {
        let reason = |name: &str| library_reason(name, &ProfileName::parse(name));
        assert!(reason("ampere_sgemm_128x64_nn").unwrap().contains("cuBLAS"));
        assert!(reason("sm90_xmma_gemm_f16f16_f32").is_some());
        assert!(reason("void at::native::vectorized_elementwise_kernel<4, float>(int, float)").unwrap().contains("ATen"));
        assert!(reason("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<float>>(Params)").unwrap().contains("CUTLASS"));
        assert!(reason("setColReadCol(int *)").is_none());
        assert!(is_library_path("/usr/local/cuda-12.1/include/cub/block/block_load.cuh"));
        assert!(!is_library_path("/workspaces/CudaProgramming/csrc/smemSquare.cu"));
        assert_eq!(ProfileName::parse("add_kernel_0d1d2d3de").fallback_bases(), vec!["add_kernel"]);
    }
}
