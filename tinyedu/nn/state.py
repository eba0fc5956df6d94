"""A model's tensors by name, and the safetensors file format to keep them in.

`get_state_dict(model)` walks the model's attributes and names every Tensor it finds the way
PyTorch does ("conv1.weight", "layers.0.bias", "bn.running_mean"), so a state dict moves between
tinyedu and PyTorch unchanged. `load_state_dict` writes values into the model's tensors in place
(with `assign`), after checking that the names and shapes match.

Files are safetensors (https://github.com/huggingface/safetensors), the format PyTorch models are
shared in today, chosen because it is only data: an 8-byte little-endian header length N, N bytes
of JSON that give each tensor's dtype, shape and byte range, then the bytes. Loading it can never
run code (unlike pickle, which tinyedu never uses), and the reader checks every number in the
header against the file before it touches the data, so a hostile or damaged file is an error, not
a crash or a read past the end.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

from tinyedu.core.dtype import DType, dtypes, from_storage, to_storage
from tinyedu.tensor import Tensor


# --8<-- [start:state-dict]
def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from `obj` through attributes, lists, tuples and dicts, by dotted name.

    Parameters and buffers (BatchNorm's running statistics) alike; a tensor reachable twice is listed
    under the first name found.
    """
    found: dict[str, Tensor] = {}
    seen: set[int] = set()  # tensors and containers already visited (shared weights, cycles)

    def walk(x: Any, name: str) -> None:
        if id(x) in seen:
            return
        if isinstance(x, Tensor):
            seen.add(id(x))
            found[name] = x
            return
        if isinstance(x, (list, tuple)):
            children = ((str(i), v) for i, v in enumerate(x))
        elif isinstance(x, dict):
            children = ((str(k), v) for k, v in x.items())
        elif hasattr(x, "__dict__") and not isinstance(x, type):
            children = vars(x).items()
        else:
            return
        seen.add(id(x))
        for key, value in children:
            walk(value, f"{name}.{key}" if name else key)

    walk(obj, prefix.rstrip("."))
    return found


def get_parameters(obj: Any) -> list[Tensor]:
    """The trainable tensors of `obj` (those with requires_grad), in state-dict order: what an optimizer
    updates. Buffers such as running statistics are in the state dict but not here."""
    return [t for t in get_state_dict(obj).values() if t.requires_grad]


def load_state_dict(obj: Any, state_dict: dict[str, Any], strict: bool = True) -> None:
    """Write each value of `state_dict` into the tensor of `obj` with that name, in place.

    Names must match exactly (strict=False ignores missing and extra names), and shapes always;
    values are cast to the model tensor's dtype and moved to its device, as PyTorch's copy does.
    """
    own = get_state_dict(obj)
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    if strict and (missing or unexpected):
        raise KeyError(f"load_state_dict: the names do not match; missing from the state dict: "
                       f"{missing or 'none'}; not in the model: {unexpected or 'none'} (pass strict=False to "
                       "load only the names they share)")
    targets, values = [], []
    for name, target in own.items():
        if name not in state_dict:
            continue
        value = state_dict[name]
        value = value if isinstance(value, Tensor) else Tensor(np.asarray(value))
        if value.shape != target.shape:
            raise ValueError(f"load_state_dict: {name} has shape {value.shape} in the state dict but "
                             f"{target.shape} in the model")
        targets.append(target)
        values.append(value.to(target.device).cast(target.dtype).detach())
    Tensor.assign_all(targets, values)
# --8<-- [end:state-dict]


# ---- safetensors ----
# --8<-- [start:dtypes]
# Every dtype a safetensors file may hold (but the 8-bit floats), by its safetensors name: tinyedu
# has them all, so a tensor loads with the dtype it was saved with.
NATIVE = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "I16": dtypes.int16,
          "I32": dtypes.int32, "I64": dtypes.int64, "U16": dtypes.uint16, "U32": dtypes.uint32,
          "U64": dtypes.uint64, "F16": dtypes.float16, "BF16": dtypes.bfloat16, "F32": dtypes.float32,
          "F64": dtypes.float64}
ITEMSIZE = {kind: dtype.itemsize for kind, dtype in NATIVE.items()}
# --8<-- [end:dtypes]
MAX_HEADER = 100_000_000  # what the reference implementation accepts; a larger claim is a damaged file


class SafetensorsError(ValueError):
    """A file that is not a valid safetensors file (the message says what is wrong and where)."""


