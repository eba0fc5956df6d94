"""What DEBUG=1 and DEBUG=2 print: the loads by name, and a kernel's first run split into lowering
(with its compile step), loading the compiled code, and running."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tinyedu import Device, Tensor


def test_debug1_names_the_loads(monkeypatch, capsys):
    monkeypatch.setenv("DEBUG", "1")
    (Tensor(np.ones((3, 4), np.float32)) + Tensor(np.ones((3, 4), np.float32))).realize()
    out = capsys.readouterr().out
    assert "scheduled 1 kernels (2 loads: copy_3_4, copy_3_4)" in out, out


def test_debug2_shows_compile_and_load_on_the_first_run_only(monkeypatch, capsys, tmp_path):
    if Device.DEFAULT != "C":
        pytest.skip("the C device compiles and loads a library")
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))  # an empty compile cache: the kernel compiles
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    monkeypatch.setenv("DEBUG", "2")
    (x * 3.0625 - 0.5).realize()
    first = [line for line in capsys.readouterr().out.splitlines() if line.startswith("***")]
    (x * 3.0625 - 0.5).realize()
    again = [line for line in capsys.readouterr().out.splitlines() if line.startswith("***")]
    assert len(first) == len(again) == 1
    assert re.search(r"\[lowered [\d.]+ ms \(compile [\d.]+ ms\), loaded [\d.]+ ms\]$", first[0]), first
    assert "lowered" not in again[0] and "loaded" not in again[0], again
