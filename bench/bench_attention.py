"""Fused (flash) attention next to the unfused one and PyTorch's SDPA: peak memory and time.

Run: .venv/bin/python bench/bench_attention.py [--quick]      (not a test; prints a table)

Causal self-attention over (1 batch, 4 heads, T, d=64) float32 on the C device, at T = 1024 and 4096:
the forward pass (and forward + backward at T = 1024). Memory is GlobalCounters.mem_peak over the
run (the inputs excluded); times are the best of a few runs after a warm-up (which compiles).
"""

from __future__ import annotations

import os

import numpy as np
from timing import QUICK, best_time, load, peer_note, torch

from tinyedu import Tensor
from tinyedu.core.helpers import GlobalCounters

REPEAT = 1 if QUICK else 3





def inputs(length: int, grad: bool) -> list[Tensor]:
    rng = np.random.default_rng(0)
    out = [Tensor(rng.standard_normal((1, 4, length, 64)).astype(np.float32), requires_grad=grad)
           for _ in range(3)]
    return [t.realize() for t in out]


def attention_step(length: int, fused: bool, backward: bool) -> tuple[float, float]:
    """(seconds, peak MiB) of one causal attention pass, forward or forward + backward."""
    q, k, v = inputs(length, backward)

    def run() -> None:
        out = q.scaled_dot_product_attention(k, v, is_causal=True, fused=fused)
        if not backward:
            out.realize()
            return
        out.sum().backward()
        for t in (q.grad, k.grad, v.grad):
            t.realize()
        q.grad = k.grad = v.grad = None

    seconds = best_time(run, REPEAT)
    GlobalCounters.mem_peak = base = GlobalCounters.mem_used
    run()
    return seconds, (GlobalCounters.mem_peak - base) / 2**20


def torch_time(length: int, backward: bool) -> float | None:
    if torch is None:
        return None
    q, k, v = (torch.randn(1, 4, length, 64, requires_grad=backward) for _ in range(3))

    def run() -> None:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        if backward:
            out.sum().backward()

    return best_time(run, REPEAT)


def main() -> None:
    print(f"cores {os.cpu_count()}; {peer_note()} [{load()}]")
    print(f"{'pass':18s} {'T':>5s} {'fused s':>9s} {'fused MiB':>10s} {'unfused s':>10s} "
          f"{'unfused MiB':>12s} {'torch s':>9s}")
    for length, backward in ((1024, False), (4096, False), (1024, True)):
        fused, fused_mib = attention_step(length, True, backward)
        plain, plain_mib = attention_step(length, False, backward)
        reference = torch_time(length, backward)
        torch_text = f"{reference:9.3f}" if reference is not None else f"{'-':>9s}"
        name = "forward+backward" if backward else "forward"
        print(f"{name:18s} {length:5d} {fused:9.3f} {fused_mib:10.1f} {plain:10.3f} {plain_mib:12.1f} "
              f"{torch_text}")
    print(f"[{load()}]")


if __name__ == "__main__":
    main()
