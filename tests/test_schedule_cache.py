"""The schedule cache: a hit for a graph of the same structure, a miss for anything the scheduler reads.

Every hit is checked against create_schedule run on the same graph without the cache (the oracle):
the same kernels (equal ASTs), writing and reading the same nodes, stored for the same reasons.
"""

import gc
import weakref

import numpy as np
import pytest

from tinyedu import Tensor, dtypes
from tinyedu.engine import schedule
from tinyedu.engine.schedule_cache import ScheduleCache, schedules
from tinyedu.exercises.hooks import clear_caches
from tinyedu.nn import Linear
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters

RNG = np.random.default_rng(0)


def data(*shape: int, dtype=np.float32) -> Tensor:
    return Tensor(RNG.standard_normal(shape).astype(dtype)).realize()


def cached(cache: ScheduleCache, out: Tensor) -> bool:
    """Schedule `out` through `cache`; True on a hit. Checks the result against the uncached schedule."""
    hits = cache.hits
    items = cache.schedule([out.lazydata])
    expected = schedule.create_schedule([out.lazydata])
    assert len(items) == len(expected)
    for got, want in zip(items, expected, strict=True):
        assert got.ast == want.ast and got.out is want.out and got.reason == want.reason
        assert len(got.inputs) == len(want.inputs)
        assert all(a is b for a, b in zip(got.inputs, want.inputs, strict=True))
    return cache.hits > hits


def test_the_same_structure_on_other_buffers_hits():
    cache = ScheduleCache()
    a, b = data(4, 5), data(5, 3)
    assert not cached(cache, ((a @ b).relu() * 2).sum(1))
    c, d = data(4, 5), data(5, 3)
    assert cached(cache, ((c @ d).relu() * 2).sum(1))


@pytest.mark.parametrize("other", [
    lambda a, b: a * 3 + b,                         # another constant
    lambda a, b: a * 2 - b,                         # another op
    lambda a, b: a.T.reshape(4, 5) * 2 + b,         # another view
    lambda a, b: a * 2 + a,                         # one buffer read twice, not two buffers
    lambda a, b: a.cast(dtypes.float16) * 2 + b,    # another dtype inside
    lambda a, b: a.sum(1, keepdim=True) * 2 + b,    # a reduce
    lambda a, b: (a * 2).contiguous() + b,          # an explicit kernel boundary
    lambda a, b: a * 2 + (b + 1),                   # one more op
    lambda a, b: a * 2 + Tensor(np.ones((4, 5), np.float32)),  # host data not in memory yet
])
def test_a_structural_change_misses(other):
    cache = ScheduleCache()
    a, b = data(4, 5), data(4, 5)
    assert not cached(cache, a * 2 + b)
    assert not cached(cache, other(a, b))
    assert cached(cache, other(data(4, 5), data(4, 5)))


def test_shape_dtype_and_device_are_part_of_the_key():
    cache = ScheduleCache()
    assert not cached(cache, data(4, 5) * 2)
    assert not cached(cache, data(5, 4) * 2)
    assert not cached(cache, data(4, 5, dtype=np.float64) * 2)
    assert not cached(cache, Tensor(np.ones((4, 5), np.float32), device="NUMPY").realize() * 2)
    assert cached(cache, data(4, 5) * 2)


def test_a_constant_is_keyed_by_its_bits():
    """x + 0.0 is not x + (-0.0), and NaN hits itself (constants are compared as const_key does)."""
    cache = ScheduleCache()
    a = data(3)
    assert not cached(cache, (a * 0.0).exp())
    assert not cached(cache, (a * -0.0).exp())
    assert not cached(cache, (a * float("nan")).exp())
    assert cached(cache, (data(3) * float("nan")).exp())
    assert cached(cache, (data(3) * -0.0).exp())


