"""The machine: device pick, dtype choice, a peak bandwidth / peak FLOP/s probe, timing and a utilisation sampler.

- `configure_threads()`: torch's intra-op threads from SPECLAB_THREADS, else the container's CPU quota
  (cgroup v2 `cpu.max`, v1 CFS quota) capped by the CPU affinity; PyTorch alone sizes from the host.
- `pick_device()`: CUDA if available, else Apple MPS, else CPU.
- `pick_dtype("auto", device)`: bfloat16 where the device computes it natively and fast (a GPU of compute
  capability >= 8.0, older GPUs float16; a CPU with AVX512-BF16 / AMX flags), else float32.
- `probe(device, dtype)`: measures this machine's peak memory bandwidth (the higher of a large tensor copy and a
  read-only sum over it, the buffer at least twice the last-level cache) and peak matmul FLOP/s in the model's
  dtype. Utilisation in the app is "% of these measured peaks".
- `StepTimer`: CUDA events on GPU, perf_counter on CPU.
- `UtilizationSampler`: a background thread reading NVML GPU utilisation (nvidia-ml-py) or psutil CPU utilisation
  every few ms; samples are attached to steps by timestamp. NVML's "utilisation" only says a kernel was running, not
  how much of the chip it used: a memory-bound decode shows ~100% while the tensor cores idle, which is exactly the
  point SpecLab makes with achieved FLOP/s instead.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class ThreadBudget:
    threads: int  # torch intra-op threads
    source: str  # why that many: "SPECLAB_THREADS", "CPU quota 2.0", "CPU affinity", ...


def _cgroup_quota_v2(text: str) -> float | None:
    """cgroup v2 `cpu.max`: "<quota> <period>" in µs, or "max <period>" for no limit."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    quota, period = int(parts[0]), int(parts[1])
    return quota / period if quota > 0 and period > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


def _ancestors(mount: Path, rel: str) -> list[Path]:
    """The cgroup directory of this process under `mount` and every parent up to `mount` (a limit on any of
    them applies). Inside a container's cgroup namespace `rel` is "/" and this is just `mount`."""
    here = mount / rel.strip("/")
    dirs = [here, *here.parents]
    return [d for d in dirs if d == mount or mount in d.parents]


