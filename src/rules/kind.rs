//! What a kernel is: a library's, generated, a framework's own, or the user's; its family (GEMM,
//! attention, ...); and whether it is a warp-specialised Hopper design. Recognised from the kernel's
//! name with the table in `expert/kernels.toml`, and from its launch metrics.

use crate::facts::Facts;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// Who controls the kernel's code, which decides what advice the user can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// The user's own CUDA code: every knob is theirs.
    User,
    /// A library kernel (cuBLAS, CUTLASS, FlashAttention, ...): shapes, dtype, configuration.
    Library,
    /// Generated code (Triton, Inductor): the generator's knobs.
    Generated,
    /// A framework's own small kernels (PyTorch ATen): fusion, batching, CUDA Graphs.
    Framework,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Library => "library",
            Origin::Generated => "generated",
            Origin::Framework => "framework",
        }
    }
}

/// Kernel families (time by family is reported per profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    Gemm,
    Attention,
    Normalization,
    Elementwise,
    Reduction,
    Communication,
    Other,
}

impl Family {
    pub const ALL: [Family; 7] = [
        Family::Gemm,
        Family::Attention,
        Family::Normalization,
        Family::Elementwise,
        Family::Reduction,
        Family::Communication,
        Family::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Gemm => "gemm",
            Family::Attention => "attention",
            Family::Normalization => "normalization",
            Family::Elementwise => "elementwise",
            Family::Reduction => "reduction",
            Family::Communication => "communication",
            Family::Other => "other",
        }
    }

    /// The name a report shows ("GEMM", "attention", ...).
    pub fn label(self) -> &'static str {
        match self {
            Family::Gemm => "GEMM",
            Family::Attention => "attention",
            Family::Normalization => "normalisation",
            Family::Elementwise => "elementwise",
            Family::Reduction => "reduction",
            Family::Communication => "communication",
            Family::Other => "other",
        }
    }

    fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// What keet knows about a kernel beyond its metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelKind {
    pub origin: Origin,
    /// The library or generator ("cuBLAS", "Triton", ...), when recognised.
    pub library: Option<String>,
    pub family: Family,
    /// Few large blocks per SM, big shared memory and tensor-core work on a Hopper-class GPU: a
    /// warp-specialised (producer/consumer, TMA + wgmma) design whose low occupancy is deliberate.
    pub warp_specialized: bool,
}

impl KernelKind {
    /// Occupancy and launch shape are the library's or generator's choice, not a defect to fix in code.
    pub fn occupancy_by_design(&self) -> bool {
        self.origin != Origin::User || self.warp_specialized
    }
}

#[derive(Deserialize)]
struct Table {
    /// Templates that only wrap the real kernel ([`short_kernel_name`] looks through them).
    wrappers: Vec<String>,
    kernel: Vec<Entry>,
    family: Vec<FamilyEntry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "match")]
    patterns: Vec<String>,
    library: String,
    origin: String,
    family: Option<String>,
}

#[derive(Deserialize)]
struct FamilyEntry {
    name: String,
    #[serde(rename = "match")]
    patterns: Vec<String>,
}

const TABLE: &str = include_str!("../../expert/kernels.toml");

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| toml::from_str(TABLE).expect("expert/kernels.toml parses (checked by a unit test)"))
}

/// A kernel's function name without namespaces, template arguments or parameters
/// ("void at::native::vectorized_elementwise_kernel<4, F>(int)" → "vectorized_elementwise_kernel").
pub fn short_kernel_name(name: &str) -> String {
    let mut depth = 0usize;
    let mut plain = String::new();
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => break,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let last = plain.trim().rsplit("::").next().unwrap_or("").trim();
    let last = last.rsplit(' ').next().unwrap_or(last);
    if !last.is_empty() && !is_wrapper(last) {
        return last.to_string();
    }
    // `cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>`: the
    // first template argument that is not itself a wrapper is the name.
    let mut rest = name;
    for _ in 0..4 {
        let Some((_, inner)) = rest.split_once('<') else { break };
        let ident: String = inner.chars().take_while(|c| !matches!(c, '<' | '>' | ',' | '(')).collect();
        let ident = ident.trim().rsplit("::").next().unwrap_or("").trim();
        if ident.is_empty() {
            break;
        }
        if !is_wrapper(ident) {
            return ident.to_string();
        }
        rest = inner;
    }
    if !last.is_empty() {
        return last.to_string(); // a function that is only called `kernel`
    }
    name.trim_start_matches("void ").chars().take(60).collect()
}

/// A template that only wraps the real kernel (`expert/kernels.toml` `wrappers`).
fn is_wrapper(name: &str) -> bool {
    table().wrappers.iter().any(|w| w == name)
}

