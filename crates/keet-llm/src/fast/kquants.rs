//! K-quant blocks (GGUF Q4_K, Q5_K, Q6_K: 256 weights per block) computed in their quantized
//! form: activations quantized to 8 bits per block of 256 with the sums of every 16 (llama.cpp's
//! Q8_K), integer dot products with the 4/5/6-bit weights (AVX2, after llama.cpp and candle's
//! kernels), and a scalar version with the same semantics; plus dequantization of rows (embedding
//! lookups, the prompt GEMM).
//!
//! Block layouts (little endian, as in ggml):
//! * Q4_K, 144 bytes: f16 `d`, f16 `dmin`, 12 bytes of 6-bit scales and mins for 8 sub-blocks of
//!   32, 128 bytes of nibbles (each 32-byte run holds two sub-blocks: low then high nibbles);
//!   weight = d * scale[j] * q - dmin * min[j].
//! * Q5_K, 176 bytes: as Q4_K with 32 bytes of fifth bits (`qh`) before the nibbles.
//! * Q6_K, 210 bytes: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 signed 8-bit scales
//!   (one per 16 weights), f16 `d` last; weight = d * scale[i] * (q - 32).

/// Weights per K-quant block.
pub const QK_K: usize = 256;

pub const Q4K_BYTES: usize = 144;
pub const Q5K_BYTES: usize = 176;
pub const Q6K_BYTES: usize = 210;

/// The K-quant formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KType {
    Q4K,
    Q5K,
    Q6K,
}

impl KType {
    pub fn block_bytes(self) -> usize {
        match self {
            KType::Q4K => Q4K_BYTES,
            KType::Q5K => Q5K_BYTES,
            KType::Q6K => Q6K_BYTES,
        }
    }
}

#[inline]
fn rd_f16(b: &[u8], off: usize) -> f32 {
    super::cpu::f16_to_f32(u16::from_le_bytes([b[off], b[off + 1]]))
}

/// Activations quantized like llama.cpp's Q8_K: per block of 256, x ≈ d * qs, with the sum of the
/// quants of every 16 (`bsums`), for `t` vectors stored one after another.
#[derive(Default, Clone)]
pub struct QActK {
    pub qs: Vec<i8>,
    pub d: Vec<f32>,
    pub bsums: Vec<i16>,
}

/// The per-token values the tiled prompt GEMMs take beside the quants, token-minor (`tp` tokens,
/// padded with zeros): `scales` `[block][token]` the Q8_K block scales; `sums16` / `sums32`
/// `[block][group][token]` the quants' sums over each 16 (32) of a block times the block scale
/// (`sums16` only `with_sums16`, for Q6_K's offset; `sums32` for the Q4_K/Q5_K mins).
pub struct TileSums {
    pub scales: Vec<f32>,
    pub sums16: Vec<f32>,
    pub sums32: Vec<f32>,
}

impl TileSums {
    /// [`TileSums`] of the first `t_n` vectors of `a` (each `nb` blocks), `tp` tokens wide.
    pub fn build(a: &QActK, t_n: usize, nb: usize, tp: usize, with_sums16: bool) -> TileSums {
        let mut scales = vec![0f32; nb * tp];
        let mut sums16 = vec![0f32; if with_sums16 { nb * 16 * tp } else { 0 }];
        let mut sums32 = vec![0f32; nb * 8 * tp];
        for t in 0..t_n {
            for b in 0..nb {
                let ad = a.d[t * nb + b];
                scales[b * tp + t] = ad;
                let bs = &a.bsums[(t * nb + b) * 16..(t * nb + b + 1) * 16];
                if with_sums16 {
                    for g in 0..16 {
                        sums16[(b * 16 + g) * tp + t] = bs[g] as f32 * ad;
                    }
                }
                for j in 0..8 {
                    sums32[(b * 8 + j) * tp + t] = (bs[2 * j] as i32 + bs[2 * j + 1] as i32) as f32 * ad;
                }
            }
        }
        TileSums { scales, sums16, sums32 }
    }
}

impl QActK {
    /// Quantizes `x` (a multiple of 256 values) block by block.
    pub fn quantize(&mut self, x: &[f32]) {
        self.resize(x.len());
        for (b, xs) in x.chunks_exact(QK_K).enumerate() {
            self.d[b] = quantize_block(xs, &mut self.qs[b * QK_K..(b + 1) * QK_K], &mut self.bsums[b * 16..(b + 1) * 16]);
        }
    }

    /// Room for `n` values (a multiple of 256), to be filled block by block with [`quantize_block`].
    pub fn resize(&mut self, n: usize) {
        let nb = n / QK_K;
        self.qs.resize(n, 0);
        self.d.resize(nb, 0.0);
        self.bsums.resize(nb * QK_K / 16, 0);
    }
}

