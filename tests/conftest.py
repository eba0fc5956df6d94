"""Shared pytest set-up: one marker per chapter (`pytest -m chapter3` checks your chapter-03 answers),
and which op-test cases NEON, LLVM, GPU and CUDA run (tests/test_ops.py says why and how they are
chosen)."""

from __future__ import annotations

import os

import pytest

from tinyedu.exercises import chapter_marker, exercises

# `make test` runs one pytest-xdist worker per core: if each worker's kernels also used a thread per
# core, the machine would hold twice as many busy threads as cores, and each worker's threads would
# wait for cores the other worker holds. So a worker runs kernels on one thread unless THREADS was
# set; tests about threads set their own (test_threads.py, test_long_sums.py, test_fork.py, the
# heuristics tests in test_opts.py), as do notebooks that print threaded opts (06, 07).
if os.environ.get("PYTEST_XDIST_WORKER") and "THREADS" not in os.environ:
    os.environ["THREADS"] = "1"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--every-device", action="store_true",
                     help="run every case of the op tests on NEON, LLVM, GPU and CUDA too (by default they "
                          "run the cases marked `backends`)")


def pytest_configure(config):
    for chapter in sorted({e.chapter for e in exercises()}):
        config.addinivalue_line("markers", f"{chapter_marker(chapter)}: your answers to chapter {chapter}")


def runs_on_sampled_devices(item: pytest.Item) -> bool:
    """A test without cases runs; a parametrized one runs the cases one of its `backends` markers names."""
    cases = {name: value for name, value in item.callspec.params.items() if name != "device"}
    if not cases:
        return True
    def picks(marker: pytest.Mark) -> bool:
        return all(str(cases[name]) in {str(v) for v in values} for name, values in marker.kwargs.items())

    return any(picks(marker) for marker in item.iter_markers("backends"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--every-device"):
        return
    keep, left_out = [], []
    for item in items:
        sampled = item.get_closest_marker("sampled_device") is not None
        (keep if not sampled or runs_on_sampled_devices(item) else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = keep
