//! The device the model runs on: parsing `--device` (`cpu`, `cuda`, `cuda:N`) into a candle
//! [`Device`] with a clear error when CUDA is not compiled in or no GPU/driver answers, the memory
//! free for weights (host `MemAvailable` and cgroup limit; GPU free memory), and a measured copy
//! bandwidth (the ceiling a memory-bound decode step can reach).
//!
//! Bandwidth convention: a copy of `n` bytes reads `n` and writes `n`, so bandwidth =
//! `2 × n / time` (the convention of CUDA's `bandwidthTest` and of STREAM's copy figure).

use std::time::Instant;

use candle_core::Device;

use super::model::LlmError;

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

/// Parses `cpu`, `cuda`, `gpu` or `cuda:N` and opens the device. A CUDA device on a keet built
/// without the `cuda` feature, or on a machine where the driver does not answer, is a clear error.
pub fn parse_device(s: &str) -> Result<Device, LlmError> {
    let s = s.trim().to_ascii_lowercase();
    if s == "cpu" {
        return Ok(Device::Cpu);
    }
    let ordinal = if s == "cuda" || s == "gpu" {
        0
    } else if let Some(n) = s.strip_prefix("cuda:") {
        n.parse::<usize>().map_err(|_| err(format!("bad device `{s}` (use cpu, cuda or cuda:N)")))?
    } else {
        return Err(err(format!("unknown device `{s}` (use cpu, cuda or cuda:N)")));
    };
    if !candle_core::utils::cuda_is_available() {
        return Err(err(format!(
            "device `{s}` asked for, but this keet was built without CUDA (rebuild with \
             `cargo build --release --features cuda`, see docs/cuda.md)"
        )));
    }
    // cudarc reports a missing driver or GPU as an error, but guard against a panic in the
    // bindings too: a bad device must never abort the process.
    let opened = std::panic::catch_unwind(|| Device::new_cuda(ordinal));
    match opened {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(err(format!(
            "cannot open CUDA device {ordinal} ({e}); is an NVIDIA GPU there and its driver's libcuda.so.1 \
             (not the toolkit's stub) on the library path? `nvidia-smi` should list the GPU",
            e = crate::model::candle_message(&e)
        ))),
        Err(_) => {
            Err(err(format!("cannot open CUDA device {ordinal} (the CUDA bindings failed); is an NVIDIA GPU and its driver present?")))
        }
    }
}

/// Checks a `--device` value early (before any profile work), so a bad device fails fast with a
/// clear error rather than after minutes of parsing, or not at all when every answer is cached.
pub fn check_device(s: Option<&str>) -> Result<(), LlmError> {
    match s {
        None => Ok(()),
        Some(s) => parse_device(s).map(|_| ()),
    }
}

/// `cpu` or `cuda:N`, for reports.
pub fn device_name(d: &Device) -> String {
    match d.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// Host memory this process can still take, bytes: `MemAvailable`, capped by the cgroup's
/// `memory.max - memory.current` when there is such a limit. `None` when neither is readable.
pub fn host_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    let read_u64 = |p: &str| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<u64>().ok());
    let cgroup = match (read_u64("/sys/fs/cgroup/memory.max"), read_u64("/sys/fs/cgroup/memory.current")) {
        (Some(max), Some(cur)) => Some(max.saturating_sub(cur)),
        _ => None,
    };
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Memory free for weights on `device`, bytes: host memory for the CPU, the GPU's free memory
/// (`cuMemGetInfo`) for CUDA.
pub fn free_bytes(device: &Device) -> Result<Option<u64>, LlmError> {
    match device {
        Device::Cpu => Ok(host_available_bytes()),
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => {
            let (free, _total) = d.cuda_stream().context().mem_get_info().map_err(|e| err(format!("CUDA free memory: {e}")))?;
            Ok(Some(free as u64))
        }
        #[allow(unreachable_patterns)]
        _ => Ok(None),
    }
}

/// A measured copy bandwidth.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CopyBandwidth {
    /// Bytes copied per copy (the buffer size).
    pub buffer_bytes: u64,
    /// Copies timed per batch (the best batch counts).
    pub copies: usize,
    /// Seconds per copy, best batch.
    pub copy_s: f64,
    /// `2 × buffer_bytes / copy_s` in GB/s (10^9 bytes): every copied byte is read once and written once.
    pub gbps: f64,
    /// What copied: `host memcpy (N threads)` or `device-to-device cuMemcpy`.
    pub method: &'static str,
}

