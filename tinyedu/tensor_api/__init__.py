"""The Tensor API, grouped by kind. Each file is a mixin class that Tensor inherits from.

Everything here is composed from the primitive Functions that tinyedu/tensor.py applies, so each
method is a small recipe: read one to see how, say, softmax or conv2d reduces to a handful of the primitives.
"""
