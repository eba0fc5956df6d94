"""Export target "wasm": the forward pass as a `.wasm` and a JavaScript module, checked against tinyedu.

Through wasmtime in this process (ExportedProgram.run), and through the JavaScript module in node when
node is there (the browser test, tests/browser/test_lab.py, runs it in Chromium).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.export import export_c
from tinyedu.models import MnistCNN, Transformer
from tinyedu.runtime.device import DeviceUnavailable


@pytest.fixture(scope="module", autouse=True)
def tools() -> None:
    from tinyedu.runtime.ops_wasm import wasm_compiler, wasmtime_module
    try:
        wasm_compiler()
        wasmtime_module()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


def _conv_net() -> tuple[MnistCNN, np.ndarray]:
    Tensor.manual_seed(1)
    model = MnistCNN()
    with Tensor.train():  # running statistics that are not 0 and 1
        model(Tensor(np.random.default_rng(0).standard_normal((8, 1, 28, 28)).astype(np.float32)))
    x = np.random.default_rng(1).standard_normal((3, 2, 1, 28, 28)).astype(np.float32) * 3
    return model, x


@pytest.mark.parametrize("embed", [True, False])
def test_cnn_wasm_equals_tinyedu(tmp_path: Path, embed: bool) -> None:
    model, x = _conv_net()
    program = export_c(model, Tensor(x[0]), name="cnn", target="wasm", embed=embed)
    assert '#include "tinyedu_wasm.h"' not in program.source and "wasm_fmaf" in program.source
    assert "int main(" not in program.source and "void cnn_run(void)" in program.source
    wasm = program.compile(tmp_path)
    assert wasm.suffix == ".wasm" and (tmp_path / "cnn.js").is_file()
    (out,) = program.run(wasm, x)
    expected = np.stack([model(Tensor(b)).numpy() for b in x])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    c_program = export_c(model, Tensor(x[0]), name="cnn", embed=embed)  # the same memory plan as target c
    assert c_program.arena_bytes == program.arena_bytes


def test_transformer_wasm_with_int_inputs(tmp_path: Path) -> None:
    Tensor.manual_seed(2)
    gpt = Transformer(12, 8, dim=16, n_heads=2, n_layers=2)
    tokens = np.random.default_rng(0).integers(0, 12, (2, 3, 8)).astype(np.int32)
    program = export_c(gpt, Tensor(tokens[0]), name="gpt", target="wasm")
    (logits,) = program.run(program.compile(tmp_path), tokens)
    expected = np.stack([gpt(Tensor(t)).numpy() for t in tokens])
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)


def test_damaged_weights_and_short_inputs_are_refused(tmp_path: Path) -> None:
    model, x = _conv_net()
    program = export_c(model, Tensor(x[0]), name="cnn", target="wasm", embed=False)
    wasm = program.compile(tmp_path)
    weights = tmp_path / "cnn.weights"
    good = weights.read_bytes()
    for bad in (good[:-10], good[:12], b"NOTTINYE" + good[8:], good + b"\0"):
        weights.write_bytes(bad)
        with pytest.raises(ValueError, match="not the weights file of this program"):
            program.run(wasm, x)
    weights.write_bytes(good)
    with pytest.raises(ValueError, match="input 0 must have shape"):
        program.run(wasm, x[:, :1])


NODE_SCRIPT = """
import { load, program } from "./cnn.js";
import { readFileSync } from "node:fs";
const input = new Float32Array(readFileSync("./input.bin").buffer.slice(0));
const model = await load(readFileSync("./cnn.wasm"), readFileSync(process.argv[2]));
const [out] = model.forward([input]);
const errors = [];
for (const bad of [[], [new Float32Array(0)], [new Float32Array(10)]]) {
  try { model.forward(bad); errors.push("accepted"); } catch (e) { errors.push(e.message); }
}
let refused = "";
try { await load(readFileSync("./cnn.wasm"), readFileSync("./cnn.weights").subarray(0, 100)); }
catch (e) { refused = e.message; }
console.log(JSON.stringify({out: Array.from(out), errors, refused}));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to run the JavaScript module")
def test_javascript_module_in_node(tmp_path: Path) -> None:
    model, x = _conv_net()
    program = export_c(model, Tensor(x[0]), name="cnn", target="wasm", embed=False)
    program.compile(tmp_path)
    (tmp_path / "input.bin").write_bytes(x[0].tobytes())
    (tmp_path / "run.mjs").write_text(NODE_SCRIPT)
    result = subprocess.run(["node", "run.mjs", "./cnn.weights"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    np.testing.assert_allclose(np.array(answer["out"]).reshape(2, 10), model(Tensor(x[0])).numpy(),
                               rtol=1e-4, atol=1e-5)
    assert answer["errors"][0].startswith("cnn: forward takes a list of 1 inputs")
    assert "got an empty input" in answer["errors"][1] and "got 10" in answer["errors"][2]
    assert "not the weights file of this program" in answer["refused"]
