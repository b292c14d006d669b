//! Compute kernels: quantized dot products (decode), dequantization + f32 GEMM micro-kernel
//! (prompt), and small vector helpers. Every kernel has an AVX2/FMA/F16C version, used when the
//! CPU has those features (runtime check), and a scalar version with the same semantics.

/// GGUF block formats this module can use directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QType {
    /// 32 weights: f16 scale `d`, then 16 bytes of 4-bit values `q`; weight = d * (q - 8).
    Q4_0,
    /// 32 weights: f16 scale `d`, f16 minimum `m`, 16 bytes of 4-bit values; weight = d * q + m.
    Q4_1,
    /// 32 weights: f16 scale `d`, 32 signed bytes; weight = d * q.
    Q8_0,
    /// K-quants, 256 weights per block (see [`super::kquants`]): computed with Q8_K activations.
    Q4K,
    Q5K,
    Q6K,
}

pub const QK: usize = 32;

impl QType {
    pub fn block_bytes(self) -> usize {
        match self {
            QType::Q4_0 => 18,
            QType::Q4_1 => 20,
            QType::Q8_0 => 34,
            QType::Q4K | QType::Q5K | QType::Q6K => self.kind().map_or(0, KType::block_bytes),
        }
    }
    /// Weights per block.
    pub fn block_elems(self) -> usize {
        if self.kind().is_some() {
            QK_K
        } else {
            QK
        }
    }
    pub fn row_bytes(self, k: usize) -> usize {
        k / self.block_elems() * self.block_bytes()
    }
    /// The K-quant format, for the 256-weight block types.
    pub fn kind(self) -> Option<KType> {
        match self {
            QType::Q4K => Some(KType::Q4K),
            QType::Q5K => Some(KType::Q5K),
            QType::Q6K => Some(KType::Q6K),
            _ => None,
        }
    }
    /// Whether [`interleave_x8`] applies (the 32-weight formats).
    pub fn interleavable(self) -> bool {
        self.kind().is_none()
    }
}

use super::kquants::{KType, QK_K};

pub use super::cpu::{f16_to_f32, has_avx2};

#[inline]
fn rd_f16(b: &[u8], off: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[off], b[off + 1]]))
}

/// Activations quantized to 8 bits in blocks of 32 (llama.cpp's Q8_1 idea, with f32 scales):
/// x ≈ d[b] * qs[i], and s[b] = d[b] * Σ qs over the block.
#[derive(Default, Clone)]
pub struct QAct {
    pub qs: Vec<i8>,
    pub d: Vec<f32>,
    pub s: Vec<f32>,
}

impl QAct {
    /// Quantizes `t` vectors of length `k` stored one after another in `x`.
    pub fn quantize(&mut self, x: &[f32], k: usize) {
        let nb = x.len() / QK;
        self.qs.resize(x.len(), 0);
        self.d.resize(nb, 0.0);
        self.s.resize(nb, 0.0);
        debug_assert_eq!(k % QK, 0);
        for b in 0..nb {
            let xs = &x[b * QK..(b + 1) * QK];
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in self.qs[b * QK..(b + 1) * QK].iter_mut().zip(xs) {
                let r = (v * id).round() as i8;
                *q = r;
                sum += r as i32;
            }
            self.d[b] = d;
            self.s[b] = d * sum as f32;
        }
    }
}

/// Dot products of `out.len()` consecutive quantized rows (`w`, each `k` wide) with one quantized
/// activation vector (`qs`, `d`, `s` of that vector).
pub fn dot_rows(fmt: QType, w: &[u8], k: usize, qs: &[i8], d: &[f32], s: &[f32], out: &mut [f32], simd: bool) {
    assert!(fmt.interleavable(), "dot_rows: {fmt:?} takes Q8_K activations (kquants::dot_rows)");
    let rb = fmt.row_bytes(k);
    assert!(w.len() >= rb * out.len() && qs.len() >= k && d.len() >= k / QK && s.len() >= k / QK);
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is only true when `has_avx2()` returned true; bounds were asserted above
        // and the kernels read exactly `rb` bytes per row, `k` activations and `k/32` scales.
        unsafe {
            match fmt {
                QType::Q4_1 => avx::dot_rows_q4_1(w, k, qs, d, s, out),
                QType::Q4_0 => avx::dot_rows_q4_0(w, k, qs, d, s, out),
                QType::Q8_0 => avx::dot_rows_q8_0(w, k, qs, d, out),
                QType::Q4K | QType::Q5K | QType::Q6K => unreachable!("asserted above"),
            }
        }
        return;
    }
    let _ = simd;
    for (r, o) in out.iter_mut().enumerate() {
        *o = dot_row_scalar(fmt, &w[r * rb..(r + 1) * rb], qs, d, s);
    }
}

/// Converts `rows` (a multiple of 8) plain rows into the 8-row interleaved layout used by
/// [`dot_rows_x8`]: for each group of 8 rows and each block index, the 8 scales (f16), then for
/// Q4_1 the 8 minimums (f16), then the 8 rows' quant bytes. Same size as the plain layout.
pub fn interleave_x8(fmt: QType, plain: &[u8], rows: usize, k: usize) -> Vec<u8> {
    let mut out = vec![0u8; plain.len()];
    interleave_x8_into(fmt, plain, rows, k, &mut out);
    out
}

