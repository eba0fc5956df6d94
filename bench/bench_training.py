"""Training-step benchmark: tinyedu (eager and TinyJit) next to PyTorch and tinygrad, in one run.

Run: .venv/bin/python bench/bench_training.py [--quick]      (not a test; prints tables)

Workloads (one step each: forward, cross-entropy, backward, update):
- MLP 784-256-10, batch 128, SGD (the issue's reference step);
- a small CNN (conv 1->8 3x3, pool, conv 8->16 3x3, pool, linear 400->10), batch 64, SGD: the model
  notebook 08 trains;
- chapter 13's GPT, AdamW with the gradients' norm clipped, as `train_gpt` trains it (its own table:
  tinyedu eager, TinyJit and its kernels, against the same model and weights in eager PyTorch).
For tinyedu three numbers: eager (build the graph, schedule, look kernels up, run them: what a
plain Python loop pays), TinyJit (replay the recorded kernels), and the kernels alone (the sum of
their times inside a replay). Python time = eager - kernels; what the JIT saves = eager - JIT.
Ratios are other / tinyedu's JIT time, so > 1 means tinyedu is faster.

PyTorch uses its default threads (reported); tinygrad runs its CPU backend under its own TinyJit
(it needs clang: `make bench` installs it). Both columns appear when the package is installed.
The machine may be shared: compare ratios measured side by side in the same run, not absolute times.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import numpy as np
from timing import QUICK, load, median_time, peer_note, tinygrad, torch
from torch_gpt import TorchGPT

from tinyedu import Device, Tensor, TinyJit
from tinyedu.core.helpers import GlobalCounters
from tinyedu.models.gpt import GPT
from tinyedu.nn import Conv2d, Linear
from tinyedu.nn.optim import SGD, AdamW, clip_grad_norm
from tinyedu.nn.state import get_parameters, get_state_dict

STEPS = 10 if QUICK else 30





# ---- the models, in each framework ----
class MLP:
    def __init__(self) -> None:
        self.l1, self.l2 = Linear(784, 256), Linear(256, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


class CNN:
    def __init__(self) -> None:
        self.c1, self.c2, self.head = Conv2d(1, 8, 3), Conv2d(8, 16, 3), Linear(16 * 5 * 5, 10)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.c1(x).relu().max_pool2d(2)
        x = self.c2(x).relu().max_pool2d(2)
        return self.head(x.flatten(1))


def tinyedu_row(make: Callable[[], object], x_np: np.ndarray, y_np: np.ndarray) -> dict[str, float]:
    Tensor.manual_seed(0)
    model = make()
    opt = SGD(get_parameters(model), lr=0.01)
    x, y = Tensor(x_np).realize(), Tensor(y_np.astype(np.int32)).realize()

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = model(x).cross_entropy(y).backward()
        opt.step()
        return loss

    eager = median_time(lambda: step(x, y).realize(), STEPS)
    GlobalCounters.reset()
    step(x, y).realize()
    eager_kernels = GlobalCounters.kernel_count
    jit = TinyJit(step)
    jit(x, y), jit(x, y), jit(x, y)  # warm up, record twice
    totals, kernels = [], []
    for _ in range(STEPS):  # each replay timed as a whole and item by item, side by side
        start = time.perf_counter()
        items = jit.time_items(x, y)
        totals.append(time.perf_counter() - start)
        kernels.append(sum(seconds for _, seconds in items))
    return {"eager": eager, "jit": statistics.median(totals), "kernels": statistics.median(kernels),
            "eager_kernels": eager_kernels, "jit_kernels": jit.kernel_count, "dropped": len(jit.dropped)}


def torch_step(kind: str, x_np: np.ndarray, y_np: np.ndarray) -> float:
    torch.manual_seed(0)
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    else:
        model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                    torch.nn.Conv2d(8, 16, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                    torch.nn.Flatten(), torch.nn.Linear(400, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.tensor(x_np), torch.tensor(y_np)

    def step() -> None:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return median_time(step, 3 * STEPS)


def tinygrad_step(kind: str, x_np: np.ndarray, y_np: np.ndarray) -> float:
    from tinygrad import Context
    from tinygrad import Tensor as TgTensor
    from tinygrad import TinyJit as TgJit
    from tinygrad import nn as tgnn

    class TgMLP:
        def __init__(self) -> None:
            self.l1, self.l2 = tgnn.Linear(784, 256), tgnn.Linear(256, 10)

        def __call__(self, x: TgTensor) -> TgTensor:
            return self.l2(self.l1(x).relu())

    class TgCNN:
        def __init__(self) -> None:
            self.c1, self.c2, self.head = tgnn.Conv2d(1, 8, 3), tgnn.Conv2d(8, 16, 3), tgnn.Linear(400, 10)

        def __call__(self, x: TgTensor) -> TgTensor:
            x = self.c1(x).relu().max_pool2d(2)
            x = self.c2(x).relu().max_pool2d(2)
            return self.head(x.flatten(1))

    with Context(TRAINING=1):
        model = TgMLP() if kind == "mlp" else TgCNN()
        opt = tgnn.optim.SGD(tgnn.state.get_parameters(model), lr=0.01)
        x, y = TgTensor(x_np).realize(), TgTensor(y_np.astype(np.int32)).realize()

        @TgJit
        def step(x: TgTensor, y: TgTensor) -> TgTensor:
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            opt.step()
            return loss.realize()

        return median_time(lambda: step(x, y).item(), STEPS)


def report(name: str, kind: str, make: Callable[[], object], shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(shape).astype(np.float32)
    y_np = rng.integers(0, 10, shape[0])
    ours = tinyedu_row(make, x_np, y_np)
    print(f"\n== {name}")
    print(f"tinyedu eager       {ours['eager'] * 1e3:8.2f} ms   ({ours['eager_kernels']} kernels; Python "
          f"{(ours['eager'] - ours['kernels']) * 1e3:.2f} ms a step)")
    print(f"tinyedu TinyJit     {ours['jit'] * 1e3:8.2f} ms   ({ours['jit_kernels']} kernels replayed, "
          f"{ours['dropped']} constant copies dropped; JIT saves "
          f"{(ours['eager'] - ours['jit']) * 1e3:.2f} ms "
          f"= {ours['eager'] / ours['jit']:.1f}x)")
    print(f"  kernels alone     {ours['kernels'] * 1e3:8.2f} ms   (replay overhead "
          f"{(ours['jit'] - ours['kernels']) * 1e3:.2f} ms)")
    if torch is not None:
        # tinyedu runs on one core; PyTorch is timed with its default threads and with one, and the
        # faster counts (on a busy machine, waiting for a second thread can cost more than it gains)
        threads = torch.get_num_threads()
        timed = {threads: torch_step(kind, x_np, y_np)}
        torch.set_num_threads(1)
        timed[1] = torch_step(kind, x_np, y_np)
        torch.set_num_threads(threads)
        best = min(timed, key=timed.get)
        others = ", ".join(f"{n} thread{'s' if n > 1 else ''}: {t * 1e3:.2f} ms" for n, t in timed.items())
        print(f"PyTorch             {timed[best] * 1e3:8.2f} ms   [{load()}]   tinyedu JIT / PyTorch = "
              f"{ours['jit'] / timed[best]:.2f} (target <= 2) [{others}]")
    if tinygrad is not None:
        try:
            t = tinygrad_step(kind, x_np, y_np)
            print(f"tinygrad TinyJit    {t * 1e3:8.2f} ms   tinygrad / tinyedu JIT = {t / ours['jit']:.2f} "
                  "(> 1: tinyedu faster)")
        except Exception as e:  # e.g. no clang for its CPU backend
            print(f"tinygrad            skipped: {type(e).__name__}: {str(e).splitlines()[0][:100]}")


# ---- chapter 13's GPT: the training step of train_gpt ----
GPT_CONFIG = {"vocab_size": 512, "block_size": 64, "dim": 96, "n_heads": 4, "n_layers": 3,
              "positions": "rope"}
GPT_BATCH, GPT_LR, GPT_CLIP = 16, 3e-3, 1.0


def gpt_table() -> None:
    """One AdamW step of chapter 13's large GPT (385k parameters) on 16 windows of 65 tokens, with the
    gradients' norm clipped to 1, as `train_gpt` runs it: tinyedu eager and under TinyJit (its
    kernels alone beside), and the same model and step in eager PyTorch (bench/torch_gpt.py, its
    loss checked against tinyedu's in tests/test_gpt.py)."""
    Tensor.manual_seed(0)
    model = GPT(**GPT_CONFIG)
    windows = np.random.default_rng(0).integers(0, GPT_CONFIG["vocab_size"], (GPT_BATCH, 65)).astype(np.int32)
    state = {k: v.numpy() for k, v in get_state_dict(model).items()}
    optimizer = AdamW(get_parameters(model), lr=GPT_LR)
    tokens = Tensor(windows).realize()

    def step(tokens: Tensor) -> Tensor:
        optimizer.zero_grad()
        loss = model.loss(tokens).backward()
        clip_grad_norm(optimizer.params, GPT_CLIP)
        optimizer.step()
        return loss

    steps = max(3, STEPS // 5)
    rows = {"tinyedu eager": median_time(lambda: step(tokens).realize(), steps, warmup=2)}
    jit = TinyJit(step)
    rows["tinyedu TinyJit"] = median_time(lambda: jit(tokens).realize(), STEPS, warmup=3)
    rows["  its kernels alone"] = statistics.median(
        sum(seconds for _, seconds in jit.time_items(tokens)) for _ in range(steps))
    reference = None
    if torch is not None:
        port = TorchGPT(torch, state, GPT_CONFIG)
        params = port.parameters()
        torch_optimizer = torch.optim.AdamW(params, lr=GPT_LR, weight_decay=0.01)
        torch_tokens = torch.tensor(windows)

        def torch_step() -> None:
            torch_optimizer.zero_grad()
            port.loss(torch_tokens).backward()
            torch.nn.utils.clip_grad_norm_(params, GPT_CLIP)
            torch_optimizer.step()

        reference = f"PyTorch eager ({torch.get_num_threads()} threads)"
        rows[reference] = median_time(torch_step, STEPS)
    print(f"\n== chapter 13's GPT (dim 96, 3 layers, vocab 512), AdamW step on {GPT_BATCH} x 64 tokens "
          f"[{load()}]")
    for name, seconds in rows.items():
        ratio = f"   {seconds / rows[reference]:5.2f}x PyTorch" if reference else ""
        print(f"{name:32s} {seconds * 1e3:8.2f} ms{ratio}")


def lr_schedule_compiles() -> None:
    """20 steps with a decaying lr: how many new kernels were compiled after the first step."""
    Tensor.manual_seed(0)
    model = MLP()
    opt = SGD(get_parameters(model), lr=0.1, momentum=0.9)
    x, y = Tensor(np.ones((8, 784), np.float32)).realize(), Tensor(np.zeros(8, np.int32)).realize()

    def step() -> None:
        opt.zero_grad()
        model(x).cross_entropy(y).backward()
        opt.step()

    step()
    before = len(Device[Device.DEFAULT].programs) if hasattr(Device[Device.DEFAULT], "programs") else None
    for k in range(20):
        opt.lr.assign(0.1 * 0.9 ** k)
        step()
    if before is not None:
        compiled = len(Device[Device.DEFAULT].programs) - before
        print(f"\nlr schedule: {compiled} kernels compiled over 20 steps of a decaying lr (the lr is a "
              "buffer the kernels read, not a literal)")


if __name__ == "__main__":
    print(f"device {Device.DEFAULT}; timings are medians of {STEPS} steps; {peer_note()} [{load()}]")
    report("MLP 784-256-10, batch 128, SGD", "mlp", MLP, (128, 784))
    report("CNN (conv8-pool-conv16-pool-linear), batch 64, SGD", "cnn", CNN, (64, 1, 28, 28))
    gpt_table()
    lr_schedule_compiles()