/// Recognises a kernel from its name and facts.
pub fn recognise(name: &str, facts: &Facts) -> KernelKind {
    let t = table();
    let entry = t.kernel.iter().find(|e| e.patterns.iter().any(|p| name.contains(p.as_str())));
    let lower = name.to_ascii_lowercase();
    let by_name = || {
        t.family
            .iter()
            .find(|f| f.patterns.iter().any(|p| lower.contains(&p.to_ascii_lowercase())))
            .and_then(|f| Family::parse(&f.name))
            .unwrap_or(Family::Other)
    };
    let family = entry.and_then(|e| e.family.as_deref()).and_then(Family::parse).unwrap_or_else(by_name);
    let origin = match entry.map(|e| e.origin.as_str()) {
        Some("library") => Origin::Library,
        Some("generated") => Origin::Generated,
        Some("framework") => Origin::Framework,
        _ => Origin::User,
    };
    KernelKind { origin, library: entry.map(|e| e.library.clone()), family, warp_specialized: warp_specialized(facts, family) }
}

/// Few large blocks (at most 2 per SM, 256+ threads), large shared memory per block (96 KiB+) and
/// matrix work (tensor pipe active, or a GEMM/attention kernel) on compute capability 9.0 or later
/// when known: the signature of warp-specialised Hopper kernels (cuBLAS nvjet, CUTLASS 3.x, FlashAttention-3).
fn warp_specialized(f: &Facts, family: Family) -> bool {
    let v = |x: &Option<crate::facts::Fact>| x.as_ref().map(|x| x.value);
    let few_blocks = f.occupancy_limit.as_ref().is_some_and(|o| o.blocks_per_sm.value <= 2.0);
    let big_blocks = v(&f.block_threads).is_some_and(|b| b >= 256.0);
    let big_smem = v(&f.shared_mem_per_block_bytes).is_some_and(|s| s >= 96.0 * 1024.0);
    let matrix = v(&f.tensor_pipe_pct).is_some_and(|t| t > 0.0) || matches!(family, Family::Gemm | Family::Attention);
    few_blocks && big_blocks && big_smem && matrix
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_names_drop_namespaces_templates_and_parameters() {
        assert_eq!(
            super::short_kernel_name("void at::native::vectorized_elementwise_kernel<4, F<int>>(int, float*)"),
            "vectorized_elementwise_kernel"
        );
        assert_eq!(super::short_kernel_name("nvjet_tst_64x8_64x16_2x1_v_bz_TNT"), "nvjet_tst_64x8_64x16_2x1_v_bz_TNT");
        assert_eq!(super::short_kernel_name("fused_moe_kernel"), "fused_moe_kernel");
        assert_eq!(super::short_kernel_name("kernel(float *)"), "kernel");
        assert_eq!(
            super::short_kernel_name("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x64_64x4_tn_align8>(Params)"),
            "cutlass_80_tensorop_s16816gemm_bf16_128x64_64x4_tn_align8"
        );
        assert_eq!(
            super::short_kernel_name(
                "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>>>>>>(T1::Params)"
            ),
            "FlashAttnFwdSm90"
        );
        assert_eq!(
            super::short_kernel_name("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int>, X>>(T1::Params)"),
            "GemmUniversal"
        );
    }

    use super::*;

    #[test]
    fn table_parses_and_names_real_families() {
        let t = table();
        assert!(!t.kernel.is_empty());
        for e in &t.kernel {
            assert!(matches!(e.origin.as_str(), "library" | "generated" | "framework"), "{}", e.library);
            if let Some(f) = &e.family {
                assert!(Family::parse(f).is_some(), "{f}");
            }
        }
        for f in &t.family {
            assert!(Family::parse(&f.name).is_some(), "{}", f.name);
        }
    }

    #[test]
    fn recognises_library_generated_and_user_kernels() {
        let f = Facts::default();
        let k = recognise("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", &f);
        assert_eq!((k.origin, k.family, k.library.as_deref()), (Origin::Library, Family::Gemm, Some("cuBLAS")));
        let k = recognise("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>", &f);
        assert_eq!((k.origin, k.family), (Origin::Library, Family::Attention));
        let k = recognise("void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(...)", &f);
        assert_eq!((k.origin, k.family), (Origin::Library, Family::Normalization));
        let k = recognise("triton_poi_fused_clamp_sub_0", &f);
        assert_eq!((k.origin, k.family), (Origin::Generated, Family::Elementwise));
        let k = recognise("triton_red_fused_sum_1", &f);
        assert_eq!((k.origin, k.family), (Origin::Generated, Family::Reduction));
        let k = recognise("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", &f);
        assert_eq!((k.origin, k.family), (Origin::Framework, Family::Elementwise));
        let k = recognise("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", &f);
        assert_eq!((k.origin, k.family), (Origin::Library, Family::Communication));
        let k = recognise("reduceNeighbored(int *, int *, unsigned int)", &f);
        assert_eq!((k.origin, k.family), (Origin::User, Family::Reduction));
        assert!(!k.occupancy_by_design());
    }
}
