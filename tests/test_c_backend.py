"""The C device: the compile cache, compile errors, DEBUG output, C semantics, and a sanitizer run.

Semantics: every (op, dtype) on edge values (0, -0, inf, nan, INT_MIN, 255, division by zero...)
must give on C (and PYTHON) exactly what the NUMPY device gives. The sanitizer test runs a slice of
the op tests with AddressSanitizer + UBSan, which fail on any out-of-bounds read or write and on
any undefined behaviour (like INT_MIN / -1) in generated code.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, BufferOps, LazyOp, MemBuffer, ReduceOps, TernaryOps, UnaryOps
from tinyedu.engine.lower import lower
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime import ops_c
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_c import Compiler
from tinyedu.runtime.ops_numpy import NumpyProgram
from tinyedu.runtime.toolchain import BASE_FLAGS, CompileError
from tinyedu.shape import ShapeTracker

REPO = Path(__file__).resolve().parents[1]
HAS_COMPILER = any(shutil.which(c) for c in (os.environ.get("CC") or "cc", "gcc", "clang"))
pytestmark = pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler (install gcc/clang or set CC)")


def kernel_source(value: float = 1.0) -> str:
    """A tiny valid kernel; a fresh `value` makes a source the cache has never seen."""
    return ("void add_const(float* restrict data0, const float* restrict data1) "
            f"{{ data0[0] = data1[0] + {value}f; }}\n")


def call_add_const(library) -> float:
    import ctypes

    out, x = np.zeros(1, np.float32), np.array([2.0], np.float32)
    library.add_const(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(x.ctypes.data))
    return float(out[0])


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    return tmp_path


# ---- the compile cache ----
def test_cache_miss_compiles_then_hit_loads(cache: Path, monkeypatch: pytest.MonkeyPatch):
    compiled: list[Path] = []
    real_compile = Compiler.compile

    def counting_compile(self: Compiler, source: str, path: Path) -> None:
        compiled.append(path)
        real_compile(self, source, path)

    monkeypatch.setattr(Compiler, "compile", counting_compile)
    source = kernel_source(0.5)
    assert call_add_const(Compiler().load(source)) == 2.5
    library = Compiler().library_path(source)
    assert len(compiled) == 1 and compiled[0].parent == cache and library.exists()
    assert library.with_name(library.name + ".manifest").exists()  # what it was built from, and its hash
    assert call_add_const(Compiler().load(source)) == 2.5  # a new Compiler: found on disk
    assert len(compiled) == 1
    Compiler().load(kernel_source(0.25))
    assert len(compiled) == 2, "another source is another cache entry"


def test_cache_key_covers_source_compiler_and_flags(cache: Path):
    plain, sanitized = Compiler(sanitize=False), Compiler(sanitize=True)
    assert plain.library_path(kernel_source(1.0)) != plain.library_path(kernel_source(2.0))
    assert plain.library_path(kernel_source(1.0)) != sanitized.library_path(kernel_source(1.0))
    assert plain.library_path(kernel_source(1.0)) == Compiler(sanitize=False).library_path(kernel_source(1.0))


def test_cache_key_covers_the_processor(cache: Path, monkeypatch: pytest.MonkeyPatch):
    """Libraries are built with -march=native: another CPU must not load this one's."""
    here = Compiler().library_path(kernel_source(1.0))
    monkeypatch.setattr(ops_c, "cpu_signature", lambda: "another processor")
    assert Compiler().library_path(kernel_source(1.0)) != here


def test_corrupt_cache_entry_is_rebuilt(cache: Path):
    source = kernel_source(0.75)
    path = Compiler().library_path(source)
    path.write_bytes(b"not a shared library")  # e.g. a crash half-way through an old write
    assert call_add_const(Compiler().load(source)) == 2.75
    assert path.read_bytes()[:4] in (b"\x7fELF", b"\xcf\xfa\xed\xfe")  # ELF (Linux) or Mach-O (macOS)


