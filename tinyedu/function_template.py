"""Formula templates: the lazy graph of a unary formula, recorded once and replayed with new input.

`x.exp()` is a formula of about 25 primitives (tinyedu/expr.py), and building it asks Python for
every one of them: an Expr, its constants, the checks of `LazyBuffer.e` (shapes, dtype, half
floats, constant folding), the node itself. A training step builds the same formula on an input of
the same dtype and shape every step, and gets the same graph each time, only with a new input at
the bottom. So the graph is recorded the first time (`record`: the nodes between the input and the
result, each as its op, dtype, tracker and argument, and which earlier node or which constant it
reads) and replayed after that (`replay`): one `LazyBuffer.create` (or `_view`) per recorded node,
with the same arguments the formula gave it, so the nodes are deduplicated exactly as when the
formula runs (`f(x) + f(x)` still computes f(x) once).

A template is keyed by everything the formula's Python looks at: the Function, its parameters,
the input's dtype, device and tracker (and its base's tracker when it is a view: movement ops
answer differently then), and whether the input is a constant (then `e` folds, so no template).
Constants the formula reads are kept by the template; if one was given memory since (assign may
store into it, see LazyBuffer.full), the template is recorded again. A formula that reads
anything else that the input does not depend on is never templated.

Only Functions that say so use it (`UnaryFunction.template = True`): their `value` must be a pure
formula of x and the parameters, keeping nothing on `self` that `backward` reads.
"""

from __future__ import annotations

from typing import Any, Callable

from tinyedu.core.ops import LoadOps, const_key
from tinyedu.lazy import LazyBuffer

MAX_TEMPLATES = 512  # (a session with many shapes starts over instead of growing)


class Template:
    """The recorded steps of one formula. Value 0 is the input, then come the constants it reads
    (`leaves`), then one value per step (`steps`); `outputs` says which values the formula returns."""

    __slots__ = ("leaves", "steps", "outputs")

    def __init__(self, leaves: tuple[LazyBuffer, ...], steps: tuple[tuple, ...], outputs: tuple[int, ...]):
        self.leaves, self.steps, self.outputs = leaves, steps, outputs

    def usable(self) -> bool:
        """No constant was given memory since it was recorded (see the module docstring)."""
        return all((leaf._base or leaf).realized is None for leaf in self.leaves)


def record(x: LazyBuffer, outs: tuple[LazyBuffer, ...]) -> Template | None:
    """The steps from x to outs, or None if the graph reads a node that is neither x, a node made
    from x, nor a constant (or if an output does not depend on x at all)."""
    depends: dict[int, bool] = {id(x): True}
    order: list[LazyBuffer] = []

    def visit(node: LazyBuffer) -> bool:  # whether node depends on x (and then, its place in `order`)
        known = depends.get(id(node))
        if known is not None:
            return known
        if node._base is not None:
            parents: tuple[LazyBuffer, ...] = (node._base,)
        else:  # (a buffer in memory is a leaf)
            parents = () if node.realized is not None else node.srcs
        found = False
        for parent in parents:
            found = visit(parent) or found
        depends[id(node)] = found
        if found:
            order.append(node)
        return found

    if not all([visit(out) for out in outs]) or any(node.device != x.device for node in order):
        return None  # (replay makes every node on the input's device)
    leaves: list[LazyBuffer] = []
    for node in order:  # what the nodes read that x does not make: constants only
        for parent in (node._base,) if node._base is not None else node.srcs:
            if not depends[id(parent)] and all(parent is not leaf for leaf in leaves):
                base = parent._base or parent
                if base.op is not LoadOps.CONST or base.realized is not None:
                    return None
                leaves.append(parent)
    slots = {id(node): i for i, node in enumerate([x, *leaves, *order])}
    steps = tuple(("view", slots[id(node._base)], node.st) if node._base is not None else
                  ("base", tuple(slots[id(src)] for src in node.srcs), node.st, node.dtype, node.op, node.arg)
                  for node in order)
    return Template(tuple(leaves), steps, tuple(slots[id(out)] for out in outs))


def replay(template: Template, x: LazyBuffer) -> tuple[LazyBuffer, ...]:
    """The recorded graph on the input x (whose dtype, device and trackers are the recorded ones)."""
    values: list[LazyBuffer] = [x, *template.leaves]
    device, create = x.device, LazyBuffer.create
    for step in template.steps:
        if step[0] == "base":
            _, srcs, st, dtype, op, arg = step
            values.append(create(device, st, dtype, op, arg, tuple([values[s] for s in srcs])))
        else:
            values.append(values[step[1]]._view(step[2]))
    return tuple([values[i] for i in template.outputs])


_TEMPLATES: dict[tuple, Template | None] = {}


def templated(formula: Any, params: dict[str, Any], x: LazyBuffer,
              build: Callable[[LazyBuffer], tuple[LazyBuffer, ...]]) -> tuple[LazyBuffer, ...]:
    """build(x) (a tuple of the formula's results), replayed from a template when one was recorded
    for this formula, these parameters and this kind of input (see the module docstring), else
    built, and recorded for the next time."""
    if type(x) is not LazyBuffer or (x._base or x).op is LoadOps.CONST:  # (several devices; a constant folds)
        return build(x)
    base = x._base or x
    try:
        key = (formula, tuple((k, const_key(v)) for k, v in sorted(params.items())), x.dtype, x.device,
               x.st, None if x._base is None else base.st)
        hash(key)
    except TypeError:  # a parameter that is not a number: built every time
        return build(x)
    template = _TEMPLATES.get(key)
    if template is not None and template.usable():
        return replay(template, x)
    outs = build(x)
    if key not in _TEMPLATES or template is not None:  # (a None entry: this formula cannot be templated)
        if len(_TEMPLATES) >= MAX_TEMPLATES:
            _TEMPLATES.clear()
        _TEMPLATES[key] = record(x, outs)
    return outs


def clear() -> None:
    """Forget every template (tests use it to build formulas from scratch)."""
    _TEMPLATES.clear()
