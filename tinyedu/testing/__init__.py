"""Gradient checks and the checkers used by the notebooks' exercises, one module per stage.

A checker prints a short "Correct: ..." for a right answer and raises AssertionError with a hint
(what kind of answer is expected, where to look; never the answer) for a wrong one.
"""

from tinyedu.testing.stage0 import (
    EXERCISES,
    MANUAL_BACKPROP_INPUTS,
    check_exercise,
    check_exercise_custom_op,
    check_exercise_repeated_backward,
    check_exercise_sigmoid_grad,
    check_manual_backprop,
    check_value_grads,
    numerical_grad,
)
from tinyedu.testing.stage1 import (
    check_broadcast_shape,
    check_index_expression,
    check_mish,
    check_strides,
    check_tensor_grads,
    tensor_numerical_grad,
)
from tinyedu.testing.stage2 import check_kernel_count
from tinyedu.testing.stage3_4 import (
    C_TEST_VALUES,
    check_c_expression,
    check_compile_count,
    check_load_count,
    check_loop_bounds,
)

__all__ = [
    "numerical_grad", "check_value_grads", "check_manual_backprop", "check_exercise_sigmoid_grad",
    "check_exercise_custom_op", "check_exercise_repeated_backward", "check_exercise", "EXERCISES",
    "MANUAL_BACKPROP_INPUTS",
    "tensor_numerical_grad", "check_tensor_grads", "check_broadcast_shape", "check_mish", "check_strides",
    "check_index_expression",
    "check_kernel_count",
    "check_loop_bounds", "check_load_count", "check_c_expression", "check_compile_count", "C_TEST_VALUES",
]