/// [`interleave_x8`] into `out` (`plain.len()` bytes), so that several matrices can be
/// interleaved into one buffer without an intermediate copy.
pub fn interleave_x8_into(fmt: QType, plain: &[u8], rows: usize, k: usize, out: &mut [u8]) {
    assert!(fmt.interleavable() && rows % 8 == 0 && out.len() == plain.len());
    let bb = fmt.block_bytes();
    let nb = k / QK;
    let hdr = if fmt == QType::Q4_1 { 4 } else { 2 };
    let qb = bb - hdr;
    for g in 0..rows / 8 {
        for b in 0..nb {
            let dst = &mut out[(g * nb + b) * 8 * bb..(g * nb + b + 1) * 8 * bb];
            for r in 0..8 {
                let src = &plain[((g * 8 + r) * nb + b) * bb..((g * 8 + r) * nb + b + 1) * bb];
                dst[2 * r..2 * r + 2].copy_from_slice(&src[0..2]);
                if fmt == QType::Q4_1 {
                    dst[16 + 2 * r..16 + 2 * r + 2].copy_from_slice(&src[2..4]);
                }
                let q0 = 8 * hdr + r * qb;
                dst[q0..q0 + qb].copy_from_slice(&src[hdr..]);
            }
        }
    }
}

/// Copies row `r` of an 8-row interleaved matrix back into plain block layout (`out`: one row).
pub fn deinterleave_row_x8(fmt: QType, data: &[u8], r: usize, k: usize, out: &mut [u8]) {
    let bb = fmt.block_bytes();
    let nb = k / QK;
    let hdr = if fmt == QType::Q4_1 { 4 } else { 2 };
    let qb = bb - hdr;
    let (g, ri) = (r / 8, r % 8);
    for b in 0..nb {
        let src = &data[(g * nb + b) * 8 * bb..(g * nb + b + 1) * 8 * bb];
        let dst = &mut out[b * bb..(b + 1) * bb];
        dst[0..2].copy_from_slice(&src[2 * ri..2 * ri + 2]);
        if fmt == QType::Q4_1 {
            dst[2..4].copy_from_slice(&src[16 + 2 * ri..16 + 2 * ri + 2]);
        }
        let q0 = 8 * hdr + ri * qb;
        dst[hdr..].copy_from_slice(&src[q0..q0 + qb]);
    }
}

/// Like [`dot_rows`] for a matrix in the 8-row interleaved layout; `w` starts at a group
/// boundary and `out.len()` is a multiple of 8.
pub fn dot_rows_x8(fmt: QType, w: &[u8], k: usize, qs: &[i8], d: &[f32], s: &[f32], out: &mut [f32], simd: bool) {
    assert!(fmt.interleavable(), "dot_rows_x8: {fmt:?} has no interleaved layout");
    let rb = fmt.row_bytes(k);
    assert!(out.len() % 8 == 0 && w.len() >= rb * out.len() && qs.len() >= k && d.len() >= k / QK && s.len() >= k / QK);
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` implies AVX2/FMA/F16C; bounds asserted above (the kernels read exactly
        // `rb * out.len()` bytes of `w`, `k` activations and `k/32` scales).
        unsafe {
            match fmt {
                QType::Q4_1 => avx::dot_x8_q4_1(w, k, qs, d, s, out),
                QType::Q4_0 => avx::dot_x8_q4_0(w, k, qs, d, s, out),
                QType::Q8_0 => avx::dot_x8_q8_0(w, k, qs, d, out),
                QType::Q4K | QType::Q5K | QType::Q6K => unreachable!("asserted above"),
            }
        }
        return;
    }
    let _ = simd;
    let mut row = vec![0u8; rb];
    for (r, o) in out.iter_mut().enumerate() {
        deinterleave_row_x8(fmt, w, r, k, &mut row);
        *o = dot_row_scalar(fmt, &row, qs, d, s);
    }
}

pub fn dot_row_scalar(fmt: QType, row: &[u8], qs: &[i8], d: &[f32], s: &[f32]) -> f32 {
    let bb = fmt.block_bytes();
    let nb = row.len() / bb;
    let mut acc = 0f32;
    for b in 0..nb {
        let blk = &row[b * bb..(b + 1) * bb];
        let a = &qs[b * QK..(b + 1) * QK];
        let wd = rd_f16(blk, 0);
        match fmt {
            QType::Q4_1 => {
                let m = rd_f16(blk, 2);
                let mut isum = 0i32;
                for j in 0..16 {
                    isum += (blk[4 + j] & 0xf) as i32 * a[j] as i32 + (blk[4 + j] >> 4) as i32 * a[j + 16] as i32;
                }
                acc += wd * d[b] * isum as f32 + m * s[b];
            }
            QType::Q4_0 => {
                let mut isum = 0i32;
                for j in 0..16 {
                    isum += (blk[2 + j] & 0xf) as i32 * a[j] as i32 + (blk[2 + j] >> 4) as i32 * a[j + 16] as i32;
                }
                acc += wd * d[b] * isum as f32 - 8.0 * wd * s[b];
            }
            QType::Q8_0 => {
                let mut isum = 0i32;
                for j in 0..32 {
                    isum += blk[2 + j] as i8 as i32 * a[j] as i32;
                }
                acc += wd * d[b] * isum as f32;
            }
            QType::Q4K | QType::Q5K | QType::Q6K => unreachable!("K-quants take Q8_K activations"),
        }
    }
    acc
}

/// Dequantizes one row of `k` weights into `out`.
pub fn dequant_row(fmt: QType, row: &[u8], out: &mut [f32]) {
    if let Some(kind) = fmt.kind() {
        super::kquants::dequant_row(kind, row, out);
        return;
    }
    let bb = fmt.block_bytes();
    for (b, o) in out.chunks_exact_mut(QK).enumerate() {
        let blk = &row[b * bb..(b + 1) * bb];
        let d = rd_f16(blk, 0);
        match fmt {
            QType::Q4_1 => {
                let m = rd_f16(blk, 2);
                for j in 0..16 {
                    o[j] = d * (blk[4 + j] & 0xf) as f32 + m;
                    o[j + 16] = d * (blk[4 + j] >> 4) as f32 + m;
                }
            }
            QType::Q4_0 => {
                for j in 0..16 {
                    o[j] = d * ((blk[2 + j] & 0xf) as i32 - 8) as f32;
                    o[j + 16] = d * ((blk[2 + j] >> 4) as i32 - 8) as f32;
                }
            }
            QType::Q8_0 => {
                for j in 0..32 {
                    o[j] = d * blk[2 + j] as i8 as f32;
                }
            }
            QType::Q4K | QType::Q5K | QType::Q6K => unreachable!("handled above"),
        }
    }
}

/// Micro-kernel of the prompt GEMM, in "feature-major" layout:
/// `c[i][t] = Σ_k w[i][k] * xt[k][t]` for `i < mr` (≤ 6) rows and the 16 tokens `t` starting at
/// `xt`/`c` (row strides `ldx` and `ldc`). `w` holds `mr` rows of length `k`, `ldw` apart.
#[allow(clippy::too_many_arguments)]
pub fn gemm_tile(w: &[f32], ldw: usize, mr: usize, k: usize, xt: &[f32], ldx: usize, c: &mut [f32], ldc: usize, simd: bool) {
    assert!((1..=6).contains(&mr) && ldw >= k && w.len() >= (mr - 1) * ldw + k);
    assert!(k == 0 || xt.len() >= (k - 1) * ldx + 16);
    assert!(c.len() >= (mr - 1) * ldc + 16);
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` implies AVX2+FMA (see `has_avx2`); the asserts above bound every access
        // the kernel makes (`mr` rows of `w`, `k` strided 16-float rows of `xt`, `mr` rows of `c`).
        unsafe {
            match mr {
                6 => avx::gemm_tile::<6>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                5 => avx::gemm_tile::<5>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                4 => avx::gemm_tile::<4>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                3 => avx::gemm_tile::<3>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                2 => avx::gemm_tile::<2>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                _ => avx::gemm_tile::<1>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
            }
        }
        return;
    }
    let _ = simd;
    for i in 0..mr {
        let mut acc = [0f32; 16];
        for kk in 0..k {
            let wv = w[i * ldw + kk];
            for (a, x) in acc.iter_mut().zip(&xt[kk * ldx..kk * ldx + 16]) {
                *a += wv * x;
            }
        }
        c[i * ldc..i * ldc + 16].copy_from_slice(&acc);
    }
}

