//! What the CPU kernels of both block families (the 32-weight blocks of [`super::kernels`] and the
//! K-quants of [`super::kquants`]) share: the CPU feature check and the half-precision conversion,
//! so neither family imports the other for them.

/// True when the AVX2 kernels may be used on this CPU.
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True when the AVX-512F kernels (16 f32 lanes) may be used: the CPU has AVX-512F besides AVX2,
/// FMA and F16C, and `KEET_CPU=avx2` does not ask for the AVX2 kernels (side-by-side measurements).
pub fn has_avx512f() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let forced_avx2 = std::env::var("KEET_CPU").is_ok_and(|v| v.eq_ignore_ascii_case("avx2"));
        #[cfg(target_arch = "x86_64")]
        let detected = is_x86_feature_detected!("avx512f") && has_avx2();
        #[cfg(not(target_arch = "x86_64"))]
        let detected = false;
        !forced_avx2 && detected
    })
}

/// IEEE half -> single conversion (exact).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // subnormal: value = man * 2^-24
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
    } else if exp == 31 {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}
