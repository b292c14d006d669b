//! The AVX2 prompt GEMM for Q4_K with the tokens across the vector lanes, for CPUs without
//! AVX-512 VNNI (AMD Zen 2/3, Intel client cores): the AVX2 counterpart of [`super::vnni`].
//!
//! [`super::kquants::gemm_rows`] multiplies one token at a time: per 32 weights and token a
//! `vpmaddubsw`, a `vpmaddwd` by the sub-block's scale and an add, so two of every three
//! instructions need the vector multiplier. Here the activations of 16 tokens are interleaved
//! two bytes at a time ([`PairTiles`], built once per GEMM for every row), so one `vpmaddubsw`
//! multiplies two weights of one row, broadcast, with two activations of each of 16 tokens and
//! leaves one 16-bit sum per token. Those sums add up in 16 bits over 8 pairs (at most 8 x 2 x 15
//! x 128 = 30,720: exact), the two halves of a sub-block are interleaved and widened by one
//! `vpmaddwd` by its scale per 8 tokens, and the block's integer sum per token is exact before
//! its one conversion to f32. The multiplier runs 18 instructions per 32 weights and 16 tokens
//! instead of 32.
//!
//! Every token's result is computed in its own lanes from its own activations only, so it does
//! not depend on the other tokens of the tile or the GEMM (the prompt path's prefix reuse relies
//! on that). Q5_K and Q6_K, whose wider quants allow only 4 and 2 pairs in 16 bits, keep the
//! per-token kernel.

use super::kquants::{QActK, TileSums, QK_K};

/// Tokens per tile: the 16 lanes of 16 bits of a 256-bit vector.
pub const TILE: usize = 16;

/// Where token `lane` of a tile lies among the tile's 16 slots: `vpunpcklwd`/`vpunpckhwd` work
/// within each 128-bit half, so slots 0-3 and 8-11 widen together, as do 4-7 and 12-15; tokens
/// 4-7 sit in slots 8-11 and tokens 8-11 in slots 4-7 so that the widened sums come out in token
/// order (tokens 0-7, then 8-15).
const fn slot(lane: usize) -> usize {
    match lane / 4 {
        1 => lane + 4,
        2 => lane - 4,
        _ => lane,
    }
}

/// The activations of a prompt GEMM laid out for [`gemm_rows_q4k`], tile by tile of 16 tokens:
/// * `quants`: `[tile][pair of quants, k / 2][slot of the tile][2]` (tokens past `t_n` are 0);
/// * `scales`: `[block][token, padded]` the Q8_K block scales;
/// * `sums32`: `[block][sub-block of 32][token, padded]` the quants' sums over each 32 times the
///   block scale, for the Q4_K mins.
#[derive(Default, Clone)]
pub struct PairTiles {
    pub quants: Vec<i8>,
    pub scales: Vec<f32>,
    pub sums32: Vec<f32>,
    pub t_n: usize,
    pub nb: usize,
}

impl PairTiles {
    /// Tokens rounded up to whole tiles.
    pub fn padded(t_n: usize) -> usize {
        t_n.div_ceil(TILE) * TILE
    }

    /// Lays out the first `t_n` vectors of `a` (each `nb` blocks of 256).
    pub fn build(a: &QActK, t_n: usize, nb: usize) -> PairTiles {
        let tp = Self::padded(t_n);
        let k = nb * QK_K;
        let mut quants = vec![0i8; tp * k];
        for t in 0..t_n {
            let (tile, at) = (t / TILE, slot(t % TILE));
            let src = &a.qs[t * k..(t + 1) * k];
            let dst = &mut quants[tile * TILE * k..(tile + 1) * TILE * k];
            for (p, pair) in src.chunks_exact(2).enumerate() {
                dst[(p * TILE + at) * 2..][..2].copy_from_slice(pair);
            }
        }
        let TileSums { scales, sums32, .. } = TileSums::build(a, t_n, nb, tp, false);
        PairTiles { quants, scales, sums32, t_n, nb }
    }
}

/// True where [`gemm_rows_q4k`] runs: the CPU has AVX2, FMA and F16C, and `KEET_CPU=avx2-per-token`
/// does not ask for the per-token kernel (for side-by-side measurements).
pub fn available() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let per_token = std::env::var("KEET_CPU").is_ok_and(|v| v.eq_ignore_ascii_case("avx2-per-token"));
        !per_token && super::cpu::has_avx2()
    })
}

