"""tinyedu/core: its budget, that it stands alone, and that what it computes is right.

The core is the whole path (Tensor, lazy graph, scheduler, linearizer, C renderer and device,
Linear/SGD/Adam) in at most 3,000 lines of code and 30 files. Lines of code are counted as
tinygrad's sz.py counts them: with Python's tokenize, every line that holds a token other than a
comment, a docstring or a blank; docstrings and comments are free.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import numpy as np
import pytest
import torch

from tinyedu.core import SGD, Adam, Tensor
from tinyedu.core.dtype import dtypes
from tinyedu.core.shape import IntOps, ShapeTracker

CORE = Path(__file__).resolve().parents[2] / "tinyedu" / "core"
MAX_LINES, MAX_FILES = 3000, 30


def lines_of_code(path: Path) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring (a string that is
    a statement of its own)."""
    lines: set[int] = set()
    previous = tokenize.NEWLINE
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        starts_statement = previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL)
        if token.type not in skip and not (token.type == tokenize.STRING and starts_statement):
            lines.update(range(token.start[0], token.end[0] + 1))
        previous = token.type
    return len(lines)


def test_core_budget() -> None:
    files = sorted(CORE.glob("*.py"))
    counts = {f.name: lines_of_code(f) for f in files}
    print("\n".join(f"{n:6d}  tinyedu/core/{name}" for name, n in counts.items()))
    print(f"{sum(counts.values()):6d}  in {len(files)} files")
    folders = [p for p in CORE.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert not folders, f"the core is one folder, with no sub-folders: {folders}"
    assert len(files) <= MAX_FILES, f"tinyedu/core has {len(files)} files; the budget is {MAX_FILES}"
    assert sum(counts.values()) <= MAX_LINES, \
        f"tinyedu/core has {sum(counts.values())} lines of code; the budget is {MAX_LINES}: {counts}"


def test_the_pages_state_the_measured_size() -> None:
    """README, the site and the package map say how big the core is: the number this file counts."""
    files = sorted(CORE.glob("*.py"))
    stated = f"{sum(lines_of_code(f) for f in files):,} lines of code in {len(files)} files"
    root = CORE.parents[1]
    for page in ("README.md", "docs/index.md", "docs/architecture.md", "docs/core.md", "tinyedu/README.md"):
        text = (root / page).read_text().replace("**", "").replace("\n", " ")
        assert stated in " ".join(text.split()), f"{page} should say the core is {stated}"


def test_line_counter() -> None:
    source = ('"""doc\nstring"""\nx = 1  # comment\n\n# only a comment\n'
              'def f():\n    """doc"""\n    return "s"\n')
    path = Path(__file__).parent / "_count_me.tmp"
    path.write_text(source)
    try:
        assert lines_of_code(path) == 3  # x = 1, def f():, return "s"
    finally:
        path.unlink()


def test_core_imports_only_itself() -> None:
    for f in CORE.glob("*.py"):
        for line in f.read_text().splitlines():
            assert not line.lstrip().startswith(("from tinyedu", "import tinyedu")), f"{f.name}: {line}"


STANDALONE = r'''
import sys
sys.path.insert(0, sys.argv[1])

class NoTinyedu:  # every tinyedu module is unimportable
    def find_spec(self, name, path=None, target=None):
        if name == "tinyedu" or name.startswith("tinyedu."):
            raise ImportError(f"{name} is blocked: the core must stand alone")

sys.meta_path.insert(0, NoTinyedu())
import numpy as np
import torch
from core import Tensor, Linear, SGD, Adam

rng = np.random.default_rng(0)
a, b = rng.standard_normal((5, 7), dtype=np.float32), rng.standard_normal((7, 3), dtype=np.float32)
ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
(ta @ tb).relu().sum().backward()
pa, pb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
(pa @ pb).relu().sum().backward()
np.testing.assert_allclose(ta.grad.numpy(), pa.grad.numpy(), rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(tb.grad.numpy(), pb.grad.numpy(), rtol=1e-5, atol=1e-6)

# an MLP 16-32-4 on random data, 20 SGD steps, the same losses as PyTorch
x, y = rng.standard_normal((64, 16), dtype=np.float32), rng.integers(0, 4, 64).astype(np.int32)
l1, l2 = Linear(16, 32), Linear(32, 4)
t1, t2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)
with torch.no_grad():
    for mine, theirs in ((l1, t1), (l2, t2)):
        theirs.weight.copy_(torch.tensor(mine.weight.numpy()))
        theirs.bias.copy_(torch.tensor(mine.bias.numpy()))
opt = SGD(l1.parameters() + l2.parameters(), lr=0.1)
topt = torch.optim.SGD(list(t1.parameters()) + list(t2.parameters()), lr=0.1)
for step in range(20):
    loss = l2(l1(Tensor(x)).relu()).cross_entropy(Tensor(y))
    opt.zero_grad()
    loss.backward()
    opt.step()
    tloss = torch.nn.functional.cross_entropy(t2(t1(torch.tensor(x)).relu()), torch.tensor(y).long())
    topt.zero_grad()
    tloss.backward()
    topt.step()
    assert abs(loss.item() - tloss.item()) < 1e-4, (step, loss.item(), tloss.item())
print("losses", round(loss.item(), 6), round(tloss.item(), 6))
'''


def test_core_stands_alone(tmp_path: Path) -> None:
    """Copied into an empty folder as a package named `core`, with tinyedu unimportable."""
    shutil.copytree(CORE, tmp_path / "core", ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "check.py"
    script.write_text(STANDALONE)
    result = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "losses" in result.stdout


# ---- what the core computes, against numpy and PyTorch ----
def test_views_against_numpy() -> None:
    """Random chains of movement ops, each compared with numpy doing the same."""
    rng = np.random.default_rng(3)
    for trial in range(40):
        x = rng.standard_normal((2, 3, 4), dtype=np.float32)
        t, n = Tensor(x), x
        for _ in range(4):
            op = rng.integers(0, 5)
            if op == 0:
                order = tuple(rng.permutation(n.ndim).tolist())
                t, n = t.permute(order), n.transpose(order)
            elif op == 1:
                shape = tuple(rng.permutation(list(n.shape)).tolist())
                shape = (-1,) + shape[1:] if n.ndim > 1 else shape
                t, n = t.reshape(shape), n.reshape(shape)
            elif op == 2:
                pads = tuple((int(rng.integers(0, 2)), int(rng.integers(0, 2))) for _ in n.shape)
                t, n = t.pad(pads), np.pad(n, pads)
            elif op == 3:
                bounds = tuple((int(lo), int(lo) + max(1, s - int(lo) - 1)) for s in n.shape
                               for lo in [rng.integers(0, max(1, s - 1))])
                t, n = t.shrink(bounds), n[tuple(slice(lo, hi) for lo, hi in bounds)]
            else:
                t = t.reshape(n.shape + (1,)).expand(n.shape + (2,))
                n = np.broadcast_to(n[..., None], n.shape + (2,))
        np.testing.assert_array_equal(t.numpy(), n, err_msg=f"trial {trial}")
        np.testing.assert_array_equal((t * 2).sum(axis=0).numpy(), (n * 2).sum(axis=0))


def test_shapetracker_index_by_hand() -> None:
    st = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((3, 8))  # needs a second view
    assert len(st.views) == 2
    base = np.arange(24).reshape(4, 6)
    expected = base.T.reshape(3, 8)
    for i in range(3):
        for j in range(8):
            index, valid = st.index([i, j], IntOps)
            assert valid and base.reshape(-1)[index] == expected[i, j]


def test_the_full_library_views_are_the_cores() -> None:
    """tinyedu/shape subclasses the core's View and ShapeTracker: the movement ops are the core's,
    and what the subclasses add (merging views, the symbolic index) reads the same elements as the
    core's plain `index` and as numpy, over random chains of movement ops."""
    from tinyedu.core import shape as core_shape
    from tinyedu.shape import ShapeTracker as FullTracker
    from tinyedu.shape import View as FullView

    assert issubclass(FullView, core_shape.View) and issubclass(FullTracker, core_shape.ShapeTracker)
    for name in ("permute", "expand", "pad", "shrink", "reshape"):
        assert getattr(FullView, name).__wrapped__ is getattr(core_shape.View, name), name
    rng = np.random.default_rng(5)
    merged = 0
    for trial in range(60):
        full, core, n = FullTracker.from_shape((2, 3, 4)), ShapeTracker.from_shape((2, 3, 4)), np.arange(24)
        n = n.reshape(2, 3, 4)
        for _ in range(5):
            op = rng.integers(0, 4)
            if op == 0:
                arg = tuple(rng.permutation(n.ndim).tolist())
                full, core, n = full.permute(arg), core.permute(arg), n.transpose(arg)
            elif op == 1:
                arg = tuple(rng.permutation(list(n.shape)).tolist())
                full, core, n = full.reshape(arg), core.reshape(arg), n.reshape(arg)
            elif op == 2:
                arg = tuple((int(rng.integers(0, 2)), int(rng.integers(0, 2))) for _ in n.shape)
                full, core, n = full.pad(arg), core.pad(arg), np.pad(n, arg, constant_values=-1)
            else:
                arg = tuple((int(lo), int(lo) + max(1, s - int(lo) - 1)) for s in n.shape
                            for lo in [rng.integers(0, max(1, s - 1))])
                full, core, n = full.shrink(arg), core.shrink(arg), n[tuple(slice(lo, hi) for lo, hi in arg)]
        merged += len(full.views) < len(core.views)
        index, valid = full.index_arrays()  # the full library's symbolic index, evaluated
        gathered = np.where(valid, np.arange(24)[np.where(valid, index, 0)], -1)
        np.testing.assert_array_equal(gathered, n, err_msg=f"trial {trial}: full tracker")
        for tracker in (full, core):  # the core's plain index, on the merged and the unmerged stacks
            for pos in np.ndindex(*n.shape):
                at, ok = tracker.index(list(pos), IntOps)
                assert (np.arange(24)[at] if ok else -1) == n[pos], (trial, pos, tracker)
    assert merged > 0, "no trial stacked views that the full library merges: the test lost its point"


def test_the_full_library_lazy_graph_is_the_cores() -> None:
    """tinyedu.lazy.LazyBuffer subclasses the core's: its movement ops are the core's, ending in the
    full library's _view, which keeps one node per view."""
    from tinyedu import Tensor as FullTensor
    from tinyedu.core import lazy as core_lazy
    from tinyedu.lazy import LazyBuffer

    assert issubclass(LazyBuffer, core_lazy.LazyBuffer)
    for name in ("base", "is_view", "cast", "reshape", "permute", "expand", "pad", "shrink"):
        assert name not in LazyBuffer.__dict__, f"the full LazyBuffer redefines {name}"
    x = FullTensor(np.arange(12, dtype=np.float32)).lazydata
    view = x.reshape((3, 4)).permute((1, 0))
    assert view.is_view and view.base is x.base and view.shape == (4, 3)
    assert x.reshape((3, 4)).permute((1, 0)) is view  # the full library's _view: one node per view
    assert view.reshape((4, 3)) is view and x.reshape((12,)) is x  # the core's shortcuts


def test_the_full_library_devices_plug_into_the_cores_registry() -> None:
    """tinyedu.runtime.Device is an instance of the core's Registry: the full library's devices plug in
    through the core's `register`, its lazy import of ops_<name>.py is the core's `find` hook, and a
    device registered through that seam runs the full library's Tensors. The core's own registry
    keeps the core's C device, whatever the full library looked up."""
    from tinyedu import Tensor as FullTensor
    from tinyedu.core import device as core_device
    from tinyedu.runtime import Device
    from tinyedu.runtime.ops_python import PythonDevice

    assert isinstance(Device, core_device.Registry)
    assert "register" not in type(Device).__dict__, "the full registry redefines the core's register"
    backend = Device["NUMPY"]
    assert Device.devices["NUMPY"] is backend and Device["numpy:1"] is backend  # (numbered: one backend)
    del Device.devices["NUMPY"]  # forgotten: the next lookup finds it again through `find`
    assert Device["NUMPY"] is not backend and Device.devices["NUMPY"].name == "NUMPY"

    class Toy(PythonDevice):  # a device of your own: the PYTHON interpreter under another name
        name = "TOY"

    with pytest.raises(ValueError, match="unknown device 'toy'"):
        Device.canonicalize("toy")
    Device.register(Toy())
    try:
        x = FullTensor([1.0, 2.0, 3.0], device="toy")
        assert x.device == "TOY" and Device["TOY:1"] is Device.devices["TOY"]
        assert (x * 2 + 1).sum().item() == 15.0 and (x.to("C") * 2).tolist() == [2.0, 4.0, 6.0]
    finally:
        del Device.devices["TOY"]

    Device["C"], Device["PYTHON"]
    assert type(core_device.DEVICES["C"]) is core_device.Device  # the core's own C device, unchanged
    assert core_device.DEVICES["C"].compile is core_device.compile_c
    assert (Tensor([[1.0, -2.0]]) @ Tensor([[3.0], [4.0]])).relu().sum().item() == 0.0
    with pytest.raises(ValueError, match="unknown device 'NUMPY'; the registered ones are"):
        core_device.DEVICES["NUMPY"]


def test_the_full_library_kernel_is_the_cores() -> None:
    """tinyedu.codegen.kernel.Kernel subclasses the core's: the core builds the name, `bufs` and
    `sts` (reduced axes last); the full one only drops axes of size 1 and goes on (kinds, blocks)."""
    from tinyedu import Tensor as FullTensor
    from tinyedu.codegen.kernel import AxisKind
    from tinyedu.codegen.kernel import Kernel as FullKernel
    from tinyedu.core import linearizer as core_linearizer
    from tinyedu.engine.schedule import create_schedule

    assert issubclass(FullKernel, core_linearizer.Kernel)
    for name in ("_shapes",):
        assert name not in FullKernel.__dict__, f"the full Kernel redefines {name}"
    x = FullTensor(np.arange(60, dtype=np.float32).reshape(3, 1, 4, 5))
    ast = create_schedule([x.sum((0, 3), keepdim=True).lazydata])[-1].ast
    core, full = core_linearizer.Kernel(ast), FullKernel(ast)
    assert core.name == full.name == "r_3_1_4_5" and core.full_shape == (1, 4, 3, 5)
    assert core.first_reduce == 2 and full.full_shape == (4, 3, 5) and full.first_reduce == 1
    assert full.bufs == core.bufs and full.kinds == [AxisKind.LOOP, AxisKind.REDUCE, AxisKind.REDUCE]
    assert [st.shape for st in full.sts] == [(4, 1, 1), (4, 3, 5)]
    for mine, theirs in zip(core.sts, full.sts, strict=True):  # the same views, less the size-1 axis
        assert mine.reshape(theirs.shape) == theirs
    with pytest.raises(ValueError, match="rooted at STORE"):
        FullKernel(ast.src[0])


def test_the_full_library_c_renderer_is_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """tinyedu.renderer.cstyle.CRenderer subclasses the core's: the loops, loads, declarations, the
    function's signature and the table of op spellings are the core's; the full one overrides what it
    writes differently (values inlined, vectors, helpers, every dtype), and so do the renderers on it."""
    from tinyedu import Tensor as FullTensor
    from tinyedu.codegen.kernel import Kernel as FullKernel
    from tinyedu.codegen.linearizer import linearize as full_linearize
    from tinyedu.core import cstyle as core_cstyle
    from tinyedu.core.ops import BinaryOps
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.renderer import c_vector_math, cuda, neon, opencl, wasm, wgsl
    from tinyedu.renderer import cstyle as full_cstyle

    full = full_cstyle.CRenderer
    assert issubclass(full, core_cstyle.CRenderer)
    for name in ("emit", "declare", "define_global", "const", "close_loop", "load", "includes", "finish",
                 "render"):
        assert name not in full.__dict__, f"the full C renderer redefines the core's {name}"
    for renderer in (neon.NEONRenderer, wasm.WASMRenderer, opencl.OpenCLRenderer, cuda.CUDARenderer,
                     c_vector_math.VectorMathCRenderer, wgsl.WGSLRenderer):
        assert issubclass(renderer, full)
    # the full renderer writes an op with the core's spelling: change the core's table and it follows
    x = FullTensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    ast = create_schedule([((x + 2) * x).sum(1).lazydata])[-1].ast
    kernel = FullKernel(ast)
    uops = full_linearize(kernel)
    before = full(kernel.name, uops).render()
    assert "for (int ridx0 = 0; ridx0 < 3; ridx0++) {" in before and "+2.0f)" in before
    monkeypatch.setitem(core_cstyle.C_OPS, BinaryOps.ADD, "add({0}, {1})")
    after = full(kernel.name, uops).render()
    assert "(add(val0, 2.0f)*val0)" in after and "data1[add(alu0, ridx0)]" in after and "+2.0f" not in after


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
def test_reductions(axis) -> None:
    x = np.random.default_rng(4).standard_normal((3, 4, 5), dtype=np.float32)
    np.testing.assert_allclose(Tensor(x).sum(axis).numpy(), x.sum(axis), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(Tensor(x).max(axis).numpy(), x.max(axis))
    np.testing.assert_allclose(Tensor(x).mean(axis).numpy(), x.mean(axis), rtol=1e-5, atol=1e-6)


def test_edges() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38], dtype=np.float32)
    t = Tensor(x)
    np.testing.assert_array_equal((t * 1.0).numpy(), x)  # -0.0 and NaN survive a round trip
    assert np.signbit((Tensor(-0.0) * 1.0).numpy())
    assert np.isnan(Tensor(x).max().item())  # NaN wins a max, as in PyTorch
    np.testing.assert_array_equal(t.relu().numpy(), torch.tensor(x).relu().numpy())
    assert Tensor.zeros(0, 3).sum(0).numpy().tolist() == [0.0, 0.0, 0.0]  # a sum of nothing
    assert Tensor.zeros(3, 0).numpy().shape == (3, 0)
    assert np.isnan(Tensor.zeros(0).mean().item()) and Tensor(3.0).sum(0).item() == 3.0
    with pytest.raises(ValueError, match="64-bit"):
        Tensor.ones(2**16, 2**16).sum().numpy()
    with pytest.raises(ValueError, match="broadcast"):
        Tensor.ones(2, 3) + Tensor.ones(4)


@pytest.mark.parametrize("bad", [
    lambda t: t.shrink(((0, 3), (0, 5))), lambda t: t.shrink(((2, 1), (0, 4))),
    lambda t: t.pad(((0, -1), (0, 0))),
    lambda t: t.expand(3, 8), lambda t: t.permute(0, 0), lambda t: t.reshape(5, 2), lambda t: t.sum(2),
    lambda t: t @ Tensor.ones(3, 2), lambda t: t @ Tensor.ones(4), lambda t: t.backward(),
    lambda t: Tensor(np.zeros(3)), lambda t: t.cast(dtypes.float64)])
def test_bad_input_is_a_clear_error(bad) -> None:
    """Never a silent read out of bounds, a wrong shape, or an internal assertion."""
    with pytest.raises((ValueError, IndexError, RuntimeError, TypeError)):
        bad(Tensor(np.zeros((3, 4), np.float32)))


def test_no_c_compiler_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyedu.core.device import compile_c
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.raises(RuntimeError, match="no C compiler"):
        compile_c("void f(void) {}")


def test_softmax_and_cross_entropy_against_torch() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((6, 10), dtype=np.float32) * 10, rng.integers(0, 10, 6).astype(np.int32)
    t, p = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    np.testing.assert_allclose(t.softmax().numpy(), p.softmax(-1).detach().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(t.log_softmax().numpy(), p.log_softmax(-1).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    loss, ploss = t.cross_entropy(Tensor(y)), torch.nn.functional.cross_entropy(p, torch.tensor(y).long())
    loss.backward()
    ploss.backward()
    assert abs(loss.item() - ploss.item()) < 1e-5
    np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_gradients_against_float64_finite_differences() -> None:
    """d/dx of a small graph with every core op in it, against central differences in float64."""
    rng = np.random.default_rng(6)
    x0, w = rng.uniform(0.5, 2, (3, 4)), rng.standard_normal((4, 2))

    def f(x: np.ndarray) -> float:
        h = np.maximum(x @ w, 0) + np.exp(-x).sum(1, keepdims=True) * np.sqrt(x[:, :2]) / np.log(1 + x[:, 2:])
        return float((h.max(1) + h.mean(1)).sum())

    t = Tensor(x0.astype(np.float32), requires_grad=True)
    tw = Tensor(w.astype(np.float32))
    h = (t @ tw).relu() + (-t).exp().sum(1, keepdim=True) * t.shrink(((0, 3), (0, 2))).sqrt() / \
        (t.shrink(((0, 3), (2, 4))) + 1).log()
    (h.max(1) + h.mean(1)).sum().backward()
    eps, numeric = 1e-6, np.zeros_like(x0)
    for i in np.ndindex(*x0.shape):
        d = np.zeros_like(x0)
        d[i] = eps
        numeric[i] = (f(x0 + d) - f(x0 - d)) / (2 * eps)
    np.testing.assert_allclose(t.grad.numpy(), numeric, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("make", ["sgd_momentum", "adam"])
def test_optimizers_against_torch(make: str) -> None:
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((5, 3), dtype=np.float32)
    x = rng.standard_normal((8, 5), dtype=np.float32)
    w, pw = Tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    if make == "adam":
        opt, popt = Adam([w], lr=0.05), torch.optim.Adam([pw], lr=0.05)
    else:
        opt, popt = SGD([w], lr=0.05, momentum=0.9), torch.optim.SGD([pw], lr=0.05, momentum=0.9)
    for _ in range(5):
        opt.zero_grad()
        (Tensor(x) @ w).square().mean().backward()
        opt.step()
        popt.zero_grad()
        (torch.tensor(x) @ pw).square().mean().backward()
        popt.step()
    np.testing.assert_allclose(w.numpy(), pw.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_generated_c_reads_as_the_listing() -> None:
    from tinyedu.core.cstyle import CRenderer
    from tinyedu.core.linearizer import Kernel, linearize
    from tinyedu.core.schedule import create_schedule
    a, b = Tensor(np.ones((4, 3), np.float32)), Tensor(np.ones((3, 2), np.float32))
    items = create_schedule([(a @ b).relu().lazydata])
    assert [len(item.bufs) for item in items] == [1, 1, 3, 2]  # a, b (copies), the matmul, the relu
    item = items[2]
    source = CRenderer("matmul", linearize(Kernel(item.ast))).render()
    assert "for (int gidx0 = 0; gidx0 < 4; gidx0++) {" in source and "ridx0 < 3" in source
    assert source.count("data0[") == 1 and "(acc0+" in source and source.count("data1[") == 1


def _random_graph(rng: np.random.Generator, lib: type, leaves: list[np.ndarray]) -> object:
    """One random program, replayed with the same choices on any Tensor class (or numpy: lib=None)."""
    choices = np.random.default_rng(int(rng.integers(1 << 30)))
    xs = [lib(a) if lib is not None else a.astype(np.float64) for a in leaves]
    lib = type(xs[0]) if lib is not None else None  # (a factory may stand in for the class)

    def pick() -> object:
        return xs[int(choices.integers(len(xs)))]

    for _ in range(8):
        x, y, op = pick(), pick(), int(choices.integers(9))
        c = float(choices.uniform(-1, 1))
        if op == 0:
            out = x + y
        elif op == 1:
            out = x * y * 0.5
        elif op == 2:
            out = x - c
        elif op == 3:
            out = x.maximum(y) if lib is not None else np.maximum(x, y)
        elif op == 4:  # a sum over rows, broadcast back
            out = x.sum(0, keepdim=True) * 0.25 if lib is not None else x.sum(0, keepdims=True) * 0.25
            out = out + x
        elif op == 5:  # a transpose of a square tensor
            out = x.permute(1, 0) if lib is not None else x.T
        elif op == 6:  # pad one column, drop another
            if lib is not None:
                out = x.pad(((0, 0), (1, 0))).shrink(((0, 4), (0, 4)))
            else:
                out = np.pad(x, ((0, 0), (1, 0)))[:, :4]
        elif op == 7:
            out = (x @ y) * 0.25
        else:  # where
            out = (x > 0).where(x, y * c) if lib is not None else np.where(x > 0, x, y * c)
        xs.append(out)
    total = xs[-1].softmax() if lib is not None else np.exp(xs[-1] - xs[-1].max(-1, keepdims=True))
    if lib is None:
        total = total / total.sum(-1, keepdims=True)
    return total


def test_python_device_runs_the_same_uops_as_c() -> None:
    """The PYTHON device interprets the UOps the C device compiles: the same bits on random programs
    (softmax's exp2 within an ulp: numpy's exp2 and the C library's exp2f may round differently)."""
    rng = np.random.default_rng(9)
    for trial in range(6):
        leaves = [rng.standard_normal((4, 4), dtype=np.float32) for _ in range(3)]
        seed = int(rng.integers(1 << 30))
        on = {}
        for device in ("C", "PYTHON"):
            make = lambda a, d=device: Tensor(a, device=d)  # noqa: E731
            on[device] = _random_graph(np.random.default_rng(seed), make, leaves).numpy()
        np.testing.assert_allclose(on["PYTHON"], on["C"], rtol=3e-7, atol=0, err_msg=f"trial {trial}")
    x = Tensor(np.array([[1.0, -2.0, np.nan], [0.0, -0.0, np.inf]], np.float32), device="PYTHON")
    np.testing.assert_array_equal(x.pad(((0, 1), (1, 0))).max(1).numpy(), [np.nan, np.inf, 0.0])
    with pytest.raises(ValueError, match="move one"):
        x + Tensor(np.zeros((2, 3), np.float32))


def test_core_agrees_with_the_full_library_and_numpy() -> None:
    """The core and the full library are two engines over the same ops: on random programs they
    agree with each other, and with numpy in float64."""
    import tinyedu
    rng = np.random.default_rng(8)
    for trial in range(25):
        leaves = [rng.standard_normal((4, 4), dtype=np.float32) for _ in range(3)]
        seed = int(rng.integers(1 << 30))
        core = _random_graph(np.random.default_rng(seed), Tensor, leaves).numpy()
        full = _random_graph(np.random.default_rng(seed), tinyedu.Tensor, leaves).numpy()
        reference = _random_graph(np.random.default_rng(seed), None, leaves)
        np.testing.assert_allclose(core, reference, rtol=1e-4, atol=1e-6, err_msg=f"trial {trial}")
        np.testing.assert_allclose(core, full, rtol=1e-5, atol=1e-7, err_msg=f"trial {trial}")


# ---- the full library's Tensor and nn are the core's, plus extras (issue 28, item 4) ----
# What the full Tensor inherits from the core unchanged: every other name the core defines is
# overridden on purpose (in tinyedu/tensor.py or a mixin), because the full library adds something.
TENSOR_INHERITED = {
    "__init__", "shape", "dtype", "device", "ndim", "numel", "realize", "tolist", "detach", "_wrap",
    "requires_grad_", "_broadcast_to", "_float", "float", "add", "sub", "mul", "maximum", "lt", "gt", "eq",
    "neg", "reciprocal", "sqrt", "square", "__hash__", "grad", "_ctx", "_parents", "requires_grad",
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__neg__", "__matmul__", "__lt__", "__gt__", "__eq__"}


def _defined_above(cls: type, base: type, name: str) -> list[str]:
    """The classes in cls's MRO before `base` that define `name` (empty: cls inherits base's)."""
    mro = cls.__mro__
    return [c.__qualname__ for c in mro[:mro.index(base)] if name in vars(c)]


def test_the_full_library_tensor_is_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """tinyedu.Tensor subclasses the core's Tensor (the core last in its bases, after the mixins):
    what behaves the same is defined once, in the core; a change there shows in the full Tensor."""
    import tinyedu
    from tinyedu.core import tensor as core_tensor
    from tinyedu.runtime import Device

    full, core = tinyedu.Tensor, core_tensor.Tensor
    assert issubclass(full, core) and full.__mro__[-2:] == (core, object)
    for name in sorted(TENSOR_INHERITED):
        assert name in vars(core), f"the core's Tensor has no {name}"
        assert not _defined_above(full, core, name), f"{_defined_above(full, core, name)} redefine {name}"
    # every other name of the core's is overridden, so a new core method must be placed on purpose
    own = {n for n in vars(core) if not (n.startswith("__") and n.endswith("__")) or n in TENSOR_INHERITED}
    for name in sorted(own - TENSOR_INHERITED):
        assert _defined_above(full, core, name), f"{name}: add it to TENSOR_INHERITED, or override it"
    # the class attributes the core reads mean the full library's on the full Tensor
    assert core.default_device == "C" and full.default_device == Device.DEFAULT
    assert full._rng is not core._rng and full.manual_seed is not core.manual_seed
    # inherited: a change to the core's method is what the full Tensor runs
    x = full(np.array([2.0, 3.0], np.float32))
    assert (x + 4).tolist() == [6.0, 7.0] and x.square().tolist() == [4.0, 9.0]
    monkeypatch.setattr(core, "add", lambda self, y, reverse=False: self.mul(y))
    monkeypatch.setattr(core, "square", lambda self: -self)
    assert (x + 4).tolist() == [8.0, 12.0] and x.square().tolist() == [-2.0, -3.0]
    assert (4 + x).tolist() == [8.0, 12.0] and type(x + 4) is full
    monkeypatch.undo()
    # the full library's extras on what it inherits: every dtype through the seam in __init__, the
    # full library's errors and dtype promotion through its _broadcasted
    h = full([1, 2], dtype="float16", requires_grad=True)
    assert h.dtype == tinyedu.dtypes.float16 and h.requires_grad and type(h.detach()) is full
    assert (full([1, 2]) - full([0.5, 1.0])).tolist() == [0.5, 1.0]
    for bad in (lambda: full([True]) - full([False]), lambda: -full([True]),
                lambda: full([1, 2]).requires_grad_()):
        with pytest.raises(TypeError, match="bool|floating point"):
            bad()
    # a core Tensor and a full one do not meet silently (their graphs run on different engines)
    with pytest.raises(TypeError, match="cannot meet in one op"):
        Tensor([1.0]) + full([1.0])
    with pytest.raises(TypeError, match="unsupported operand"):
        full([1.0]) + Tensor([1.0])


def test_the_full_library_nn_is_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """tinyedu.nn.Linear and the optimizers' base subclass the core's: Linear's weights and
    parameters(), an optimizer's zero_grad() and step() are defined once, in tinyedu/core/nn.py."""
    import tinyedu
    from tinyedu.core import nn as core_nn
    from tinyedu.nn import Linear, optim

    assert issubclass(Linear, core_nn.Linear) and issubclass(optim.Optimizer, core_nn.Optimizer)
    assert issubclass(optim.SGD, core_nn.Optimizer) and issubclass(optim.AdamW, core_nn.Optimizer)
    assert not _defined_above(Linear, core_nn.Linear, "parameters")
    for cls in (optim.SGD, optim.Adam):
        assert not _defined_above(cls, core_nn.Optimizer, "zero_grad")
    assert not _defined_above(optim.SGD, core_nn.Optimizer, "step")
    layer = Linear(16, 4)
    assert type(layer.weight) is tinyedu.Tensor and layer.weight.requires_grad
    assert [id(p) for p in layer.parameters()] == [id(layer.weight), id(layer.bias)]
    assert len(Linear(16, 4, bias=False).parameters()) == 1
    assert 0 < np.abs(layer.weight.numpy()).max() <= 1 / 4  # U(-1/sqrt(16), 1/sqrt(16))
    with pytest.raises(ValueError, match="in_features must be a positive int"):
        Linear(0, 4)
    # the core's step() writes what updates() gives: change it, and the full SGD follows
    w = tinyedu.Tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    w.sum().backward()
    monkeypatch.setattr(core_nn.Optimizer, "step", lambda self: None)
    opt.step()
    assert w.tolist() == [1.0, 2.0]
    monkeypatch.undo()
    opt.step()
    assert w.tolist() == [0.5, 1.5]
    monkeypatch.setattr(core_nn.Linear, "parameters", lambda self: [self.bias])
    assert [id(p) for p in layer.parameters()] == [id(layer.bias)]


# ---- the linearizer: the full library's subclasses the core's (issue 28) ----

def test_the_full_library_linearizer_is_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """tinyedu.codegen.linearizer.Linearizer subclasses the core's: the skeleton (`linearize`: globals,
    output loops, the REDUCE, the store, closing), the empty-output check and the plain reduce are
    the core's; a change to the core's step shows in the full library's UOps."""
    from tinyedu import Tensor as FullTensor
    from tinyedu.codegen import kernel as full_kernel
    from tinyedu.codegen import linearizer as full_linearizer
    from tinyedu.core import linearizer as core_linearizer
    from tinyedu.core.ops import BinaryOps
    from tinyedu.core.uops import UOps
    from tinyedu.engine.schedule import create_schedule

    full = full_linearizer.Linearizer
    assert issubclass(full, core_linearizer.Linearizer)
    for name in ("nothing_to_compute", "lower_plain_reduce"):
        assert name not in full.__dict__, f"the full Linearizer redefines the core's {name}"
    assert full_kernel.ast_dtype is core_linearizer.ast_dtype  # one ast_dtype, the core's
    x = FullTensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    ast = create_schedule([(x * 2).max(1).lazydata])[-1].ast
    uops = full_linearizer.linearize(full_kernel.Kernel(ast))
    assert [u.op for u in uops].count(UOps.RANGE) == 2 and [u.op for u in uops].count(UOps.DEFINE_ACC) == 1
    # the full library reduces with the core's lower_plain_reduce: make the core's add 1 to the result
    plain = core_linearizer.Linearizer.lower_plain_reduce

    def plus_one(self: core_linearizer.Linearizer, reduce):  # noqa: ANN001, ANN202
        result = plain(self, reduce)
        return self.b.alu(BinaryOps.ADD, result, self.b.const(1.0, self._dtype(reduce.src[0])))
    monkeypatch.setattr(core_linearizer.Linearizer, "lower_plain_reduce", plus_one)
    patched = full_linearizer.linearize(full_kernel.Kernel(ast))
    added = [u for u in patched if u.op is UOps.ALU and u.arg is BinaryOps.ADD]
    assert len(patched) == len(uops) + 2
    assert any(s.op is UOps.CONST and s.arg == 1.0 for u in added for s in u.src)
    # and its skeleton: an output the core calls empty has no loops in the full library either
    monkeypatch.setattr(core_linearizer.Linearizer, "nothing_to_compute", lambda self: True)
    assert {u.op for u in full_linearizer.linearize(full_kernel.Kernel(ast))} == {UOps.DEFINE_GLOBAL}


# ---- the scheduler: the full library's is the core's, with more rules (issue 28) ----
def test_the_full_library_scheduler_is_the_cores() -> None:
    """tinyedu.engine.schedule subclasses the core's Scheduler and KernelBuilder: the three steps,
    the items, the leaves (LOAD, CONST) and rules 1 and 2 are the core's; the full one overrides
    which bases are stored and how a fused op enters a kernel through a view."""
    from tinyedu import Tensor as FullTensor
    from tinyedu.core import schedule as core_schedule
    from tinyedu.engine import schedule as full_schedule

    assert issubclass(full_schedule.Scheduler, core_schedule.Scheduler)
    assert issubclass(full_schedule.KernelBuilder, core_schedule.KernelBuilder)
    assert full_schedule.ScheduleItem is core_schedule.ScheduleItem
    for name in ("schedule", "kernel"):
        assert name not in full_schedule.Scheduler.__dict__, f"the full Scheduler redefines {name}"
    for name in ("read", "_read"):
        assert name not in full_schedule.KernelBuilder.__dict__, f"the full KernelBuilder redefines {name}"
    for name in ("rule1_outputs", "rule2_loads", "readers_of", "kernel_name"):
        assert name not in vars(full_schedule), f"the full scheduler keeps its own copy of {name}"
    assert full_schedule.RULES[1] is core_schedule.RULES[1]

    # a view of a fused op: the core stores the op (its rule 3), the full library pushes the view through it
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    core_y, full_y = ((Tensor(data) + 1).T * 2), ((FullTensor(data) + 1).T * 2)
    core_items = core_schedule.create_schedule([core_y.lazydata])
    full_items = full_schedule.create_schedule([full_y.lazydata])
    rules = core_schedule.RULES
    assert [i.reason for i in core_items] == [rules[2], rules[3], rules[1]]
    assert [i.reason for i in full_items] == [rules[2], rules[1]]
    assert all(type(i) is core_schedule.ScheduleItem for i in core_items + full_items)
    assert core_items[-1].bufs == [core_items[-1].out, core_items[1].out] and core_items[-1].name == "E_3_2"
    np.testing.assert_array_equal(core_y.numpy(), (data + 1).T * 2)
    np.testing.assert_array_equal(full_y.numpy(), (data + 1).T * 2)


def test_a_change_to_the_cores_scheduler_shows_in_the_full_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 1 and the step that makes an item are the core's: patch them and the full library follows."""
    from tinyedu import Tensor as FullTensor
    from tinyedu.core import schedule as core_schedule
    from tinyedu.engine.schedule import create_schedule

    x = FullTensor(np.arange(6, dtype=np.float32).reshape(2, 3)).realize()
    inner = x * 2
    y = inner + 1
    assert [i.name for i in create_schedule([y.lazydata])] == ["E_2_3"]  # one fused kernel

    also_inner = core_schedule.rule1_outputs
    monkeypatch.setattr(core_schedule, "rule1_outputs", lambda outs: also_inner([*outs, inner.lazydata]))
    kernels = []
    make_item = core_schedule.Scheduler.kernel

    def counted(self, base, stored):  # noqa: ANN001, ANN202
        kernels.append(base)
        return make_item(self, base, stored)

    monkeypatch.setattr(core_schedule.Scheduler, "kernel", counted)
    items = create_schedule([y.lazydata])
    assert [i.reason for i in items] == [core_schedule.RULES[1]] * 2  # `inner` is stored now, by rule 1
    assert items[1].inputs == (items[0].out,) and kernels == [i.out for i in items]
    monkeypatch.undo()
    assert len(create_schedule([y.lazydata])) == 1
    # the schedule cache keys the core's rules too: a patched rule is used, not a remembered schedule
    from tinyedu.engine.schedule_cache import schedules
    assert len(schedules.schedule([(x * 2 + 1).lazydata])) == 1  # (now remembered)
    monkeypatch.setattr(core_schedule, "rule1_outputs",
                        lambda outs: also_inner([*outs, *(o.srcs[0] for o in outs)]))  # and what they add to
    assert len(schedules.schedule([(x * 2 + 1).lazydata])) == 2


# ---- the engine: the full library's plugs into the core's seam, LazyBuffer.engine (issue 28) ----

def test_the_full_engine_is_installed_in_the_cores_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each LazyBuffer class runs on the engine installed in its class attribute `engine`: the core's
    on the core's class, the full one on the full library's; replacing it changes where graphs go."""
    import tinyedu
    import tinyedu.engine
    from tinyedu import lazy as full_lazy
    from tinyedu.core import lazy as core_lazy
    from tinyedu.core import realize as core_realize

    assert isinstance(core_lazy.LazyBuffer.engine, core_realize.Engine)
    assert isinstance(full_lazy.LazyBuffer.engine, tinyedu.engine.Engine)
    assert "realize" not in vars(full_lazy.LazyBuffer)  # realize() is the core's, through the seam
    seen: list[int] = []

    class Watching:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def realize(self, outs: list) -> None:
            seen.append(len(outs))
            self.inner.realize(outs)

        def __getattr__(self, name: str) -> object:  # assign, canonical_device: the full engine's
            return getattr(self.inner, name)

    monkeypatch.setattr(full_lazy.LazyBuffer, "engine", Watching(full_lazy.LazyBuffer.engine))
    assert (tinyedu.Tensor([1.0, 2.0]) * 3).tolist() == [3.0, 6.0] and seen
    before = len(seen)
    assert (Tensor([1.0, 2.0]) * 3).tolist() == [3.0, 6.0] and len(seen) == before  # the core's: not watched
    monkeypatch.setattr(full_lazy.LazyBuffer, "engine", None)
    with pytest.raises(RuntimeError, match="no engine installed"):
        (tinyedu.Tensor([1.0]) + 1).numpy()
