"""Target "wasm": the exported C file compiled for wasm32, and a JavaScript module that runs it.

The C file is the one target "c" writes (the same kernels, the same memory plan and arenas, the same
weights), with the WASM device's renderer (SIMD128 vectors, the libm header written into the file) and
`main` left out (`-DTINYEDU_NO_MAIN`: a WebAssembly module has no stdin). In its place the file ends
with a few functions a host calls (`wasm_entry_points`):

    void* NAME_input(int k)    where input k lives in the module's memory (a host writes it there)
    void* NAME_output(int k)   where output k lives (a host reads it back)
    void* NAME_weight(int k)   where weight array k lives (a host copies a sidecar weights file there)
    void  NAME_run(void)       the forward pass on those arrays

`clang --target=wasm32 -O2 -msimd128 -nostdlib` and wasm-ld make one `.wasm` of it, which exports its
memory. `NAME.js` (render_js) is a small ES module with no dependencies that loads the `.wasm` (and the
weights file, checked: a damaged or truncated one is refused), and runs the forward pass on typed
arrays; a browser, node or deno runs it. `run_wasm` does the same from Python through wasmtime, which
is how the tests compare the module with tinyedu.
"""

from __future__ import annotations

import json
import os
import shlex
import struct
import subprocess
from pathlib import Path
from typing import Any

from tinyedu.core.helpers import prod
from tinyedu.export.targets import Target, missing_tool_hint

MAGIC = b"TINYEDUW"  # the sidecar weights file's first 8 bytes (cfile.WEIGHTS_MAGIC)
TYPED_ARRAYS = {"float32": "Float32Array", "int32": "Int32Array", "uint8": "Uint8Array", "bool": "Uint8Array",
                "float64": "Float64Array", "int8": "Int8Array", "int16": "Int16Array",
                "uint16": "Uint16Array", "uint32": "Uint32Array"}


def wasm_entry_points(program: Any) -> list[str]:
    """The C lines after the forward pass for target wasm: the input and output arrays, and the
    functions a host calls (see the module docstring)."""
    name = program.name
    weights = [b for b in program.buffers if b.role == "weight"]
    ins = [(f"input{k}", dt, prod(shape)) for k, (shape, dt) in enumerate(program.inputs)]
    outs = [(f"output{k}", dt, prod(shape)) for k, (shape, dt) in enumerate(program.outputs)]
    lines = ["\n/* ---- for a WebAssembly host: where the inputs, outputs and weights live, and the forward "
             "pass ---- */"]
    lines += [f"static _Alignas(64) {dt.c_name} {n}[{max(size, 1)}];" for n, dt, size in ins + outs]

    def table(kind: str, names: list[str]) -> list[str]:
        cases = " ".join(f"case {k}: return (void*){n};" for k, n in enumerate(names))
        return [f"void* {name}_{kind}(int k) {{ switch (k) {{ {cases} default: return 0; }} }}"]

    lines += table("input", [n for n, _, _ in ins]) + table("output", [n for n, _, _ in outs])
    lines += table("weight", [b.name for b in weights])
    call = ", ".join([n for n, _, _ in ins] + [n for n, _, _ in outs])
    lines.append(f"void {name}_run(void) {{ {name}_forward({call}); }}")
    return lines


def metadata(program: Any) -> dict:
    """What the JavaScript module needs to know about the program: names, shapes, dtypes, sizes."""
    weights = [b for b in program.buffers if b.role == "weight"]
    return {"name": program.name, "embedded": program.embedded,
            "inputs": [{"shape": list(shape), "dtype": dt.name, "bytes": prod(shape) * dt.itemsize}
                       for shape, dt in program.inputs],
            "outputs": [{"shape": list(shape), "dtype": dt.name, "bytes": prod(shape) * dt.itemsize}
                        for shape, dt in program.outputs],
            "weights": [] if program.embedded else [b.nbytes for b in weights]}


def check_weights(data: bytes, sizes: list[int], what: str) -> None:
    """Refuse a weights file that is not this program's: its magic, its byte count, its length."""
    total = sum(sizes)
    count = struct.unpack("<Q", data[8:16])[0] if len(data) >= 16 else None
    if len(data) < 16 or data[:8] != MAGIC or count != total or len(data) != 16 + total:
        raise ValueError(f"export: {what} is not the weights file of this program: it must hold "
                         f"{MAGIC.decode()}, the byte count {total} and then {total} bytes of weights "
                         f"({16 + total} bytes in all); it has {len(data)} bytes")


def build_wasm(program: Any, folder: Path) -> Path:
    """Write NAME.c, NAME.js (and NAME.weights) into `folder` and compile NAME.wasm; its path."""
    source = program.save(folder)
    target: Target = program.target
    wasm = source.with_suffix(".wasm")
    command = [*target.compiler, *target.flags, str(source), "-o", str(wasm)]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError(missing_tool_hint(target, target.compiler[0])) from None
    if result.returncode != 0:
        raise RuntimeError(f"export: `{shlex.join(command)}` failed:\n{result.stderr.strip()}")
    source.with_suffix(".js").write_text(render_js(program))
    return wasm


