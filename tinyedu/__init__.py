"""tinyedu: a deep-learning framework meant to be read.

Stage 0 is `tinyedu.scalar` (scalar autograd). Later stages add Tensor, the lazy graph, the
scheduler, the linearizer and the C/NEON backends; see DESIGN.md and the walkthrough site.
"""

from tinyedu.scalar import MLP, Layer, Neuron, Value

__all__ = ["Value", "Neuron", "Layer", "MLP"]
__version__ = "0.1.0"