/// Times copies of a `buffer_bytes` buffer on `device` (warm-up first, then the best of a few
/// batches, synchronised on CUDA). On the CPU the copy is split over `threads` threads, the count
/// the model uses, so the figure is what the model's threads can pull from memory.
pub fn measure_copy_bandwidth(device: &Device, buffer_bytes: usize, threads: usize) -> Result<CopyBandwidth, LlmError> {
    if buffer_bytes < 1 << 20 {
        return Err(err(format!("copy buffer of {buffer_bytes} bytes is too small to time (use at least 1 MiB)")));
    }
    match device {
        Device::Cpu => Ok(cpu_copy(buffer_bytes, threads.max(1))),
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => cuda_copy(d, buffer_bytes),
        #[allow(unreachable_patterns)]
        _ => Err(err("copy bandwidth: only cpu and cuda devices are supported")),
    }
}

fn bandwidth(buffer_bytes: usize, copies: usize, copy_s: f64, method: &'static str) -> CopyBandwidth {
    let gbps = if copy_s > 0.0 { 2.0 * buffer_bytes as f64 / copy_s / 1e9 } else { 0.0 };
    CopyBandwidth { buffer_bytes: buffer_bytes as u64, copies, copy_s, gbps, method }
}

fn cpu_copy(n: usize, threads: usize) -> CopyBandwidth {
    // Both buffers written before timing, so no page fault is timed.
    let src = vec![1u8; n];
    let mut dst = vec![2u8; n];
    let chunk = n.div_ceil(threads).next_multiple_of(4096);
    let copy = |dst: &mut [u8]| {
        std::thread::scope(|s| {
            for (d, sc) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(sc));
            }
        });
    };
    copy(&mut dst);
    let copies = 3;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..copies {
            copy(&mut dst);
        }
        best = best.min(t.elapsed().as_secs_f64() / copies as f64);
    }
    std::hint::black_box(&dst);
    let method = if threads == 1 { "host memcpy (1 thread)" } else { "host memcpy (model's threads)" };
    bandwidth(n, copies, best, method)
}

#[cfg(feature = "cuda")]
fn cuda_copy(d: &candle_core::CudaDevice, n: usize) -> Result<CopyBandwidth, LlmError> {
    let cuda = |what: &str, e: candle_core::cuda::cudarc::driver::DriverError| err(format!("copy bandwidth, {what}: {e}"));
    let stream = d.cuda_stream();
    let src = stream.alloc_zeros::<u8>(n).map_err(|e| cuda("allocating the source", e))?;
    let mut dst = stream.alloc_zeros::<u8>(n).map_err(|e| cuda("allocating the destination", e))?;
    stream.memcpy_dtod(&src, &mut dst).map_err(|e| cuda("warm-up copy", e))?;
    stream.synchronize().map_err(|e| cuda("synchronize", e))?;
    let copies = 10;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..copies {
            stream.memcpy_dtod(&src, &mut dst).map_err(|e| cuda("copy", e))?;
        }
        stream.synchronize().map_err(|e| cuda("synchronize", e))?;
        best = best.min(t.elapsed().as_secs_f64() / copies as f64);
    }
    Ok(bandwidth(n, copies, best, "device-to-device cuMemcpy"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_or_fail_clearly() {
        assert!(parse_device("cpu").unwrap().is_cpu());
        assert!(parse_device(" CPU ").unwrap().is_cpu());
        let e = parse_device("tpu").unwrap_err().to_string();
        assert!(e.contains("unknown device `tpu`") && e.contains("cuda:N"), "{e}");
        let e = parse_device("cuda:x").unwrap_err().to_string();
        assert!(e.contains("bad device `cuda:x`"), "{e}");
        #[cfg(not(feature = "cuda"))]
        {
            let e = parse_device("cuda").unwrap_err().to_string();
            assert!(e.contains("built without CUDA") && e.contains("--features cuda"), "{e}");
            assert!(check_device(Some("cuda:1")).is_err());
        }
        assert!(check_device(None).is_ok() && check_device(Some("cpu")).is_ok());
    }

    #[test]
    fn cpu_copy_bandwidth_is_measured() {
        let b = measure_copy_bandwidth(&Device::Cpu, 8 << 20, 2).unwrap();
        assert_eq!(b.buffer_bytes, 8 << 20);
        assert!(b.copy_s > 0.0 && b.gbps > 0.0, "{b:?}");
        assert!((b.gbps - 2.0 * (8 << 20) as f64 / b.copy_s / 1e9).abs() < 1e-9);
        assert!(measure_copy_bandwidth(&Device::Cpu, 1000, 1).is_err());
    }

    #[test]
    fn host_memory_is_known() {
        let b = host_available_bytes().expect("/proc/meminfo");
        assert!(b > 0);
        assert!(free_bytes(&Device::Cpu).unwrap().is_some_and(|f| f > 0));
    }
}
