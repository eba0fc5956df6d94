"""A WHERE whose condition comes lane by lane (bools loaded from memory, or ops on them) is still one
vector select: the condition is gathered into an int mask (tinyedu/codegen/vectorize.py,
`lanes_to_mask`), so the select has no branch per element. Checked on the UOps, and bit for bit
against numpy on C and PYTHON (NaN, -0.0 and infinities among the values)."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptOps, apply_opts
from tinyedu.core.ops import LoadOps, TernaryOps
from tinyedu.core.uops import UOps, is_vector
from tinyedu.engine.schedule import create_schedule
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_c import Compiler, CProgram
from tinyedu.runtime.ops_python import PythonProgram

EDGE = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-38, -3.5, 2.0], np.float32)


def inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    mask = rng.random((8, 32)) < 0.5
    x = rng.standard_normal((8, 32)).astype(np.float32)
    x[0, :8], x[1, 8:16] = EDGE, EDGE  # (the second row: where the mask differs)
    g = rng.standard_normal((8, 32)).astype(np.float32)
    g[2, :8] = EDGE
    return mask, x, g


CASES = {  # name: (tinyedu expression, numpy expression) on (mask, x, g)
    "relu's select": (lambda m, x, g: m.where(0.0, x), lambda m, x, g: np.where(m, np.float32(0), x)),
    "relu's gradient": (lambda m, x, g: ((m | (x == 0)) == False).where(g, 0.0),  # noqa: E712
                        lambda m, x, g: np.where(~(m | (x == 0)), g, np.float32(0))),
}


def item_of(expression, m, x, g):
    t = expression(*(Tensor(a).realize() for a in (m, x, g)))
    items = [i for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]
    assert len(items) == 1
    return items[0]


@pytest.mark.parametrize("name", list(CASES))
def test_a_lane_by_lane_condition_selects_as_one_vector(name: str):
    mask, x, g = inputs()
    ours, theirs = CASES[name]
    item = item_of(ours, mask, x, g)
    kernel = apply_opts(Kernel(item.ast), [Opt(OptOps.UPCAST, 1, 16)])
    uops = linearize(kernel)
    wheres = [u for u in uops if u.op is UOps.ALU and u.arg is TernaryOps.WHERE]
    assert wheres and all(is_vector(u.dtype) for u in wheres), [u.dtype for u in wheres]
    expected = theirs(mask, x, g)
    for device in ("C", "PYTHON"):
        out = Buffer(device, expected.size, item.out.dtype)
        buffers = [out, *(i.realized for i in item.inputs)]
        if device == "C":
            CProgram(kernel.name, Compiler().build(render_c(kernel.name, uops)))(buffers)
        else:
            PythonProgram(uops)(buffers)
        got = out.as_numpy().reshape(expected.shape)
        np.testing.assert_array_equal(got, expected, err_msg=f"{name} on {device}")
        assert np.array_equal(np.signbit(got), np.signbit(expected)), f"-0.0 differs: {name} on {device}"
