"""Chapter 11 (exporting a model to C): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

from tinyedu.exercises.registry import Mistake
from tinyedu.export import memory, program

# --8<-- [start:place_buffers]
place_buffers = memory.place_buffers
# --8<-- [end:place_buffers]


# --8<-- [start:buffer_lifetimes]
buffer_lifetimes = program.buffer_lifetimes
# --8<-- [end:buffer_lifetimes]


def _all_at_zero(buffers: dict) -> dict:
    return {key: 0 for key in buffers}


def _one_each(buffers: dict) -> dict:
    offsets, offset = {}, 0
    for key, (_, nbytes) in buffers.items():
        offsets[key] = offset
        offset += -(-nbytes // 64) * 64
    return offsets


def _unaligned(buffers: dict) -> dict:
    offsets, offset = {}, 0
    for key, (_, nbytes) in buffers.items():
        offsets[key] = offset
        offset += nbytes
    return offsets


def _touching_is_free(buffers: dict) -> dict:
    """Treats a buffer whose last reader writes the next one as already free."""
    placed: dict = {}
    for key in sorted(buffers, key=lambda k: -buffers[k][1]):
        (first, last), nbytes = buffers[key]
        in_the_way = sorted((p for p in placed.values() if p[2] < last and first < p[3]), key=lambda p: p[0])
        offset = 0
        for other_offset, other_bytes, _, _ in in_the_way:
            if offset + nbytes <= other_offset:
                break
            offset = max(offset, -(-(other_offset + other_bytes) // 64) * 64)
        placed[key] = (offset, nbytes, first, last)
    return {key: p[0] for key, p in placed.items()}


def _lifetimes_with_everything(calls: list) -> dict:
    spans: dict = {}
    for k, call in enumerate(calls):
        for b in call.buffers:
            spans[b] = (spans.get(b, (k, k))[0], k)
    return spans


def _lifetimes_writes_only(calls: list) -> dict:
    return {call.buffers[0]: (k, k) for k, call in enumerate(calls) if call.buffers[0].role == "scratch"}


def _lifetimes_first_read(calls: list) -> dict:
    spans: dict = {}
    for k, call in enumerate(calls):
        for b in call.buffers[1:]:
            if b.role == "scratch" and b not in spans:
                spans[b] = (k, k)
    return spans


def _lifetimes_until_first_reader(calls: list) -> dict:
    """Ends a buffer's life at the first call that reads it, not the last."""
    spans: dict = {}
    for k, call in enumerate(calls):
        for position, b in enumerate(call.buffers):
            if b.role == "scratch" and (position == 0 or spans[b][0] == spans[b][1]):
                spans[b] = (spans.get(b, (k, k))[0], k)
    return spans


MISTAKES = [
    Mistake("11.place_buffers", _all_at_zero, "are both alive at call"),
    Mistake("11.place_buffers", _one_each, "as much as one buffer per kernel"),
    Mistake("11.place_buffers", _unaligned, "a multiple of 64"),
    Mistake("11.place_buffers", _touching_is_free, "one is read by the call that writes the other"),
    Mistake("11.place_buffers", lambda buffers: list(buffers), "return a dict with an offset for every key"),
    Mistake("11.buffer_lifetimes", _lifetimes_with_everything, "only the intermediate buffers"),
    Mistake("11.buffer_lifetimes", _lifetimes_writes_only, "stays alive until the last call that reads it"),
    Mistake("11.buffer_lifetimes", _lifetimes_first_read, "the first call is the one that writes the buffer"),
    Mistake("11.buffer_lifetimes", _lifetimes_until_first_reader, "the last one that lists the buffer"),
]