def cpu_quota(root: str | os.PathLike = "/sys/fs/cgroup", proc_cgroup: str | os.PathLike = "/proc/self/cgroup") -> float | None:
    """This process's CPU limit in CPUs from its cgroup (None: no limit found). cgroup v2 reads `cpu.max`,
    v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`; the smallest limit along the cgroup's path wins. This is what
    `docker run --cpus` and a Space's hardware tier set; PyTorch ignores it and sizes its pool from the host."""
    root = Path(root)
    lines = (_read(Path(proc_cgroup)) or "0::/").splitlines()
    quotas: list[float] = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, rel = fields
        if controllers == "":  # v2 unified hierarchy (on a hybrid host it may sit under root/unified)
            for mount in (root, root / "unified"):
                for d in _ancestors(mount, rel):
                    text = _read(d / "cpu.max")
                    quota = _cgroup_quota_v2(text) if text else None
                    if quota:
                        quotas.append(quota)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own mount
            for name in (controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"):
                mount = root / name
                if not mount.is_dir():
                    continue
                for d in _ancestors(mount, rel):
                    q, p = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
                    try:
                        q_us, p_us = int(q), int(p)
                    except (TypeError, ValueError):
                        continue
                    if q_us > 0 and p_us > 0:
                        quotas.append(q_us / p_us)
                break
    return min(quotas) if quotas else None


def cpu_affinity() -> int:
    """CPUs this process may run on (cpuset / taskset); os.cpu_count() where the OS cannot say."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_budget(env: dict | None = None, quota: float | None | str = "read", affinity: int | None = None) -> ThreadBudget:
    """How many torch threads to use: SPECLAB_THREADS if set, else the container's CPU quota (rounded down, at
    least 1) capped by the CPUs this process may run on, else those CPUs. (The arguments are for tests.)

    A 2-vCPU Space on a 16-core host otherwise gets 16 threads that spin-wait against each other inside a
    2-CPU quota and are throttled: the timings, which are what SpecLab shows, turn noisy and slow."""
    env = os.environ if env is None else env
    value = env.get("SPECLAB_THREADS")
    if value:
        try:
            threads = int(value)
        except ValueError:
            raise ValueError(f"SPECLAB_THREADS must be a positive integer; got {value!r}") from None
        if threads < 1:
            raise ValueError(f"SPECLAB_THREADS must be a positive integer; got {value!r}")
        return ThreadBudget(threads, "SPECLAB_THREADS")
    cpus = cpu_affinity() if affinity is None else affinity
    limit = cpu_quota() if quota == "read" else quota
    if limit is not None and int(limit) < cpus:
        return ThreadBudget(max(1, int(limit)), f"CPU quota {limit:g}")
    return ThreadBudget(max(1, cpus), "CPU affinity")


def configure_threads() -> ThreadBudget:
    """Size torch's intra-op pool from `thread_budget()` (SPECLAB_THREADS, else the container's CPU quota and
    affinity): on a shared or quota-limited CPU, more threads than CPUs spin-wait against each other and make
    the measured timings many times slower and noisier."""
    budget = thread_budget()
    if torch.get_num_threads() != budget.threads:
        torch.set_num_threads(budget.threads)
    return budget


def thread_line() -> str:
    """'2 (CPU quota 2)': torch's intra-op threads now and why (for the run's machine line)."""
    threads = torch.get_num_threads()
    try:
        budget = thread_budget()
    except ValueError:  # a bad SPECLAB_THREADS: load_pair has said so already
        return str(threads)
    return f"{threads} ({budget.source})" if budget.threads == threads else f"{threads} (set by the caller)"


def configure_attention(device: torch.device | str) -> None:
    """On CUDA, keep scaled_dot_product_attention off its cuDNN backend (process-wide), unless
    SPECLAB_CUDNN_ATTENTION=1.

    Measured on an H200 with torch 2.11 (`scripts/investigate/gpu_attention.py`, README "GPU"): PyTorch picks cuDNN's
    fused attention for a decode step, and cuDNN builds an execution plan for every new shape. Decoding
    brings a new cache length at every step, so a cold step paid for a new plan: batch-1 decode steps took
    several times as long with cuDNN as without it, for SmolLM2-135M, SmolLM2-1.7B and Qwen2.5-7B shapes. Once
    every length has been seen, cuDNN is faster (the numbers: docs/journal.md, "Code history moved out of
    engine/"). The app measures per-step latency, and plan building would show up as spikes that have nothing to
    do with the model's work, so cuDNN is off by default. A long-running server that sees the same lengths
    again and again can opt back in. Nothing changes on a CPU."""
    if torch.device(device).type == "cuda" and os.environ.get("SPECLAB_CUDNN_ATTENTION") != "1":
        torch.backends.cuda.enable_cudnn_sdp(False)


def pick_device(device: str | None = None) -> torch.device:
    if device:
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"unknown device {device!r}: use cpu, cuda, cuda:N or mps") from None
        if dev.type not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device {device!r} is not supported: use cpu, cuda, cuda:N or mps")
        if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ValueError(f"device {device!r} requested but MPS is not available on this machine")
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available on this machine")
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of auto, {', '.join(DTYPES)}; got {dtype!r}")
        return DTYPES[dtype]
    if device.type == "cuda":
        return torch.bfloat16 if cuda_bf16_is_native(device) else torch.float16
    if device.type == "cpu" and cpu_bf16_is_fast():
        return torch.bfloat16
    return torch.float32


def cuda_bf16_is_native(device: torch.device) -> bool:
    """Does this GPU compute bf16 natively? NVIDIA: compute capability 8.0 or later (Ampere on: A10G, A100, L4,
    L40S, H100, H200). `torch.cuda.is_bf16_supported()` also says yes where bf16 is only emulated (a T4, 7.5,
    runs it through float32 paths, slower than float16), so "auto" would pick an emulated dtype there; such
    GPUs get float16. ROCm GPUs that PyTorch supports compute bf16."""
    if getattr(torch.version, "hip", None):
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    major, _minor = torch.cuda.get_device_capability(device)
    return major >= 8


def cpu_has_native_bf16() -> bool:
    """Does this CPU advertise native bf16 arithmetic (AVX512-BF16 or AMX-BF16)? Linux only."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool({"avx512_bf16", "amx_bf16"} & flags)
    except OSError:
        pass
    return False


@functools.lru_cache(maxsize=1)
def cpu_bf16_is_fast() -> bool:
    """Is bf16 the fast dtype on this CPU? Only where the CPU computes it natively (AVX512-BF16 / AMX).

    Without those instructions PyTorch emulates bf16. A timing used to decide this, and it came out either
    way with the machine's load (so `dtype="auto"` changed between processes); without them float32 is the faster
    dtype (measured: docs/journal.md, "Code history moved out of engine/"). The flags decide, the same every time."""
    return cpu_has_native_bf16()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


class StepTimer:
    """Times a region: CUDA events on GPU (read after one synchronize), perf_counter elsewhere."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device
        self._start = self._end = None

    def __enter__(self):
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self._end.record()
        else:
            synchronize(self.device)
            self._end = time.perf_counter()

    @property
    def ms(self) -> float:
        if self.cuda:
            self._end.synchronize()
            return self._start.elapsed_time(self._end)
        return (self._end - self._start) * 1000.0


@dataclass(frozen=True)
class HardwareProbe:
    device: str
    device_name: str
    dtype: str
    peak_bandwidth: float  # bytes/s, measured
    peak_flops: float  # FLOP/s in `dtype`, measured
    threads: int
    copy_bandwidth: float | None = None  # bytes/s of the copy, counted as one read and one write per byte
    read_bandwidth: float | None = None  # bytes/s of a read-only stream (a sum) over the same buffer

    @property
    def ridge_point(self) -> float:
        """FLOP per byte at which work turns compute-bound on this machine."""
        return self.peak_flops / self.peak_bandwidth

    def to_dict(self) -> dict:
        return asdict(self) | {"ridge_point": self.ridge_point}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        return line.split(":", 1)[1].strip() + f" ({torch.get_num_threads()} threads)"
        except OSError:
            pass
    return device.type


def last_level_cache(root: str | os.PathLike = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """Bytes of cpu0's largest cache (Linux sysfs `index*/size`, e.g. "300M" or "307200K"); 0 where unreadable."""
    most = 0
    for size in Path(root).glob("index*/size"):
        text = (_read(size) or "").strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        if (digits := text.rstrip("KMG")).isdigit():
            most = max(most, int(digits) * scale)
    return most


def probe_bytes(quick: bool, cache: int) -> int:
    """The CPU probe's buffer: 64 MiB (quick) or 256, at least twice the last-level cache (one it holds reads at the
    cache's speed: a 64 MiB sum 62 GB/s under a 300 MiB L3, 28 from memory; docs/journal.md), at most 2 GiB."""
    return min(max(64 << 20 if quick else 256 << 20, 2 * cache), 2 << 30)


def _median_time(fn, device: torch.device, repeats: int) -> float:
    fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def probe(device: torch.device | str | None = None, dtype: torch.dtype | str = "auto", quick: bool = False) -> HardwareProbe:
    """Measure peak memory bandwidth (the higher of a copy and a read of a buffer far larger than cache), peak matmul FLOP/s."""
    device = pick_device(device if isinstance(device, str) or device is None else str(device))
    dtype = pick_dtype(dtype, device)
    big = device.type != "cpu"
    # Bandwidth, two ways over one buffer far larger than the caches: a copy (counted as one read and one write per
    # byte, though a CPU may also read each destination line before writing it) and a read-only sum, which is what a
    # decode pass mostly does with its weights. The peak is the higher: with the copy alone, a one-token pass read more
    # than "the peak" on the 2-core EPYC, where a read can stream faster than the copy's counted rate (docs/measurements.md,
    # "Passes on the CPU"). The quick probe's buffer is smaller; both are at least twice the last-level cache.
    n_bytes = (1 << 30) if big else probe_bytes(quick, last_level_cache())
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    repeats = 5 if quick else 9
    copy_bw = 2 * n_bytes / _median_time(lambda: dst.copy_(src), device, repeats)  # noqa: F821 (ruff misreads the del below)
    read_bw = n_bytes / _median_time(lambda: src.sum(), device, repeats)  # noqa: F821
    bandwidth = max(copy_bw, read_bw)
    del src, dst
    # FLOP/s: a square matmul large enough to be compute-bound.
    n = 8192 if big else (768 if quick else 1536)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    t = _median_time(lambda: a @ b, device, 5 if quick else 9)
    flops = 2 * n**3 / t
    return HardwareProbe(
        device=device.type,
        device_name=device_name(device),
        dtype=str(dtype).replace("torch.", ""),
        peak_bandwidth=bandwidth,
        peak_flops=flops,
        threads=torch.get_num_threads(),
        copy_bandwidth=copy_bw,
        read_bandwidth=read_bw,
    )


class UtilizationSampler:
    """Background sampler of the coarse utilisation gauge: NVML on CUDA, psutil CPU% elsewhere.

    Use as a context manager; `mean_between(t0, t1)` averages samples taken in a perf_counter window."""

    def __init__(self, device: torch.device, interval_s: float = 0.02):
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        # NVML also gives the SM clock (MHz) and board power (W): (time, clock, power), sampled alike
        self.gpu_samples: list[tuple[float, float | None, float | None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._read_gpu = None
        self._read = self._make_reader(device)
        self.source = "none" if self._read is None else ("nvml" if device.type == "cuda" else "psutil")

    def _make_reader(self, device: torch.device):
        if device.type == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
                self._read_gpu = functools.partial(_nvml_clock_power, pynvml, handle)
                return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except Exception:  # no NVML library: the gauge is simply absent
                return None
        try:
            import psutil

            psutil.cpu_percent(interval=None)
            return lambda: psutil.cpu_percent(interval=None)
        except ImportError:
            return None

    def _run(self):
        while not self._stop.wait(self.interval_s):
            t = time.perf_counter()
            self.samples.append((t, self._read()))
            if self._read_gpu is not None:
                self.gpu_samples.append((t, *self._read_gpu()))

    def __enter__(self):
        if self._read is not None:
            self._thread = threading.Thread(target=self._run, name="speclab-util", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def mean_between(self, t0: float, t1: float) -> float | None:
        # Each sample covers the interval before it, so take those ending inside the window
        # plus the first one after it.
        vals = [v for t, v in self.samples if t0 < t <= t1 + self.interval_s]
        return sum(vals) / len(vals) if vals else None

    def gpu_between(self, t0: float, t1: float) -> tuple[float | None, float | None]:
        """Mean NVML SM clock (MHz) and power (W) of the samples in the window (None: not sampled)."""
        window = [(c, p) for t, c, p in self.gpu_samples if t0 < t <= t1 + self.interval_s]
        clocks = [c for c, _ in window if c is not None]
        powers = [p for _, p in window if p is not None]
        return (sum(clocks) / len(clocks) if clocks else None, sum(powers) / len(powers) if powers else None)


def _nvml_clock_power(pynvml, handle) -> tuple[float | None, float | None]:
    """NVML's current SM clock (MHz) and board power draw (W); None for a reading the board does not give."""
    try:
        clock = float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:
        clock = None
    try:
        power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # milliwatts
    except Exception:
        power = None
    return clock, power
