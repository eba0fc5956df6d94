"""The core of tinyedu: one computation from Tensor to a C kernel and back, in files you can read
in one sitting. Read them in this order:

    helpers.py    prod, the one graph walk (postorder), DEBUG
    dtype.py      DType, PyTorch's promotion rules
    shape.py      View and ShapeTracker: movement ops as index arithmetic
    ops.py        the primitive ops, and LazyOp, the kernel AST
    lazy.py       LazyBuffer: the lazy graph
    function.py   one differentiable Function per primitive op
    tensor.py     Tensor: PyTorch's API and autograd, over the lazy graph
    nn.py         Linear, SGD, Adam
    schedule.py   the graph cut into kernels: which values get memory (a Scheduler with seams)
    uops.py       UOps, the flat instructions a kernel becomes
    linearizer.py a kernel AST to UOps: loops, loads, a reduce, a store
    renderer.py   the seam a backend fills in: one method per kind of UOp
    cstyle.py     the C renderer
    device.py     memory, compiling and loading: the C device
    interpreter.py the PYTHON device: UOps run one at a time, nothing compiled
    realize.py    the engine: schedule, lower, run
    errors.py     the error classes

The rest of tinyedu is the full library. It builds on this folder where the two agree (the shared
files, View and ShapeTracker, LazyBuffer and its engine seam, the Function and Renderer base
classes, the device Registry, the Tensor, Linear and the Optimizer, the Scheduler, the Kernel, the
Linearizer's skeleton, the C renderer, the Interpreter) and runs its own, larger realizer and
devices; tinyedu/README.md and the site's "Read the core" list which seam each part plugs into.

This package uses only relative imports, so it also works copied on its own.
"""

__all__ = ["Tensor", "Linear", "SGD", "Adam"]


def __getattr__(name: str) -> object:
    """`from tinyedu.core import Tensor` loads the whole core: the Tensor, the engine (realize.py
    installs it in `LazyBuffer.engine`) and both devices. Importing one module of the core, as the full
    library does (`tinyedu.core.helpers`), loads only that module and what it imports."""
    if name not in __all__:
        raise AttributeError(f"module 'tinyedu.core' has no attribute {name!r}")
    from . import interpreter, realize  # noqa: F401 - they register the PYTHON device and the engine
    from .nn import SGD, Adam, Linear
    from .tensor import Tensor
    return {"Tensor": Tensor, "Linear": Linear, "SGD": SGD, "Adam": Adam}[name]
