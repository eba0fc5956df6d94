"""Stage 2 (notebook 03): the kernel-count exercise."""

from __future__ import annotations

from typing import Any, Callable


# ================================================================================================
# stage 2: the scheduler (notebook 03) -- predict how many kernels an expression takes
# ================================================================================================
def check_kernel_count(build: Callable[[], Any], predicted: int) -> str:
    """Exercise: predict how many kernels the scheduler makes for the Tensor `build()` returns."""
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.ops import LoadOps

    if not isinstance(predicted, int) or isinstance(predicted, bool):
        raise AssertionError("predict the number of kernels as an int")
    tensor = build()
    kernels = [item for item in create_schedule([tensor.lazydata]) if not isinstance(item.ast.op, LoadOps)]
    if predicted == len(kernels):
        return f"{len(kernels)} kernel(s)."
    rules = sorted({item.reason for item in kernels if not item.reason.startswith("rule 1")})
    direction = "more" if len(kernels) > predicted else "fewer"
    hint = ("Besides the output, buffers were stored by: " + "; ".join(rules)) if rules else \
        "Only the output is stored here: everything else fuses into one kernel."
    raise AssertionError(f"not quite: the scheduler makes {direction} kernels than {predicted}. {hint}")