/// One Q8_K block: the 256 values `xs` become `qs` (with the sums of every 16 in `bsums`); returns
/// the block scale.
pub fn quantize_block(xs: &[f32], qs: &mut [i8], bsums: &mut [i16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::has_avx2() && xs.len() == QK_K && qs.len() == QK_K && bsums.len() == 16 {
        // SAFETY: AVX2 present; the lengths are checked.
        return unsafe { avx::quantize_block(xs, qs, bsums) };
    }
    quantize_block_scalar(xs, qs, bsums)
}

fn quantize_block_scalar(xs: &[f32], qs: &mut [i8], bsums: &mut [i16]) -> f32 {
    // As ggml's quantize_row_q8_K: the scale comes from the value of largest magnitude, with its
    // sign (that value becomes -127).
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in xs {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    let d = if amax == 0.0 {
        qs.fill(0);
        0.0
    } else {
        let iscale = -127.0 / max;
        for (q, &v) in qs.iter_mut().zip(xs) {
            *q = (iscale * v).round().clamp(-128.0, 127.0) as i8;
        }
        1.0 / iscale
    };
    for (g, s) in bsums.iter_mut().enumerate() {
        *s = qs[g * 16..(g + 1) * 16].iter().map(|&q| q as i16).sum();
    }
    d
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K / Q5_K block (`q`: the 12 bytes).
#[inline]
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// The 6-bit scales and mins of a Q4_K/Q5_K block (`sc`: its 12 bytes) as 16 bytes, the 8 scales
/// then the 8 mins, packed little endian into 4 words (ggml's `get_scale_min_k4` for all 8
/// sub-blocks at once, for the SIMD kernels).
#[inline(always)]
pub(super) fn scales_and_mins_k4(sc: [u8; 12]) -> [u32; 4] {
    const KMASK1: u32 = 0x3f3f_3f3f;
    const KMASK2: u32 = 0x0f0f_0f0f;
    const KMASK3: u32 = 0x0303_0303;
    let word = |i: usize| u32::from_le_bytes([sc[4 * i], sc[4 * i + 1], sc[4 * i + 2], sc[4 * i + 3]]);
    let mut u = [word(0), word(1), word(2), 0];
    u[3] = ((u[2] >> 4) & KMASK2) | (((u[1] >> 6) & KMASK3) << 4);
    let uaux = u[1] & KMASK1;
    u[1] = (u[2] & KMASK2) | (((u[0] >> 6) & KMASK3) << 4);
    u[2] = uaux;
    u[0] &= KMASK1;
    u
}

/// The integer quants of one block (0..31 for Q4_K/Q5_K, -32..31 for Q6_K) in weight order, and
/// the integer scale of every 16 weights and min of every 32 (mins are 0 for Q6_K).
fn block_ints(fmt: KType, blk: &[u8], q: &mut [i8; QK_K], sc16: &mut [i32; 16], mins: &mut [i32; 8]) {
    match fmt {
        KType::Q4K | KType::Q5K => {
            let scales = &blk[4..16];
            let (qh, qs) = if fmt == KType::Q5K { (Some(&blk[16..48]), &blk[48..176]) } else { (None, &blk[16..144]) };
            for j in 0..8 {
                let (s, m) = scale_min_k4(j, scales);
                sc16[2 * j] = s as i32;
                sc16[2 * j + 1] = s as i32;
                mins[j] = m as i32;
            }
            for c in 0..4 {
                for l in 0..32 {
                    let byte = qs[c * 32 + l];
                    let (mut lo, mut hi) = ((byte & 0xf) as i8, (byte >> 4) as i8);
                    if let Some(qh) = qh {
                        lo += (((qh[l] >> (2 * c)) & 1) << 4) as i8;
                        hi += (((qh[l] >> (2 * c + 1)) & 1) << 4) as i8;
                    }
                    q[c * 64 + l] = lo;
                    q[c * 64 + 32 + l] = hi;
                }
            }
        }
        KType::Q6K => {
            let (ql, qh, sc) = (&blk[0..128], &blk[128..192], &blk[192..208]);
            for (s, &v) in sc16.iter_mut().zip(sc) {
                *s = v as i8 as i32;
            }
            mins.fill(0);
            for n in 0..2 {
                let (ql, qh) = (&ql[n * 64..], &qh[n * 32..]);
                let y = &mut q[n * 128..];
                for l in 0..32 {
                    y[l] = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) as i8 - 32;
                    y[l + 32] = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                    y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                    y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
                }
            }
        }
    }
}

/// `(d, dmin)` of a block (`dmin` 0 for Q6_K).
#[inline]
fn block_scales(fmt: KType, blk: &[u8]) -> (f32, f32) {
    match fmt {
        KType::Q4K | KType::Q5K => (rd_f16(blk, 0), rd_f16(blk, 2)),
        KType::Q6K => (rd_f16(blk, 208), 0.0),
    }
}

/// Dequantizes one row (a whole number of blocks) into `out`.
pub fn dequant_row(fmt: KType, row: &[u8], out: &mut [f32]) {
    let bb = fmt.block_bytes();
    let (mut q, mut sc, mut mins) = ([0i8; QK_K], [0i32; 16], [0i32; 8]);
    for (blk, o) in row.chunks_exact(bb).zip(out.chunks_exact_mut(QK_K)) {
        block_ints(fmt, blk, &mut q, &mut sc, &mut mins);
        let (d, dmin) = block_scales(fmt, blk);
        for (i, (ov, &qv)) in o.iter_mut().zip(q.iter()).enumerate() {
            *ov = d * sc[i / 16] as f32 * qv as f32 - dmin * mins[i / 32] as f32;
        }
    }
}

/// Scalar dot product of one row with one Q8_K activation vector (exact integer sums per block).
pub fn dot_row_scalar(fmt: KType, row: &[u8], qs: &[i8], d: &[f32], bsums: &[i16]) -> f32 {
    let bb = fmt.block_bytes();
    let (mut q, mut sc, mut mins) = ([0i8; QK_K], [0i32; 16], [0i32; 8]);
    let mut acc = 0f32;
    for (b, blk) in row.chunks_exact(bb).enumerate() {
        block_ints(fmt, blk, &mut q, &mut sc, &mut mins);
        let (wd, wmin) = block_scales(fmt, blk);
        let a = &qs[b * QK_K..(b + 1) * QK_K];
        let mut isum = 0i32;
        for g in 0..16 {
            let s: i32 = (0..16).map(|l| q[g * 16 + l] as i32 * a[g * 16 + l] as i32).sum();
            isum += sc[g] * s;
        }
        let bs = &bsums[b * 16..(b + 1) * 16];
        let msum: i32 = (0..8).map(|j| mins[j] * (bs[2 * j] as i32 + bs[2 * j + 1] as i32)).sum();
        acc += d[b] * (wd * isum as f32 - wmin * msum as f32);
    }
    acc
}

/// Dot products of `out.len()` consecutive rows (`w`, each `k` wide) with one Q8_K activation
/// vector.
pub fn dot_rows(fmt: KType, w: &[u8], k: usize, qs: &[i8], d: &[f32], bsums: &[i16], out: &mut [f32], simd: bool) {
    let nb = k / QK_K;
    let rb = nb * fmt.block_bytes();
    assert!(k % QK_K == 0 && w.len() >= rb * out.len() && qs.len() >= k && d.len() >= nb && bsums.len() >= nb * 16);
    #[cfg(target_arch = "x86_64")]
    if simd {
        for (r, o) in out.iter_mut().enumerate() {
            let row = &w[r * rb..(r + 1) * rb];
            // SAFETY: `simd` is only true when `cpu::has_avx2()` holds; `row` holds `nb` whole
            // blocks and the activations `nb` blocks (asserted above); the kernels read no more.
            *o = unsafe {
                match fmt {
                    KType::Q4K => avx::dot_q4k(row, nb, qs, d, bsums),
                    KType::Q5K => avx::dot_q5k(row, nb, qs, d, bsums),
                    KType::Q6K => avx::dot_q6k(row, nb, qs, d, bsums),
                }
            };
        }
        return;
    }
    let _ = simd;
    for (r, o) in out.iter_mut().enumerate() {
        *o = dot_row_scalar(fmt, &w[r * rb..(r + 1) * rb], qs, d, bsums);
    }
}

/// Most tokens [`dot_rows_tokens`] takes in one call.
pub const MAX_DOT_TOKENS: usize = 8;

/// [`dot_rows`] for `t_n` (at most [`MAX_DOT_TOKENS`]) Q8_K vectors at once, token-major (`qs`
/// `t_n * k`, `d` `t_n * nb`, `bsums` `t_n * nb * 16`): `out[t * ldo + r]` is, bit for bit, what
/// [`dot_rows`] gives for row `r` and vector `t` alone (the same operations per token, in the same
/// order), but each block of weights is unpacked once for all the vectors. A decode step's logits
/// therefore do not depend on how many tokens ran with it (what lets drafted tokens be checked in
/// one pass), and a few tokens cost little more than one.
#[allow(clippy::too_many_arguments)]
pub fn dot_rows_tokens(
    fmt: KType,
    w: &[u8],
    rows: usize,
    k: usize,
    qs: &[i8],
    d: &[f32],
    bsums: &[i16],
    t_n: usize,
    out: &mut [f32],
    ldo: usize,
    simd: bool,
) {
    let nb = k / QK_K;
    let rb = nb * fmt.block_bytes();
    assert!(t_n <= MAX_DOT_TOKENS && k % QK_K == 0 && w.len() >= rows * rb && ldo >= rows);
    assert!(qs.len() >= t_n * k && d.len() >= t_n * nb && bsums.len() >= t_n * nb * 16);
    assert!(t_n == 0 || out.len() >= (t_n - 1) * ldo + rows);
    #[cfg(target_arch = "x86_64")]
    if simd {
        let mut per_token = [0f32; MAX_DOT_TOKENS];
        for r in 0..rows {
            let row = &w[r * rb..(r + 1) * rb];
            // SAFETY: `simd` is only true when `cpu::has_avx2()` holds; `row` holds `nb` whole
            // blocks and the activations `t_n` vectors of `nb` blocks (asserted above).
            unsafe {
                match fmt {
                    KType::Q4K => avx::dot_q4k_tokens(row, nb, qs, d, bsums, t_n, &mut per_token),
                    KType::Q5K => avx::dot_q5k_tokens(row, nb, qs, d, bsums, t_n, &mut per_token),
                    KType::Q6K => avx::dot_q6k_tokens(row, nb, qs, d, bsums, t_n, &mut per_token),
                }
            }
            for (t, v) in per_token[..t_n].iter().enumerate() {
                out[t * ldo + r] = *v;
            }
        }
        return;
    }
    for t in 0..t_n {
        let o = &mut out[t * ldo..t * ldo + rows];
        dot_rows(
            fmt,
            &w[..rows * rb],
            k,
            &qs[t * k..(t + 1) * k],
            &d[t * nb..(t + 1) * nb],
            &bsums[t * nb * 16..(t + 1) * nb * 16],
            o,
            simd,
        );
    }
}

/// Prompt GEMM in quantized form: `out[r * ldo + t] = w[r] · x[t]` for the `rows` rows of `w`
/// (plain layout, `k` wide) and the first `t_n` vectors of `a` (Q8_K, token-major). Each block of
/// a row is unpacked once and multiplied with every token, so the integer dot products run at
/// the rate of the multiply units rather than of the unpacking.
pub fn gemm_rows(fmt: KType, w: &[u8], rows: usize, k: usize, a: &QActK, t_n: usize, out: &mut [f32], ldo: usize, simd: bool) {
    let nb = k / QK_K;
    let rb = nb * fmt.block_bytes();
    assert!(k % QK_K == 0 && w.len() >= rb * rows && a.qs.len() >= t_n * k && a.d.len() >= t_n * nb);
    assert!(a.bsums.len() >= t_n * nb * 16 && ldo >= t_n && (rows == 0 || out.len() >= (rows - 1) * ldo + t_n));
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` implies AVX2/FMA/F16C; the asserts bound every read of `w` (rows x rb),
        // of the activations (t_n vectors of k, nb scales, 16 nb sums) and every write of `out`.
        unsafe { avx::gemm_rows(fmt, w, rows, nb, a, t_n, out, ldo) };
        return;
    }
    let _ = simd;
    for r in 0..rows {
        let row = &w[r * rb..(r + 1) * rb];
        for t in 0..t_n {
            out[r * ldo + t] =
                dot_row_scalar(fmt, row, &a.qs[t * k..(t + 1) * k], &a.d[t * nb..(t + 1) * nb], &a.bsums[t * nb * 16..(t + 1) * nb * 16]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::QK_K;
    use std::arch::x86_64::*;

    /// [`super::quantize_block_scalar`] with 8 lanes, the same bits: the largest magnitude by a
    /// vector max and the first value that has it; each product rounded half away from zero
    /// (truncate, then step away from zero where the remainder is at least one half, exact).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn quantize_block(xs: &[f32], qs: &mut [i8], bsums: &mut [i16]) -> f32 {
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let mut amax_v = _mm256_setzero_ps();
        for c in 0..QK_K / 8 {
            amax_v = _mm256_max_ps(amax_v, _mm256_and_ps(_mm256_loadu_ps(xs.as_ptr().add(8 * c)), abs_mask));
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), amax_v);
        let amax = lanes.iter().fold(0f32, |m, v| m.max(*v));
        if amax == 0.0 || amax.is_nan() {
            return super::quantize_block_scalar(xs, qs, bsums);
        }
        let max = *xs.iter().find(|v| v.abs() == amax).expect("the largest magnitude is one of the values");
        let iscale = -127.0 / max;
        let sv = _mm256_set1_ps(iscale);
        let half = _mm256_set1_ps(0.5);
        let one = _mm256_set1_ps(1.0);
        let sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MIN));
        let (lo, hi) = (_mm256_set1_ps(-128.0), _mm256_set1_ps(127.0));
        for c in 0..QK_K / 8 {
            let p = _mm256_mul_ps(_mm256_loadu_ps(xs.as_ptr().add(8 * c)), sv);
            let t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            let rem = _mm256_and_ps(_mm256_sub_ps(p, t), abs_mask);
            let away = _mm256_and_ps(_mm256_cmp_ps(rem, half, _CMP_GE_OQ), _mm256_or_ps(one, _mm256_and_ps(p, sign_mask)));
            let r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(t, away), lo), hi);
            let mut ints = [0i32; 8];
            _mm256_storeu_si256(ints.as_mut_ptr() as *mut __m256i, _mm256_cvtps_epi32(r));
            for (q, v) in qs[8 * c..8 * c + 8].iter_mut().zip(ints) {
                *q = v as i8;
            }
        }
        for (g, s) in bsums.iter_mut().enumerate() {
            *s = qs[g * 16..(g + 1) * 16].iter().map(|&q| q as i16).sum();
        }
        1.0 / iscale
    }

    /// How far ahead of the block being computed the GEMV kernels prefetch the weight stream.
    /// Decode reads every weight once per token from DRAM; one core streaming a Q4_K matrix
    /// without it reached 15-16 GMAC/s here, with 2 KiB ahead 19.6-21.0 (best of 15 over a
    /// 150 MB matrix), while the same kernel computes at 17-26 GMAC/s from cache: the hardware
    /// prefetcher alone does not keep enough lines in flight. 512 bytes gave 17.4; 4 KiB no more
    /// than 2 KiB.
    const PREFETCH_BYTES: usize = 2048;

    /// Prefetches the `len` bytes that start `PREFETCH_BYTES` after `x` into L1. A prefetch
    /// never faults, so reaching past the end of the matrix is harmless.
    #[inline(always)]
    unsafe fn prefetch_ahead(x: *const u8, len: usize) {
        let mut off = 0;
        while off < len {
            _mm_prefetch::<_MM_HINT_T0>(x.wrapping_add(PREFETCH_BYTES + off) as *const i8);
            off += 64;
        }
    }

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    #[inline(always)]
    unsafe fn f16_at(p: *const u8) -> f32 {
        super::super::cpu::f16_to_f32((p as *const u16).read_unaligned())
    }

    /// Byte shuffles that broadcast 16-bit scale `i` (0..8) to all 16 lanes of a 256-bit vector.
    const SHUF_K4: [[u8; 32]; 8] = {
        let mut t = [[0u8; 32]; 8];
        let mut i = 0;
        while i < 8 {
            let mut l = 0;
            while l < 16 {
                t[i][2 * l] = 2 * i as u8;
                t[i][2 * l + 1] = 2 * i as u8 + 1;
                l += 1;
            }
            i += 1;
        }
        t
    };

    /// Byte shuffles that broadcast byte `2i` to the low 8 lanes and `2i+1` to the high 8.
    const SHUF_Q6: [[u8; 16]; 8] = {
        let mut t = [[0u8; 16]; 8];
        let mut i = 0;
        while i < 8 {
            let mut l = 0;
            while l < 8 {
                t[i][l] = 2 * i as u8;
                t[i][l + 8] = 2 * i as u8 + 1;
                l += 1;
            }
            i += 1;
        }
        t
    };

    /// The 8 scales and 8 mins of a Q4_K/Q5_K block as 16 u16 lanes (scales low, mins high).
    #[inline(always)]
    unsafe fn mins_and_scales(sc: *const u8) -> __m256i {
        let u = super::scales_and_mins_k4((sc as *const [u8; 12]).read_unaligned());
        _mm256_cvtepu8_epi16(_mm_set_epi32(u[3] as i32, u[2] as i32, u[1] as i32, u[0] as i32))
    }

    /// `Σ_j min[j] * (bsum[2j] + bsum[2j+1])` as 4 i32 lanes.
    #[inline(always)]
    unsafe fn min_products(ms: __m256i, bsums: *const i16) -> __m128i {
        let q8sums = _mm256_loadu_si256(bsums as *const __m256i);
        let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
        _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), q8s)
    }

    /// Unpacks block `x` of format `fmt` into 8 vectors of 32 unsigned quants (weight order),
    /// the i16 scale of each 32 (per 16 for Q6_K: low and high half), and the i16 factors of
    /// the activation sums of 16 (`mins` of Q4_K/Q5_K, the scales of Q6_K for its offset of 32).
    /// Returns `(d, dmin)`: the weight is `d * scale * q - dmin * min` (Q6_K: `dmin = 32 d`).
    #[inline(always)]
    unsafe fn unpack(fmt: super::KType, x: *const u8, wq: &mut [__m256i; 8], sc: &mut [__m256i; 8], mf: &mut __m256i) -> (f32, f32) {
        let m4 = _mm256_set1_epi8(0xf);
        match fmt {
            super::KType::Q4K | super::KType::Q5K => {
                let ms = mins_and_scales(x.add(4));
                let s8: [i16; 16] = std::mem::transmute(ms);
                for j in 0..8 {
                    sc[j] = _mm256_set1_epi16(s8[j]);
                }
                // mins of sub-block j apply to the sums of 16 number 2j and 2j+1
                let mins = _mm256_extracti128_si256(ms, 1);
                *mf = _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
                let q5 = fmt == super::KType::Q5K;
                let (qs, hbits) =
                    if q5 { (x.add(48), _mm256_loadu_si256(x.add(16) as *const __m256i)) } else { (x.add(16), _mm256_setzero_si256()) };
                let sixteen = _mm256_set1_epi8(16);
                let mut hmask = _mm256_set1_epi8(1);
                for c in 0..4 {
                    let bits = _mm256_loadu_si256(qs.add(32 * c) as *const __m256i);
                    let mut lo = _mm256_and_si256(bits, m4);
                    let mut hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
                    if q5 {
                        let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, hmask), hmask), sixteen);
                        hmask = _mm256_slli_epi16(hmask, 1);
                        let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, hmask), hmask), sixteen);
                        hmask = _mm256_slli_epi16(hmask, 1);
                        lo = _mm256_add_epi8(lo, h0);
                        hi = _mm256_add_epi8(hi, h1);
                    }
                    wq[2 * c] = lo;
                    wq[2 * c + 1] = hi;
                }
                (f16_at(x), f16_at(x.add(2)))
            }
            super::KType::Q6K => {
                let m2 = _mm256_set1_epi8(3);
                let scales = _mm_loadu_si128(x.add(192) as *const __m128i);
                let s16 = _mm256_cvtepi8_epi16(scales);
                *mf = s16;
                let s: [i16; 16] = std::mem::transmute(s16);
                for j in 0..8 {
                    sc[j] = _mm256_set_m128i(_mm_set1_epi16(s[2 * j + 1]), _mm_set1_epi16(s[2 * j]));
                }
                for n in 0..2 {
                    let b1 = _mm256_loadu_si256(x.add(64 * n) as *const __m256i);
                    let b2 = _mm256_loadu_si256(x.add(64 * n + 32) as *const __m256i);
                    let h = _mm256_loadu_si256(x.add(128 + 32 * n) as *const __m256i);
                    let h0 = _mm256_slli_epi16(_mm256_and_si256(h, m2), 4);
                    let h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4);
                    let h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4);
                    let h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4);
                    wq[4 * n] = _mm256_or_si256(_mm256_and_si256(b1, m4), h0);
                    wq[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(b2, m4), h1);
                    wq[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), h2);
                    wq[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), h3);
                }
                let d = f16_at(x.add(208));
                (d, 32.0 * d)
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn gemm_rows(
        fmt: super::KType,
        w: &[u8],
        rows: usize,
        nb: usize,
        a: &super::QActK,
        t_n: usize,
        out: &mut [f32],
        ldo: usize,
    ) {
        let bb = fmt.block_bytes();
        let k = nb * QK_K;
        let mut acc = vec![_mm256_setzero_ps(); t_n];
        let mut wq = [_mm256_setzero_si256(); 8];
        let mut sc = [_mm256_setzero_si256(); 8];
        let mut mf = _mm256_setzero_si256();
        for r in 0..rows {
            acc.fill(_mm256_setzero_ps());
            for b in 0..nb {
                let x = w.as_ptr().add((r * nb + b) * bb);
                let (d, dmin) = unpack(fmt, x, &mut wq, &mut sc, &mut mf);
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let q8 = a.qs.as_ptr().add(t * k + b * QK_K);
                    let mut sumi = _mm256_setzero_si256();
                    for j in 0..8 {
                        let av = _mm256_loadu_si256(q8.add(32 * j) as *const __m256i);
                        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(wq[j], av), sc[j]));
                    }
                    let ad = *a.d.get_unchecked(t * nb + b);
                    let bs = _mm256_loadu_si256(a.bsums.as_ptr().add((t * nb + b) * 16) as *const __m256i);
                    let corr = _mm256_cvtepi32_ps(_mm256_madd_epi16(mf, bs));
                    *acc_t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d * ad), *acc_t);
                    *acc_t = _mm256_fmadd_ps(corr, _mm256_set1_ps(-dmin * ad), *acc_t);
                }
            }
            for (t, acc_t) in acc.iter().enumerate() {
                *out.get_unchecked_mut(r * ldo + t) = hsum(*acc_t);
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q4k(row: &[u8], nb: usize, qs: &[i8], d: &[f32], bsums: &[i16]) -> f32 {
        let m4 = _mm256_set1_epi8(0xf);
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        for b in 0..nb {
            let x = row.as_ptr().add(b * super::Q4K_BYTES);
            prefetch_ahead(x, super::Q4K_BYTES);
            let yd = *d.get_unchecked(b);
            let dd = yd * f16_at(x);
            let dmin = -yd * f16_at(x.add(2));
            let ms = mins_and_scales(x.add(4));
            let prod = min_products(ms, bsums.as_ptr().add(b * 16));
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
            let sc128 = _mm256_castsi256_si128(ms);
            let scales = _mm256_set_m128i(sc128, sc128);
            let mut q4 = x.add(16);
            let mut q8 = qs.as_ptr().add(b * QK_K);
            let mut sumi = _mm256_setzero_si256();
            for j in 0..QK_K / 64 {
                let scale_l = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j].as_ptr() as *const __m256i));
                let scale_h = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j + 1].as_ptr() as *const __m256i));
                let q4bits = _mm256_loadu_si256(q4 as *const __m256i);
                q4 = q4.add(32);
                let q4l = _mm256_and_si256(q4bits, m4);
                let q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
                let q8l = _mm256_loadu_si256(q8 as *const __m256i);
                let q8h = _mm256_loadu_si256(q8.add(32) as *const __m256i);
                q8 = q8.add(64);
                let pl = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
                let ph = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), acc);
        }
        let acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
        let acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
        hsum(acc) + _mm_cvtss_f32(acc_m)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q5k(row: &[u8], nb: usize, qs: &[i8], d: &[f32], bsums: &[i16]) -> f32 {
        let m4 = _mm256_set1_epi8(0xf);
        let mone = _mm256_set1_epi8(1);
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        for b in 0..nb {
            let x = row.as_ptr().add(b * super::Q5K_BYTES);
            prefetch_ahead(x, super::Q5K_BYTES);
            let yd = *d.get_unchecked(b);
            let dd = yd * f16_at(x);
            let dmin = -yd * f16_at(x.add(2));
            let ms = mins_and_scales(x.add(4));
            let prod = min_products(ms, bsums.as_ptr().add(b * 16));
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
            let sc128 = _mm256_castsi256_si128(ms);
            let scales = _mm256_set_m128i(sc128, sc128);
            let hbits = _mm256_loadu_si256(x.add(16) as *const __m256i);
            let mut q5 = x.add(48);
            let mut q8 = qs.as_ptr().add(b * QK_K);
            let mut sumi = _mm256_setzero_si256();
            let mut hmask = mone;
            for j in 0..QK_K / 64 {
                let scale_0 = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j].as_ptr() as *const __m256i));
                let scale_1 = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j + 1].as_ptr() as *const __m256i));
                let q5bits = _mm256_loadu_si256(q5 as *const __m256i);
                q5 = q5.add(32);
                // The fifth bit of each byte: 16 where the hbits bit of this sub-block is set.
                let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, hmask), hmask), _mm256_set1_epi8(16));
                hmask = _mm256_slli_epi16(hmask, 1);
                let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, hmask), hmask), _mm256_set1_epi8(16));
                hmask = _mm256_slli_epi16(hmask, 1);
                let q5_0 = _mm256_add_epi8(_mm256_and_si256(q5bits, m4), h0);
                let q5_1 = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4), h1);
                let q8_0 = _mm256_loadu_si256(q8 as *const __m256i);
                let q8_1 = _mm256_loadu_si256(q8.add(32) as *const __m256i);
                q8 = q8.add(64);
                let p0 = _mm256_madd_epi16(scale_0, _mm256_maddubs_epi16(q5_0, q8_0));
                let p1 = _mm256_madd_epi16(scale_1, _mm256_maddubs_epi16(q5_1, q8_1));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), acc);
        }
        let acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
        let acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
        hsum(acc) + _mm_cvtss_f32(acc_m)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q6k(row: &[u8], nb: usize, qs: &[i8], d: &[f32], bsums: &[i16]) -> f32 {
        let m4 = _mm256_set1_epi8(0xf);
        let m2 = _mm256_set1_epi8(3);
        let mut acc = _mm256_setzero_ps();
        for b in 0..nb {
            let x = row.as_ptr().add(b * super::Q6K_BYTES);
            prefetch_ahead(x, super::Q6K_BYTES);
            let dd = *d.get_unchecked(b) * f16_at(x.add(208));
            let mut q4 = x;
            let mut qh = x.add(128);
            let mut q8 = qs.as_ptr().add(b * QK_K);
            let scales = _mm_loadu_si128(x.add(192) as *const __m128i);
            let mut sumi = _mm256_setzero_si256();
            for j in 0..QK_K / 128 {
                let is = j * 4;
                let sh = |i: usize| _mm_loadu_si128(SHUF_Q6[i].as_ptr() as *const __m128i);
                let scale_0 = _mm_shuffle_epi8(scales, sh(is));
                let scale_1 = _mm_shuffle_epi8(scales, sh(is + 1));
                let scale_2 = _mm_shuffle_epi8(scales, sh(is + 2));
                let scale_3 = _mm_shuffle_epi8(scales, sh(is + 3));
                let q4bits1 = _mm256_loadu_si256(q4 as *const __m256i);
                let q4bits2 = _mm256_loadu_si256(q4.add(32) as *const __m256i);
                q4 = q4.add(64);
                let q4bits_h = _mm256_loadu_si256(qh as *const __m256i);
                qh = qh.add(32);
                let q4h_0 = _mm256_slli_epi16(_mm256_and_si256(q4bits_h, m2), 4);
                let q4h_1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 2), m2), 4);
                let q4h_2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 4), m2), 4);
                let q4h_3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 6), m2), 4);
                let q4_0 = _mm256_or_si256(_mm256_and_si256(q4bits1, m4), q4h_0);
                let q4_1 = _mm256_or_si256(_mm256_and_si256(q4bits2, m4), q4h_1);
                let q4_2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m4), q4h_2);
                let q4_3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m4), q4h_3);
                let q8_0 = _mm256_loadu_si256(q8 as *const __m256i);
                let q8_1 = _mm256_loadu_si256(q8.add(32) as *const __m256i);
                let q8_2 = _mm256_loadu_si256(q8.add(64) as *const __m256i);
                let q8_3 = _mm256_loadu_si256(q8.add(96) as *const __m256i);
                q8 = q8.add(128);
                // q * a of 6-bit q and |a| <= 127 fits i16 pairs; the offset of 32 is taken off
                // once per block below, from the activation sums of 16.
                let p0 = _mm256_maddubs_epi16(q4_0, q8_0);
                let p1 = _mm256_maddubs_epi16(q4_1, q8_1);
                let p2 = _mm256_maddubs_epi16(q4_2, q8_2);
                let p3 = _mm256_maddubs_epi16(q4_3, q8_3);
                let p0 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scale_0), p0);
                let p1 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scale_1), p1);
                let p2 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scale_2), p2);
                let p3 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scale_3), p3);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p2, p3));
            }
            // Σ scale[i] * (q - 32) * a = Σ scale[i] * q * a - 32 Σ scale[i] * bsum[i] over the
            // 16 groups of 16: one multiply per block instead of one per 32 weights (decode spends
            // a third of its time in Q6_K, the output head and half the FFN down projections).
            let bs = _mm256_loadu_si256(bsums.as_ptr().add(b * 16) as *const __m256i);
            let offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scales), bs);
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum(acc)
    }

    /// [`dot_q4k`] for `t_n` token vectors: the weight side of each block once, then per token
    /// exactly the operations of [`dot_q4k`] in its order.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q4k_tokens(row: &[u8], nb: usize, qs: &[i8], d: &[f32], bsums: &[i16], t_n: usize, out: &mut [f32; 8]) {
        let m4 = _mm256_set1_epi8(0xf);
        let mut acc = [_mm256_setzero_ps(); 8];
        let mut acc_m = [_mm_setzero_ps(); 8];
        for b in 0..nb {
            let x = row.as_ptr().add(b * super::Q4K_BYTES);
            prefetch_ahead(x, super::Q4K_BYTES);
            let (xd, xmin) = (f16_at(x), f16_at(x.add(2)));
            let ms = mins_and_scales(x.add(4));
            let sc128 = _mm256_castsi256_si128(ms);
            let scales = _mm256_set_m128i(sc128, sc128);
            let mut wl = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 4];
            let mut wh = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 4];
            let mut q4 = x.add(16);
            for j in 0..QK_K / 64 {
                let scale_l = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j].as_ptr() as *const __m256i));
                let scale_h = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j + 1].as_ptr() as *const __m256i));
                let q4bits = _mm256_loadu_si256(q4 as *const __m256i);
                q4 = q4.add(32);
                wl[j] = (scale_l, _mm256_and_si256(q4bits, m4));
                wh[j] = (scale_h, _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4));
            }
            block_tokens_k4(&wl, &wh, ms, (xd, xmin), qs, d, bsums, (b, nb), t_n, &mut acc, &mut acc_m);
        }
        finish_tokens_k4(&acc, &acc_m, t_n, out);
    }

    /// Q4_K/Q5_K block `b` (of `nb` per row) of [`dot_q4k_tokens`]/[`dot_q5k_tokens`], per token:
    /// exactly the operations of [`dot_q4k`] after the unpacking, in its order. `low` and `high`
    /// hold each 64-weight step's (scales, quants) of the low and high 32 weights.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn block_tokens_k4(
        low: &[(__m256i, __m256i); 4],
        high: &[(__m256i, __m256i); 4],
        ms: __m256i,
        (xd, xmin): (f32, f32),
        qs: &[i8],
        d: &[f32],
        bsums: &[i16],
        (b, nb): (usize, usize),
        t_n: usize,
        acc: &mut [__m256; 8],
        acc_m: &mut [__m128; 8],
    ) {
        let k = nb * QK_K;
        for t in 0..t_n {
            let yd = *d.get_unchecked(t * nb + b);
            let dd = yd * xd;
            let dmin = -yd * xmin;
            let prod = min_products(ms, bsums.as_ptr().add((t * nb + b) * 16));
            acc_m[t] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m[t]);
            let mut q8 = qs.as_ptr().add(t * k + b * QK_K);
            let mut sumi = _mm256_setzero_si256();
            for j in 0..QK_K / 64 {
                let q8l = _mm256_loadu_si256(q8 as *const __m256i);
                let q8h = _mm256_loadu_si256(q8.add(32) as *const __m256i);
                q8 = q8.add(64);
                let pl = _mm256_madd_epi16(low[j].0, _mm256_maddubs_epi16(low[j].1, q8l));
                let ph = _mm256_madd_epi16(high[j].0, _mm256_maddubs_epi16(high[j].1, q8h));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), acc[t]);
        }
    }

    /// The per-token results of [`block_tokens_k4`]'s accumulators, summed as [`dot_q4k`] sums.
    #[inline(always)]
    unsafe fn finish_tokens_k4(acc: &[__m256; 8], acc_m: &[__m128; 8], t_n: usize, out: &mut [f32; 8]) {
        for t in 0..t_n {
            let m = _mm_add_ps(acc_m[t], _mm_movehl_ps(acc_m[t], acc_m[t]));
            let m = _mm_add_ss(m, _mm_movehdup_ps(m));
            out[t] = hsum(acc[t]) + _mm_cvtss_f32(m);
        }
    }

    /// [`dot_q5k`] for `t_n` token vectors (see [`dot_q4k_tokens`]).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q5k_tokens(row: &[u8], nb: usize, qs: &[i8], d: &[f32], bsums: &[i16], t_n: usize, out: &mut [f32; 8]) {
        let m4 = _mm256_set1_epi8(0xf);
        let mone = _mm256_set1_epi8(1);
        let mut acc = [_mm256_setzero_ps(); 8];
        let mut acc_m = [_mm_setzero_ps(); 8];
        for b in 0..nb {
            let x = row.as_ptr().add(b * super::Q5K_BYTES);
            prefetch_ahead(x, super::Q5K_BYTES);
            let (xd, xmin) = (f16_at(x), f16_at(x.add(2)));
            let ms = mins_and_scales(x.add(4));
            let sc128 = _mm256_castsi256_si128(ms);
            let scales = _mm256_set_m128i(sc128, sc128);
            let hbits = _mm256_loadu_si256(x.add(16) as *const __m256i);
            let mut q5 = x.add(48);
            let mut hmask = mone;
            let mut w0 = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 4];
            let mut w1 = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 4];
            for j in 0..QK_K / 64 {
                let scale_0 = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j].as_ptr() as *const __m256i));
                let scale_1 = _mm256_shuffle_epi8(scales, _mm256_loadu_si256(SHUF_K4[2 * j + 1].as_ptr() as *const __m256i));
                let q5bits = _mm256_loadu_si256(q5 as *const __m256i);
                q5 = q5.add(32);
                let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, hmask), hmask), _mm256_set1_epi8(16));
                hmask = _mm256_slli_epi16(hmask, 1);
                let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, hmask), hmask), _mm256_set1_epi8(16));
                hmask = _mm256_slli_epi16(hmask, 1);
                w0[j] = (scale_0, _mm256_add_epi8(_mm256_and_si256(q5bits, m4), h0));
                w1[j] = (scale_1, _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4), h1));
            }
            block_tokens_k4(&w0, &w1, ms, (xd, xmin), qs, d, bsums, (b, nb), t_n, &mut acc, &mut acc_m);
        }
        finish_tokens_k4(&acc, &acc_m, t_n, out);
    }

    /// [`dot_q6k`] for `t_n` token vectors (see [`dot_q4k_tokens`]).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q6k_tokens(row: &[u8], nb: usize, qs: &[i8], d: &[f32], bsums: &[i16], t_n: usize, out: &mut [f32; 8]) {
        let m4 = _mm256_set1_epi8(0xf);
        let m2 = _mm256_set1_epi8(3);
        let k = nb * QK_K;
        let mut acc = [_mm256_setzero_ps(); 8];
        for b in 0..nb {
            let x = row.as_ptr().add(b * super::Q6K_BYTES);
            prefetch_ahead(x, super::Q6K_BYTES);
            let xd = f16_at(x.add(208));
            let mut q4 = x;
            let mut qh = x.add(128);
            let scales = _mm_loadu_si128(x.add(192) as *const __m128i);
            let scales16 = _mm256_cvtepi8_epi16(scales);
            // per half: the four 32-weight vectors and their scales (i16)
            let mut wq = [_mm256_setzero_si256(); 8];
            let mut ws = [_mm256_setzero_si256(); 8];
            for j in 0..QK_K / 128 {
                let is = j * 4;
                let sh = |i: usize| _mm_loadu_si128(SHUF_Q6[i].as_ptr() as *const __m128i);
                for i in 0..4 {
                    ws[is + i] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, sh(is + i)));
                }
                let q4bits1 = _mm256_loadu_si256(q4 as *const __m256i);
                let q4bits2 = _mm256_loadu_si256(q4.add(32) as *const __m256i);
                q4 = q4.add(64);
                let q4bits_h = _mm256_loadu_si256(qh as *const __m256i);
                qh = qh.add(32);
                let q4h_0 = _mm256_slli_epi16(_mm256_and_si256(q4bits_h, m2), 4);
                let q4h_1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 2), m2), 4);
                let q4h_2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 4), m2), 4);
                let q4h_3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 6), m2), 4);
                wq[is] = _mm256_or_si256(_mm256_and_si256(q4bits1, m4), q4h_0);
                wq[is + 1] = _mm256_or_si256(_mm256_and_si256(q4bits2, m4), q4h_1);
                wq[is + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m4), q4h_2);
                wq[is + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m4), q4h_3);
            }
            for (t, acc_t) in acc.iter_mut().enumerate().take(t_n) {
                let dd = *d.get_unchecked(t * nb + b) * xd;
                let mut q8 = qs.as_ptr().add(t * k + b * QK_K);
                let mut sumi = _mm256_setzero_si256();
                for j in 0..QK_K / 128 {
                    let is = j * 4;
                    let mut p = [_mm256_setzero_si256(); 4];
                    for (i, p_i) in p.iter_mut().enumerate() {
                        let a = _mm256_loadu_si256(q8.add(32 * i) as *const __m256i);
                        *p_i = _mm256_madd_epi16(ws[is + i], _mm256_maddubs_epi16(wq[is + i], a));
                    }
                    q8 = q8.add(128);
                    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p[0], p[1]));
                    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p[2], p[3]));
                }
                let bs = _mm256_loadu_si256(bsums.as_ptr().add((t * nb + b) * 16) as *const __m256i);
                let offset = _mm256_madd_epi16(scales16, bs);
                sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
                *acc_t = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), *acc_t);
            }
        }
        for (o, a) in out.iter_mut().zip(&acc).take(t_n) {
            *o = hsum(*a);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use candle_core::quantized::k_quants::{BlockQ4K, BlockQ5K, BlockQ6K, GgmlType};

    /// The vector quantizer gives the scalar one's bits, ties at one half included (they round
    /// away from zero, as `f32::round`).
    #[test]
    fn quantize_block_simd_equals_scalar() {
        let mut blocks: Vec<Vec<f32>> = (0..40).map(|seed| rng_values(seed + 1, QK_K, 3.0 + seed as f32)).collect();
        // -127 at the first value, so every k + 0.5 (k < 127) is an exact product: ties everywhere
        blocks.push(
            (0..QK_K).map(|i| if i == 0 { 127.0 } else { ((i % 254) as f32 - 126.5) * if i % 3 == 0 { -1.0 } else { 1.0 } }).collect(),
        );
        blocks.push(vec![0.0; QK_K]);
        blocks.push(
            (0..QK_K)
                .map(|i| {
                    if i == 77 {
                        -2.5
                    } else if i == 200 {
                        2.5
                    } else {
                        0.1
                    }
                })
                .collect(),
        );
        for (n, xs) in blocks.iter().enumerate() {
            let (mut q1, mut q2) = (vec![0i8; QK_K], vec![0i8; QK_K]);
            let (mut s1, mut s2) = (vec![0i16; 16], vec![0i16; 16]);
            let d1 = quantize_block(xs, &mut q1, &mut s1);
            let d2 = quantize_block_scalar(xs, &mut q2, &mut s2);
            assert_eq!(d1.to_bits(), d2.to_bits(), "block {n}");
            assert_eq!(q1, q2, "block {n}");
            assert_eq!(s1, s2, "block {n}");
        }
    }

    pub(in crate::fast) fn rng_values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
            })
            .collect()
    }

    /// Quantizes `x` with candle's (ggml's) reference quantizer into GGUF block bytes.
    pub(in crate::fast) fn quantize(fmt: KType, x: &[f32]) -> Vec<u8> {
        fn blocks<T: GgmlType>(x: &[f32]) -> Vec<u8> {
            let mut b = vec![T::zeros(); x.len() / T::BLCK_SIZE];
            T::from_float(x, &mut b);
            let bytes = std::mem::size_of_val(b.as_slice());
            // SAFETY: the block types are plain `repr(C)` byte layouts (as in GGUF files).
            unsafe { std::slice::from_raw_parts(b.as_ptr() as *const u8, bytes) }.to_vec()
        }
        match fmt {
            KType::Q4K => blocks::<BlockQ4K>(x),
            KType::Q5K => blocks::<BlockQ5K>(x),
            KType::Q6K => blocks::<BlockQ6K>(x),
        }
    }

    /// candle's own dequantization of the same bytes.
    fn candle_dequant(fmt: KType, bytes: &[u8], n: usize) -> Vec<f32> {
        fn deq<T: GgmlType>(bytes: &[u8], n: usize) -> Vec<f32> {
            let nb = n / T::BLCK_SIZE;
            assert_eq!(bytes.len(), nb * std::mem::size_of::<T>());
            let mut b = vec![T::zeros(); nb];
            // SAFETY: as above; sizes checked.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), b.as_mut_ptr() as *mut u8, bytes.len()) };
            let mut out = vec![0f32; n];
            T::to_float(&b, &mut out);
            out
        }
        match fmt {
            KType::Q4K => deq::<BlockQ4K>(bytes, n),
            KType::Q5K => deq::<BlockQ5K>(bytes, n),
            KType::Q6K => deq::<BlockQ6K>(bytes, n),
        }
    }

    #[test]
    fn dequant_matches_candle() {
        for fmt in [KType::Q4K, KType::Q5K, KType::Q6K] {
            let x = rng_values(3, 4 * QK_K, 0.5);
            let bytes = quantize(fmt, &x);
            assert_eq!(bytes.len(), 4 * fmt.block_bytes());
            let mut ours = vec![0f32; x.len()];
            dequant_row(fmt, &bytes, &mut ours);
            assert_eq!(ours, candle_dequant(fmt, &bytes, x.len()), "{fmt:?}");
        }
    }

    #[test]
    fn dots_match_scalar_and_dequantized_reference() {
        let simd = super::super::cpu::has_avx2();
        for fmt in [KType::Q4K, KType::Q5K, KType::Q6K] {
            for k in [256, 512, 1536] {
                let rows = 5;
                let w = quantize(fmt, &rng_values(11 + k as u64, rows * k, 0.3));
                let x = rng_values(17, k, 2.0);
                let mut a = QActK::default();
                a.quantize(&x);
                let xa: Vec<f64> = (0..k).map(|i| a.qs[i] as f64 * a.d[i / QK_K] as f64).collect();
                let mut fast = vec![0f32; rows];
                let mut scalar = vec![0f32; rows];
                dot_rows(fmt, &w, k, &a.qs, &a.d, &a.bsums, &mut fast, simd);
                dot_rows(fmt, &w, k, &a.qs, &a.d, &a.bsums, &mut scalar, false);
                let rb = k / QK_K * fmt.block_bytes();
                for r in 0..rows {
                    let mut wr = vec![0f32; k];
                    dequant_row(fmt, &w[r * rb..(r + 1) * rb], &mut wr);
                    let reference: f64 = wr.iter().zip(&xa).map(|(w, x)| *w as f64 * x).sum();
                    let scale: f64 = wr.iter().zip(&xa).map(|(w, x)| (*w as f64 * x).abs()).sum::<f64>() + 1e-3;
                    assert!(((fast[r] as f64 - reference) / scale).abs() < 1e-5, "{fmt:?} k={k} fast {} ref {reference}", fast[r]);
                    assert!(((scalar[r] as f64 - reference) / scale).abs() < 1e-5, "{fmt:?} k={k} scalar {} ref {reference}", scalar[r]);
                }
            }
        }
    }

    #[test]
    fn gemm_rows_matches_dot_rows() {
        let simd = super::super::cpu::has_avx2();
        for fmt in [KType::Q4K, KType::Q5K, KType::Q6K] {
            let (rows, k, t_n, ldo) = (6, 768, 11, 16);
            let w = quantize(fmt, &rng_values(23, rows * k, 0.3));
            let x = rng_values(29, t_n * k, 2.0);
            let mut a = QActK::default();
            a.quantize(&x);
            let nb = k / QK_K;
            for simd in [false, simd] {
                let mut out = vec![f32::NAN; rows * ldo];
                gemm_rows(fmt, &w, rows, k, &a, t_n, &mut out, ldo, simd);
                for t in 0..t_n {
                    let mut want = vec![0f32; rows];
                    let (qs, d, bs) = (&a.qs[t * k..(t + 1) * k], &a.d[t * nb..(t + 1) * nb], &a.bsums[t * nb * 16..(t + 1) * nb * 16]);
                    dot_rows(fmt, &w, k, qs, d, bs, &mut want, false);
                    for r in 0..rows {
                        let got = out[r * ldo + t];
                        assert!(
                            (got - want[r]).abs() <= 1e-4 * (want[r].abs() + 1.0),
                            "{fmt:?} simd={simd} r={r} t={t}: {got} vs {}",
                            want[r]
                        );
                    }
                }
            }
        }
    }

    /// Several tokens at once give each token, bit for bit, what one token alone gives.
    #[test]
    fn dot_rows_tokens_equals_dot_rows_bit_for_bit() {
        let simd = super::super::cpu::has_avx2();
        for fmt in [KType::Q4K, KType::Q5K, KType::Q6K] {
            let (rows, k) = (5, 768);
            let nb = k / QK_K;
            let w = quantize(fmt, &rng_values(41, rows * k, 0.3));
            for t_n in [1, 3, MAX_DOT_TOKENS] {
                let x = rng_values(43 + t_n as u64, t_n * k, 2.0);
                let mut a = QActK::default();
                a.quantize(&x);
                for simd in [false, simd] {
                    let ldo = rows + 2;
                    let mut out = vec![f32::NAN; t_n * ldo];
                    dot_rows_tokens(fmt, &w, rows, k, &a.qs, &a.d, &a.bsums, t_n, &mut out, ldo, simd);
                    for t in 0..t_n {
                        let mut want = vec![0f32; rows];
                        let (qs, d, bs) = (&a.qs[t * k..(t + 1) * k], &a.d[t * nb..(t + 1) * nb], &a.bsums[t * nb * 16..(t + 1) * nb * 16]);
                        dot_rows(fmt, &w, k, qs, d, bs, &mut want, simd);
                        let got: Vec<u32> = out[t * ldo..t * ldo + rows].iter().map(|v| v.to_bits()).collect();
                        let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                        assert_eq!(got, want, "{fmt:?} simd={simd} t_n={t_n} t={t}");
                    }
                }
            }
        }
    }

    #[test]
    fn packed_scales_and_mins_match_the_per_sub_block_reading() {
        let mut state = 99u64;
        for _ in 0..200 {
            let mut sc = [0u8; 12];
            for b in sc.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = (state >> 32) as u8;
            }
            let packed = scales_and_mins_k4(sc);
            let bytes: Vec<u8> = packed.iter().flat_map(|w| w.to_le_bytes()).collect();
            for j in 0..8 {
                assert_eq!((bytes[j], bytes[8 + j]), scale_min_k4(j, &sc), "sub-block {j} of {sc:?}");
            }
        }
    }

    #[test]
    fn activation_quantization_keeps_block_sums() {
        let x = rng_values(5, 2 * QK_K, 4.0);
        let mut a = QActK::default();
        a.quantize(&x);
        for b in 0..2 {
            assert!(a.qs[b * QK_K..(b + 1) * QK_K].iter().any(|&q| q.abs() == 127));
            for g in 0..16 {
                let s: i32 = a.qs[b * QK_K + g * 16..][..16].iter().map(|&q| q as i32).sum();
                assert_eq!(a.bsums[b * 16 + g] as i32, s);
            }
        }
        for (i, v) in x.iter().enumerate() {
            assert!((a.qs[i] as f32 * a.d[i / QK_K] - v).abs() <= a.d[i / QK_K].abs() * 0.5 + 1e-6);
        }
    }
}