def test_a_constant_in_memory_is_keyed_by_its_value():
    """A realized constant is still read as a literal by kernels: its value is in the key."""
    cache = ScheduleCache()
    a = data(4, 5)
    two, three = Tensor.full((4, 5), 2.0).realize(), Tensor.full((4, 5), 3.0).realize()
    assert two.lazydata.base.realized is not None and two.lazydata.is_const()
    assert not cached(cache, a * two)
    assert not cached(cache, a * three)
    assert cached(cache, data(4, 5) * three)
    np.testing.assert_array_equal((a * three).numpy(), a.numpy() * 3)


def test_which_nodes_are_outputs_is_part_of_the_key():
    cache = ScheduleCache()
    a = data(4, 5)
    hidden = a.exp()
    out = hidden.sum()
    items = cache.schedule([out.lazydata])
    both = cache.schedule([out.lazydata, hidden.lazydata])
    assert cache.hits == 0 and len(both) == len(items) + 1


def test_the_settings_the_rules_read_are_part_of_the_key(monkeypatch):
    cache = ScheduleCache()
    a = data(4, 5)
    assert not cached(cache, (a * 2).exp().sum())
    monkeypatch.setenv("FUSION", "0")
    hits = cache.hits
    assert len(cache.schedule([(a * 2).exp().sum().lazydata])) > 2 and cache.hits == hits  # one kernel per op
    monkeypatch.delenv("FUSION")
    monkeypatch.setattr(schedule, "MAX_KERNEL_DEPTH", 2)
    assert not cached(cache, (a * 2).exp().sum())
    monkeypatch.setattr(schedule, "keeps_zero", lambda op: False)
    assert not cached(cache, (a * 2).exp().sum())


def test_host_data_is_copied_from_the_new_graph():
    """A step that makes a tensor from numpy hits, and copies this step's data, not the first one's."""
    outs, hits = [], schedules.hits
    for value in (1.0, 2.0):
        x = Tensor(np.full((3, 2), value, np.float32))
        outs.append((x * 3).numpy())
    assert schedules.hits == hits + 1
    np.testing.assert_array_equal(outs[0], np.full((3, 2), 3.0))
    np.testing.assert_array_equal(outs[1], np.full((3, 2), 6.0))


def test_a_hit_keeps_no_graph_alive():
    cache = ScheduleCache()
    a = data(4, 5)
    for _ in range(2):
        out = (a * 2 + 1).sum()
        node = weakref.ref(out.lazydata.base)
        cache.schedule([out.lazydata])
        del out
        gc.collect()
        assert node() is None


def test_the_version_guard_still_runs_on_a_hit():
    """A computation planned on memory written since is refused (tests/test_assign.py), cache or not."""
    for _ in range(2):
        w = data(2)
        y = w * 3
        w.lazydata.base.realized.version += 1  # a write nobody told the graph about
        with pytest.raises(RuntimeError, match="assign has overwritten since"):
            schedules.schedule([y.lazydata])


def test_the_version_guard_checks_a_buffer_each_time_the_walk_meets_it():
    """The key's walk checks a source in memory every time it meets it, not only the first time:
    here it meets b first in a node planned after the write (fine), then in one planned before it.
    The first graph has no write and is scheduled; the second, of the same structure, is a hit, on
    which the walk is the only check (a miss is checked by the scheduler's walk too)."""
    for write in (False, True):
        b = data(2)
        stale = b * 2  # planned on b's contents now
        if write:
            b.lazydata.base.realized.version += 1  # a write nobody told the graph about
        y = (b * 3) + stale
        if not write:
            schedules.schedule([y.lazydata])
            continue
        with pytest.raises(RuntimeError, match="assign has overwritten since"):
            schedules.schedule([y.lazydata])


def test_a_source_given_memory_after_the_node_was_built_is_not_refused():
    """Only memory that was there when a node was built can have been overwritten under it."""
    for _ in range(2):  # a miss, then a hit
        a = data(2)
        later = (a + 1).contiguous()
        y = later * a
        later.realize()
        np.testing.assert_allclose(y.numpy(), (a.numpy() + 1) * a.numpy(), rtol=1e-6)


