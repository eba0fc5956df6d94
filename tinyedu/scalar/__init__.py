"""Stage 0: scalar autograd (`Value`) and a tiny neural-network library built on it."""

from tinyedu.scalar.nn import MLP, Layer, Module, Neuron
from tinyedu.scalar.train import fit, hinge_loss
from tinyedu.scalar.value import Value

__all__ = ["Value", "Module", "Neuron", "Layer", "MLP", "hinge_loss", "fit"]
