"""Every kernel source that random ops render, to check that a refactor leaves generated code alone.

    PYTHONPATH=$PWD .venv/bin/python scripts/kernel_sources.py OUT.c [--seed 0] [--ops 300]
    PYTHONPATH=$PWD .venv/bin/python scripts/kernel_sources.py --compare BEFORE.c AFTER.c

The first form runs `--ops` random operations (elementwise chains, broadcasts, sums and maxima over
random axes, matmuls, softmax, pads, shrinks, permutes, integer ops, long sums that come in blocks,
a convolution), with random shapes that include axes of size 1, on C, and on GPU too where OpenCL
runs (PoCL on a CPU). It writes the source of every kernel the devices render to OUT.c. Run it on
the code before and after a change, then compare the two files with the second form.

The comparison is of the multiset of sources, not their order: the engine lowers the new kernels
of a schedule on several threads (engine/lower.py), so the order in which they are rendered
varies from run to run. Set THREADS to the same number for both runs (opts depend on it).
"""

from __future__ import annotations

import argparse
import collections
from typing import Callable

import numpy as np

SEPARATOR = "\n//=====\n"


def record_sources(seed: int, count: int) -> list[str]:
    from tinyedu import Tensor
    from tinyedu.runtime import Device
    from tinyedu.runtime.device import DeviceUnavailable

    sources: list[str] = []

    def record(device: str) -> None:
        backend = Device[device]
        render = backend.renderer

        def recording(name: str, uops: list) -> str:
            source = render(name, uops)
            sources.append(f"// {device}\n{source}")
            return source
        backend.renderer = recording

    devices = ["C"]
    try:
        Device["GPU"].check_runnable()
        devices.append("GPU")
    except (DeviceUnavailable, ImportError) as missing:
        print(f"only C: {missing}")
    for device in devices:
        record(device)

    rng = np.random.default_rng(seed)

    def shape(ndim: int | None = None) -> tuple[int, ...]:
        ndim = int(rng.integers(0, 5)) if ndim is None else ndim
        return tuple(int(rng.choice([1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 33, 64])) for _ in range(ndim))

    def t(s: tuple[int, ...], device: str) -> Tensor:
        return Tensor(rng.standard_normal(s).astype(np.float32), device=device)

    def axes(s: tuple[int, ...]) -> tuple[int, ...] | None:
        if not s:
            return None
        return tuple(sorted(rng.choice(len(s), int(rng.integers(1, len(s) + 1)), replace=False).tolist()))

    def some_ndim(low: int, high: int) -> int:
        return int(rng.integers(low, high))

    ops: list[Callable[[str], Tensor]] = [
        lambda d: (t(shape(), d).exp() * 2 + 1).sqrt().log(),
        lambda d: (lambda s: t(s, d) + t(tuple(1 if rng.random() < .4 else n for n in s), d))(shape()),
        lambda d: (lambda s: t(s, d).sum(axes(s), keepdim=bool(rng.random() < .5)))(shape()),
        lambda d: (lambda s: t(s, d).max(axes(s)))(shape(some_ndim(1, 5))),
        lambda d: (lambda s: t(s, d).relu().mean(axes(s)))(shape(some_ndim(1, 5))),
        lambda d: (lambda a: a @ t((a.shape[1], int(rng.integers(1, 40))), d))(t(shape(2), d)),
        lambda d: t(shape(some_ndim(1, 4)), d).softmax(-1),
        lambda d: t(shape(3), d).permute(tuple(rng.permutation(3).tolist())).contiguous() * 3,
        lambda d: (lambda s: t(s, d).pad(tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3)))
                                               for _ in s)).sum())(shape(2)),
        lambda d: (lambda s: t(s, d)[tuple(slice(0, max(1, n // 2)) for n in s)].exp())(shape(3)),
        lambda d: (lambda s: (t(s, d) < t(s, d)).where(t(s, d), 0.5))(shape()),
        lambda d: Tensor(rng.integers(-9, 9, shape()).astype(np.int32), device=d) * 3 // 2,
        lambda d: t((int(rng.choice([4096 * 3, 70000, 100003, 300000])),), d).sum(),
        lambda d: t((int(rng.choice([3, 40])), int(rng.choice([5000, 20011]))), d).sum(-1),
        lambda d: t(shape(2), d).cumsum(-1),
        lambda d: (lambda s: t(s, d).flip(0).expand((2, *s)).contiguous())(shape(2)),
        lambda d: t((1, 2, 9, 9), d).conv2d(t((3, 2, 3, 3), d)),
        lambda d: (lambda x: (x - x.max(-1, keepdim=True)).exp().sum(-1).log())(t(shape(2), d)),
    ]
    for _ in range(count):
        op = ops[int(rng.integers(0, len(ops)))]
        for device in devices:  # the same random choices on every device
            state = rng.bit_generator.state
            op(device).realize()
            if device != devices[-1]:
                rng.bit_generator.state = state
    return sources


def compare(before: str, after: str) -> bool:
    a = collections.Counter(open(before).read().split(SEPARATOR))
    b = collections.Counter(open(after).read().split(SEPARATOR))
    print(f"{sum(a.values())} sources ({len(a)} distinct) before, {sum(b.values())} ({len(b)} distinct) "
          f"after; only before: {sum((a - b).values())}, only after: {sum((b - a).values())}")
    return a == b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        same = compare(*args.compare)
        print("the same sources" if same else "DIFFERENT sources")
        raise SystemExit(0 if same else 1)
    if not args.out:
        parser.error("give OUT.c (or --compare BEFORE AFTER)")
    sources = record_sources(args.seed, args.ops)
    with open(args.out, "w") as f:
        f.write(SEPARATOR.join(sources))
    print(f"{len(sources)} sources written to {args.out}")


if __name__ == "__main__":
    main()