def train(steps: int) -> list[np.ndarray]:
    """A few SGD steps of a small MLP on fixed data; the weights afterwards."""
    Tensor.manual_seed(3)
    l1, l2 = Linear(12, 16), Linear(16, 4)
    opt = SGD(get_parameters([l1, l2]), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        x = Tensor(rng.standard_normal((8, 12)).astype(np.float32))
        y = Tensor(rng.integers(0, 4, 8).astype(np.int32))
        opt.zero_grad()
        l2(l1(x).relu()).cross_entropy(y).backward()
        opt.step()
    return [p.numpy() for p in get_parameters([l1, l2])]


def test_training_with_the_cache_is_bit_identical_to_without(monkeypatch):
    hits = schedules.hits
    with_cache = train(4)
    assert schedules.hits > hits  # the repeated steps were not scheduled again
    monkeypatch.setenv("SCHEDULE_CACHE", "0")
    hits = schedules.hits
    without = train(4)
    assert schedules.hits == hits
    for a, b in zip(with_cache, without, strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_argument_that_cannot_be_hashed_is_scheduled_without_the_cache():
    cache = ScheduleCache()
    a = data(3)
    out = a * 2
    out.lazydata.base.arg = [1]  # no op has such an argument today; a new one must not break the cache
    items = cache.schedule([out.lazydata])
    assert len(items) == 1 and cache.hits == cache.misses == 0


def test_plugging_a_piece_in_empties_the_cache():
    schedules.schedule([(data(4) * 2).lazydata])
    assert schedules.cache
    clear_caches()
    assert not schedules.cache


def test_the_walk_finds_the_bases_the_scheduler_runs():
    """graph_structure's walk finds exactly the unrealized bases schedule.bases_to_run lists, numbered
    in the order the walk first meets them, so that every source is numbered by the time its user's
    part of the key is written; bases_to_run is postorder's loop written out for lazy nodes."""
    from tinyedu.core.helpers import postorder
    from tinyedu.engine.schedule_cache import graph_structure

    a, b = data(4, 5), data(5, 3)
    x = (a @ b).relu()
    outs = [(x * 2).sum(1).lazydata, (x + a.sum(1, keepdim=True)[:, :1]).lazydata, x.exp().lazydata]
    structure = graph_structure(outs, True)
    order = schedule.bases_to_run(outs)
    assert len(order) > 5 and len(structure.bases) == len(order)
    assert {id(n) for n in structure.bases} == {id(n) for n in order}
    places = {id(n): k for k, n in enumerate(structure.bases)}
    places.update({id(n): -1 - k for k, n in enumerate(structure.leaves)})
    for k, node in enumerate(structure.bases):  # each part names the node's sources by their places
        assert [place for place, _ in structure.key[0][k][5]] == [places[id(src.base)] for src in node.srcs]

    def unrealized_sources(node):
        return [src.base for src in node.srcs if src.base.realized is None]
    expected = postorder([out.base for out in outs if out.base.realized is None], unrealized_sources)
    assert [id(n) for n in order] == [id(n) for n in expected]


def random_graph(seed: int, inputs: list[Tensor], changed: int | None = None) -> list[Tensor]:
    """A random graph of (5, 5) tensors over `inputs`: elementwise ops, constants, reduces broadcast
    back, transposes and kernel boundaries, each reading earlier nodes (so some are read twice), and
    one to three of its nodes as outputs. The same seed on other inputs gives the same structure;
    `changed=k` gives its sibling that differs in one place: step k makes the next kind of node, from
    the same sources (a sum for a product, a constant for another, a transpose for a reduce, ...)."""
    rng = np.random.default_rng(seed)
    nodes = list(inputs)
    steps = int(rng.integers(2, 12))
    for step in range(steps):
        kind, first, second = int(rng.integers(8)), rng.random(), rng.random()
        constant, axis = float(rng.choice([2.0, -0.0, 0.0, 1.0])), int(rng.integers(2))
        if step == changed:
            kind = (kind + 1) % 8
        x, y = nodes[int(first * len(nodes))], nodes[int(second * len(nodes))]
        nodes.append(random_node(kind, x, y, constant, axis))
    made = np.arange(len(inputs), len(nodes))
    count = int(rng.integers(1, min(3, len(made)) + 1))
    return [nodes[k] for k in rng.choice(made, size=count, replace=False)]


def random_node(kind: int, x: Tensor, y: Tensor, constant: float, axis: int) -> Tensor:
    """One of eight kinds of (5, 5) node made from x and y."""
    if kind == 0:
        return x + y
    if kind == 1:
        return x * y
    if kind == 2:
        return x * constant
    if kind == 3:
        return x.maximum(y).exp()
    if kind == 4:
        return x - x.sum(axis, keepdim=True)
    if kind == 5:
        return x.T
    if kind == 6:
        return x.contiguous()
    return x.max(axis, keepdim=True) + y


def test_random_graphs_hit_only_their_own_structure():
    """Random graphs through one cache, each with its siblings that differ in one place and built on
    one input passed twice (a buffer read twice is not two buffers): every schedule, hit or miss, is
    create_schedule's on the same graph (the oracle), so a key shared by two graphs that differ
    fails here; and each graph built again on other buffers hits."""
    cache = ScheduleCache()
    for seed in range(12):
        for changed in (None, 0, 1, 2, 3):
            for same_input in (False, True):
                for attempt in range(2):
                    a, b = data(5, 5), data(5, 5)
                    outs = [t.lazydata for t in random_graph(seed, [a, a if same_input else b], changed)]
                    hits = cache.hits
                    items = cache.schedule(outs)
                    expected = schedule.create_schedule(outs)
                    assert [(i.ast, i.out, i.inputs, i.reason) for i in items] == \
                        [(i.ast, i.out, i.inputs, i.reason) for i in expected]
                    if attempt == 1:
                        assert cache.hits == hits + 1  # the same structure again, on other buffers
    assert cache.misses > 50  # (changing a node no output reads changes nothing: that hit is checked too)


def test_equal_trackers_made_apart_get_one_number_and_hit():
    """Trackers and dtypes enter the key as numbers found by identity first; an equal tracker that is
    another object gets the same number, so the key still compares values."""
    from tinyedu.engine.schedule_cache import _number
    from tinyedu.lazy import LazyBuffer
    from tinyedu.shape import ShapeTracker

    st = ShapeTracker.from_shape((4, 5))
    twin = ShapeTracker(st.views)  # equal, and another object
    assert twin is not st and twin == st and _number(twin)[1] == _number(st)[1]
    assert _number(ShapeTracker.from_shape((5, 4)))[1] != _number(st)[1]
    cache = ScheduleCache()
    a = data(4, 5)
    assert not cached(cache, a * 2)
    node = LazyBuffer.create(a.device, twin, a.dtype, (a * 2).lazydata.op, None,
                             (a.lazydata, (a * 2).lazydata.srcs[1]))
    assert cached(cache, Tensor(node))


def test_a_full_table_of_numbers_starts_the_cache_over(monkeypatch):
    from tinyedu.engine.schedule_cache import NUMBERS

    cache = ScheduleCache()
    a = data(3, 7)
    assert not cached(cache, a * 2 + 1)
    assert cached(cache, a * 2 + 1)
    monkeypatch.setattr(type(NUMBERS), "LIMIT", len(NUMBERS.by_id) - 1)
    assert not cached(cache, a * 2 + 1) and len(cache.cache) == 1  # its old keys went with the numbers
    monkeypatch.undo()
    assert cached(cache, a * 2 + 1)
    np.testing.assert_allclose((a * 2 + 1).numpy(), a.numpy() * 2 + 1)
