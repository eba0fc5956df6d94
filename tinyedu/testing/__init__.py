"""Exercises and checks: the framework every chapter's exercises use, gradient checks, checkers.

In a notebook: write your answer in the cell marked `# exercise: <name>`, then run
`check("<name>", answer)` below it. It prints "correct", "not done yet" (a stub) or "not yet right"
with a hint (never the answer). From the command line, `make check-exercises` checks the same
answer cells. How to add an exercise: tinyedu/testing/README.md.
"""

from tinyedu.testing.chapter00 import (
    MANUAL_BACKPROP_INPUTS,
    check_exercise_custom_op,
    check_exercise_repeated_backward,
    check_exercise_sigmoid_grad,
    check_manual_backprop,
    check_tanh,
    check_topological_order,
)
from tinyedu.testing.exercise import (
    CORRECT,
    NOT_DONE,
    WRONG,
    Exercise,
    Mistake,
    Result,
    check,
    exercise,
    exercises,
    load_answers,
    run,
)
from tinyedu.testing.hooks import clear_caches, plug
from tinyedu.testing.stage0 import check_value_grads, numerical_grad
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
    "check", "run", "exercise", "exercises", "load_answers", "plug", "clear_caches", "Exercise", "Mistake",
    "Result", "CORRECT", "NOT_DONE", "WRONG",
    "numerical_grad", "check_value_grads", "check_manual_backprop", "check_exercise_sigmoid_grad",
    "check_exercise_custom_op", "check_exercise_repeated_backward", "check_tanh", "check_topological_order",
    "MANUAL_BACKPROP_INPUTS",
    "tensor_numerical_grad", "check_tensor_grads", "check_broadcast_shape", "check_mish", "check_strides",
    "check_index_expression",
    "check_kernel_count",
    "check_loop_bounds", "check_load_count", "check_c_expression", "check_compile_count", "C_TEST_VALUES",
]
