"""Named GPUs and their data-sheet peaks: memory bandwidth and dense matrix FLOP/s per dtype.

The roofline predictor (engine/roofline/predictor.py) prices a forward pass on these numbers. They are the vendors'
*peak* figures, which real kernels do not reach (SpecLab's H200 run reached ~80% of the bandwidth and of the
bf16 FLOP/s the sheet gives with its own copy and matmul probes, docs/measurements/h200-gpu_graphs.json), so
a prediction from them is a lower bound on time, and the page says so.

Rules for every entry:
- FLOP/s are DENSE. NVIDIA's data sheets print Tensor Core figures "with sparsity" (2:4 structured sparsity,
  which a dense LLM matmul does not use) and state the dense figure is one half; the entries below are those
  halves, and each comment says which number was printed.
- "bfloat16"/"float16" are the Tensor Core figures with FP32 accumulation (what PyTorch's matmuls use);
  "float32" is the non-Tensor FP32 figure (PyTorch does not use TF32 for float32 matmuls by default).
  None = the GPU has no such units (a T4 has no bfloat16 Tensor Cores).
- bandwidth in bytes/s (1 TB/s = 1e12 B/s, as the sheets count).
- The source is the vendor document the figure comes from. The build machine has no internet, so the PDFs
  themselves were not opened here: each figure was checked against copies of the sheets quoted in public
  pages (found with the project's search tool, named in each comment). Where no vendor figure exists, the
  entry says so in `note`, and the page shows that note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TB = 1e12
TFLOPS = 1e12
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class GPU:
    key: str  # short name used in URLs and the CLI ("H200")
    name: str  # the product as the vendor names it
    memory_gb: float  # on-board memory (GB = 1e9 bytes, as the sheets count)
    bandwidth: float  # peak memory bandwidth, bytes/s
    flops: dict[str, float | None]  # dense peak FLOP/s per dtype (see the module docstring)
    source: str  # vendor document(s) the numbers come from
    device_names: tuple[str, ...] = ()  # substrings of torch.cuda.get_device_name() that mean this GPU
    note: str = ""  # caveats the page shows (unconfirmed or derived numbers)
    sparse_printed: dict[str, float] = field(default_factory=dict)  # the "with sparsity" figure the sheet prints

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s in `dtype`; ValueError (one line) where the GPU has no such units."""
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}; got {dtype!r}")
        value = self.flops.get(dtype)
        if value is None:
            raise ValueError(f"the {self.name} has no {dtype} matrix units; choose another dtype")
        return value

    def ridge_point(self, dtype: str) -> float:
        """FLOP per byte above which a kernel is compute-bound on this GPU (peak FLOP/s / peak bandwidth)."""
        return self.peak_flops(dtype) / self.bandwidth


