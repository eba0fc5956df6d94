"""Chapter 06 (kernel optimizations): implement UPCAST, pick opts for a fast matmul, predict C."""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from tinyedu import Tensor
from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import MOVES, Opt, OptError, OptOps, apply_opts
from tinyedu.core.uops import UOps
from tinyedu.engine.beam import scratch_buffers, time_runner
from tinyedu.engine.lower import lower
from tinyedu.exercises.checking import compute_items
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.renderer.cstyle import render_c


def _tensors(*shapes: tuple[int, ...], seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [Tensor(rng.standard_normal(shape).astype(np.float32)).realize() for shape in shapes]


def _kernel(expr) -> Any:
    """A fresh Kernel of the one compute kernel of `expr` (its inputs are realized)."""
    items = compute_items(expr)
    assert len(items) == 1, f"expected one kernel, got {[i.name for i in items]}"
    return Kernel(items[0].ast)


def _with_opts(opts_for: Callable) -> Any:
    """Plug `opts_for(kernel)` in as the heuristics: every kernel realized in the block gets its opts."""
    return plug(heuristics, "hand_coded_optimizations", lambda kernel, width, threads: opts_for(kernel))


# ---- 06.upcast: UPCAST as a view -------------------------------------------------------------------
def _layout(k) -> tuple:
    return k.full_shape, [kind.value for kind in k.kinds], [st.views[-1].strides for st in k.sts]


@exercise("06.upcast", answer="upcast", title="UPCAST: split an axis and move the part into the loop body",
          hook="codegen.opts.MOVES[OptOps.UPCAST]")
def check_upcast(upcast: Callable) -> str:
    x, w = _tensors((8, 12), (12, 32))
    cases = [[Opt(OptOps.UPCAST, 1, 16)], [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 4)],
             [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2)], [Opt(OptOps.UPCAST, 0, 8)]]
    for opts in cases:
        expected = apply_opts(_kernel(x @ w), opts)
        with plug(MOVES, OptOps.UPCAST, upcast):
            got = apply_opts(_kernel(x @ w), opts)
        if got.full_shape == expected.full_shape and got.kinds == expected.kinds and got.sts == expected.sts:
            continue
        where = f"after {opts} on the (8, 12) @ (12, 32) matmul (full shape (8, 32, 12))"
        if AxisKind.UPCAST not in got.kinds:
            raise AssertionError(f"{where} no axis is an UPCAST axis: move the split-off part with the kind "
                                 "AxisKind.UPCAST (move_axis's third argument).")
        sizes = sorted(got.full_shape[a] for a in got.expanded_axes)
        if sizes != sorted(expected.full_shape[a] for a in expected.expanded_axes):
            raise AssertionError(f"{where} the upcast axes have sizes {sizes}: the upcast must be "
                                 "`amount` long and be the *inner* part of the split: split_axis(axis, "
                                 "amount) makes (n // amount, amount), and the amount part is axis + 1.")
        if got.full_shape[:len(got.loop_axes)] != expected.full_shape[:len(expected.loop_axes)]:
            raise AssertionError(f"{where} the loops are {got.full_shape} with kinds {_layout(got)[1]}, "
                                 f"expected {expected.full_shape}. The *inner* part (axis + 1 after the "
                                 "split) becomes the upcast; the outer part stays a loop where the axis was.")
        raise AssertionError(f"{where} the expanded axes are in the wrong order: {got.full_shape} instead "
                             f"of {expected.full_shape}. Move the new part to the *front* of the expanded "
                             "axes (before the first UPCAST/UNROLL axis), so the first one applied stays "
                             "innermost: j = j0*32 + u*16 + v needs v (split off first) innermost.")
    # the real pipeline, with a register block of these upcasts, on C and on PYTHON

    X, W = x.numpy(), w.numpy()
    opts = [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 4),
            Opt(OptOps.UNROLL, 1, 4)]
    with plug(MOVES, OptOps.UPCAST, upcast), _with_opts(lambda k: opts):
        for device in ("C", "PYTHON"):
            got = (Tensor(X, device=device) @ Tensor(W, device=device)).numpy()
            np.testing.assert_allclose(got, X @ W, rtol=1e-4, atol=1e-4,
                                       err_msg=f"the matmul with your UPCAST on {device}")
    return ("the same views as the library's UPCAST (shape, kinds and every ShapeTracker), and a matmul "
            "with a 4x32 register block of your upcasts, vectorized, matches numpy on C and PYTHON.")


# ---- 06.fast_matmul: opts that reach a speed bar -----------------------------------------------------
BAR = 2.5  # at most this many times the time of the library's own heuristics


def _fast_matmul_hint(kernel: Any, opts: list) -> str:
    """The next step for opts that are too slow, from what they made of the matmul's three axes: the
    output's rows (i) and columns (j, contiguous in w and in the output) and the reduce axis k."""
    strides = kernel.sts[0].views[-1].strides  # the output's: 1 along j, 0 along k
    expanded = {("j" if strides[a] == 1 else "i") if kind is AxisKind.UPCAST else "k"
                for a, kind in enumerate(kernel.kinds)
                if kind in (AxisKind.UPCAST, AxisKind.UNROLL) and kernel.full_shape[a] > 1}
    if not opts:
        return "no opts: this is the kernel as written. Start with a vector along j (axis 1)."
    if "j" not in expanded:
        return ("nothing is a vector along j (axis 1), the axis along which w and the output are contiguous: "
                "there one vector load feeds 16 multiply-adds. Along k (UNROLL) the elements of w are a "
                "row apart, so a vector there is gathered lane by lane, and rows (i) share no w element.")
    if "i" not in expanded:
        return ("a vector alone reuses nothing: each B vector feeds one multiply-add per k. UPCAST the "
                "rows (axis 0) too, so one B vector is used by several rows (a register block).")
    return ("look at the accumulators (DEFINE_ACC): aim for about 16 vectors of 16, e.g. 8 rows by 2 "
            "vectors of columns; more spill out of the 32 registers, fewer leave the FMA units idle.")


