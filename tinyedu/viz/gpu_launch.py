"""Draw how a GPU kernel is launched: a grid of workgroups, each a block of threads (stage 7).

The picture comes from a kernel's `LaunchDims` alone (`Kernel.launch` or `launch_dims(uops)`): one
box per workgroup, labelled with its `gid` triple, and inside it one cell per thread, labelled with
its `lid` pair. Dimension 0 runs left to right (it is the one whose neighbours read neighbouring
memory), dimension 1 top to bottom. Real launches have thousands of threads; past `max_groups`
workgroups or `max_threads` threads along a dimension the drawing shows the first ones and a "…".
Node names follow the positions, so the DOT source is the same on every run.
"""

from __future__ import annotations

import graphviz

from tinyedu.core.helpers import prod
from tinyedu.launch import LaunchDims


def launch_summary(launch: LaunchDims) -> str:
    """One line: the grid, the workgroup and the total number of threads."""
    def dims(sizes: tuple[int, ...]) -> str:
        used = list(sizes[:max((d + 1 for d, s in enumerate(sizes) if s > 1), default=1)])
        return " x ".join(str(s) for s in used)
    groups, local = prod(launch.groups), prod(launch.local)
    return (f"grid of {dims(launch.groups)} workgroups ({groups}), {dims(launch.local)} threads in each "
            f"({local}): {groups * local} threads")


def _shown(size: int, most: int) -> list[int | None]:
    """The indices drawn along one dimension: all of them, or the first most - 1 and None (the rest)."""
    return list(range(size)) if size <= most else [*range(most - 1), None]


def _threads_table(launch: LaunchDims, max_threads: int, caption: str) -> str:
    """An HTML-like table: one cell per thread (lid0 across, lid1 down), the caption below."""
    width = len(_shown(launch.local[0], max_threads))
    rows = []
    for y in _shown(launch.local[1], max_threads):
        cells = "".join("<TD>…</TD>" if x is None or y is None else f"<TD>{x},{y}</TD>"
                        for x in _shown(launch.local[0], max_threads))
        rows.append(f"<TR>{cells}</TR>")
    rows.append(f'<TR><TD COLSPAN="{width}" BORDER="0">{caption}</TD></TR>')
    return f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="2">{"".join(rows)}</TABLE>>'


def draw_launch(launch: LaunchDims, max_groups: int = 3, max_threads: int = 4) -> graphviz.Digraph:
    """The grid of `launch` as a `graphviz.Digraph`: workgroups as boxes, threads as cells (lid0,lid1)."""
    if not isinstance(launch, LaunchDims):
        raise TypeError(f"draw_launch: expected LaunchDims (Kernel.launch or launch_dims(uops)), got "
                        f"{type(launch).__name__}; a CPU kernel has none (launch is None)")
    if max_groups < 2 or max_threads < 2:
        raise ValueError(f"draw_launch: max_groups and max_threads must be >= 2, got {max_groups} and "
                         f"{max_threads}")
    dot = graphviz.Digraph(graph_attr={"rankdir": "TB", "label": launch_summary(launch), "labelloc": "t",
                                       "fontname": "Helvetica", "nodesep": "0.15", "ranksep": "0.15"},
                           node_attr={"fontname": "Helvetica", "fontsize": "9", "shape": "plaintext"})
    rows = _shown(launch.groups[1], max_groups)
    for y, gy in enumerate(rows):
        with dot.subgraph(name=f"row{y}", graph_attr={"rank": "same"}) as row:
            for x, gx in enumerate(_shown(launch.groups[0], max_groups)):
                if gx is None or gy is None:
                    row.node(f"g{x}_{y}", "…", fontsize="14")
                else:
                    row.node(f"g{x}_{y}", _threads_table(launch, max_threads, f"workgroup ({gx}, {gy}, 0)"))
        if y:  # invisible edges keep the rows in order, top to bottom
            dot.edge(f"g0_{y - 1}", f"g0_{y}", style="invis")
    return dot
