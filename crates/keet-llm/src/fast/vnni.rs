//! AVX-512 VNNI kernels for the K-quants (Q4_K, Q5_K, Q6_K), used where the CPU has them
//! (Intel Ice Lake and later servers, AMD Zen 4 and later); the AVX2 kernels of
//! [`super::kquants`] serve every other x86-64 CPU and give the same sums.
//!
//! Prompt GEMM ([`gemm_rows`]): the tokens lie across the vector lanes. The activations of 16
//! tokens are interleaved four bytes at a time ([`TokenTiles`], built once per GEMM for every row),
//! so one `vpdpbusd` multiplies four weights of one row, broadcast, with four activations of each
//! of 16 tokens: 64 multiply-adds with no per-token scaling. A weight row's sub-block scale is
//! applied once per sub-block and 16 tokens (one convert and one FMA), and its mins (Q6_K: its
//! offset of 32) by one FMA per sub-block and 16 tokens from the activations' sums. The AVX2
//! kernel spends two multiplies and an add per 32 weights and token instead.
//!
//! Decode stays on the AVX2 dot products of [`super::kquants`]: it reads every weight once per
//! token from memory, and a VNNI version of them (one `vpdpbusd` and one `vpdpwssd` per 64
//! weights) measured no faster (15.2-17.4 against 15.9-16.1 tok/s on the default model).

use super::kquants::{KType, QActK, TileSums, QK_K};

/// True when the AVX-512 VNNI kernels may be used: the CPU has AVX-512 F, BW, DQ and VNNI, and
/// `KEET_CPU=avx2` does not ask for the AVX2 kernels (for side-by-side measurements).
pub fn available() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let forced_avx2 =
            std::env::var("KEET_CPU").is_ok_and(|v| v.eq_ignore_ascii_case("avx2") || v.eq_ignore_ascii_case("avx2-per-token"));
        !forced_avx2 && detected()
    })
}

#[cfg(target_arch = "x86_64")]
fn detected() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("avx512vnni")
        && super::cpu::has_avx2()
}

#[cfg(not(target_arch = "x86_64"))]
fn detected() -> bool {
    false
}

/// Tokens per tile (the 16 f32 or i32 lanes of a 512-bit vector).
pub const TILE: usize = 16;

/// The activations of a prompt GEMM laid out for [`gemm_rows`], tile by tile of 16 tokens:
/// * `quants`: `[tile][word of 4 quants, k / 4][token of the tile][4]` (tokens past `t_n` are 0);
/// * `scales`: `[block][token, padded]` the Q8_K block scales;
/// * `sums16` / `sums32`: `[block][group][token, padded]` the quants' sums over each 16 (32) of a
///   block times the block scale, for the Q6_K offset (the Q4_K/Q5_K mins).
#[derive(Default, Clone)]
pub struct TokenTiles {
    pub quants: Vec<i8>,
    pub scales: Vec<f32>,
    pub sums16: Vec<f32>,
    pub sums32: Vec<f32>,
    pub t_n: usize,
    pub nb: usize,
}

impl TokenTiles {
    /// Tokens rounded up to whole tiles.
    pub fn padded(t_n: usize) -> usize {
        t_n.div_ceil(TILE) * TILE
    }

    /// Lays out the first `t_n` vectors of `a` (each `nb` blocks of 256).
    pub fn build(a: &QActK, t_n: usize, nb: usize) -> TokenTiles {
        let tp = Self::padded(t_n);
        let k = nb * QK_K;
        let words = k / 4;
        let mut quants = vec![0i8; tp * k];
        for t in 0..t_n {
            let (tile, lane) = (t / TILE, t % TILE);
            let src = &a.qs[t * k..(t + 1) * k];
            let dst = &mut quants[tile * TILE * k..(tile + 1) * TILE * k];
            for w in 0..words {
                dst[(w * TILE + lane) * 4..][..4].copy_from_slice(&src[w * 4..w * 4 + 4]);
            }
        }
        let TileSums { scales, sums16, sums32 } = TileSums::build(a, t_n, nb, tp, true);
        TokenTiles { quants, scales, sums16, sums32, t_n, nb }
    }
}

