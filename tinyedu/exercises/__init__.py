"""The course's exercises: every chapter's exercises and checkers, and the framework they share.

In a notebook: write your answer in the cell marked `# exercise: <name>`, then run
`check("<name>", answer)` below it. It prints "correct", "not done yet" (a stub) or "not yet right"
with a hint (never the answer). From the command line, `make check-exercises` (`python -m
tinyedu.exercises`) checks the same answer cells.

The package: registry.py (registering and running a check), answers.py (the answer cells of the
notebooks), hooks.py (`plug`: the learner's piece in the real library), checking.py (the checks
several chapters share), gradcheck.py (finite differences), chapterNN.py (one module per notebook
`notebooks/NN_*.ipynb`), solutions/ (reference solutions and typical mistakes). How to add an
exercise: tinyedu/exercises/README.md.
"""

from tinyedu.exercises.answers import NOTEBOOKS_DIR, answer_cells, chapter_marker, load_answers, notebook_for
from tinyedu.exercises.chapter00 import (
    MANUAL_BACKPROP_INPUTS,
    check_exercise_custom_op,
    check_exercise_repeated_backward,
    check_exercise_sigmoid_grad,
    check_manual_backprop,
    check_tanh,
    check_topological_order,
)
from tinyedu.exercises.chapter01 import check_broadcast_shape, check_mish
from tinyedu.exercises.chapter02 import check_index_expression, check_strides
from tinyedu.exercises.chapter03 import check_kernel_count
from tinyedu.exercises.chapter04 import check_load_count, check_loop_bounds
from tinyedu.exercises.chapter05 import C_TEST_VALUES, check_c_expression, check_compile_count
from tinyedu.exercises.gradcheck import (
    check_tensor_grads,
    check_value_grads,
    numerical_grad,
    tensor_numerical_grad,
)
from tinyedu.exercises.hooks import clear_caches, plug
from tinyedu.exercises.registry import (
    CORRECT,
    NOT_DONE,
    WRONG,
    Exercise,
    Mistake,
    Result,
    check,
    exercise,
    exercises,
    run,
)

__all__ = [
    "check", "run", "exercise", "exercises", "load_answers", "plug", "clear_caches", "Exercise", "Mistake",
    "Result", "CORRECT", "NOT_DONE", "WRONG",
    "NOTEBOOKS_DIR", "answer_cells", "chapter_marker", "notebook_for",
    "numerical_grad", "check_value_grads", "check_manual_backprop", "check_exercise_sigmoid_grad",
    "check_exercise_custom_op", "check_exercise_repeated_backward", "check_tanh", "check_topological_order",
    "MANUAL_BACKPROP_INPUTS",
    "tensor_numerical_grad", "check_tensor_grads", "check_broadcast_shape", "check_mish", "check_strides",
    "check_index_expression",
    "check_kernel_count",
    "check_loop_bounds", "check_load_count", "check_c_expression", "check_compile_count", "C_TEST_VALUES",
]
