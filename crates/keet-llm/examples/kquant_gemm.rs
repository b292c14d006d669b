//! Micro-benchmark of the K-quant prompt GEMM on one core, the per-token AVX2 kernel beside the
//! AVX2 Q4_K kernel with the tokens across the lanes (`pairs`) and the AVX-512 VNNI one (where the
//! CPU has it), from cache: best of 30 runs each, interleaved, with the load average. Shape from the environment: `ROWS` (128), `K` (1536, a multiple of 256), `T` tokens (32).
//!
//! `cargo run --release -p keet-llm --example kquant_gemm`
use keet_llm::fast::kquants::{gemm_rows, KType, QActK, QK_K};
use keet_llm::fast::{pairs, vnni};
use std::time::Instant;

fn main() {
    let env = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (rows, k, t_n) = (env("ROWS", 128), env("K", 1536) / QK_K * QK_K, env("T", 32).max(1));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{rows} rows x {k} x {t_n} tokens, one thread; load average {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let mut state = 7u64;
    let mut random = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for fmt in [KType::Q4K, KType::Q5K, KType::Q6K] {
        let nb = k / QK_K;
        let block_bytes = fmt.block_bytes();
        // random bytes are valid quants and scales; d (and dmin) set to 0.01 (0.005)
        let mut weights: Vec<u8> = (0..rows * nb * block_bytes).map(|_| (random() >> 24) as u8).collect();
        for block in weights.chunks_exact_mut(block_bytes) {
            match fmt {
                KType::Q6K => block[208..210].copy_from_slice(&0x211Fu16.to_le_bytes()),
                _ => {
                    block[0..2].copy_from_slice(&0x211Fu16.to_le_bytes());
                    block[2..4].copy_from_slice(&0x1D1Fu16.to_le_bytes());
                }
            }
        }
        let x: Vec<f32> = (0..t_n * k).map(|_| ((random() >> 40) as f32 / 16_777_216.0) - 0.5).collect();
        let mut acts = QActK::default();
        acts.quantize(&x);
        let tiles = vnni::available().then(|| vnni::TokenTiles::build(&acts, t_n, nb));
        let pair_tiles = (fmt == KType::Q4K && pairs::available()).then(|| pairs::PairTiles::build(&acts, t_n, nb));
        let mut out_avx2 = vec![0f32; rows * t_n];
        let mut out_vnni = vec![0f32; rows * t_n];
        let mut out_pairs = vec![0f32; rows * t_n];
        let (mut best_avx2_s, mut best_vnni_s, mut best_pairs_s) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..30 {
            let start = Instant::now();
            gemm_rows(fmt, &weights, rows, k, &acts, t_n, &mut out_avx2, t_n, true);
            best_avx2_s = best_avx2_s.min(start.elapsed().as_secs_f64());
            if let Some(pair_tiles) = &pair_tiles {
                let start = Instant::now();
                pairs::gemm_rows_q4k(&weights, rows, k, pair_tiles, &mut out_pairs, t_n);
                best_pairs_s = best_pairs_s.min(start.elapsed().as_secs_f64());
                let worst = out_avx2.iter().zip(&out_pairs).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
                assert!(worst < 1e-2 && out_pairs.iter().all(|v| v.is_finite()), "the pair kernel disagrees by {worst}");
            }
            if let Some(tiles) = &tiles {
                let start = Instant::now();
                vnni::gemm_rows(fmt, &weights, rows, k, tiles, &mut out_vnni, t_n);
                best_vnni_s = best_vnni_s.min(start.elapsed().as_secs_f64());
                let worst = out_avx2.iter().zip(&out_vnni).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
                assert!(worst < 1e-2 && out_vnni.iter().all(|v| v.is_finite()), "the kernels disagree by {worst}");
            }
        }
        let macs = (rows * k * t_n) as f64;
        if pair_tiles.is_some() {
            println!(
                "{fmt:?}: avx2 per token {:.1} GMAC/s, avx2 tokens across lanes {:.1} GMAC/s ({:.2}x)",
                macs / best_avx2_s / 1e9,
                macs / best_pairs_s / 1e9,
                best_avx2_s / best_pairs_s
            );
        }
        match tiles {
            Some(_) => println!(
                "{fmt:?}: avx2 {:.1} GMAC/s, avx512 vnni {:.1} GMAC/s ({:.2}x)",
                macs / best_avx2_s / 1e9,
                macs / best_vnni_s / 1e9,
                best_avx2_s / best_vnni_s
            ),
            None => println!("{fmt:?}: avx2 {:.1} GMAC/s (no AVX-512 VNNI on this CPU)", macs / best_avx2_s / 1e9),
        }
    }
}
