"""Stage 7 benchmark: tinyedu's GPU kernels, on a CUDA GPU next to PyTorch, and on OpenCL next to C.

Run: .venv/bin/python bench/bench_gpu.py [--quick]          (not a test; prints tables)

1. What is present: a CUDA GPU with its driver (tinyedu's CUDA device), PyTorch with CUDA, an OpenCL
   platform (the GPU device; PoCL on a machine without a GPU). Whatever is missing is skipped, saying
   why.
2. On a CUDA GPU, side by side with PyTorch in one run (TF32 off, so both compute in float32): a
   4096² float32 matmul in GFLOPS, a row softmax and a sum in GB/s, and the fused elementwise chain
   relu(a*b+c)*0.5-a in GB/s, against PyTorch's unfused ops. Ratio = tinyedu's rate / PyTorch's, so
   > 1 means tinyedu is faster; the goals of issue 19 are printed with them (PASS / MISS).
3. On the OpenCL device and on the WEBGPU device (WGSL through wgpu: the machine's GPU, or lavapipe
   on the CPU; the adapter is printed), the same kernels at smaller sizes against the C device
   (report only: PoCL and lavapipe on a CPU say that the kernels run, not how fast a GPU is).
4. The lockstep emulator's counts of the same kernels (small sizes, the GPU heuristics' opts):
   32-byte sectors per warp request, shared-memory bank conflicts, barriers executed, idle threads
   (tinyedu/runtime/gpu_counts.py): what they would cost a GPU, measured without one.

tinyedu's times are its kernels alone, each lowered with the default heuristics and timed on scratch
buffers (the best of several runs; a kernel call waits for the kernel to finish). A workload that is
several kernels (softmax) adds up its kernels' times. PyTorch's are the best of several runs with
`torch.cuda.synchronize()` after each. Every workload is also checked against numpy once.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tinyedu import Tensor
from tinyedu.core.ops import LoadOps
from tinyedu.engine.beam import scratch_buffers, time_runner
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Device, DeviceUnavailable

QUICK = "--quick" in sys.argv
REPEAT = 3 if QUICK else 7

try:
    import torch
except ImportError:
    torch = None


@dataclass
class Workload:
    """One benchmark: a Tensor expression of float32 inputs, its numpy twin, and what a run moves."""

    name: str
    unit: str                              # "GFLOPS" or "GB/s"
    shapes: list[tuple[int, ...]]
    build: Callable[..., Tensor]           # the tinyedu expression of the input Tensors
    numpy: Callable[..., np.ndarray]       # the same in numpy (float64), the check
    torch: Callable[..., Any]              # PyTorch's version (unfused for the chain)
    amount: Callable[[list[tuple[int, ...]]], float]  # FLOPs or bytes, from the shapes


def softmax64(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape))


def workloads(on_gpu: bool) -> list[Workload]:
    """The four workloads at GPU sizes (`on_gpu`) or at sizes two CPU cores run in seconds."""
    n = 4096 if on_gpu else (256 if QUICK else 512)
    rows = (4096, 4096) if on_gpu else ((512, 512) if QUICK else (1024, 1024))
    flat = (1 << 26,) if on_gpu else ((1 << 20,) if QUICK else (1 << 22,))
    return [
        Workload(f"matmul {n}x{n}", "GFLOPS", [(n, n), (n, n)], lambda a, b: a @ b,
                 lambda a, b: a @ b, lambda a, b: a @ b, lambda s: 2 * s[0][0] * s[0][1] * s[1][1]),
        Workload(f"softmax rows {rows[0]}x{rows[1]}", "GB/s", [rows], lambda x: x.softmax(-1), softmax64,
                 lambda x: torch.softmax(x, -1), lambda s: 8 * _size(s[0])),
        Workload(f"sum 2^{flat[0].bit_length() - 1}", "GB/s", [flat], lambda x: x.sum(), lambda x: x.sum(),
                 lambda x: x.sum(), lambda s: 4 * _size(s[0])),
        Workload(f"relu(a*b+c)*0.5-a 2^{flat[0].bit_length() - 1}", "GB/s", [flat] * 3,
                 lambda a, b, c: (a * b + c).relu() * 0.5 - a,
                 lambda a, b, c: np.maximum(a * b + c, 0) * 0.5 - a,
                 lambda a, b, c: (a * b + c).relu() * 0.5 - a, lambda s: 16 * _size(s[0])),
    ]


def inputs(work: Workload, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in work.shapes]


def kernel_seconds(work: Workload, arrays: list[np.ndarray], device: str) -> tuple[float, int]:
    """The summed best times of the compute kernels `work` makes on `device`, and how many there are."""
    tensors = [Tensor(a, device=device).realize() for a in arrays]
    items = [i for i in create_schedule([work.build(*tensors).lazydata]) if not isinstance(i.ast.op, LoadOps)]
    total = 0.0
    for item in items:
        runner, buffers = lower(device, item.ast).runner, scratch_buffers(item.ast, device)
        total += min(time_runner(runner, buffers) for _ in range(REPEAT))
    return total, len(items)


def check(work: Workload, arrays: list[np.ndarray], device: str) -> str:
    """'ok' when `device` computes the workload as numpy does (float32 tolerances), else the error."""
    got = work.build(*(Tensor(a, device=device) for a in arrays)).numpy()
    expected = work.numpy(*(a.astype(np.float64) for a in arrays))
    scale = max(float(np.abs(expected).max()), 1.0)
    error = float(np.abs(got - expected).max()) / scale
    return "ok" if error < 1e-3 else f"WRONG (relative error {error:.1e})"


def torch_seconds(work: Workload, arrays: list[np.ndarray]) -> float:
    tensors = [torch.from_numpy(a).cuda() for a in arrays]
    work.torch(*tensors)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(REPEAT):
        start = time.perf_counter()
        work.torch(*tensors)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


# ---- 1. what is present ----
def present() -> dict[str, str | None]:
    """For CUDA, torch-on-CUDA and OpenCL: None when usable, else why not."""
    found: dict[str, str | None] = {}
    try:
        Device["CUDA"].check_runnable()
        found["CUDA"] = None
    except DeviceUnavailable as missing:
        found["CUDA"] = str(missing)
    if torch is None:
        found["torch"] = "PyTorch is not installed"
    elif not torch.cuda.is_available():
        found["torch"] = f"PyTorch {torch.__version__} sees no CUDA GPU"
    else:
        found["torch"] = None
    for device in ("GPU", "WEBGPU"):
        try:
            Device[device]
            found[device] = None
        except DeviceUnavailable as missing:
            found[device] = str(missing)
    return found


# ---- 2. a CUDA GPU against PyTorch ----
GOALS = {"matmul": 0.5, "softmax": 0.7, "sum": 0.7, "relu": 1.0}  # issue 19: tinyedu / torch at least


def bench_cuda() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"CUDA GPU: {torch.cuda.get_device_name()} (PyTorch {torch.__version__}, TF32 off)")
    print(f"{'workload':32s} {'kernels':>7s} {'tinyedu':>14s} {'torch':>14s} {'ratio':>6s} {'goal':>12s} "
          "check")
    for work in workloads(on_gpu=True):
        arrays = inputs(work)
        seconds, count = kernel_seconds(work, arrays, "CUDA")
        theirs = torch_seconds(work, arrays)
        ours_rate, their_rate = (work.amount(work.shapes) / s * 1e-9 for s in (seconds, theirs))
        goal = GOALS[work.name.split()[0].split("(")[0]]
        verdict = f"{'PASS' if ours_rate / their_rate >= goal else 'MISS'} >= {goal}"
        rates = f"{ours_rate:7.1f} {work.unit:6s} {their_rate:7.1f} {work.unit:6s}"
        print(f"{work.name:32s} {count:7d} {rates} {ours_rate / their_rate:5.2f}x {verdict:>12s} "
              f"{check(work, arrays, 'CUDA')}")


# ---- 3. OpenCL and WebGPU against the C device ----
def bench_against_c(device: str) -> None:
    what = "OpenCL (GPU device)" if device == "GPU" else f"WebGPU ({Device['WEBGPU'].adapter_name})"
    print(f"{what} against the C device, {os.cpu_count()} cores here; report only")
    print(f"{'workload':32s} {'kernels':>7s} {device:>14s} {'C':>14s} {'ratio':>8s} check")
    for work in workloads(on_gpu=False):
        arrays = inputs(work)
        rates = {}
        for name in (device, "C"):
            seconds, count = kernel_seconds(work, arrays, name)
            rates[name] = work.amount(work.shapes) / seconds * 1e-9
        both = f"{rates[device]:7.1f} {work.unit:6s} {rates['C']:7.1f} {work.unit:6s}"
        ratio = rates[device] / rates["C"]
        print(f"{work.name:32s} {count:7d} {both} {ratio:7.2f}x {check(work, arrays, device)}")


# ---- 4. the emulator's counts ----
SMALL = [("matmul 256x256", [(256, 256)] * 2, lambda a, b: a @ b),
         ("softmax rows 64x512", [(64, 512)], lambda x: x.softmax(-1)),
         ("sum 2^16", [(1 << 16,)], lambda x: x.sum()),
         ("column sum 512x256", [(512, 256)], lambda x: x.sum(0)),
         ("relu(a*b+c)*0.5-a 2^16", [(1 << 16,)] * 3, lambda a, b, c: (a * b + c).relu() * 0.5 - a)]


def emulator_counts() -> None:
    """Each small workload's kernels on PYTHON with PYTHON_GPU=1 (lowered GPU-style with the GPU
    heuristics for a typical GPU's limits, run in lockstep): the memory counts of every kernel."""
    print("Emulator counts (PYTHON in lockstep, the GPU heuristics' opts for a typical GPU's limits)")
    saved = os.environ.get("PYTHON_GPU")
    os.environ["PYTHON_GPU"] = "1"
    try:
        rng = np.random.default_rng(0)
        for name, shapes, build in SMALL:
            tensors = [Tensor(rng.standard_normal(s).astype(np.float32), device="PYTHON").realize()
                       for s in shapes]
            for item in create_schedule([build(*tensors).lazydata]):
                if not isinstance(item.ast.op, LoadOps):
                    runner = lower("PYTHON", item.ast).runner
                    runner(scratch_buffers(item.ast, "PYTHON"))
                    print(f"  {name:24s} {item.name:20s} {runner.traffic}")
    finally:
        if saved is None:
            del os.environ["PYTHON_GPU"]
        else:
            os.environ["PYTHON_GPU"] = saved


def main() -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench_gpu: {os.cpu_count()} cores, load average {load}{' (--quick)' if QUICK else ''}")
    found = present()
    for name, why in found.items():
        print(f"  {name:6s} {'present' if why is None else 'skipped: ' + why}")
    print()
    if found["CUDA"] is None and found["torch"] is None:
        bench_cuda()
    else:
        missing = "the CUDA device cannot run" if found["CUDA"] is not None else "PyTorch has no CUDA"
        print(f"CUDA against PyTorch: skipped ({missing}; see above)")
    print()
    for device, name in (("GPU", "OpenCL"), ("WEBGPU", "WebGPU")):
        if found[device] is None:
            bench_against_c(device)
        else:
            print(f"{name} against C: skipped ({device} cannot run here; see above)")
        print()
    emulator_counts()


if __name__ == "__main__":
    main()
