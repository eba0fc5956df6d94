"""tinyedu: a deep-learning framework meant to be read.

Stage 0 is `tinyedu.scalar` (scalar autograd). Stage 1 is `Tensor` (tinyedu/tensor.py) over the
lazy graph (tinyedu/lazy.py) and views (tinyedu/shape/). The map of all stages is the walkthrough
site's architecture page (docs/architecture.md; `make serve` builds the site).
"""

import tinyedu.engine  # noqa: F401 - installs the engine under the lazy graph (see tinyedu/engine/__init__.py)
import tinyedu.viz  # noqa: F401 - hooks GRAPH=1's drawings into the engine and Value's SVG into Jupyter
from tinyedu.core.dtype import dtypes
from tinyedu.jit import JitError, TinyJit
from tinyedu.runtime.device import Device
from tinyedu.scalar import MLP, Layer, Neuron, Value
from tinyedu.tensor import Tensor, count_primitives
from tinyedu.tensor_api.grad_mode import no_grad

__all__ = ["Value", "Neuron", "Layer", "MLP", "Tensor", "no_grad", "count_primitives", "dtypes", "Device",
           "TinyJit", "JitError"]
__version__ = "0.1.0"