GPUS: dict[str, GPU] = {
    g.key: g
    for g in (
        # NVIDIA T4 data sheet ("NVIDIA T4 Tensor Core GPU for AI inference", PDF 951643): 320 GB/s GDDR6,
        # "Mixed precision (FP16/FP32) 65 FP16 TFLOPS", single precision 8.1 TFLOPS. Turing has no 2:4
        # sparsity, so 65 is dense. No bfloat16 (Turing Tensor Cores do FP16/INT8/INT4 only).
        # Checked against: sysrqmts.com/en/gpus/nvidia/tesla/t4 (320.0 GB/s, FP16 65.13, FP32 8.141 TFLOPS).
        GPU(
            "T4",
            "NVIDIA T4 (16 GB)",
            16,
            320e9,
            {"bfloat16": None, "float16": 65 * TFLOPS, "float32": 8.1 * TFLOPS},
            "NVIDIA T4 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/tesla-t4/",
            ("Tesla T4", "NVIDIA T4"),
        ),
        # NVIDIA L4 data sheet ("NVIDIA L4 Tensor Core GPU"): 300 GB/s; "BF16 Tensor Core 242 teraFLOPS*",
        # "FP16 Tensor Core 242 teraFLOPS*", * = with sparsity -> 121 dense; FP32 30.3 teraFLOPS.
        # Checked against: grokipedia.com/page/NVIDIA_L4_vs_L40S (242 TFLOPS FP16 with sparsity, 300 GB/s).
        GPU(
            "L4",
            "NVIDIA L4 (24 GB)",
            24,
            300e9,
            {"bfloat16": 121 * TFLOPS, "float16": 121 * TFLOPS, "float32": 30.3 * TFLOPS},
            "NVIDIA L4 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/l4/",
            ("NVIDIA L4",),
            sparse_printed={"bfloat16": 242 * TFLOPS},
        ),
        # NVIDIA publishes no A10G data sheet (it is an AWS-only variant of the A10, in EC2 G5 instances). The
        # bandwidth, 600 GB/s, is the A10's and the A10G's (Baseten, "NVIDIA A10 vs A10G for ML model
        # inference", baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/). The FLOP/s are the A10's
        # data sheet figures (BF16 Tensor Core 125 dense / 250 with sparsity; FP32 31.2): NOT confirmed for the
        # A10G, whose Tensor Core throughput Baseten says is lower than the A10's.
        GPU(
            "A10G",
            "NVIDIA A10G (24 GB, AWS)",
            24,
            600e9,
            {"bfloat16": 125 * TFLOPS, "float16": 125 * TFLOPS, "float32": 31.2 * TFLOPS},
            "NVIDIA A10 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/products/a10-gpu/ "
            "(A10, not A10G); bandwidth also in https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/",
            ("A10G",),
            note="NVIDIA publishes no A10G data sheet: its FLOP/s here are the A10's (125 TFLOPS dense bf16), which "
            "Baseten reports the A10G does not reach; the bandwidth (600 GB/s) is confirmed for both.",
            sparse_printed={"bfloat16": 250 * TFLOPS},
        ),
        # NVIDIA A100 data sheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): A100 40GB SXM 1,555 GB/s;
        # "BFLOAT16 Tensor Core 312 TFLOPS | 624 TFLOPS*" (* with sparsity); FP32 19.5 TFLOPS.
        # Checked against: glennklockwood.com/garden/processors/A100 (quotes that PDF: 1.555 TB/s, BF16 312/624).
        GPU(
            "A100-40GB",
            "NVIDIA A100 SXM 40 GB",
            40,
            1555e9,
            {"bfloat16": 312 * TFLOPS, "float16": 312 * TFLOPS, "float32": 19.5 * TFLOPS},
            "NVIDIA A100 Tensor Core GPU data sheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
            "a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
            ("A100-SXM4-40GB", "A100-PCIE-40GB", "A100 40GB"),
            sparse_printed={"bfloat16": 624 * TFLOPS},
        ),
        # Same sheet, A100 80GB SXM: 2,039 GB/s (the 80GB PCIe card: 1,935 GB/s); same FLOP/s.
        # Checked against: glennklockwood.com/garden/processors/A100 and thundercompute.com's A100 table.
        GPU(
            "A100-80GB",
            "NVIDIA A100 SXM 80 GB",
            80,
            2039e9,
            {"bfloat16": 312 * TFLOPS, "float16": 312 * TFLOPS, "float32": 19.5 * TFLOPS},
            "NVIDIA A100 Tensor Core GPU data sheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
            "a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
            ("A100-SXM4-80GB", "A100 80GB"),
            sparse_printed={"bfloat16": 624 * TFLOPS},
        ),
        # NVIDIA H100 data sheet: H100 SXM 3.35 TB/s; "BFLOAT16 Tensor Core 1,979 teraFLOPS*" (* with sparsity;
        # "specifications 1/2 lower without sparsity") -> 989.5 dense; FP32 67 teraFLOPS.
        # Checked against: archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html (the sheet's table and footnote)
        # and glennklockwood.com/garden/processors/h100 (BF16 matrix 989.4, sparse 1978.9).
        GPU(
            "H100-SXM",
            "NVIDIA H100 SXM 80 GB",
            80,
            3.35 * TB,
            {"bfloat16": 989.5 * TFLOPS, "float16": 989.5 * TFLOPS, "float32": 67 * TFLOPS},
            "NVIDIA H100 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/h100/",
            ("H100 80GB HBM3", "H100 SXM"),
            sparse_printed={"bfloat16": 1979 * TFLOPS},
        ),
        # NVIDIA H200 data sheet: H200 SXM 141 GB HBM3e, 4.8 TB/s; "BFLOAT16 Tensor Core 1,979 TFLOPS*" (with
        # sparsity) -> 989.5 dense (the same GH100 compute as the H100); FP32 67 TFLOPS.
        # Checked against: itkb.uw.cz "NVIDIA H200 vs B300" (dense FP16/BF16 ~989 TFLOPS, 4.8 TB/s) and
        # lzwjava.github.io/nvidia-h200-gpu-specs-en (4.8 TB/s, figures "include sparsity").
        GPU(
            "H200",
            "NVIDIA H200 SXM 141 GB",
            141,
            4.8 * TB,
            {"bfloat16": 989.5 * TFLOPS, "float16": 989.5 * TFLOPS, "float32": 67 * TFLOPS},
            "NVIDIA H200 Tensor Core GPU data sheet, https://www.nvidia.com/en-us/data-center/h200/",
            ("H200",),
            sparse_printed={"bfloat16": 1979 * TFLOPS},
        ),
        # NVIDIA HGX B200 (per GPU, 1,000 W configuration): FP16/BF16 Tensor Core 4.5 PFLOPS with sparsity ->
        # 2.25 PFLOPS dense; FP32 80 TFLOPS; 8 TB/s HBM3e (DGX B200 data sheet: 64 TB/s for 8 GPUs; some
        # listings print 7.7 TB/s per GPU). Checked against: glennklockwood.com/garden/processors/B200 (HGX B200
        # at 1,000 W: BF16 2250 dense / 4500 sparse, FP32 80, 8 TB/s) and hpc-ai.com's H200-vs-B200 table.
        GPU(
            "B200",
            "NVIDIA B200 (HGX, 180 GB)",
            180,
            8 * TB,
            {"bfloat16": 2250 * TFLOPS, "float16": 2250 * TFLOPS, "float32": 80 * TFLOPS},
            "NVIDIA HGX B200 / DGX B200 data sheets, https://www.nvidia.com/en-us/data-center/hgx/ and "
            "https://www.nvidia.com/en-us/data-center/dgx-b200/",
            ("B200",),
            note="B200 bandwidth is printed as 8 TB/s (DGX B200: 64 TB/s for 8 GPUs) and elsewhere as 7.7 TB/s; 8 TB/s is used.",
            sparse_printed={"bfloat16": 4500 * TFLOPS},
        ),
        # NVIDIA Ada GPU Architecture whitepaper (v2.01), RTX 4090 column: memory bandwidth 1,008 GB/s;
        # "Peak BF16 Tensor TFLOPS with FP32 Accumulate 165.2 | 330.4" (dense | sparse); FP32 82.6 TFLOPS.
        # GeForce cards run FP16/BF16 with FP32 accumulation at half the FP16-accumulate rate (330.3 dense).
        # Checked against: waredb.com/processor/nvidia-geforce-rtx-4090 (BF16 165.15 / 330.30 sparse, 1008 GB/s).
        GPU(
            "RTX4090",
            "NVIDIA GeForce RTX 4090 (24 GB)",
            24,
            1008e9,
            {"bfloat16": 165.2 * TFLOPS, "float16": 165.2 * TFLOPS, "float32": 82.6 * TFLOPS},
            "NVIDIA Ada GPU Architecture whitepaper, https://images.nvidia.com/aem-dam/Solutions/geforce/ada/"
            "nvidia-ada-gpu-architecture.pdf",
            ("RTX 4090",),
            sparse_printed={"bfloat16": 330.4 * TFLOPS},
        ),
    )
}


def gpu(key: str) -> GPU:
    """The GPU called `key` (case-insensitive); ValueError naming the choices otherwise."""
    for name, entry in GPUS.items():
        if name.lower() == str(key).lower():
            return entry
    raise ValueError(f"unknown GPU {key!r}; choose from {', '.join(GPUS)}")


def gpu_for_device(device_name: str) -> GPU | None:
    """The table entry for a device name as torch reports it ("NVIDIA H200"), or None if it is not listed."""
    for entry in GPUS.values():
        if any(pattern.lower() in device_name.lower() for pattern in entry.device_names):
            return entry
    return None