def test_two_processes_compiling_the_same_kernel_at_once(cache: Path):
    """Both start together (released by a file), both compile, both load a whole library."""
    go = cache / "go"
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(REPO)!r})
        from tinyedu.runtime.ops_c import Compiler
        while not os.path.exists({str(go)!r}):
            time.sleep(0.001)
        lib = Compiler().load({kernel_source(float(uuid.uuid4().int % 1000) / 8)!r})
        print("loaded", lib.add_const is not None)
    """)
    env = {**os.environ, "TINYEDU_CACHE": str(cache)}
    workers = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    go.touch()
    results = [w.communicate(timeout=120) for w in workers]
    for worker, (out, err) in zip(workers, results, strict=True):
        assert worker.returncode == 0, err
        assert "loaded True" in out
    files = sorted(p.name for p in cache.iterdir() if p.name != "go")
    assert len(files) == 2 and files[0].endswith(".so") and files[1] == files[0] + ".manifest", \
        f"expected one library and its manifest, no temp files: {files}"


def test_compile_error_shows_numbered_source_and_compiler_output(cache: Path):
    with pytest.raises(CompileError) as error:
        Compiler().load("void broken(float* data0) {\n  data0[0] = undefined_name;\n}\n")
    message = str(error.value)
    assert "   2    data0[0] = undefined_name;" in message
    assert "compiler output" in message and "undefined_name" in message.split("compiler output")[1]
    assert not list(cache.glob("*.so")), "a failed compile leaves nothing in the cache"


# ---- DEBUG output ----
def test_debug_levels_print_source_uops_and_disassembly(monkeypatch: pytest.MonkeyPatch, capsys):
    x = Tensor(np.arange(8, dtype=np.float32), device="C").realize()
    monkeypatch.setenv("DEBUG", "6")
    (x * 3).sum().realize()
    out = capsys.readouterr().out
    assert "void r_8(float* restrict data0, const float* restrict data1) {" in out      # DEBUG=4
    assert "DEFINE_ACC    float32" in out                                              # DEBUG=5
    assert "<r_8>:" in out or "_r_8" in out or "no objdump" in out                     # DEBUG=6


def test_generated_reduce_source():
    padded = ShapeTracker.from_shape((4, 16)).pad(((0, 0), (1, 0)))
    load = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtypes.float32, padded))
    ast = LazyOp(BufferOps.STORE, (LazyOp(ReduceOps.MAX, (load,), (1,)),),
                 MemBuffer(0, dtypes.float32, ShapeTracker.from_shape((4, 1))))
    kernel = Kernel(ast)
    assert render_c(kernel.name, linearize(kernel)) == textwrap.dedent("""\
        #include <math.h>
        #include <stdbool.h>
        static inline float max_float32(float a, float b) { return (a > b || a != a) ? a : b; }
        void r_4_17(float* restrict data0, const float* restrict data1) {
          for (int gidx0 = 0; gidx0 < 4; gidx0++) {
            float acc0 = -INFINITY;
            int alu0 = gidx0*16;
            for (int ridx0 = 0; ridx0 < 17; ridx0++) {
              float val0 = (ridx0>0) ? data1[(alu0+ridx0)-1] : 0.0f;
              acc0 = max_float32(acc0, val0);
            }
            data0[gidx0] = acc0;
          }
        }
        """)


# ---- semantics: every (op, dtype) on edge values, against NUMPY ----
EDGES = {
    dtypes.float32: [0.0, -0.0, 1.0, -1.0, 2.5, -3.75, 7.0, np.inf, -np.inf, np.nan, 1e30, -1e-30, 3e38],
    dtypes.int32: [0, 1, -1, 7, -7, 2, -2, 100000, 2**31 - 1, -2**31],
    dtypes.uint8: [0, 1, 2, 7, 100, 200, 255],
    dtypes.bool: [False, True],
}
BITWISE = [BinaryOps.AND, BinaryOps.OR, BinaryOps.XOR]  # integers and bools only
BINARY = {dtypes.float32: [op for op in BinaryOps if op not in BITWISE], dtypes.int32: list(BinaryOps),
          dtypes.uint8: list(BinaryOps),
          dtypes.bool: [BinaryOps.ADD, BinaryOps.MUL, BinaryOps.MAX, BinaryOps.CMPLT, BinaryOps.CMPEQ,
                        *BITWISE]}
FLOAT_UNARY = [UnaryOps.NEG, UnaryOps.RECIP, UnaryOps.SQRT, UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SIN,
               UnaryOps.COS]
UNARY = {dtypes.float32: FLOAT_UNARY, **{d: [UnaryOps.NEG] for d in EDGES if not d.is_float}}
# float -> int is undefined in C outside the int's range; tinyedu defines it (dtype.cast_array), so
# every device must give INT32_MIN for NaN, inf and 3e9, and wrap through int32 into uint8
CASTABLE = {**EDGES, dtypes.float32: [0.0, -0.0, 1.5, 2.9, 100.7, 255.0, 0.25, -1.5, 256.0, 300.7, -300.7,
                                      2147483520.0, -2147483648.0, 2147483648.0, 3e9, -3e9, 1e10,
                                      np.inf, -np.inf, np.nan]}


def run_ast(device: str, ast: LazyOp, inputs: list[np.ndarray]) -> np.ndarray:
    out = Buffer(device, ast.arg.st.size, ast.arg.dtype)
    buffers = [Buffer(device, x.size, dtypes.from_numpy(x.dtype)).copyin(x) for x in inputs]
    runner = NumpyProgram(ast) if device == "NUMPY" else lower(device, ast).runner
    runner([out, *buffers])
    return out.as_numpy()


def pairwise(op, dtype: DType, values: list) -> tuple[LazyOp, list[np.ndarray]]:
    """op(a, b) for every pair of values: a (n, 1) and a (1, n) buffer, both expanded to (n, n)."""
    n = len(values)
    a = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtype, ShapeTracker.from_shape((n, 1)).expand((n, n))))
    b = LazyOp(BufferOps.LOAD, (), MemBuffer(2, dtype, ShapeTracker.from_shape((1, n)).expand((n, n))))
    out_dtype = dtypes.bool if op in (BinaryOps.CMPLT, BinaryOps.CMPEQ) else dtype
    store = MemBuffer(0, out_dtype, ShapeTracker.from_shape((n, n)))
    ast = LazyOp(BufferOps.STORE, (LazyOp(op, (a, b)),), store)
    array = np.array(values, dtype=dtype.np)
    return ast, [array, array]


def unary(op, dtype: DType, values: list, arg=None, out_dtype: DType | None = None) -> tuple[LazyOp, list]:
    x = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtype, ShapeTracker.from_shape((len(values),))))
    store = MemBuffer(0, out_dtype or dtype, ShapeTracker.from_shape((len(values),)))
    return LazyOp(BufferOps.STORE, (LazyOp(op, (x,), arg),), store), [np.array(values, dtype=dtype.np)]


# NUMPY's integer division goes through np.abs, which overflows for INT_MIN (it gives INT_MIN // 2 =
# 2**30): INT_MIN is left out of DIV/MOD here and checked on its own in test_int_min_division.
NO_INT_MIN = [v for v in EDGES[dtypes.int32] if v != -2**31]


def _values(op, d: DType) -> list:
    return NO_INT_MIN if d == dtypes.int32 and op in (BinaryOps.DIV, BinaryOps.MOD) else EDGES[d]


CASES = [(f"{op.name}-{d.name}", lambda op=op, d=d: pairwise(op, d, _values(op, d)))
         for d in BINARY for op in BINARY[d]]
CASES += [(f"{op.name}-{d.name}", lambda op=op, d=d: unary(op, d, EDGES[d]))
          for d in UNARY for op in UNARY[d]]
CASES += [(f"CAST-{s.name}-{t.name}", lambda s=s, t=t: unary(UnaryOps.CAST, s, CASTABLE[s], t, out_dtype=t))
          for s in EDGES for t in EDGES if s != t]


def _where_case() -> tuple[LazyOp, list]:
    n = 4
    leaves = [LazyOp(BufferOps.LOAD, (), MemBuffer(i + 1, d, ShapeTracker.from_shape((n,))))
              for i, d in enumerate((dtypes.bool, dtypes.float32, dtypes.float32))]
    ast = LazyOp(BufferOps.STORE, (LazyOp(TernaryOps.WHERE, tuple(leaves)),),
                 MemBuffer(0, dtypes.float32, ShapeTracker.from_shape((n,))))
    return ast, [np.array([True, False, True, False]), np.array([1, 2, np.nan, 4], np.float32),
                 np.array([-1, -2, -3, np.nan], np.float32)]


CASES.append(("WHERE-float32", _where_case))
APPROXIMATE = ("EXP2", "LOG2", "SIN", "COS")  # libm and numpy may round these differently by an ulp


@pytest.mark.parametrize("device", ["C", "PYTHON"])
@pytest.mark.parametrize("name, make", CASES, ids=[name for name, _ in CASES])
def test_edge_values_match_numpy(device: str, name: str, make):
    ast, inputs = make()
    expected = run_ast("NUMPY", ast, inputs)
    got = run_ast(device, ast, inputs)
    if name.split("-")[0] in APPROXIMATE:
        np.testing.assert_allclose(got, expected, rtol=2e-7, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)
        if expected.dtype == np.float32:  # -0.0 and 0.0 are equal but not the same
            assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("device", ["C", "PYTHON"])
def test_int_min_division(device: str):
    """C-style truncation, and no trap on INT_MIN / -1 (it wraps to INT_MIN, like numpy's int32 negation)."""
    a = [-2**31, -2**31, -2**31, -2**31, 1, 7]
    b = [2, -1, 3, 0, -2**31, -2**31]
    inputs = [np.array(a, np.int32), np.array(b, np.int32)]
    n = len(a)
    for op, expected in ((BinaryOps.DIV, [-2**30, -2**31, -715827882, 0, 0, 0]),
                         (BinaryOps.MOD, [0, 0, -2, 0, 1, 7])):
        st = ShapeTracker.from_shape((n,))
        leaves = tuple(LazyOp(BufferOps.LOAD, (), MemBuffer(i, dtypes.int32, st)) for i in (1, 2))
        ast = LazyOp(BufferOps.STORE, (LazyOp(op, leaves),), MemBuffer(0, dtypes.int32, st))
        assert run_ast(device, ast, inputs).tolist() == expected


# ---- the sanitizer ----
def _libasan() -> str | None:
    if platform.system() != "Linux" or shutil.which("gcc") is None:
        return None
    found = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True)
    path = found.stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def _sanitized_env() -> dict[str, str]:
    libasan = _libasan()
    if libasan is None:
        pytest.skip("needs Linux with gcc's AddressSanitizer runtime (libasan.so); on macOS, ASan libraries "
                    "must be loaded with DYLD_INSERT_LIBRARIES instead, which this test does not set up")
    return {**os.environ, "CC": "gcc", "TINYEDU_SANITIZE": "1", "LD_PRELOAD": libasan,
            "ASAN_OPTIONS": "detect_leaks=0", "PYTHONPATH": str(REPO), "TINYEDU_DIFFERENTIAL_EXAMPLES": "25"}


