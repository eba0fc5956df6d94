"""Random graphs on sharded tensors: every program of tests/test_random_graphs.py, run with its
inputs cut over several devices, gives the float64 result (and the gradients the single-device
run gives). The inputs are sharded along a random axis long enough for the devices (else
replicated), so elementwise ops meet operands sharded differently, reductions cross the shards
and reshapes mix them: each case that must communicate is met."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_random_graphs import (
    apply_tinyedu,
    assert_close,
    count,
    evaluate,
    numpy_values,
    random_program,
)
from tinyedu import Tensor

DEVICES = {"numpy": ("NUMPY:0", "NUMPY:1", "NUMPY:2"), "mixed": ("C", "PYTHON:1")}


def sharded_inputs(program, devices: tuple[str, ...], rng: np.random.Generator, grad: bool) -> list[Tensor]:
    inputs = []
    for x in program.inputs:
        long_enough = [a for a, s in enumerate(x.shape) if s >= len(devices)]
        axis = int(rng.choice(long_enough)) if long_enough and rng.random() < 0.85 else None
        t = Tensor(x, requires_grad=grad)
        inputs.append((t, t.shard(devices, axis)))
    return inputs


def run_sharded(seed: int, devices: tuple[str, ...], weights: list[np.ndarray] | None = None):
    program = random_program(seed, ops=8 if weights is not None else 12)
    rng = np.random.default_rng(seed)
    pairs = sharded_inputs(program, devices, rng, weights is not None)
    values = evaluate(program, lambda k: pairs[k][1], apply_tinyedu)
    outs = [values[i] for i in program.outputs]
    Tensor.realize_all(*outs)
    got = [o.numpy() for o in outs]
    if weights is None:
        return program, got, None
    loss = sum((o * Tensor(w).to(o.device)).sum() for o, w in zip(outs, weights, strict=True))
    if isinstance(loss, Tensor) and loss.requires_grad:
        loss.backward()
    return program, got, [np.zeros(x.shape, np.float32) if t.grad is None else t.grad.numpy()
                          for x, (t, _) in zip(program.inputs, pairs, strict=True)]


@pytest.mark.parametrize("kind", ["numpy", "mixed"])
def test_sharded_random_graphs_match_float64(kind: str) -> None:
    devices = DEVICES[kind]
    for seed in range(count(80 if kind == "numpy" else 6)):
        program, got, _ = run_sharded(seed, devices)
        exact, single = numpy_values(program), numpy_values(program, np.float32)
        for i, value in zip(program.outputs, got, strict=True):
            assert_close(value, exact[i], single[i], f"seed {seed} on {devices}, node {i} of\n{program}")


def test_sharded_random_graph_gradients_match_one_device() -> None:
    for seed in range(40_000, 40_000 + count(20)):
        program = random_program(seed, ops=8)
        rng = np.random.default_rng(seed)
        exact = numpy_values(program)
        weights = [rng.uniform(-1, 1, np.shape(exact[i])).astype(np.float32) for i in program.outputs]
        _, _, sharded = run_sharded(seed, DEVICES["numpy"], weights)
        inputs = [Tensor(x, device="NUMPY", requires_grad=True) for x in program.inputs]
        values = evaluate(program, inputs.__getitem__, apply_tinyedu)
        loss = sum((values[i] * Tensor(w, device="NUMPY")).sum()
                   for i, w in zip(program.outputs, weights, strict=True))
        if isinstance(loss, Tensor) and loss.requires_grad:
            loss.backward()
        for k, (x, got) in enumerate(zip(inputs, sharded, strict=True)):
            want = np.zeros(x.shape, np.float32) if x.grad is None else x.grad.numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * (1 + np.abs(want).max(initial=0)),
                                       err_msg=f"seed {seed}: gradient of input {k} of\n{program}")