def run_wasm(program: Any, wasm: str | os.PathLike, stream: bytes, batches: int) -> bytes:
    """Run the module in wasmtime on `batches` batches of input bytes; the outputs' bytes, in order."""
    import wasmtime

    store = wasmtime.Store()
    module = wasmtime.Module.from_file(store.engine, str(wasm))
    exports = wasmtime.Instance(store, module, []).exports(store)
    memory, name = exports["memory"], program.name
    meta = metadata(program)
    if not program.embedded:
        path = Path(wasm).with_suffix(".weights")
        data = path.read_bytes()
        check_weights(data, meta["weights"], str(path))
        offset = 16
        for k, size in enumerate(meta["weights"]):
            memory.write(store, data[offset:offset + size], exports[f"{name}_weight"](store, k))
            offset += size
    per_batch = sum(i["bytes"] for i in meta["inputs"])
    if batches < 1 or len(stream) != per_batch * batches:
        raise ValueError(f"export: {name}.wasm takes whole batches of {per_batch} input bytes; "
                         f"got {len(stream)}")
    out = bytearray()
    for batch in range(batches):
        offset = batch * per_batch
        for k, spec in enumerate(meta["inputs"]):
            memory.write(store, stream[offset:offset + spec["bytes"]], exports[f"{name}_input"](store, k))
            offset += spec["bytes"]
        exports[f"{name}_run"](store)
        for k, spec in enumerate(meta["outputs"]):
            start = exports[f"{name}_output"](store, k)
            out += memory.read(store, start, start + spec["bytes"])
    return bytes(out)


# --8<-- [start:js]
JS = r"""// NAME.js: the forward pass of a tinyedu model compiled to WebAssembly (NAME.wasm). No dependencies.
//   const model = await load(new URL("NAME.wasm", import.meta.url));   // (and the weights file, if any)
//   const [probabilities] = model.forward([new Float32Array(784)]);
// Every kernel in NAME.wasm was rendered by tinyedu's renderer; this file only moves bytes.
export const program = __META__;

async function bytesOf(source) {  // a URL (fetched) or the bytes themselves
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return source;
  const response = await fetch(source);
  if (!response.ok) throw new Error(`${program.name}: could not fetch ${source} (${response.status})`);
  return response.arrayBuffer();
}

// A weights file is "TINYEDUW", the byte count (uint64, little-endian), then the arrays: anything else
// (another model's, a truncated download) is refused.
export function checkWeights(bytes) {
  const data = new Uint8Array(bytes.buffer ?? bytes, bytes.byteOffset ?? 0, bytes.byteLength);
  const total = program.weights.reduce((a, b) => a + b, 0);
  const magic = String.fromCharCode(...data.subarray(0, 8));
  const count = data.length < 16 ? -1
    : Number(new DataView(data.buffer, data.byteOffset + 8, 8).getBigUint64(0, true));
  if (magic !== "TINYEDUW" || count !== total || data.length !== 16 + total)
    throw new Error(`${program.name}: this is not the weights file of this program: it must hold TINYEDUW, ` +
                    `the byte count ${total} and ${total} bytes of weights (${16 + total} bytes); ` +
                    `it has ${data.length}`);
  return data;
}

export async function load(wasmSource, weightsSource) {
  if (typeof WebAssembly !== "object") throw new Error("this browser has no WebAssembly");
  const { instance } = await WebAssembly.instantiate(await bytesOf(wasmSource), {});
  const e = instance.exports, name = program.name;
  if (!program.embedded) {
    if (weightsSource === undefined)
      throw new Error(`${name}: this program reads its weights from a file; pass it to load()`);
    const data = checkWeights(await bytesOf(weightsSource));
    let offset = 16;
    program.weights.forEach((size, k) => {
      new Uint8Array(e.memory.buffer, e[`${name}_weight`](k), size).set(data.subarray(offset, offset + size));
      offset += size;
    });
  }
  const types = __TYPES__;
  return {
    program,
    // inputs: one typed array (or plain array) per input, of exactly its element count; outputs: copies
    forward(inputs) {
      if (!Array.isArray(inputs) || inputs.length !== program.inputs.length)
        throw new Error(`${name}: forward takes a list of ${program.inputs.length} inputs`);
      program.inputs.forEach((spec, k) => {
        const count = spec.shape.reduce((a, b) => a * b, 1), given = inputs[k]?.length ?? 0;
        if (given !== count)
          throw new Error(`${name}: input ${k} needs ${count} values ` +
                          `(shape [${spec.shape}], ${spec.dtype}); ` +
                          `got ${given === 0 ? "an empty input" : given}`);
        new types[spec.dtype](e.memory.buffer, e[`${name}_input`](k), count).set(inputs[k]);
      });
      e[`${name}_run`]();
      return program.outputs.map((spec, k) => {
        const count = spec.shape.reduce((a, b) => a * b, 1);
        return new types[spec.dtype](e.memory.buffer, e[`${name}_output`](k), count).slice();
      });
    },
  };
}
"""
# --8<-- [end:js]


def render_js(program: Any) -> str:
    """The ES module that loads NAME.wasm and runs its forward pass."""
    types = "{" + ", ".join(f"{k}: {v}" for k, v in TYPED_ARRAYS.items()) + "}"
    return JS.replace("NAME", program.name).replace("__META__", json.dumps(metadata(program))) \
        .replace("__TYPES__", types)

