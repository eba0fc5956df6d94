"""Settings read from the environment take effect at the next realize, although the realizer reads
them once per realize and the C device keeps one Compiler per setting (tinyedu/engine/lower.py's
settings_key, tinyedu/runtime/ops_c.py's CDevice.compiler): tests and notebooks change them while
running."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.engine.lower import lower, settings_key
from tinyedu.engine.schedule_cache import schedules
from tinyedu.runtime.device import Device


def test_the_c_compiler_follows_tinyedu_sanitize_and_cc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TINYEDU_SANITIZE", raising=False)
    plain = Device["C"].compiler
    assert not any(flag.startswith("-fsanitize") for flag in plain.flags)
    assert Device["C"].compiler is plain  # one Compiler per setting, not one per call
    monkeypatch.setenv("TINYEDU_SANITIZE", "1")
    assert "-fsanitize=address,undefined" in Device["C"].compiler.flags
    assert settings_key("C") != (monkeypatch.delenv("TINYEDU_SANITIZE") or settings_key("C"))
    monkeypatch.setenv("CC", plain.compiler)  # the same compiler, named: the same Compiler
    assert Device["C"].compiler is plain


def test_noopt_set_between_two_realizes_changes_the_next_kernel(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DEVICE", "C")
    monkeypatch.delenv("NOOPT", raising=False)
    x = Tensor(np.arange(64 * 256, dtype=np.float32).reshape(64, 256)).realize()
    [item] = schedules.schedule([(x * 3).lazydata])  # the kernel's AST
    expected = x.numpy() * 3
    np.testing.assert_array_equal((x * 3).numpy(), expected)
    optimized = Device["C"].programs[(item.ast, settings_key("C"))]
    monkeypatch.setenv("NOOPT", "1")
    np.testing.assert_array_equal((x * 3).numpy(), expected)
    plain = Device["C"].programs[(item.ast, settings_key("C"))]  # lowered anew under NOOPT=1
    assert optimized.runs >= 1 and plain.runs >= 1
    assert optimized.opts != [] and plain.opts == []
    assert lower("C", item.ast) is plain
