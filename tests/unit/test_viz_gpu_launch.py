"""Stage 7 drawing: the grid / workgroup / thread picture of a launch, from its LaunchDims alone."""

from __future__ import annotations

import re

import pytest

from tinyedu.launch import LaunchDims
from tinyedu.viz.gpu_launch import draw_launch, launch_summary


def test_summary_counts_workgroups_and_threads():
    assert launch_summary(LaunchDims((16, 4, 1), (16, 16, 1))) == \
        "grid of 16 x 4 workgroups (64), 16 x 16 threads in each (256): 16384 threads"
    assert launch_summary(LaunchDims((64, 1, 1), (16, 1, 1))) == \
        "grid of 64 workgroups (64), 16 threads in each (16): 1024 threads"
    assert launch_summary(LaunchDims((1, 1, 1), (1, 1, 1))) == \
        "grid of 1 workgroups (1), 1 threads in each (1): 1 threads"


def test_small_launch_draws_every_workgroup_and_thread():
    source = draw_launch(LaunchDims((2, 2, 1), (3, 2, 1))).source
    assert source.count("workgroup (") == 4
    for gx in range(2):
        for gy in range(2):
            assert f"workgroup ({gx}, {gy}, 0)" in source
    cells = re.findall(r"<TD>(\d),(\d)</TD>", source)
    assert len(cells) == 4 * 3 * 2 and set(cells) == {(str(x), str(y)) for x in range(3) for y in range(2)}
    assert "…" not in source


def test_large_launch_is_cut_with_an_ellipsis_and_is_deterministic():
    launch = LaunchDims((16, 4, 1), (16, 16, 1))
    source = draw_launch(launch, max_groups=3, max_threads=4).source
    assert source == draw_launch(launch, max_groups=3, max_threads=4).source
    assert "workgroup (1, 1, 0)" in source and "workgroup (2, 0, 0)" not in source and "…" in source
    assert "<TD>2,2</TD>" in source and "<TD>3,0</TD>" not in source
    assert "16384 threads" in source


def test_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="expected LaunchDims .* a CPU kernel has none"):
        draw_launch(None)
    with pytest.raises(ValueError, match="max_groups and max_threads must be >= 2"):
        draw_launch(LaunchDims((2, 1, 1), (2, 1, 1)), max_threads=1)