/// Prompt GEMM of Q4_K rows in quantized form, as [`super::kquants::gemm_rows`]: `out[r * ldo +
/// t] = w[r] · x[t]` for `rows` rows `k` wide and the `acts.t_n` tokens of `acts`
/// ([`PairTiles::build`]). Only where [`available`] holds.
pub fn gemm_rows_q4k(w: &[u8], rows: usize, k: usize, acts: &PairTiles, out: &mut [f32], ldo: usize) {
    let nb = k / QK_K;
    let (t_n, tp) = (acts.t_n, PairTiles::padded(acts.t_n));
    assert!(available(), "the AVX2 pair kernel needs AVX2, FMA and F16C");
    assert!(k % QK_K == 0 && w.len() >= nb * super::kquants::Q4K_BYTES * rows && acts.nb == nb);
    assert!(acts.quants.len() >= tp * k && acts.scales.len() >= nb * tp && acts.sums32.len() >= nb * 8 * tp);
    assert!(ldo >= t_n && (rows == 0 || out.len() >= (rows - 1) * ldo + t_n));
    // SAFETY: the CPU has the features (asserted); the asserts bound every read of `w` (rows x
    // nb blocks) and of the tiles (tp tokens of k), and every write of `out` (t_n per row).
    #[cfg(target_arch = "x86_64")]
    unsafe {
        avx2::gemm_rows_q4k(w, rows, nb, acts, out, ldo)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{PairTiles, QK_K, TILE};
    use std::arch::x86_64::*;

    /// One Q4_K block of a row unpacked: its quants as bytes in weight order, the 6-bit scale of
    /// each sub-block of 32 as 16 bits, and the factors of the block's integer sum (`d`) and of
    /// each sub-block's activation sum (`-dmin * min`).
    #[repr(C, align(32))]
    struct Block {
        quants: [u8; QK_K],
        scales: [i16; 8],
        d: f32,
        mins: [f32; 8],
    }

    #[inline(always)]
    unsafe fn f16_at(p: *const u8) -> f32 {
        super::super::cpu::f16_to_f32((p as *const u16).read_unaligned())
    }

    #[inline(always)]
    unsafe fn unpack(x: *const u8, out: &mut Block) {
        let m4 = _mm256_set1_epi8(0xf);
        for c in 0..4 {
            // 32 bytes hold sub-block 2c in their low nibbles and 2c+1 in their high ones
            let bits = _mm256_loadu_si256(x.add(16 + 32 * c) as *const __m256i);
            _mm256_store_si256(out.quants.as_mut_ptr().add(64 * c) as *mut __m256i, _mm256_and_si256(bits, m4));
            let high = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            _mm256_store_si256(out.quants.as_mut_ptr().add(64 * c + 32) as *mut __m256i, high);
        }
        let packed = super::super::kquants::scales_and_mins_k4((x.add(4) as *const [u8; 12]).read_unaligned());
        let bytes: [u8; 16] = std::mem::transmute(packed);
        let (d, dmin) = (f16_at(x), f16_at(x.add(2)));
        out.d = d;
        for j in 0..8 {
            out.scales[j] = bytes[j] as i16;
            out.mins[j] = -dmin * bytes[8 + j] as f32;
        }
    }

    /// Rows computed together, so each vector of activations loaded serves this many rows.
    const ROWS: usize = 2;

    /// `R` rows (`blocks[r * nb..]`) against the tile of 16 tokens `tile`: each row's dot
    /// products for tokens 0-7 and 8-15.
    // The register tile is indexed by row, as in any GEMM micro-kernel.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    unsafe fn tile_rows<const R: usize>(blocks: &[Block], nb: usize, acts: &PairTiles, tile: usize) -> [[__m256; 2]; R] {
        let k = nb * QK_K;
        let tp = PairTiles::padded(acts.t_n);
        let quants = acts.quants.as_ptr().add(tile * TILE * k);
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for b in 0..nb {
            let mut isum = [[_mm256_setzero_si256(); 2]; R];
            for j in 0..8 {
                // pairs 0-7 and 8-15 of sub-block j, each summed in 16 bits per token
                let mut half = [[_mm256_setzero_si256(); 2]; R];
                for h in 0..2 {
                    for p in 0..8 {
                        let pair = b * QK_K / 2 + j * 16 + h * 8 + p;
                        let av = _mm256_loadu_si256(quants.add(pair * 2 * TILE) as *const __m256i);
                        for r in 0..R {
                            let q = blocks.get_unchecked(r * nb + b).quants.as_ptr().add(2 * (pair - b * QK_K / 2));
                            let wv = _mm256_set1_epi16((q as *const i16).read_unaligned());
                            half[r][h] = _mm256_add_epi16(half[r][h], _mm256_maddubs_epi16(wv, av));
                        }
                    }
                }
                for r in 0..R {
                    let sc = _mm256_set1_epi16(*blocks.get_unchecked(r * nb + b).scales.get_unchecked(j));
                    let low = _mm256_madd_epi16(_mm256_unpacklo_epi16(half[r][0], half[r][1]), sc);
                    let high = _mm256_madd_epi16(_mm256_unpackhi_epi16(half[r][0], half[r][1]), sc);
                    isum[r][0] = _mm256_add_epi32(isum[r][0], low);
                    isum[r][1] = _mm256_add_epi32(isum[r][1], high);
                }
            }
            for (h, tokens) in [0, 8].into_iter().enumerate() {
                let ad = _mm256_loadu_ps(acts.scales.as_ptr().add(b * tp + tile * TILE + tokens));
                for r in 0..R {
                    let factor = _mm256_mul_ps(_mm256_set1_ps(blocks.get_unchecked(r * nb + b).d), ad);
                    acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][h]), factor, acc[r][h]);
                }
                // the mins, from the activations' sums (scaled already)
                for j in 0..8 {
                    let s = _mm256_loadu_ps(acts.sums32.as_ptr().add((b * 8 + j) * tp + tile * TILE + tokens));
                    for r in 0..R {
                        let m = _mm256_set1_ps(*blocks.get_unchecked(r * nb + b).mins.get_unchecked(j));
                        acc[r][h] = _mm256_fmadd_ps(s, m, acc[r][h]);
                    }
                }
            }
        }
        acc
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn gemm_rows_q4k(w: &[u8], rows: usize, nb: usize, acts: &PairTiles, out: &mut [f32], ldo: usize) {
        let bb = super::super::kquants::Q4K_BYTES;
        let t_n = acts.t_n;
        let tiles = PairTiles::padded(t_n) / TILE;
        let mut blocks: Vec<Block> = Vec::with_capacity(ROWS * nb);
        let store = |out: &mut [f32], r: usize, tile: usize, v: [__m256; 2]| {
            let mut lanes = [0f32; TILE];
            _mm256_storeu_ps(lanes.as_mut_ptr(), v[0]);
            _mm256_storeu_ps(lanes.as_mut_ptr().add(8), v[1]);
            let n = (t_n - tile * TILE).min(TILE);
            out[r * ldo + tile * TILE..][..n].copy_from_slice(&lanes[..n]);
        };
        let mut r0 = 0;
        while r0 < rows {
            let nr = ROWS.min(rows - r0);
            blocks.clear();
            for r in r0..r0 + nr {
                for b in 0..nb {
                    let mut block = Block { quants: [0; QK_K], scales: [0; 8], d: 0.0, mins: [0.0; 8] };
                    unpack(w.as_ptr().add((r * nb + b) * bb), &mut block);
                    blocks.push(block);
                }
            }
            for tile in 0..tiles {
                if nr == ROWS {
                    for (r, v) in tile_rows::<ROWS>(&blocks, nb, acts, tile).into_iter().enumerate() {
                        store(out, r0 + r, tile, v);
                    }
                } else {
                    for r in 0..nr {
                        let [v] = tile_rows::<1>(&blocks[r * nb..], nb, acts, tile);
                        store(out, r0 + r, tile, v);
                    }
                }
            }
            r0 += nr;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kquants::tests::{quantize, rng_values};
    use super::super::kquants::{dot_rows, KType};
    use super::*;

    /// Each token's dot product equals the per-token kernel's to rounding, whatever the number of
    /// tokens (a partial tile, one, two and a half) and rows (the 2-row path and the odd one), and
    /// a token's result does not depend on the other tokens of its tile, bit for bit.
    #[test]
    fn pair_gemm_matches_the_per_token_dot_products() {
        if !available() {
            return;
        }
        let (rows, k) = (5, 768);
        let nb = k / QK_K;
        let w = quantize(KType::Q4K, &rng_values(61, rows * k, 0.3));
        let mut alone: Vec<Vec<f32>> = Vec::new();
        for t_n in [1, 7, 16, 40] {
            let x = rng_values(67, t_n * k, 2.0);
            let mut a = QActK::default();
            a.quantize(&x);
            let tiles = PairTiles::build(&a, t_n, nb);
            let ldo = t_n + 3;
            let mut out = vec![f32::NAN; rows * ldo];
            gemm_rows_q4k(&w, rows, k, &tiles, &mut out, ldo);
            for t in 0..t_n {
                let mut want = vec![0f32; rows];
                let (qs, d, bs) = (&a.qs[t * k..(t + 1) * k], &a.d[t * nb..(t + 1) * nb], &a.bsums[t * nb * 16..(t + 1) * nb * 16]);
                dot_rows(KType::Q4K, &w, k, qs, d, bs, &mut want, false);
                for r in 0..rows {
                    let got = out[r * ldo + t];
                    assert!((got - want[r]).abs() <= 1e-4 * (want[r].abs() + 1.0), "t_n={t_n} r={r} t={t}: {got} vs {}", want[r]);
                }
            }
            // the first token's values are the same vector for every t_n (same seed, same first token)
            let first: Vec<f32> = (0..rows).map(|r| out[r * ldo]).collect();
            alone.push(first);
        }
        for other in &alone[1..] {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(other), bits(&alone[0]), "a token's result depends on the tokens beside it");
        }
    }
}
