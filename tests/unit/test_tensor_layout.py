"""How Tensor's parts relate: tensor.py imports the mixins, never the other way, and TensorLike (the
type of `self` in the mixins) names only what Tensor really has."""

import ast
import inspect
from pathlib import Path

import pytest

import tinyedu
from tinyedu import Tensor
from tinyedu.tensor_api import grad_mode
from tinyedu.tensor_api.base import TensorLike, broadcast_shape
from tinyedu.tensor_api.elementwise import ElementwiseMixin
from tinyedu.tensor_api.scans import ScanMixin

TENSOR_API = Path(tinyedu.__file__).parent / "tensor_api"


def _imported_modules(path: Path) -> set[str]:
    """Every module an import statement in the file names, at module level or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(TENSOR_API.glob("*.py")), ids=lambda p: p.name)
def test_no_mixin_imports_tensor(path: Path) -> None:
    assert "tinyedu.tensor" not in _imported_modules(path), f"{path.name} imports tinyedu.tensor"


def _protocol_members() -> list[str]:
    """The attributes TensorLike declares and the methods and properties it describes."""
    described = [name for name, value in vars(TensorLike).items()
                 if isinstance(value, property) or (inspect.isfunction(value) and not name.startswith("__"))]
    return list(TensorLike.__annotations__) + described


def test_tensorlike_names_only_what_tensor_has() -> None:
    t = Tensor([1.0], requires_grad=True)
    for name in _protocol_members():
        assert hasattr(t, name) or hasattr(Tensor, name), f"TensorLike.{name} is not on Tensor"


def test_tensorlike_methods_take_the_same_arguments_as_tensors() -> None:
    for name, member in vars(TensorLike).items():
        if not inspect.isfunction(member) or (name.startswith("__") and name != "__init__"):
            continue
        described = list(inspect.signature(member).parameters)
        actual = list(inspect.signature(getattr(Tensor, name)).parameters)
        assert described == actual, f"TensorLike.{name}{described} but Tensor.{name}{actual}"


def test_ops_sit_with_their_kind() -> None:
    for name in ("pow", "__pow__", "asin", "acos", "atan", "erf"):
        assert name in vars(ElementwiseMixin), f"{name} is not in elementwise.py"
    assert Tensor.pow is ElementwiseMixin.pow
    assert "cumsum" in vars(ScanMixin), "cumsum is not with the other running ops in scans.py"


def test_shared_helpers_live_below_tensor() -> None:
    assert tinyedu.no_grad is grad_mode.no_grad
    assert broadcast_shape((3, 1), (4,)) == (3, 4)
    x = Tensor([1.0], requires_grad=True)
    with tinyedu.no_grad():
        assert not grad_mode.GradMode.enabled and not (x * 2).requires_grad
    assert grad_mode.GradMode.enabled and (x * 2).requires_grad