/// Prompt GEMM in quantized form, as [`super::kquants::gemm_rows`]: `out[r * ldo + t] = w[r] ·
/// x[t]` for `rows` rows `k` wide and the `acts.t_n` tokens of `acts` ([`TokenTiles::build`]).
/// Only where [`available`] holds.
pub fn gemm_rows(fmt: KType, w: &[u8], rows: usize, k: usize, acts: &TokenTiles, out: &mut [f32], ldo: usize) {
    let nb = k / QK_K;
    let (t_n, tp) = (acts.t_n, TokenTiles::padded(acts.t_n));
    assert!(available(), "the AVX-512 VNNI kernels need AVX-512 F, BW, DQ and VNNI");
    assert!(k % QK_K == 0 && w.len() >= nb * fmt.block_bytes() * rows && acts.nb == nb);
    assert!(acts.quants.len() >= tp * k && acts.scales.len() >= nb * tp);
    assert!(acts.sums16.len() >= nb * 16 * tp && acts.sums32.len() >= nb * 8 * tp);
    assert!(ldo >= t_n && (rows == 0 || out.len() >= (rows - 1) * ldo + t_n));
    // SAFETY: the CPU has the features (asserted); the asserts bound every read of `w` (rows x
    // nb blocks) and of the tiles (tp tokens of k), and every write of `out` (masked to t_n).
    #[cfg(target_arch = "x86_64")]
    unsafe {
        avx512::gemm_rows(fmt, w, rows, nb, acts, out, ldo)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{KType, TokenTiles, QK_K, TILE};
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn f16_at(p: *const u8) -> f32 {
        super::super::cpu::f16_to_f32((p as *const u16).read_unaligned())
    }

    /// The 8 scales then the 8 mins of a Q4_K/Q5_K block (`sc`: its 12 bytes of 6-bit values),
    /// as 16 i32 lanes.
    #[inline(always)]
    unsafe fn scales_and_mins_k4(sc: *const u8) -> __m512i {
        let u = super::super::kquants::scales_and_mins_k4((sc as *const [u8; 12]).read_unaligned());
        _mm512_cvtepu8_epi32(_mm_set_epi32(u[3] as i32, u[2] as i32, u[1] as i32, u[0] as i32))
    }

    /// The 256 quants of block `x` as unsigned bytes in weight order, 64 per vector (0..15 for
    /// Q4_K, 0..31 for Q5_K, 0..63 for Q6_K, whose offset of 32 is applied with the mins).
    #[inline(always)]
    unsafe fn unpack_quants(fmt: KType, x: *const u8) -> [__m512i; 4] {
        let m4 = _mm512_set1_epi8(0xf);
        let mut quants = [_mm512_setzero_si512(); 4];
        match fmt {
            KType::Q4K | KType::Q5K => {
                let q5 = fmt == KType::Q5K;
                let qs = if q5 { x.add(48) } else { x.add(16) };
                let high =
                    if q5 { _mm512_broadcast_i64x4(_mm256_loadu_si256(x.add(16) as *const __m256i)) } else { _mm512_setzero_si512() };
                let one = _mm512_set1_epi8(1);
                for (c, q) in quants.iter_mut().enumerate() {
                    // 32 bytes hold sub-block 2c in their low nibbles and 2c+1 in their high ones
                    let v = _mm512_broadcast_i64x4(_mm256_loadu_si256(qs.add(32 * c) as *const __m256i));
                    let lo = _mm512_and_si512(v, m4);
                    let hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    *q = _mm512_mask_blend_epi64(0xf0, lo, hi);
                    if q5 {
                        // the fifth bit of sub-block j is bit j of each byte of `high`
                        let h = _mm512_mask_blend_epi64(
                            0xf0,
                            _mm512_srl_epi16(high, _mm_cvtsi32_si128(2 * c as i32)),
                            _mm512_srl_epi16(high, _mm_cvtsi32_si128(2 * c as i32 + 1)),
                        );
                        *q = _mm512_or_si512(*q, _mm512_slli_epi16(_mm512_and_si512(h, one), 4));
                    }
                }
            }
            KType::Q6K => {
                let m3 = _mm512_set1_epi8(3);
                for n in 0..2 {
                    // 64 bytes of low nibbles (weights n*128 + 0..64 low, + 64..128 high) and
                    // 32 of 2-bit highs (bits 0-1, 2-3, 4-5, 6-7 for the four runs of 32)
                    let low = _mm512_loadu_si512(x.add(64 * n) as *const _);
                    let hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(x.add(128 + 32 * n) as *const __m256i));
                    let h01 = _mm512_mask_blend_epi64(0xf0, hb, _mm512_srli_epi16(hb, 2));
                    let h23 = _mm512_mask_blend_epi64(0xf0, _mm512_srli_epi16(hb, 4), _mm512_srli_epi16(hb, 6));
                    quants[2 * n] = _mm512_or_si512(_mm512_and_si512(low, m4), _mm512_slli_epi16(_mm512_and_si512(h01, m3), 4));
                    quants[2 * n + 1] =
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low, 4), m4), _mm512_slli_epi16(_mm512_and_si512(h23, m3), 4));
                }
            }
        }
        quants
    }

    /// One block of a weight row unpacked for the GEMM: its quants as bytes in weight order,
    /// the f32 factor of each group's integer sum (`d * scale`), and of each group's activation
    /// sum (`-dmin * min`; Q6_K `-32 d * scale`, its offset).
    #[repr(C, align(64))]
    struct GemmBlock {
        quants: [u8; QK_K],
        scales: [f32; 16],
        mins: [f32; 16],
    }

    #[inline(always)]
    unsafe fn unpack_gemm(fmt: KType, x: *const u8, out: &mut GemmBlock) {
        for (c, q) in unpack_quants(fmt, x).into_iter().enumerate() {
            _mm512_store_si512(out.quants.as_mut_ptr().add(64 * c) as *mut _, q);
        }
        match fmt {
            KType::Q4K | KType::Q5K => {
                // lanes 0..8 scales (times d), 8..16 mins (times -dmin)
                let sm = _mm512_cvtepi32_ps(scales_and_mins_k4(x.add(4)));
                let factors = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(f16_at(x)), _mm512_set1_ps(-f16_at(x.add(2))));
                let f = _mm512_mul_ps(sm, factors);
                _mm256_storeu_ps(out.scales.as_mut_ptr(), _mm512_castps512_ps256(f));
                _mm256_storeu_ps(out.mins.as_mut_ptr(), _mm512_extractf32x8_ps::<1>(f));
            }
            KType::Q6K => {
                // the weight is d * scale * (q - 32): the offset goes with the activation sums
                let scales = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(x.add(192) as *const __m128i)));
                let d = f16_at(x.add(208));
                _mm512_storeu_ps(out.scales.as_mut_ptr(), _mm512_mul_ps(scales, _mm512_set1_ps(d)));
                _mm512_storeu_ps(out.mins.as_mut_ptr(), _mm512_mul_ps(scales, _mm512_set1_ps(-32.0 * d)));
            }
        }
    }

    /// Rows computed together, so each vector of activations loaded serves this many rows.
    const ROWS: usize = 4;
    /// Tiles of 16 tokens computed together, so each weight broadcast serves 32 tokens; with
    /// [`ROWS`] that gives 8 independent chains of `vpdpbusd` (latency 5, two a cycle).
    const TILES: usize = 2;

    /// `R` rows against `T` tiles of 16 tokens from `tile0`: each row's dot products, by tile.
    // The register tile is indexed by row and token tile together, as in any GEMM micro-kernel.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    unsafe fn tile_rows<const R: usize, const T: usize>(
        fmt: KType,
        blocks: &[GemmBlock],
        nb: usize,
        acts: &TokenTiles,
        tile0: usize,
    ) -> [[__m512; T]; R] {
        let k = nb * QK_K;
        let tp = TokenTiles::padded(acts.t_n);
        let (groups, words_per_group, sums, n_sums) = match fmt {
            KType::Q4K | KType::Q5K => (8, 8, acts.sums32.as_ptr(), 8),
            KType::Q6K => (16, 4, acts.sums16.as_ptr(), 16),
        };
        let quants = acts.quants.as_ptr();
        let mut acc = [[_mm512_setzero_ps(); T]; R];
        for b in 0..nb {
            let mut block_acc = [[_mm512_setzero_ps(); T]; R];
            for g in 0..groups {
                let mut isum = [[_mm512_setzero_si512(); T]; R];
                for wi in 0..words_per_group {
                    let word = g * words_per_group + wi;
                    let mut av = [_mm512_setzero_si512(); T];
                    for (t, v) in av.iter_mut().enumerate() {
                        *v = _mm512_loadu_si512(quants.add((tile0 + t) * TILE * k + (b * 64 + word) * 64) as *const _);
                    }
                    for r in 0..R {
                        let q = (blocks.get_unchecked(r * nb + b).quants.as_ptr().add(4 * word) as *const i32).read();
                        let qv = _mm512_set1_epi32(q);
                        for t in 0..T {
                            isum[r][t] = _mm512_dpbusd_epi32(isum[r][t], qv, av[t]);
                        }
                    }
                }
                for r in 0..R {
                    let scale = _mm512_set1_ps(*blocks.get_unchecked(r * nb + b).scales.get_unchecked(g));
                    for t in 0..T {
                        block_acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]), scale, block_acc[r][t]);
                    }
                }
            }
            for t in 0..T {
                let ad = _mm512_loadu_ps(acts.scales.as_ptr().add(b * tp + (tile0 + t) * TILE));
                for r in 0..R {
                    acc[r][t] = _mm512_fmadd_ps(block_acc[r][t], ad, acc[r][t]);
                }
            }
            // the mins (Q6_K: the offset of 32), from the activations' sums (scaled already)
            for g in 0..n_sums {
                for t in 0..T {
                    let s = _mm512_loadu_ps(sums.add((b * n_sums + g) * tp + (tile0 + t) * TILE));
                    for r in 0..R {
                        let m = *blocks.get_unchecked(r * nb + b).mins.get_unchecked(g);
                        acc[r][t] = _mm512_fmadd_ps(s, _mm512_set1_ps(m), acc[r][t]);
                    }
                }
            }
        }
        acc
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")]
    pub unsafe fn gemm_rows(fmt: KType, w: &[u8], rows: usize, nb: usize, acts: &TokenTiles, out: &mut [f32], ldo: usize) {
        let bb = fmt.block_bytes();
        let t_n = acts.t_n;
        let tiles = TokenTiles::padded(t_n) / TILE;
        let mut blocks: Vec<GemmBlock> = Vec::with_capacity(ROWS * nb);
        let mut r0 = 0;
        while r0 < rows {
            let nr = ROWS.min(rows - r0);
            blocks.clear();
            for r in r0..r0 + nr {
                for b in 0..nb {
                    let mut g = GemmBlock { quants: [0; QK_K], scales: [0.0; 16], mins: [0.0; 16] };
                    unpack_gemm(fmt, w.as_ptr().add((r * nb + b) * bb), &mut g);
                    blocks.push(g);
                }
            }
            let mut tile = 0;
            while tile < tiles {
                let store = |out: &mut [f32], r: usize, tile: usize, v: __m512| {
                    let lanes = (t_n - tile * TILE).min(TILE);
                    let mask: __mmask16 = if lanes == TILE { 0xffff } else { (1u16 << lanes) - 1 };
                    _mm512_mask_storeu_ps(out.as_mut_ptr().add((r0 + r) * ldo + tile * TILE), mask, v);
                };
                if tiles - tile >= TILES {
                    if nr == ROWS {
                        for (r, row) in tile_rows::<ROWS, TILES>(fmt, &blocks, nb, acts, tile).into_iter().enumerate() {
                            for (t, v) in row.into_iter().enumerate() {
                                store(out, r, tile + t, v);
                            }
                        }
                    } else {
                        for r in 0..nr {
                            let [row] = tile_rows::<1, TILES>(fmt, &blocks[r * nb..], nb, acts, tile);
                            for (t, v) in row.into_iter().enumerate() {
                                store(out, r, tile + t, v);
                            }
                        }
                    }
                    tile += TILES;
                } else if nr == ROWS {
                    for (r, [v]) in tile_rows::<ROWS, 1>(fmt, &blocks, nb, acts, tile).into_iter().enumerate() {
                        store(out, r, tile, v);
                    }
                    tile += 1;
                } else {
                    for r in 0..nr {
                        let [[v]] = tile_rows::<1, 1>(fmt, &blocks[r * nb..], nb, acts, tile);
                        store(out, r, tile, v);
                    }
                    tile += 1;
                }
            }
            r0 += nr;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kquants::tests::{quantize, rng_values};
    use super::super::kquants::{dequant_row, dot_row_scalar, KType, QActK, QK_K};
    use super::*;

    /// Blocks of random bytes (every quant and scale value, the extremes included) with a sane
    /// f16 `d` and `dmin`, and blocks quantized from random weights.
    fn weights(fmt: KType, rows: usize, k: usize, seed: u64) -> Vec<u8> {
        let mut w = quantize(fmt, &rng_values(seed, rows * k, 0.3));
        let mut s = seed | 1;
        let bb = fmt.block_bytes();
        for (i, blk) in w.chunks_exact_mut(bb).enumerate() {
            if i % 2 == 0 {
                continue;
            }
            for v in blk.iter_mut() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *v = (s >> 24) as u8;
            }
            // d = 0.01 and dmin = 0.005 as f16
            let (d, dmin) = (0x211Fu16.to_le_bytes(), 0x1D1Fu16.to_le_bytes());
            match fmt {
                KType::Q4K | KType::Q5K => {
                    blk[0..2].copy_from_slice(&d);
                    blk[2..4].copy_from_slice(&dmin);
                }
                KType::Q6K => blk[208..210].copy_from_slice(&d),
            }
        }
        w
    }

    /// Activations with random values, and a block at full scale (every quant +-127) so the
    /// 16-bit lane sums are at their largest.
    fn activations(t_n: usize, k: usize, seed: u64) -> QActK {
        let mut x = rng_values(seed, t_n * k, 2.0);
        for t in 0..t_n {
            let sign = if t % 2 == 0 { 1.0 } else { -1.0 };
            x[t * k..t * k + QK_K].fill(sign);
        }
        let mut a = QActK::default();
        a.quantize(&x);
        a
    }

    /// Within 1e-5 of Σ|w·x| (the sums are exact integers per block; only the f32 scaling and
    /// the order of the additions differ from the reference).
    fn close(fmt: KType, row: &[u8], qs: &[i8], d: &[f32], got: f32, want: f32) -> bool {
        let mut wr = vec![0f32; qs.len()];
        dequant_row(fmt, row, &mut wr);
        let magnitude: f32 = wr.iter().zip(qs).enumerate().map(|(i, (w, &q))| (w * q as f32 * d[i / QK_K]).abs()).sum();
        (got - want).abs() <= 1e-5 * (magnitude + 1e-3)
    }

    #[test]
    fn gemm_matches_the_scalar_reference() {
        if !available() {
            eprintln!("SKIP: this CPU has no AVX-512 VNNI");
            return;
        }
        for fmt in [KType::Q4K, KType::Q5K, KType::Q6K] {
            for (rows, k, t_n) in [(5, 768, 11), (3, 1536, 32), (4, 256, 17), (2, 512, 1)] {
                let nb = k / QK_K;
                let w = weights(fmt, rows, k, 31 + k as u64);
                let a = activations(t_n, k, 37 + t_n as u64);
                let tiles = TokenTiles::build(&a, t_n, nb);
                let ldo = t_n + 3;
                let mut out = vec![f32::NAN; rows * ldo];
                gemm_rows(fmt, &w, rows, k, &tiles, &mut out, ldo);
                let rb = nb * fmt.block_bytes();
                for r in 0..rows {
                    for t in 0..t_n {
                        let (row, qs, d) = (&w[r * rb..(r + 1) * rb], &a.qs[t * k..(t + 1) * k], &a.d[t * nb..(t + 1) * nb]);
                        let want = dot_row_scalar(fmt, row, qs, d, &a.bsums[t * nb * 16..(t + 1) * nb * 16]);
                        let got = out[r * ldo + t];
                        assert!(close(fmt, row, qs, d, got, want), "{fmt:?} k={k} r={r} t={t}: {got} vs {want}");
                    }
                    assert!(out[r * ldo + t_n..(r * ldo + ldo).min(out.len())].iter().all(|v| v.is_nan()), "wrote past t_n");
                }
            }
        }
    }
}
