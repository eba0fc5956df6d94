"""State dicts and safetensors files: round trips, interoperability with the reference `safetensors`
package (both directions), and hostile or damaged files, which must give a clear error and never
read past the file."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor, dtypes
from tinyedu.nn import BatchNorm2d, Conv2d, Linear
from tinyedu.nn.state import SafetensorsError, get_state_dict, load_state_dict, safe_load, safe_save

safetensors_numpy = pytest.importorskip("safetensors.numpy")


class Net:
    def __init__(self) -> None:
        self.conv = Conv2d(1, 2, 3)
        self.bn = BatchNorm2d(2)
        self.head = [Linear(8, 3)]


def _tensors() -> dict[str, Tensor]:
    return {"weight": Tensor(np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5),
            "index": Tensor(np.array([-2, 0, 2**31 - 1], dtype=np.int32)),
            "pixels": Tensor(np.array([[0, 255], [7, 128]], dtype=np.uint8)),
            "mask": Tensor(np.array([True, False, True])),
            "scalar": Tensor(np.array(3.5, dtype=np.float32)),
            "empty": Tensor(np.zeros((0, 4), dtype=np.float32))}


def test_round_trip_every_dtype(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    tensors = _tensors()
    safe_save(tensors, path, metadata={"format": "np", "note": "tinyedu"})
    loaded = safe_load(path)
    assert list(loaded) == list(tensors)
    for name, t in tensors.items():
        assert loaded[name].dtype == t.dtype and loaded[name].shape == t.shape, name
        np.testing.assert_array_equal(loaded[name].numpy(), t.numpy())
    assert (8 + struct.unpack("<Q", path.read_bytes()[:8])[0]) % 8 == 0  # data starts 8-byte aligned


def test_files_we_write_load_in_the_reference_reader(tmp_path: Path) -> None:
    path = tmp_path / "ours.safetensors"
    safe_save(_tensors(), path, metadata={"who": "tinyedu"})
    theirs = safetensors_numpy.load_file(str(path))
    for name, t in _tensors().items():
        np.testing.assert_array_equal(theirs[name], t.numpy())
        assert theirs[name].dtype == t.numpy().dtype
    from safetensors import safe_open
    with safe_open(str(path), framework="np") as f:
        assert f.metadata() == {"who": "tinyedu"}


def test_files_the_reference_writer_makes_load_here(tmp_path: Path) -> None:
    path = tmp_path / "theirs.safetensors"
    arrays = {"a": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
              "b": np.array([1, 2], dtype=np.int32),
              "c": np.array([3], dtype=np.uint8), "d": np.array([False, True])}
    safetensors_numpy.save_file(arrays, str(path))
    loaded = safe_load(path)
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name].numpy(), array)


def test_wide_dtypes_load_with_their_dtype(tmp_path: Path) -> None:
    """Files written by PyTorch keep their dtypes (every dtype: tests/test_dtypes.py)."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    path = tmp_path / "wide.safetensors"
    save_file({"half": torch.tensor([1.5, -2.25, 65504.0], dtype=torch.float16),
               "brain": torch.tensor([1.0, -3.5, 1e30], dtype=torch.bfloat16),
               "double": torch.tensor([0.1, 1e-3], dtype=torch.float64),
               "long": torch.tensor([-5, 2**40], dtype=torch.int64),
               "short": torch.tensor([-300, 300], dtype=torch.int16)}, str(path))
    loaded = safe_load(path)
    np.testing.assert_array_equal(loaded["half"].numpy(), np.array([1.5, -2.25, 65504.0], np.float16))
    assert loaded["brain"].dtype == dtypes.bfloat16
    np.testing.assert_array_equal(loaded["brain"].numpy(),
                                  torch.tensor([1.0, -3.5, 1e30], dtype=torch.bfloat16).float().numpy())
    np.testing.assert_array_equal(loaded["double"].numpy(), np.array([0.1, 1e-3], dtype=np.float64))
    assert loaded["long"].dtype == dtypes.int64 and loaded["long"].tolist() == [-5, 2**40]
    assert loaded["short"].dtype == dtypes.int16 and loaded["short"].tolist() == [-300, 300]


