"""Writing the exported program down: one C file (and, without PORT=1, a sidecar weights file).

The file, top to bottom: a comment that says how to build and run it; the includes, vector types
and helpers the kernels need (each once); the weights; the arenas of the memory plan; every kernel
function; `<name>_forward`, which calls them in schedule order; and `main`.
"""

from __future__ import annotations

import struct

import numpy as np

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.helpers import prod
from tinyedu.export.model import BufferInfo, ExportedProgram
from tinyedu.export.wasm import wasm_entry_points
from tinyedu.renderer.wasm import HEADER_NAME
from tinyedu.renderer.wasm_math import WASM_MATH_HEADER

WEIGHTS_MAGIC = b"TINYEDUW"  # the sidecar file: magic, byte count (uint64 little-endian), the arrays
# --8<-- [start:fma]
# fmaf (a*b + c, rounded once) is one instruction where the processor has FMA (every arm64; an
# x86-64 compiled with -mfma or -march=native), but on a baseline x86-64, which a plain `cc -O2`
# targets, it is a call into the maths library, 4x slower for a whole CNN. There the program rounds
# twice instead: a difference of float32 rounding, like any change of summation order.
FUSED_MULTIPLY_ADD = """#if defined(__FMA__) || defined(__aarch64__)
static inline float multiply_add(float a, float b, float c) { return fmaf(a, b, c); }
#else
static inline float multiply_add(float a, float b, float c) { return a * b + c; }
#endif"""
# --8<-- [end:fma]
PRINT_FORMAT = {"float32": ("%.9g", "double"), "int32": ("%d", "int"), "uint8": ("%u", "unsigned"),
                "bool": ("%d", "int")}  # %.9g: nine digits read back as the same float32


