"""Settings read from the environment take effect at the next realize, although the realizer reads
them once per realize and the C device keeps one Compiler per setting (tinyedu/engine/lower.py's
settings_key, tinyedu/runtime/ops_c.py's CDevice.compiler): tests and notebooks change them while
running."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.core.helpers import SETTINGS, GlobalCounters, getenv
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


def test_the_settings_key_kept_between_realizes_follows_the_environment_and_the_limits(
        monkeypatch: pytest.MonkeyPatch):
    """Inside a realize, settings_key gives the last realize's answer again only while the
    environment and the device's limits are the ones it was computed with."""
    monkeypatch.delenv("NOOPT", raising=False)
    with SETTINGS:
        first = settings_key("C")
    with SETTINGS:
        assert settings_key("C") is first  # the environment did not change: kept
    monkeypatch.setenv("NOOPT", "1")
    with SETTINGS:
        noopt = settings_key("C")
    assert noopt[0] == "none" and first[0] != "none"
    monkeypatch.delenv("NOOPT")
    with SETTINGS:
        assert settings_key("C") is first  # (equal settings are one object)
    monkeypatch.setattr(Device["C"], "limits", ("other limits",))  # the environment as it was
    with SETTINGS:
        limited = settings_key("C")
    assert limited[3] == ("other limits",) and limited[0] == first[0]


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


def test_a_realize_reads_each_flag_once_and_the_next_realize_sees_a_change(monkeypatch: pytest.MonkeyPatch):
    """While a realize runs (`with SETTINGS:`) a flag keeps the value it had when first read; a change
    made since is seen by the next realize, and outside a realize every call reads os.environ."""
    monkeypatch.setenv("TINYEDU_TEST_FLAG", "1")
    with SETTINGS:
        assert getenv("TINYEDU_TEST_FLAG", 0) == 1
        monkeypatch.setenv("TINYEDU_TEST_FLAG", "2")
        assert getenv("TINYEDU_TEST_FLAG", 0) == 1  # kept for the rest of this realize
        with SETTINGS:  # a realize inside a realize (assign's) keeps them too
            assert getenv("TINYEDU_TEST_FLAG", 0) == 1
    assert getenv("TINYEDU_TEST_FLAG", 0) == 2  # outside a realize: read now
    with SETTINGS:
        assert getenv("TINYEDU_TEST_FLAG", 0) == 2
    monkeypatch.delenv("TINYEDU_TEST_FLAG")
    with SETTINGS:
        assert getenv("TINYEDU_TEST_FLAG", 0) == 0  # unset since: the default
    monkeypatch.setenv("TINYEDU_TEST_FLAG", "3")  # set again, and nothing else changed
    with SETTINGS:
        assert getenv("TINYEDU_TEST_FLAG", 0) == 3


def test_fusion_set_between_two_realizes_changes_the_next_schedule(monkeypatch: pytest.MonkeyPatch):
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    expected = (np.arange(12, dtype=np.float32).reshape(3, 4) * 2 + 1).sum(axis=1)
    monkeypatch.delenv("FUSION", raising=False)
    GlobalCounters.reset()
    np.testing.assert_array_equal(((x * 2 + 1).sum(axis=1)).numpy(), expected)
    fused = GlobalCounters.kernel_count
    monkeypatch.setenv("FUSION", "0")  # one kernel per op from the next realize on
    GlobalCounters.reset()
    np.testing.assert_array_equal(((x * 2 + 1).sum(axis=1)).numpy(), expected)
    assert (fused, GlobalCounters.kernel_count) == (1, 3)
    monkeypatch.delenv("FUSION")
    GlobalCounters.reset()
    np.testing.assert_array_equal(((x * 2 + 1).sum(axis=1)).numpy(), expected)
    assert GlobalCounters.kernel_count == 1


def test_another_thread_reads_the_environment_while_one_realizes(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYEDU_TEST_FLAG", "1")
    seen = []
    with SETTINGS:
        assert getenv("TINYEDU_TEST_FLAG", 0) == 1
        monkeypatch.setenv("TINYEDU_TEST_FLAG", "2")
        thread = threading.Thread(target=lambda: seen.append(getenv("TINYEDU_TEST_FLAG", 0)))
        thread.start()
        thread.join()
        assert getenv("TINYEDU_TEST_FLAG", 0) == 1
    assert seen == [2]