def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike,
              metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` (a state dict) to a safetensors file."""
    if not isinstance(tensors, dict) or not all(isinstance(k, str) and isinstance(v, Tensor)
                                                for k, v in tensors.items()):
        raise TypeError("safe_save: expected a dict of names (str) to Tensors, e.g. get_state_dict(model)")
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str)
                                        for k, v in metadata.items()):
        raise TypeError("safe_save: metadata must map str to str (the format allows nothing else)")
    names = {dt: name for name, dt in NATIVE.items()}
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    chunks, offset = [], 0
    for name, tensor in tensors.items():
        if name == "__metadata__":
            raise ValueError("safe_save: '__metadata__' is reserved by the format; rename that tensor")
        data = np.ascontiguousarray(to_storage(tensor.numpy(), tensor.dtype), dtype=_le(tensor.dtype))
        chunks.append(data.tobytes())
        header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(chunks[-1])]}
        offset += len(chunks[-1])
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # pad with spaces so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


# --8<-- [start:safe-load]
def safe_load(path: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """Read a safetensors file into Tensors, checking the header against the file first."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise SafetensorsError(f"safe_load: {path} has {size} bytes; a safetensors file starts with an "
                                   "8-byte header length")
        (header_len,) = struct.unpack("<Q", f.read(8))
        if header_len > min(MAX_HEADER, size - 8):
            raise SafetensorsError(f"safe_load: {path}: the header claims {header_len} bytes but the file "
                                   f"has {size - 8} after the length (limit {MAX_HEADER}); truncated or not "
                                   "safetensors")
        header = _parse_header(f.read(header_len), path)
        data_len = size - 8 - header_len
        entries = _check_entries(header, data_len, path)
        data = f.read(data_len)
    out = {}
    for name, (kind, shape, begin, end) in entries.items():
        values = _decode(data[begin:end], kind, shape, name, path)
        out[name] = Tensor(values, device=device, dtype=NATIVE[kind])
    return out
# --8<-- [end:safe-load]


def _parse_header(raw: bytes, path: Any) -> dict[str, Any]:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise SafetensorsError(f"safe_load: {path}: the header names a tensor twice")
        return dict(pairs)

    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
    except RecursionError:  # a valid header is 3 levels deep: {name: {"shape": [...]}}
        raise SafetensorsError(f"safe_load: {path}: the header nests JSON arrays or objects too deeply "
                               "to read; a safetensors header is 3 levels deep") from None
    except ValueError as e:  # (invalid UTF-8 or JSON, or an int with more digits than Python converts)
        raise SafetensorsError(f"safe_load: {path}: the header is not valid UTF-8 JSON ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"safe_load: {path}: the header must be a JSON object, got "
                               f"{type(header).__name__}")
    return header


def _check_entries(header: dict[str, Any], data_len: int, path: Any) -> dict[str, tuple]:
    """Each tensor's (dtype, shape, begin, end), after checking them against each other and the file:
    known dtype, non-negative int shape, byte range inside the data, of the right size, and the ranges
    tiling the data exactly (no overlaps, no holes), as the reference implementation requires."""
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        raise SafetensorsError(f"safe_load: {path}: __metadata__ must map strings to strings")
    entries = {}
    for name, info in header.items():
        where = f"safe_load: {path}: tensor {name!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"{where}: expected exactly the keys dtype, shape and data_offsets, got "
                                   f"{info!r}")
        kind, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if kind not in ITEMSIZE:
            known = ", ".join(sorted(ITEMSIZE))
            raise SafetensorsError(f"{where}: unknown or unsupported dtype {kind!r}; tinyedu reads {known}")
        if not isinstance(shape, list) or not all(_is_count(s) for s in shape):
            raise SafetensorsError(f"{where}: shape must be a list of non-negative ints, got {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)):
            raise SafetensorsError(f"{where}: data_offsets must be [begin, end] with ints >= 0, got "
                                   f"{offsets!r}")
        begin, end = offsets
        if not begin <= end <= data_len:
            raise SafetensorsError(f"{where}: bytes {begin}..{end} are outside the data ({data_len} bytes); "
                                   "the file is truncated or the header is wrong")
        expected = int(np.prod(shape, dtype=object)) * ITEMSIZE[kind]
        if end - begin != expected:
            raise SafetensorsError(f"{where}: shape {shape} of {kind} needs {expected} bytes but "
                                   f"data_offsets give {end - begin}")
        entries[name] = (kind, tuple(shape), begin, end)
    position = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda e: (e[1][2], e[1][3])):
        if begin != position:
            problem = "overlaps the one before" if begin < position else \
                f"leaves a hole of {begin - position} bytes"
            raise SafetensorsError(f"safe_load: {path}: tensor {name!r} (bytes {begin}..{end}) {problem}")
        position = end
    if position != data_len:
        raise SafetensorsError(f"safe_load: {path}: the tensors cover {position} bytes of data but the file "
                               f"has {data_len} after the header")
    return entries


def _decode(raw: bytes, kind: str, shape: tuple[int, ...], name: str, path: Any) -> np.ndarray:
    """The values of one tensor (little-endian in the file); bfloat16's as float32, as Tensor.numpy()."""
    array = np.frombuffer(raw, dtype=_le(NATIVE[kind]))
    if kind == "BOOL" and array.size and np.frombuffer(raw, dtype=np.uint8).max() > 1:
        raise SafetensorsError(f"safe_load: {path}: tensor {name!r} is BOOL but holds bytes other than 0 "
                               "and 1")
    array = array.astype(array.dtype.newbyteorder("="))
    return from_storage(array, NATIVE[kind]).reshape(shape)


def _le(dtype: DType) -> np.dtype:
    return np.dtype(dtype.np).newbyteorder("<")


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load",
           "SafetensorsError"]