def render_program(program: ExportedProgram) -> tuple[str, bytes]:
    """The C source, and the sidecar file's bytes (empty when the weights are embedded)."""
    weights = [b for b in program.buffers if b.role == "weight"]
    prelude, bodies = _split_kernels(program.functions)
    wasm = program.target.name == "wasm"  # no libc: the libm header inside, no main (see export/wasm.py)
    libc = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>"]
    if wasm:
        header = f'#include "{HEADER_NAME}"'
        prelude = [WASM_MATH_HEADER if line.startswith(header) else line for line in prelude]
        libc = []
    lines = [_header(program), *libc, *prelude, ""]
    lines.append(f"/* ---- weights: {len(weights)} arrays, {sum(b.nbytes for b in weights)} bytes"
                 f"{'' if program.embedded else f', read from {program.name}.weights at start-up'} ---- */")
    for b in weights:
        lines.append(_weight_definition(b, program.embedded))
    lines.append("\n/* ---- scratch memory: the memory plan puts every intermediate buffer in one arena per "
                 "dtype ---- */")
    for dtype_name, nbytes in program.arena_bytes.items():
        dtype = dtypes.from_any(dtype_name)
        elements = max(nbytes // dtype.itemsize, 1)
        lines.append(f"static _Alignas(64) {dtype.c_name} arena_{dtype_name}[{elements}];  "
                     f"/* {nbytes} bytes */")
    lines.append("\n/* ---- the kernels, in the order the forward pass runs them ---- */")
    lines.extend(bodies)
    lines.extend(_forward(program))
    lines.extend(wasm_entry_points(program) if wasm else _main(program, weights))
    return "\n".join(lines) + "\n", b"" if program.embedded else _weights_file(weights)


# --8<-- [start:split]
def _split_kernels(functions: dict[str, str]) -> tuple[list[str], list[str]]:
    """Each rendered kernel is a whole source (includes, types, helpers, the function): share the first
    part, each line once, and keep the functions (only the function: a device may add a wrapper after
    it for its own runtime, such as the NEON device's entry point for its qemu harness)."""
    prelude: list[str] = []
    bodies: list[str] = []
    for name, source in functions.items():
        lines = source.rstrip("\n").split("\n")
        start = next(i for i, line in enumerate(lines) if line.startswith(f"void {name}("))
        for line in lines[:start]:
            if line.strip() and line not in prelude:
                prelude.append(line)
        end = next(i for i in range(start, len(lines)) if lines[i] == "}")  # the function's closing brace
        bodies.append("\n".join(lines[start:end + 1]))
    includes = [line for line in prelude if line.startswith("#include")]
    helpers = [line for line in prelude if not line.startswith("#include")]
    if any("fmaf(" in text for text in helpers + bodies):
        helpers = [FUSED_MULTIPLY_ADD, *(line.replace("fmaf(", "multiply_add(") for line in helpers)]
        bodies = [text.replace("fmaf(", "multiply_add(") for text in bodies]
    return includes + helpers, bodies
# --8<-- [end:split]


def _header(program: ExportedProgram) -> str:
    target, stats, name = program.target, program.stats, program.name
    build = f"{' '.join(target.compiler)} {' '.join(target.flags)} {name}.c -o {name} -lm"
    run = f"{' '.join(target.run_prefix) + ' ' if target.run_prefix else ''}./{name}"
    ios = [f"     input{k}: {dt.name} {shape}, {prod(shape) * dt.itemsize} bytes"
           for k, (shape, dt) in enumerate(program.inputs)]
    ios += [f"     output{k}: {dt.name} {shape}, {prod(shape) * dt.itemsize} bytes"
            for k, (shape, dt) in enumerate(program.outputs)]
    return "\n".join([
        f"/* {name}.c: the forward pass of a tinyedu model as a standalone C program (target "
        f"{target.name}).",
        "   Generated by tinyedu.export; every kernel below was rendered by tinyedu's own renderer.",
        f"   Build: {build}",
        f"   Run:   {run} [-t] [-s BYTES] [-w WEIGHTS] [INPUT]",
        "     reads batches from INPUT (default: stdin), each the inputs' raw bytes one after another, and",
        "     writes each batch's outputs to stdout: raw bytes, or with -t as text (one line per sample);",
        "     -s skips BYTES at the start of the input (a file header), -w names the weights file.",
        "   Per batch:", *ios,
        f"   {stats['kernels']} kernel calls ({stats['functions']} functions); weights "
        f"{stats['weight_bytes']} bytes ({'in this file' if program.embedded else f'in {name}.weights'});",
        f"   scratch memory {stats['scratch_bytes']} bytes (one buffer per kernel would take "
        f"{stats['unplanned_scratch_bytes']}). */"])


# --8<-- [start:values]
def _c_values(data: np.ndarray, dtype: DType) -> str:
    """Array values as C initializers that read back exactly: 9 significant digits for a float32."""
    flat = data.reshape(-1)
    if dtype.is_float:
        wide = flat.astype(np.float64)
        text = np.char.mod("%.9g", wide).astype(object)
        text[np.isnan(wide)] = "NAN"
        text[np.isposinf(wide)] = "INFINITY"
        text[np.isneginf(wide)] = "-INFINITY"
        text[(wide == 0) & np.signbit(wide)] = "-0.0"  # "-0" would be the int 0, losing the sign
    else:
        text = np.char.mod("%d", flat.astype(np.int64)).astype(object)
    return ",\n  ".join(", ".join(text[i:i + 8]) for i in range(0, len(text), 8))
# --8<-- [end:values]


def _weight_definition(b: BufferInfo, embedded: bool) -> str:
    size = max(b.size, 1)
    if not embedded:
        return f"static _Alignas(64) {b.dtype.c_name} {b.name}[{size}];"
    values = _c_values(b.data, b.dtype)
    return f"static const _Alignas(64) {b.dtype.c_name} {b.name}[{size}] = {{\n  {values}\n}};"


def _pointer(b: BufferInfo) -> str:
    """A buffer as the kernel argument: its own array, or its place in its arena."""
    if b.role == "scratch":
        return f"arena_{b.dtype.name} + {b.allocation.offset // b.dtype.itemsize}"
    return b.name


def _forward(program: ExportedProgram) -> list[str]:
    params = [f"const {dt.c_name}* restrict input{k}" for k, (_, dt) in enumerate(program.inputs)]
    params += [f"{dt.c_name}* restrict output{k}" for k, (_, dt) in enumerate(program.outputs)]
    lines = ["\n/* ---- the forward pass: the kernels in schedule order, on the planned memory ---- */",
             f"void {program.name}_forward({', '.join(params)}) {{"]
    for call in program.calls:
        out = call.buffers[0]
        where = (f"  /* {out.name}: {out.nbytes} bytes at {out.allocation.offset} */" if out.role == "scratch"
                 else "")
        lines.append(f"  {call.function}({', '.join(_pointer(b) for b in call.buffers)});{where}")
    lines.append("}")
    return lines


def _weights_file(weights: list[BufferInfo]) -> bytes:
    data = b"".join(np.ascontiguousarray(b.data).astype(np.dtype(b.dtype.np).newbyteorder("<")).tobytes()
                    for b in weights)
    return WEIGHTS_MAGIC + struct.pack("<Q", len(data)) + data


def _main(program: ExportedProgram, weights: list[BufferInfo]) -> list[str]:
    name = program.name
    ins = [(f"input{k}", dt, prod(shape)) for k, (shape, dt) in enumerate(program.inputs)]
    outs = [(f"output{k}", dt, shape) for k, (shape, dt) in enumerate(program.outputs)]
    lines = ["\n#ifndef TINYEDU_NO_MAIN  /* -DTINYEDU_NO_MAIN leaves main out (to link the forward pass) */"]
    lines += [f"static _Alignas(64) {dt.c_name} {n}[{max(size, 1)}];" for n, dt, size in ins]
    lines += [f"static _Alignas(64) {dt.c_name} {n}[{max(prod(shape), 1)}];" for n, dt, shape in outs]
    lines += [
        "",
        "static size_t read_fully(FILE* f, void* to, size_t n) {",
        "  size_t got = 0, r;",
        "  while (got < n && (r = fread((char*)to + got, 1, n - got, f)) > 0) got += r;",
        "  return got;",
        "}",
        "",
        "/* -s BYTES: digits only, at most 10^15 (a sign, a suffix or an overflow is a usage error) */",
        "static int parse_bytes(const char* text, long long* out) {",
        "  long long n = 0;",
        "  if (!*text) return 0;",
        "  for (const char* c = text; *c; c++) {",
        "    if (*c < '0' || *c > '9') return 0;",
        "    n = n * 10 + (*c - '0');",
        "    if (n > 1000000000000000LL) return 0;",
        "  }",
        "  *out = n;",
        "  return 1;",
        "}",
    ]
    if not program.embedded:
        total = sum(b.nbytes for b in weights)
        lines += [
            "",
            "static int load_weights(const char* path) {",
            "  FILE* f = fopen(path, \"rb\");",
            "  if (!f) { perror(path); return 0; }",
            "  char magic[8]; unsigned char count[8]; unsigned long long n = 0;",
            "  int ok = read_fully(f, magic, 8) == 8 && memcmp(magic, \"TINYEDUW\", 8) == 0 "
            "&& read_fully(f, count, 8) == 8;",
            "  for (int i = 7; ok && i >= 0; i--) n = (n << 8) | count[i];",
            f"  ok = ok && n == {total}ULL;",
            *[f"  ok = ok && read_fully(f, {b.name}, {b.nbytes}) == {b.nbytes};" for b in weights],
            "  ok = ok && fgetc(f) == EOF;",
            "  fclose(f);",
            f"  if (!ok) fprintf(stderr, \"{name}: %s is not the weights file of this program (it must hold "
            f"{total} bytes of weights after its header)\\n\", path);",
            "  return ok;",
            "}",
        ]
    lines += ["", "static void print_text(void) {"]
    rows = {shape[0] if shape else 1 for _, _, shape in outs}
    if len(rows) == 1:  # one line per sample: every output's values for it, separated by " | "
        n_rows = rows.pop()
        lines.append(f"  for (int i = 0; i < {n_rows}; i++) {{")
        for k, (n, dt, shape) in enumerate(outs):
            per_row = prod(shape) // n_rows
            fmt, cast = PRINT_FORMAT[dt.name]
            if k:
                lines.append('    fputs(" | ", stdout);')
            lines.append(f"    for (int j = 0; j < {per_row}; j++) printf(j ? \" {fmt}\" : \"{fmt}\", "
                         f"({cast}){n}[i * {per_row} + j]);")
        lines += ["    putchar('\\n');", "  }"]
    else:  # outputs without a shared first axis: each on its own line
        for n, dt, shape in outs:
            fmt, cast = PRINT_FORMAT[dt.name]
            lines.append(f"  for (int j = 0; j < {prod(shape)}; j++) printf(j ? \" {fmt}\" : \"{fmt}\", "
                         f"({cast}){n}[j]);")
            lines.append("  putchar('\\n');")
    lines.append("}")
    call = ", ".join([n for n, _, _ in ins] + [n for n, _, _ in outs])
    lines += [
        "",
        "int main(int argc, char** argv) {",
        "  int text = 0; long long skip = 0; const char* path = NULL;",
        f"  const char* weights = \"{name}.weights\";",
        "  for (int i = 1; i < argc; i++) {",
        "    if (!strcmp(argv[i], \"-t\")) text = 1;",
        "    else if (!strcmp(argv[i], \"-s\") && i + 1 < argc) {",
        "      if (!parse_bytes(argv[++i], &skip)) {",
        "        fprintf(stderr, \"%s: -s takes a number of bytes to skip (digits, 0 to 10^15), \"",
        "                \"not '%s'\\n\", argv[0], argv[i]);",
        "        return 2;",
        "      }",
        "    }",
        "    else if (!strcmp(argv[i], \"-w\") && i + 1 < argc) weights = argv[++i];",
        "    else if (argv[i][0] == '-' && argv[i][1]) {",
        "      fprintf(stderr, \"usage: %s [-t] [-s BYTES] [-w WEIGHTS] [INPUT]\\n\", argv[0]);",
        "      return 2;",
        "    } else path = argv[i];",
        "  }",
        "  (void)weights;",
    ]
    if not program.embedded:
        lines.append("  if (!load_weights(weights)) return 2;")
    lines += [
        "  FILE* in = path ? fopen(path, \"rb\") : stdin;",
        "  if (!in) { perror(path); return 1; }",
        "  for (long long i = 0; i < skip; i++) if (fgetc(in) == EOF) {",
        f"    fprintf(stderr, \"{name}: the input has %lld bytes, fewer than the %lld that -s skips\\n\",",
        "            i, skip);",
        "    return 1;",
        "  }",
        "  for (long batch = 0;; batch++) {",
    ]
    for k, (n, dt, size) in enumerate(ins):
        nbytes = size * dt.itemsize
        lines.append(f"    size_t got{k} = read_fully(in, {n}, {nbytes});")
        if k == 0:
            lines += ["    if (got0 == 0 && batch > 0) break;  /* the end of the input, between batches */",
                      "    if (got0 == 0) {",
                      f"      fprintf(stderr, \"{name}: the input is empty; it needs at least one batch of "
                      f"{sum(s * d.itemsize for _, d, s in ins)} bytes\\n\");",
                      "      return 1;", "    }"]
        lines += [f"    if (got{k} != {nbytes}) {{",
                  f"      fprintf(stderr, \"{name}: the input ends inside batch %ld ({n}: %zu of {nbytes} "
                  f"bytes)\\n\", batch, got{k});",
                  "      return 1;", "    }"]
    lines += [f"    {name}_forward({call});", "    if (text) print_text();"]
    lines += [f"    else fwrite({n}, {dt.itemsize}, {max(prod(shape), 1)}, stdout);" if i == 0 else
              f"    if (!text) fwrite({n}, {dt.itemsize}, {max(prod(shape), 1)}, stdout);"
              for i, (n, dt, shape) in enumerate(outs)]
    lines += ["  }", "  return 0;", "}", "#endif"]
    return lines