@exercise("06.fast_matmul", answer="matmul_opts", title="Pick the opts of a 512x512 matmul: within 2.5x "
          "of the heuristics' time", hook="codegen.heuristics.hand_coded_optimizations")
def check_fast_matmul(matmul_opts: Callable) -> str:
    x, w = _tensors((512, 512), (512, 512))
    kernel = _kernel(x @ w)
    opts = matmul_opts(kernel.copy())
    if not isinstance(opts, list) or not all(isinstance(o, Opt) for o in opts):
        raise AssertionError(f"matmul_opts must return a list of Opt(OptOps..., axis, amount), got {opts!r}")
    try:
        apply_opts(kernel.copy(), opts)
    except OptError as error:
        raise AssertionError(f"these opts do not apply: {error}") from None
    with _with_opts(lambda k: opts):
        got = (x @ w).numpy()
    np.testing.assert_allclose(got, x.numpy() @ w.numpy(), rtol=1e-3, atol=1e-3,
                               err_msg="the matmul with your opts is wrong (a library bug, if they apply)")
    ast = kernel.ast
    buffers = scratch_buffers(ast, "C")
    theirs = heuristics.hand_coded_optimizations(kernel.copy(), 16, 1)
    programs = {"yours": lower("C", ast, opts).runner, "heuristics": lower("C", ast, theirs).runner}
    best = {name: min(time_runner(p, buffers) for _ in range(3)) for name, p in programs.items()}
    for _ in range(2):  # measured side by side: a busy machine slows both
        best = {name: min(best[name], time_runner(p, buffers)) for name, p in programs.items()}
    ratio = best["yours"] / best["heuristics"]
    if ratio > BAR:
        hint = _fast_matmul_hint(apply_opts(kernel.copy(), opts), opts)
        raise AssertionError(f"your opts {opts} run {ratio:.1f}x slower than the library's heuristics "
                             f"(the bar is {BAR}x). {hint}")
    return f"your opts run within {BAR}x of the heuristics' (measured side by side) and compute the matmul."


# ---- 06.upcast_c: predict the C of an UPCAST ---------------------------------------------------------
@exercise("06.upcast_c", answer="prediction", title="Predict the C an UPCAST of 16 produces")
def check_upcast_c(prediction: dict) -> str:

    wanted = {"loop sizes", "vector type", "vector loads", "broadcasts"}
    if not isinstance(prediction, dict) or set(prediction) != wanted:
        raise AssertionError(f"answer with a dict with exactly the keys {sorted(wanted)}")
    x, y = _tensors((16, 64), (16, 64))
    kernel = apply_opts(_kernel(x * 2 + y), [Opt(OptOps.UPCAST, 1, 16)])
    source = render_c(kernel.name, linearize(kernel))
    body = source.split("void ", 1)[1]
    truth = {"loop sizes": [int(n) for n in re.findall(r"idx\d+ < (\d+);", body)],
             "vector type": "floatx16", "vector loads": body.count("*(const floatx16*)"),
             "broadcasts": body.count("broadcast_floatx16(")}
    hints = {"loop sizes": "an UPCAST axis is no loop any more: 64 columns = (a loop of 64 // 16) x "
                           "(16 lanes written out in the body); the rows stay a loop.",
             "vector type": "the C type is named after its lanes: float lanes, how many per vector?",
             "vector loads": "each buffer contiguous along the upcast axis is read with one vector load per "
                             "iteration: how many buffers does x * 2 + y read?",
             "broadcasts": "a value that is the same in every lane (a constant) is made into a vector once: "
                           "how many such values does x * 2 + y have?"}
    for key in ("loop sizes", "vector type", "vector loads", "broadcasts"):
        if prediction[key] != truth[key]:
            raise AssertionError(f"{key}: not {prediction[key]!r}. {hints[key]}")
    return f"the kernel of x * 2 + y with UPCAST(axis=1, amount=16):\n{body.split('{', 1)[1].rstrip()[:-1]}"


# ---- 06.accumulators: predict how many accumulators --------------------------------------------------
@exercise("06.accumulators", answer="accumulators", title="Predict the accumulators of a register block")
def check_accumulators(accumulators: dict) -> str:
    if not isinstance(accumulators, dict) or set(accumulators) != {"matmul", "sum"}:
        raise AssertionError("answer with a dict {'matmul': n, 'sum': m} of DEFINE_ACC counts")
    a, b, v = _tensors((64, 64), (64, 64), (4096,))
    kernels = {"matmul": (_kernel(a @ b), [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2),
                                           Opt(OptOps.UPCAST, 0, 4)]),
               "sum": (_kernel(v.sum()), [Opt(OptOps.UNROLL, 0, 16), Opt(OptOps.UNROLL, 0, 4)])}
    truth = {name: sum(u.op is UOps.DEFINE_ACC for u in linearize(apply_opts(k, opts)))
             for name, (k, opts) in kernels.items()}
    for name in ("matmul", "sum"):
        if accumulators[name] != truth[name]:
            hint = ("one accumulator per position of the expanded axes except the vector axis, which lives "
                    "inside each accumulator (16 lanes)")
            raise AssertionError(f"{name}: not {accumulators[name]}. {hint}; list the expanded axes of "
                                 f"{kernels[name][1]} and multiply the sizes of all but the first applied.")
    return (f"matmul: {truth['matmul']} vector accumulators (2 x 4 around the 16 lanes), sum: {truth['sum']} "
            "(then added together, and their lanes summed, after the loop).")
