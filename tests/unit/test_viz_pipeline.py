"""The home page's pipeline picture is drawn from the real objects of its computation."""

import numpy as np

from tinyedu.core.uops import uops_listing
from tinyedu.viz.pipeline import EXAMPLE_A, EXAMPLE_B, draw_pipeline, pipeline_figure, pipeline_stages


def dot_text(text: str) -> str:
    """How a multi-line text looks inside the DOT source of a left-justified label."""
    return text.replace("\\", "\\\\").rstrip("\n").replace("\n", "\\l")


def test_stages_are_the_real_pipeline():
    stages = pipeline_stages()
    want = np.maximum((np.array(EXAMPLE_A) * np.array(EXAMPLE_B)).sum(1), 0)
    np.testing.assert_array_equal(stages.result, want)
    assert [k.name for k in stages.kernels] == ["r_2_3"]
    assert stages.source.startswith("#include <math.h>") and "void r_2_3(" in stages.source


def test_drawing_shows_every_stage_and_is_deterministic():
    stages = pipeline_stages()
    source = draw_pipeline(stages).source
    assert dot_text(uops_listing(stages.uops)) in source          # every UOp, as listed
    assert dot_text(stages.source) in source                       # the C source, as rendered
    for label in ("ReduceOps.SUM axes=(1,)", "BufferOps.STORE", "create_schedule", "render_c",
                  "y = [5., 0.]", "cluster_lazy", "cluster_kernel0", "cluster_uops", "cluster_csource"):
        assert label in source, label
    assert draw_pipeline(pipeline_stages()).source == source


def test_figure_is_inline_svg_scaled_to_the_page():
    figure = pipeline_figure()
    assert figure.startswith('<figure class="pipeline"')
    assert '<svg class="pipeline-picture" width="100%"' in figure
    assert "r_2_3" in figure and "DEFINE_GLOBAL" in figure and "<?xml" not in figure