/// [`gemm_tile`] with `xt` stored as IEEE half floats (the KV cache).
#[allow(clippy::too_many_arguments)]
pub fn gemm_tile_h(w: &[f32], ldw: usize, mr: usize, k: usize, xt: &[u16], ldx: usize, c: &mut [f32], ldc: usize, simd: bool) {
    assert!((1..=6).contains(&mr) && ldw >= k && w.len() >= (mr - 1) * ldw + k);
    assert!(k == 0 || xt.len() >= (k - 1) * ldx + 16);
    assert!(c.len() >= (mr - 1) * ldc + 16);
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` implies AVX2+FMA+F16C; the asserts above bound every access.
        unsafe {
            match mr {
                6 => avx::gemm_tile_h::<6>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                5 => avx::gemm_tile_h::<5>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                4 => avx::gemm_tile_h::<4>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                3 => avx::gemm_tile_h::<3>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                2 => avx::gemm_tile_h::<2>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
                _ => avx::gemm_tile_h::<1>(w.as_ptr(), ldw, k, xt.as_ptr(), ldx, c.as_mut_ptr(), ldc),
            }
        }
        return;
    }
    let _ = simd;
    for i in 0..mr {
        let mut acc = [0f32; 16];
        for kk in 0..k {
            let wv = w[i * ldw + kk];
            for (a, x) in acc.iter_mut().zip(&xt[kk * ldx..kk * ldx + 16]) {
                *a += wv * f16_to_f32(*x);
            }
        }
        c[i * ldc..i * ldc + 16].copy_from_slice(&acc);
    }
}

/// f32 -> IEEE half, round to nearest even (saturating to infinity).
pub fn f32_to_f16(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = v.abs();
    if a.is_nan() {
        return sign | 0x7e00;
    }
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < 6.103_515_6e-5 {
        // subnormal: multiples of 2^-24
        return sign | (a * 16_777_216.0).round_ties_even() as u16;
    }
    let ab = a.to_bits();
    let exp = (ab >> 23) as i32 - 127 + 15;
    let man = ab & 0x7f_ffff;
    let mut h = ((exp as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
        h += 1;
    }
    sign | h as u16
}

pub fn dot_f32(a: &[f32], b: &[f32], simd: bool) -> f32 {
    assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: AVX2/FMA present (see `has_avx2`); lengths are equal.
        return unsafe { avx::dot_f32(a, b) };
    }
    let _ = simd;
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `y += a * x`
pub fn axpy(a: f32, x: &[f32], y: &mut [f32], simd: bool) {
    assert_eq!(x.len(), y.len());
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: AVX2/FMA present; lengths are equal.
        unsafe { avx::axpy(a, x, y) };
        return;
    }
    let _ = simd;
    for (yv, xv) in y.iter_mut().zip(x) {
        *yv += a * xv;
    }
}

/// In-place `x[i] = exp(x[i] - max)`, returns the sum.
pub fn exp_sub_sum(x: &mut [f32], max: f32, simd: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: AVX2/FMA present.
        return unsafe { avx::exp_sub_sum(x, max) };
    }
    let _ = simd;
    let mut s = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        s += *v;
    }
    s
}

/// Two [`gemm_tile_h`] tiles that share the rows `w`: columns 0..16 of `c` from `xt`, columns
/// 16..32 from `xt[second..]` (same strides). Every sum is the same, bit for bit, as two calls (each
/// element is one FMA chain over `k` in order); with AVX-512F one 16-lane vector per row and tile
/// does what takes two AVX2 vectors, and the 12 accumulators of a 6-row pair keep both FMA ports
/// busy.
#[allow(clippy::too_many_arguments)]
pub fn gemm_tile2_h(
    w: &[f32],
    ldw: usize,
    mr: usize,
    k: usize,
    xt: &[u16],
    second: usize,
    ldx: usize,
    c: &mut [f32],
    ldc: usize,
    simd: bool,
) {
    assert!((1..=6).contains(&mr) && ldw >= k && w.len() >= (mr - 1) * ldw + k);
    assert!(k == 0 || xt.len() >= second + (k - 1) * ldx + 16);
    assert!(ldc >= 32 && c.len() >= (mr - 1) * ldc + 32);
    #[cfg(target_arch = "x86_64")]
    if simd && super::cpu::has_avx512f() {
        let (w, xt, c) = (w.as_ptr(), xt.as_ptr(), c.as_mut_ptr());
        // SAFETY: AVX-512F/F16C present (checked); the asserts above bound every access (`mr` rows
        // of `w`, `k` strided 16-half rows at `xt` and at `xt + second`, `mr` 32-float rows of `c`).
        unsafe {
            match mr {
                6 => avx512::gemm_tile2_h::<6>(w, ldw, k, xt, second, ldx, c, ldc),
                5 => avx512::gemm_tile2_h::<5>(w, ldw, k, xt, second, ldx, c, ldc),
                4 => avx512::gemm_tile2_h::<4>(w, ldw, k, xt, second, ldx, c, ldc),
                3 => avx512::gemm_tile2_h::<3>(w, ldw, k, xt, second, ldx, c, ldc),
                2 => avx512::gemm_tile2_h::<2>(w, ldw, k, xt, second, ldx, c, ldc),
                _ => avx512::gemm_tile2_h::<1>(w, ldw, k, xt, second, ldx, c, ldc),
            }
        }
        return;
    }
    gemm_tile_h(w, ldw, mr, k, xt, ldx, c, ldc, simd);
    gemm_tile_h(w, ldw, mr, k, &xt[second..], ldx, &mut c[16..], ldc, simd);
}

/// Scales `x` by `scale` in place and returns the largest scaled value (`-inf` for none): the first
/// pass of a softmax. Same values as the scalar loop.
pub fn scale_max(x: &mut [f32], scale: f32, simd: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: AVX2 present.
        return unsafe { avx::scale_max(x, scale) };
    }
    let _ = simd;
    let mut max = f32::NEG_INFINITY;
    for v in x.iter_mut() {
        *v *= scale;
        max = max.max(*v);
    }
    max
}

/// `g[i] = silu(g[i]) * u[i]`
pub fn silu_mul(g: &mut [f32], u: &[f32], simd: bool) {
    assert_eq!(g.len(), u.len());
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: AVX2/FMA present; lengths are equal.
        unsafe { avx::silu_mul(g, u) };
        return;
    }
    let _ = simd;
    for (gv, uv) in g.iter_mut().zip(u) {
        *gv = *gv / (1.0 + (-*gv).exp()) * uv;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm_tile2_h<const MR: usize>(
        w: *const f32,
        ldw: usize,
        k: usize,
        xt: *const u16,
        second: usize,
        ldx: usize,
        c: *mut f32,
        ldc: usize,
    ) {
        let mut c0 = [_mm512_setzero_ps(); MR];
        let mut c1 = [_mm512_setzero_ps(); MR];
        for kk in 0..k {
            let x = xt.add(kk * ldx);
            let a0 = _mm512_cvtph_ps(_mm256_loadu_si256(x as *const __m256i));
            let a1 = _mm512_cvtph_ps(_mm256_loadu_si256(x.add(second) as *const __m256i));
            for i in 0..MR {
                let wv = _mm512_set1_ps(*w.add(i * ldw + kk));
                c0[i] = _mm512_fmadd_ps(wv, a0, c0[i]);
                c1[i] = _mm512_fmadd_ps(wv, a1, c1[i]);
            }
        }
        for i in 0..MR {
            _mm512_storeu_ps(c.add(i * ldc), c0[i]);
            _mm512_storeu_ps(c.add(i * ldc + 16), c1[i]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::QK;
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// Two f16 at `p` -> (first, second) as f32.
    #[inline(always)]
    unsafe fn f16x2(p: *const u8) -> __m128 {
        _mm_cvtph_ps(_mm_cvtsi32_si128((p as *const i32).read_unaligned()))
    }

    /// 16 bytes of packed nibbles -> 32 unsigned bytes (low nibbles first, as in GGUF).
    #[inline(always)]
    unsafe fn nibbles(p: *const u8) -> __m256i {
        let q = _mm_loadu_si128(p as *const __m128i);
        let m = _mm_set1_epi8(0x0f);
        let lo = _mm_and_si128(q, m);
        let hi = _mm_and_si128(_mm_srli_epi16(q, 4), m);
        _mm256_set_m128i(hi, lo)
    }

    /// Σ u8 * i8 over 32 lanes, as 8 i32 lanes converted to f32.
    #[inline(always)]
    unsafe fn dot_u8i8(w: __m256i, a: __m256i) -> __m256 {
        let p16 = _mm256_maddubs_epi16(w, a);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)))
    }

    /// Horizontal sums of 8 vectors of 8 i32: lane r of the result = Σ lanes of `v[r]`.
    #[inline(always)]
    unsafe fn reduce8(v: &[__m256i; 8]) -> __m256i {
        let h01 = _mm256_hadd_epi32(v[0], v[1]);
        let h23 = _mm256_hadd_epi32(v[2], v[3]);
        let h45 = _mm256_hadd_epi32(v[4], v[5]);
        let h67 = _mm256_hadd_epi32(v[6], v[7]);
        let a = _mm256_hadd_epi32(h01, h23);
        let b = _mm256_hadd_epi32(h45, h67);
        let lo = _mm256_permute2x128_si256(a, b, 0x20);
        let hi = _mm256_permute2x128_si256(a, b, 0x31);
        _mm256_add_epi32(lo, hi)
    }

    #[inline(always)]
    unsafe fn madd_u8i8(w: __m256i, a: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_x8_q4_1(w: &[u8], k: usize, qs: &[i8], d: &[f32], s: &[f32], out: &mut [f32]) {
        let nb = k / QK;
        let zero = _mm256_setzero_si256();
        for (g, o) in out.chunks_exact_mut(8).enumerate() {
            let mut acc = _mm256_setzero_ps();
            let mut macc = _mm256_setzero_ps();
            for b in 0..nb {
                let p = w.as_ptr().add((g * nb + b) * 160);
                let a = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let d8 = _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i));
                let m8 = _mm256_cvtph_ps(_mm_loadu_si128(p.add(16) as *const __m128i));
                macc = _mm256_fmadd_ps(m8, _mm256_set1_ps(*s.get_unchecked(b)), macc);
                let mut v = [zero; 8];
                for (r, vr) in v.iter_mut().enumerate() {
                    *vr = madd_u8i8(nibbles(p.add(32 + 16 * r)), a);
                }
                let sums = _mm256_cvtepi32_ps(reduce8(&v));
                acc = _mm256_fmadd_ps(sums, _mm256_mul_ps(d8, _mm256_set1_ps(*d.get_unchecked(b))), acc);
            }
            _mm256_storeu_ps(o.as_mut_ptr(), _mm256_add_ps(acc, macc));
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_x8_q4_0(w: &[u8], k: usize, qs: &[i8], d: &[f32], s: &[f32], out: &mut [f32]) {
        let nb = k / QK;
        let zero = _mm256_setzero_si256();
        for (g, o) in out.chunks_exact_mut(8).enumerate() {
            let mut acc = _mm256_setzero_ps();
            let mut macc = _mm256_setzero_ps();
            for b in 0..nb {
                let p = w.as_ptr().add((g * nb + b) * 144);
                let a = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let d8 = _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i));
                macc = _mm256_fmadd_ps(d8, _mm256_set1_ps(-8.0 * *s.get_unchecked(b)), macc);
                let mut v = [zero; 8];
                for (r, vr) in v.iter_mut().enumerate() {
                    *vr = madd_u8i8(nibbles(p.add(16 + 16 * r)), a);
                }
                let sums = _mm256_cvtepi32_ps(reduce8(&v));
                acc = _mm256_fmadd_ps(sums, _mm256_mul_ps(d8, _mm256_set1_ps(*d.get_unchecked(b))), acc);
            }
            _mm256_storeu_ps(o.as_mut_ptr(), _mm256_add_ps(acc, macc));
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_x8_q8_0(w: &[u8], k: usize, qs: &[i8], d: &[f32], out: &mut [f32]) {
        let nb = k / QK;
        let zero = _mm256_setzero_si256();
        for (g, o) in out.chunks_exact_mut(8).enumerate() {
            let mut acc = _mm256_setzero_ps();
            for b in 0..nb {
                let p = w.as_ptr().add((g * nb + b) * 272);
                let a = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let d8 = _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i));
                let mut v = [zero; 8];
                for (r, vr) in v.iter_mut().enumerate() {
                    let wr = _mm256_loadu_si256(p.add(16 + 32 * r) as *const __m256i);
                    // |w| as u8 times sign-adjusted a: see dot_rows_q8_0 for the range argument.
                    *vr = madd_u8i8(_mm256_sign_epi8(wr, wr), _mm256_sign_epi8(a, wr));
                }
                let sums = _mm256_cvtepi32_ps(reduce8(&v));
                acc = _mm256_fmadd_ps(sums, _mm256_mul_ps(d8, _mm256_set1_ps(*d.get_unchecked(b))), acc);
            }
            _mm256_storeu_ps(o.as_mut_ptr(), acc);
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_rows_q4_1(w: &[u8], k: usize, qs: &[i8], d: &[f32], s: &[f32], out: &mut [f32]) {
        let nb = k / QK;
        let rb = nb * 20;
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.as_ptr().add(r * rb);
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            let mut macc = 0f32;
            let mut b = 0;
            while b + 1 < nb {
                let p0 = row.add(b * 20);
                let p1 = row.add(b * 20 + 20);
                let dm0 = f16x2(p0);
                let dm1 = f16x2(p1);
                let a0 = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let a1 = _mm256_loadu_si256(qs.as_ptr().add(b * QK + QK) as *const __m256i);
                let x0 = dot_u8i8(nibbles(p0.add(4)), a0);
                let x1 = dot_u8i8(nibbles(p1.add(4)), a1);
                acc0 = _mm256_fmadd_ps(x0, _mm256_set1_ps(_mm_cvtss_f32(dm0) * *d.get_unchecked(b)), acc0);
                acc1 = _mm256_fmadd_ps(x1, _mm256_set1_ps(_mm_cvtss_f32(dm1) * *d.get_unchecked(b + 1)), acc1);
                macc += f32::from_bits(_mm_extract_ps(dm0, 1) as u32) * *s.get_unchecked(b)
                    + f32::from_bits(_mm_extract_ps(dm1, 1) as u32) * *s.get_unchecked(b + 1);
                b += 2;
            }
            if b < nb {
                let p0 = row.add(b * 20);
                let dm0 = f16x2(p0);
                let a0 = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let x0 = dot_u8i8(nibbles(p0.add(4)), a0);
                acc0 = _mm256_fmadd_ps(x0, _mm256_set1_ps(_mm_cvtss_f32(dm0) * *d.get_unchecked(b)), acc0);
                macc += f32::from_bits(_mm_extract_ps(dm0, 1) as u32) * *s.get_unchecked(b);
            }
            *o = hsum(_mm256_add_ps(acc0, acc1)) + macc;
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_rows_q4_0(w: &[u8], k: usize, qs: &[i8], d: &[f32], s: &[f32], out: &mut [f32]) {
        let nb = k / QK;
        let rb = nb * 18;
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.as_ptr().add(r * rb);
            let mut acc = _mm256_setzero_ps();
            let mut macc = 0f32;
            for b in 0..nb {
                let p = row.add(b * 18);
                let wd = _mm_cvtss_f32(f16x2(p));
                let a = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let x = dot_u8i8(nibbles(p.add(2)), a);
                acc = _mm256_fmadd_ps(x, _mm256_set1_ps(wd * *d.get_unchecked(b)), acc);
                macc -= 8.0 * wd * *s.get_unchecked(b);
            }
            *o = hsum(acc) + macc;
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_rows_q8_0(w: &[u8], k: usize, qs: &[i8], d: &[f32], out: &mut [f32]) {
        let nb = k / QK;
        let rb = nb * 34;
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.as_ptr().add(r * rb);
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            let mut b = 0;
            while b + 1 < nb {
                let p0 = row.add(b * 34);
                let p1 = p0.add(34);
                let w0 = _mm256_loadu_si256(p0.add(2) as *const __m256i);
                let w1 = _mm256_loadu_si256(p1.add(2) as *const __m256i);
                let a0 = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let a1 = _mm256_loadu_si256(qs.as_ptr().add(b * QK + QK) as *const __m256i);
                // i8 x i8 via maddubs(|w|, sign(a, w)); |w| <= 128 fits u8 and no pair overflows i16
                // because |a| <= 127 (activations are quantized to ±127).
                let x0 = dot_u8i8(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(a0, w0));
                let x1 = dot_u8i8(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(a1, w1));
                let d0 = _mm_cvtss_f32(f16x2(p0)) * *d.get_unchecked(b);
                let d1 = _mm_cvtss_f32(f16x2(p1)) * *d.get_unchecked(b + 1);
                acc0 = _mm256_fmadd_ps(x0, _mm256_set1_ps(d0), acc0);
                acc1 = _mm256_fmadd_ps(x1, _mm256_set1_ps(d1), acc1);
                b += 2;
            }
            if b < nb {
                let p0 = row.add(b * 34);
                let w0 = _mm256_loadu_si256(p0.add(2) as *const __m256i);
                let a0 = _mm256_loadu_si256(qs.as_ptr().add(b * QK) as *const __m256i);
                let x0 = dot_u8i8(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(a0, w0));
                let d0 = _mm_cvtss_f32(f16x2(p0)) * *d.get_unchecked(b);
                acc0 = _mm256_fmadd_ps(x0, _mm256_set1_ps(d0), acc0);
            }
            *o = hsum(_mm256_add_ps(acc0, acc1));
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn gemm_tile<const MR: usize>(w: *const f32, ldw: usize, k: usize, xt: *const f32, ldx: usize, c: *mut f32, ldc: usize) {
        let mut c0 = [_mm256_setzero_ps(); MR];
        let mut c1 = [_mm256_setzero_ps(); MR];
        for kk in 0..k {
            let x = xt.add(kk * ldx);
            let a0 = _mm256_loadu_ps(x);
            let a1 = _mm256_loadu_ps(x.add(8));
            for i in 0..MR {
                let wv = _mm256_broadcast_ss(&*w.add(i * ldw + kk));
                c0[i] = _mm256_fmadd_ps(wv, a0, c0[i]);
                c1[i] = _mm256_fmadd_ps(wv, a1, c1[i]);
            }
        }
        for i in 0..MR {
            _mm256_storeu_ps(c.add(i * ldc), c0[i]);
            _mm256_storeu_ps(c.add(i * ldc + 8), c1[i]);
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn gemm_tile_h<const MR: usize>(w: *const f32, ldw: usize, k: usize, xt: *const u16, ldx: usize, c: *mut f32, ldc: usize) {
        let mut c0 = [_mm256_setzero_ps(); MR];
        let mut c1 = [_mm256_setzero_ps(); MR];
        for kk in 0..k {
            let x = xt.add(kk * ldx);
            let a0 = _mm256_cvtph_ps(_mm_loadu_si128(x as *const __m128i));
            let a1 = _mm256_cvtph_ps(_mm_loadu_si128(x.add(8) as *const __m128i));
            for i in 0..MR {
                let wv = _mm256_broadcast_ss(&*w.add(i * ldw + kk));
                c0[i] = _mm256_fmadd_ps(wv, a0, c0[i]);
                c1[i] = _mm256_fmadd_ps(wv, a1, c1[i]);
            }
        }
        for i in 0..MR {
            _mm256_storeu_ps(c.add(i * ldc), c0[i]);
            _mm256_storeu_ps(c.add(i * ldc + 8), c1[i]);
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8)), acc1);
            i += 16;
        }
        let mut s = hsum(_mm256_add_ps(acc0, acc1));
        while i < n {
            s += a[i] * b[i];
            i += 1;
        }
        s
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
        let n = x.len();
        let av = _mm256_set1_ps(alpha);
        let mut i = 0;
        while i + 8 <= n {
            let yv = _mm256_loadu_ps(y.as_ptr().add(i));
            _mm256_storeu_ps(y.as_mut_ptr().add(i), _mm256_fmadd_ps(av, _mm256_loadu_ps(x.as_ptr().add(i)), yv));
            i += 8;
        }
        while i < n {
            y[i] += alpha * x[i];
            i += 1;
        }
    }

    /// exp(x) for 8 lanes: range reduction to [-ln2/2, ln2/2] and a degree-6 polynomial
    /// (relative error ~2 ulp); inputs are clamped to [-87.3, 88.7].
    #[inline(always)]
    pub unsafe fn exp8(x: __m256) -> __m256 {
        let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654)), _mm256_set1_ps(88.72283));
        let n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_145_75), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428_606_8e-6), r);
        let mut p = _mm256_set1_ps(1.0 / 720.0);
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0 / 120.0));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0 / 24.0));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0 / 6.0));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0));
        // 2^n: n in [-126, 128]; split in two factors so that n = 128 and n = -126 stay finite/normal.
        let ni = _mm256_cvtps_epi32(n);
        let h = _mm256_srai_epi32(ni, 1);
        let f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
        let f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23));
        _mm256_mul_ps(_mm256_mul_ps(p, f1), f2)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scale_max(x: &mut [f32], scale: f32) -> f32 {
        let n = x.len();
        let sv = _mm256_set1_ps(scale);
        let mut mv = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut i = 0;
        while i + 8 <= n {
            let p = x.as_mut_ptr().add(i);
            let v = _mm256_mul_ps(_mm256_loadu_ps(p), sv);
            _mm256_storeu_ps(p, v);
            mv = _mm256_max_ps(mv, v);
            i += 8;
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), mv);
        let mut max = lanes.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v));
        while i < n {
            x[i] *= scale;
            max = max.max(x[i]);
            i += 1;
        }
        max
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_sub_sum(x: &mut [f32], max: f32) -> f32 {
        let n = x.len();
        let mv = _mm256_set1_ps(max);
        let mut acc = _mm256_setzero_ps();
        let mut i = 0;
        while i + 8 <= n {
            let p = x.as_mut_ptr().add(i);
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p), mv));
            _mm256_storeu_ps(p, e);
            acc = _mm256_add_ps(acc, e);
            i += 8;
        }
        let mut s = hsum(acc);
        while i < n {
            x[i] = (x[i] - max).exp();
            s += x[i];
            i += 1;
        }
        s
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn silu_mul(g: &mut [f32], u: &[f32]) {
        let n = g.len();
        let one = _mm256_set1_ps(1.0);
        let mut i = 0;
        while i + 8 <= n {
            let p = g.as_mut_ptr().add(i);
            let x = _mm256_loadu_ps(p);
            let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
            let s = _mm256_div_ps(x, _mm256_add_ps(one, e));
            _mm256_storeu_ps(p, _mm256_mul_ps(s, _mm256_loadu_ps(u.as_ptr().add(i))));
            i += 8;
        }
        while i < n {
            g[i] = g[i] / (1.0 + (-g[i]).exp()) * u[i];
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small deterministic generator (xorshift) for test data.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn f(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
    }

    fn f32_to_f16_bits(v: f32) -> u16 {
        // Only for test data: normal range, truncating mantissa.
        if v == 0.0 {
            return 0;
        }
        let b = v.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
        assert!((1..31).contains(&exp));
        sign | ((exp as u16) << 10) | ((b >> 13) & 0x3ff) as u16
    }

    fn random_rows(fmt: QType, rows: usize, k: usize, rng: &mut Rng) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rows * k / QK {
            let d = f32_to_f16_bits(0.01 + 0.05 * rng.f().abs());
            out.extend_from_slice(&d.to_le_bytes());
            if fmt == QType::Q4_1 {
                out.extend_from_slice(&f32_to_f16_bits(-0.2 * rng.f().abs()).to_le_bytes());
            }
            let n = if fmt == QType::Q8_0 { 32 } else { 16 };
            for _ in 0..n {
                out.push(rng.next() as u8);
            }
        }
        out
    }

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }

    #[test]
    fn quantized_dots_match_dequantized_reference() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let simd = has_avx2();
        for fmt in [QType::Q4_1, QType::Q4_0, QType::Q8_0] {
            for k in [32, 64, 96, 576] {
                let rows = 7;
                let w = random_rows(fmt, rows, k, &mut rng);
                let x: Vec<f32> = (0..k).map(|_| rng.f() * 3.0).collect();
                let mut a = QAct::default();
                a.quantize(&x, k);
                // reference: dequantized weights . dequantized activations, in f64
                let xa: Vec<f64> = (0..k).map(|i| a.qs[i] as f64 * a.d[i / QK] as f64).collect();
                let mut fast = vec![0f32; rows];
                let mut scalar = vec![0f32; rows];
                dot_rows(fmt, &w, k, &a.qs, &a.d, &a.s, &mut fast, simd);
                dot_rows(fmt, &w, k, &a.qs, &a.d, &a.s, &mut scalar, false);
                let rb = fmt.row_bytes(k);
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
    fn interleaved_dots_match_plain() {
        let mut rng = Rng(99);
        for fmt in [QType::Q4_1, QType::Q4_0, QType::Q8_0] {
            for k in [32, 576, 1536] {
                let rows = 24;
                let w = random_rows(fmt, rows, k, &mut rng);
                let x8 = interleave_x8(fmt, &w, rows, k);
                let rb = fmt.row_bytes(k);
                let mut back = vec![0u8; rb];
                for r in 0..rows {
                    deinterleave_row_x8(fmt, &x8, r, k, &mut back);
                    assert_eq!(&back[..], &w[r * rb..(r + 1) * rb]);
                }
                let x: Vec<f32> = (0..k).map(|_| rng.f() * 3.0).collect();
                let mut a = QAct::default();
                a.quantize(&x, k);
                let mut plain = vec![0f32; rows];
                dot_rows(fmt, &w, k, &a.qs, &a.d, &a.s, &mut plain, false);
                for simd in [false, has_avx2()] {
                    let mut got = vec![0f32; rows];
                    dot_rows_x8(fmt, &x8, k, &a.qs, &a.d, &a.s, &mut got, simd);
                    for r in 0..rows {
                        let tol = 1e-5 * (plain[r].abs() + 1.0) * (k as f32 / 32.0);
                        assert!((got[r] - plain[r]).abs() <= tol, "{fmt:?} k={k} r={r} simd={simd}: {} vs {}", got[r], plain[r]);
                    }
                }
            }
        }
    }

    #[test]
    fn gemm_tile_matches_reference() {
        let mut rng = Rng(42);
        for simd in [false, has_avx2()] {
            for mr in 1..=6 {
                let k = 77;
                let ldx = 40;
                let ldc = 24;
                let ldw = k + 5;
                let w: Vec<f32> = (0..mr * ldw).map(|_| rng.f()).collect();
                let xt: Vec<f32> = (0..k * ldx).map(|_| rng.f()).collect();
                let mut c = vec![0f32; mr * ldc];
                gemm_tile(&w, ldw, mr, k, &xt[3..], ldx, &mut c, ldc, simd);
                for i in 0..mr {
                    for t in 0..16 {
                        let r: f32 = (0..k).map(|kk| w[i * ldw + kk] * xt[3 + kk * ldx + t]).sum();
                        assert!((c[i * ldc + t] - r).abs() < 1e-4, "mr={mr} i={i} t={t}");
                    }
                }
            }
        }
    }

    #[test]
    fn gemm_tile_h_matches_reference() {
        let mut rng = Rng(43);
        for simd in [false, has_avx2()] {
            for mr in 1..=6 {
                let (k, ldx, ldc, ldw) = (70, 20, 16, 72);
                let w: Vec<f32> = (0..mr * ldw).map(|_| rng.f()).collect();
                let xt: Vec<u16> = (0..k * ldx).map(|_| f32_to_f16(rng.f() * 8.0)).collect();
                let mut c = vec![0f32; mr * ldc];
                gemm_tile_h(&w, ldw, mr, k, &xt, ldx, &mut c, ldc, simd);
                for i in 0..mr {
                    for t in 0..16 {
                        let r: f32 = (0..k).map(|kk| w[i * ldw + kk] * f16_to_f32(xt[kk * ldx + t])).sum();
                        assert!((c[i * ldc + t] - r).abs() < 1e-3, "mr={mr} i={i} t={t}");
                    }
                }
            }
        }
        for v in [0.0f32, 1.0, -2.5, 65504.0, 1e-6, 3.25, -1e-8] {
            let back = f16_to_f32(f32_to_f16(v));
            assert!((back - v).abs() <= v.abs() * 1e-3 + 6e-8, "{v} -> {back}");
        }
    }

    /// The paired tile (AVX-512 where the CPU has it) gives the bits of two single AVX2 tiles, so
    /// attention's results do not depend on which CPU path ran.
    #[test]
    fn gemm_tile2_h_equals_two_tiles_bit_for_bit() {
        let mut rng = Rng(44);
        let simd = has_avx2();
        for mr in 1..=6 {
            for k in [0, 1, 17, 128] {
                let (ldx, ldw, second, ldc) = (48, 130, 24, 40);
                let w: Vec<f32> = (0..mr * ldw).map(|_| rng.f()).collect();
                let xt: Vec<u16> = (0..second + k.max(1) * ldx + 16).map(|_| f32_to_f16(rng.f() * 8.0)).collect();
                let mut pair = vec![f32::NAN; mr * ldc];
                gemm_tile2_h(&w, ldw, mr, k, &xt, second, ldx, &mut pair, ldc, simd);
                let mut single = vec![f32::NAN; mr * ldc];
                gemm_tile_h(&w, ldw, mr, k, &xt, ldx, &mut single, ldc, simd);
                gemm_tile_h(&w, ldw, mr, k, &xt[second..], ldx, &mut single[16..], ldc, simd);
                for i in 0..mr {
                    for t in 0..32 {
                        assert_eq!(pair[i * ldc + t].to_bits(), single[i * ldc + t].to_bits(), "mr={mr} k={k} i={i} t={t}");
                    }
                }
            }
        }
    }

    #[test]
    fn scale_max_matches_scalar() {
        let mut rng = Rng(45);
        for n in [0, 1, 7, 8, 9, 33, 100] {
            let x: Vec<f32> = (0..n).map(|_| rng.f() * 50.0).collect();
            let (mut a, mut b) = (x.clone(), x.clone());
            let (ma, mb) = (scale_max(&mut a, 0.088, has_avx2()), scale_max(&mut b, 0.088, false));
            assert_eq!(ma.to_bits(), mb.to_bits(), "n={n}");
            assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
        }
    }

    #[test]
    fn vector_helpers_match_scalar() {
        let mut rng = Rng(7);
        let simd = has_avx2();
        for n in [1, 7, 8, 19, 64, 100] {
            let a: Vec<f32> = (0..n).map(|_| rng.f() * 4.0).collect();
            let b: Vec<f32> = (0..n).map(|_| rng.f() * 4.0).collect();
            let r: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot_f32(&a, &b, simd) - r).abs() < 1e-4);
            let mut y1 = b.clone();
            let mut y2 = b.clone();
            axpy(0.7, &a, &mut y1, simd);
            axpy(0.7, &a, &mut y2, false);
            assert!(y1.iter().zip(&y2).all(|(p, q)| (p - q).abs() < 1e-5));
            let mut e1: Vec<f32> = a.iter().map(|v| v * 20.0).collect();
            let mut e2 = e1.clone();
            let s1 = exp_sub_sum(&mut e1, 30.0, simd);
            let s2 = exp_sub_sum(&mut e2, 30.0, false);
            assert!((s1 - s2).abs() <= 1e-5 * s2.abs());
            assert!(e1.iter().zip(&e2).all(|(p, q)| (p - q).abs() <= 2e-6 * q.abs() + 1e-37));
            let mut g1: Vec<f32> = a.iter().map(|v| v * 30.0).collect();
            let mut g2 = g1.clone();
            silu_mul(&mut g1, &b, simd);
            silu_mul(&mut g2, &b, false);
            assert!(g1.iter().zip(&g2).all(|(p, q)| (p - q).abs() <= 1e-5 * q.abs() + 1e-6));
        }
        // extreme inputs stay finite
        let mut e = vec![-200.0f32, -90.0, 0.0, 88.0, 100.0, 1.0, 2.0, 3.0];
        exp_sub_sum(&mut e, 0.0, simd);
        assert!(e.iter().all(|v| v.is_finite()));
    }
}