def test_sanitizer_catches_an_out_of_bounds_read():
    """The negative control: if this passes, a clean sanitized run below means something."""
    script = textwrap.dedent("""
        import ctypes, numpy as np
        from tinyedu.runtime.ops_c import Compiler
        lib = Compiler().load("void oob(float* data0, const float* data1) { data0[0] = data1[4]; }\\n")
        out, x = np.zeros(1, np.float32), np.zeros(4, np.float32)
        lib.oob(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(x.ctypes.data))
    """)
    result = subprocess.run([sys.executable, "-c", script], env=_sanitized_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "heap-buffer-overflow" in result.stderr


def test_op_tests_run_clean_under_address_and_ub_sanitizers():
    """Pads, shrinks, flips, strides and reductions on C, with ASan + UBSan watching every access:
    the edge-value tests above, random programs (test_differential.py), a slice of test_ops.py, and
    random opts (vector loads at padded and strided edges, packed tiles, threads) from test_opts.py."""
    env = _sanitized_env()
    # One pytest process for all of them (each start imports tinyedu, numpy and torch again): a
    # keyword expression per file, joined with `or` (-k matches the file name too).
    chosen = ["(test_c_backend.py and (test_edge_values_match_numpy or test_int_min_division) and C])",
              "test_differential.py",
              "(test_opts.py and random and (padded or strided or conv or odd or rows))"]
    files = [__file__, str(REPO / "tests" / "test_differential.py"), str(REPO / "tests" / "test_opts.py")]
    op_tests = REPO / "tests" / "test_ops.py"
    if op_tests.exists():
        chosen.append("(test_ops.py and (test_movement or test_reduce_non_contiguous or "
                      "test_reduce_over_nothing) and [C-)")
        files.append(str(op_tests))
    run = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files,
           "-k", " or ".join(chosen)]
    result = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    report = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, f"sanitized run failed:\n{report}"
    assert "passed" in result.stdout and "Sanitizer" not in result.stderr, report


def test_sanitize_flag_changes_the_build(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYEDU_SANITIZE", "1")
    assert "-fsanitize=address,undefined" in Compiler().flags
    monkeypatch.setenv("TINYEDU_SANITIZE", "0")
    assert not any(f.startswith("-fsanitize") for f in Compiler().flags)
    assert {"-fwrapv", "-ffp-contract=off"} <= set(BASE_FLAGS)
