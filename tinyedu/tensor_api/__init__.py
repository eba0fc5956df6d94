"""The Tensor API, grouped by kind. Each file is a mixin class that Tensor inherits from, except the two
that all of them share: base.py (TensorLike, the type of a mixin's `self`, and broadcast_shape) and
grad_mode.py (no_grad).

Tensor (tinyedu/tensor.py) lists these mixins before the core's Tensor (tinyedu/core/tensor.py), so a
method here wins over the core's of the same name; what the core already has is not repeated.
Everything here is composed from the primitive Functions that Tensor applies, so each
method is a small recipe: read one to see how, say, softmax or conv2d reduces to a handful of the primitives.
The imports go one way: tensor.py imports these files, and none of them imports tensor.py.
"""