def test_model_state_round_trips_through_a_file_and_torch(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    Tensor.manual_seed(0)
    net, other = Net(), Net()
    with Tensor.train():
        net.bn(Tensor(np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32)))
    path = tmp_path / "net.safetensors"
    safe_save(get_state_dict(net), path)
    load_state_dict(other, safe_load(path))
    for (name, a), b in zip(get_state_dict(net).items(), get_state_dict(other).values(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    # the same file as a torch state dict (num_batches_tracked is int64 in torch, int32 here)
    from safetensors.torch import load_file, save_file
    state = load_file(str(path))
    assert state["bn.running_mean"].shape == (2,) and state["head.0.weight"].shape == (3, 8)
    state["bn.num_batches_tracked"] = state["bn.num_batches_tracked"].long()
    save_file(state, str(path))
    load_state_dict(other, safe_load(path))
    assert other.bn.num_batches_tracked.item() == 1


def test_load_state_dict_checks_names_and_shapes() -> None:
    net = Net()
    state = {k: Tensor(t.numpy()) for k, t in get_state_dict(net).items()}
    with pytest.raises(KeyError, match=r"missing from the state dict: \['bn.bias'\]"):
        load_state_dict(net, {k: v for k, v in state.items() if k != "bn.bias"})
    with pytest.raises(KeyError, match=r"not in the model: \['extra'\]"):
        load_state_dict(net, {**state, "extra": Tensor([1.0])})
    with pytest.raises(ValueError, match=r"head.0.bias has shape \(4,\) in the state dict but \(3,\)"):
        load_state_dict(net, {**state, "head.0.bias": Tensor.zeros(4)})
    before = net.conv.weight.numpy()
    load_state_dict(net, {"conv.weight": Tensor.zeros(2, 1, 3, 3)}, strict=False)  # only the shared names
    assert not net.conv.weight.numpy().any() and before.any()


def _write(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)
    return path


GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}


@pytest.mark.parametrize("header, data, length, match", [
    (GOOD, b"\0" * 8, 10**12, "header claims 1000000000000 bytes"),              # header length past EOF
    (GOOD, b"\0" * 8, 2**64 - 1, "header claims"),                                # absurd length
    (b"\xff\xfe{", b"", None, "not valid UTF-8 JSON"),
    (b"{not json", b"", None, "not valid UTF-8 JSON"),
    (b"[1, 2]", b"", None, "must be a JSON object"),
    (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {}}', b"\0" * 4, None, "twice"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 80]}}, b"\0" * 8, None, "outside the data"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 0]}}, b"\0" * 8, None, "outside the data"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "needs 12 bytes"),
    ({"a": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "unknown or unsupported"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "non-negative ints"),
    ({"a": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}, b"\0" * 8, None, "non-negative ints"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}, b"\0" * 8, None, "data_offsets must be"),
    ({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, None, "expected exactly the keys"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, None, "overlaps"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, None, "hole of 4 bytes"),
    (GOOD, b"\0" * 12, None, "cover 8 bytes of data but the file has 12"),        # trailing bytes
    (GOOD, b"\0" * 5, None, "outside the data"),                                  # truncated data
    ({**GOOD, "__metadata__": {"k": 1}}, b"\0" * 8, None, "__metadata__ must map strings"),
    ({"m": {"dtype": "BOOL", "shape": [1], "data_offsets": [0, 1]}}, b"\x07", None, "other than 0 and 1"),
    ({"a": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, b"\0" * 8, None, "needs"),
    (b"[" * 100_000 + b"]" * 100_000, b"", None, "nests JSON arrays or objects too deeply"),
    (b'{"a": ' * 50_000 + b"1" + b"}" * 50_000, b"", None, "nests JSON arrays or objects too deeply"),
    (b'{"a": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 8]}}', b"\0" * 8, None,
     "not valid UTF-8 JSON"),                                                     # an int too long to convert
    ({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, b"\0" * 8, None, "non-negative ints"),
    (b'{"a": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 8]}}', b"\0" * 8, None, "non-negative"),
    ({"a": {"dtype": "F32", "shape": [True, 2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "non-negative"),
])
def test_malformed_files_give_clear_errors(tmp_path: Path, header, data, length, match) -> None:
    path = _write(tmp_path / "bad.safetensors", header, data, length)
    with pytest.raises(SafetensorsError, match=match):
        safe_load(path)


def test_short_files(tmp_path: Path) -> None:
    for raw in (b"", b"\x01\x02"):
        (tmp_path / "short").write_bytes(raw)
        with pytest.raises(SafetensorsError, match="8-byte header length"):
            safe_load(tmp_path / "short")
    truncated = tmp_path / "t.safetensors"
    safe_save({"w": Tensor.ones(100)}, truncated)
    truncated.write_bytes(truncated.read_bytes()[:-1])
    with pytest.raises(SafetensorsError, match="outside the data"):
        safe_load(truncated)


def test_a_pickle_is_data_not_code(tmp_path: Path) -> None:
    """A torch .pt (pickle) file is refused as a bad header; nothing in it is run."""
    import pickle
    marker = tmp_path / "ran"
    payload = pickle.dumps(type("Evil", (), {"__reduce__": lambda self: (marker.touch, ())})())
    (tmp_path / "model.pt").write_bytes(payload)
    with pytest.raises(SafetensorsError):
        safe_load(tmp_path / "model.pt")
    assert not marker.exists()


def test_safe_save_checks_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="dict of names"):
        safe_save([Tensor.ones(2)], tmp_path / "x")
    with pytest.raises(TypeError, match="metadata must map str to str"):
        safe_save({"a": Tensor.ones(2)}, tmp_path / "x", metadata={"n": 1})
    with pytest.raises(ValueError, match="reserved"):
        safe_save({"__metadata__": Tensor.ones(2)}, tmp_path / "x")
