"""THREAD loops in LLVM IR: the loop becomes a worker function that OpenMP runs on several threads.

LLVM IR has no `#pragma omp parallel for`: that pragma is C compilers' work, which they lower to calls
into the OpenMP runtime. The LLVM renderer makes the same calls itself, with gcc's runtime (libgomp):

    kernel:                                      worker (on every thread, the kernel's one too):
      fill a context: the values the loop uses     read the values back from the context
      and a counter of claimed iterations          loop: tidx0 = atomically claim the next iteration
      GOMP_parallel(worker, context, threads)           if tidx0 >= end: return
      ... (after every thread returned)                 the loop body, unchanged

The worker's values keep their names (`%data1`, `%local0`, `%alu3`): the body is the loop body the
renderer wrote, moved into another function. Each thread claims one iteration at a time, so a thread
that starts late (a busy machine) takes fewer; which thread runs an iteration never changes what it
computes (a partial sum goes to its own slot of a local array, added after the loop in a fixed
order), so the results are the same bits with any number of threads. `GOMP_parallel` gets one thread
when `omp_get_max_threads()` is 1 (a child process after fork(): see runtime/toolchain.py), as the C
device's `if(omp_get_max_threads() > 1)` does.
"""

from __future__ import annotations

OPENMP_DECLARES = {"@GOMP_parallel": "declare void @GOMP_parallel(ptr, ptr, i32, i32)",
                   "@omp_get_max_threads": "declare i32 @omp_get_max_threads()"}


def context_type(captured: list[tuple[str, str]], counter: str) -> str:
    """The context's struct type: one field per captured value, then the counter."""
    return "{ " + ", ".join([t for _, t in captured] + [counter]) + " }"


def start_threads(loop: str, worker: str, captured: list[tuple[str, str]], counter: str, start: str,
                  threads: int) -> tuple[str, list[str]]:
    """The kernel's side: the context's alloca, and the lines that fill it and run the worker on
    `threads` threads (one when OpenMP's thread count is 1)."""
    struct, context = context_type(captured, counter), f"%{loop}.context"
    lines = [f"; {loop}: the loop runs in {worker} on {threads} threads, each claiming iterations"]
    for field, (name, t) in enumerate(captured):
        lines += [f"{name}.arg = getelementptr inbounds {struct}, ptr {context}, i32 0, i32 {field}",
                  f"store {t} {name}, ptr {name}.arg"]
    lines += [f"%{loop}.counter = getelementptr inbounds {struct}, ptr {context}, i32 0, i32 {len(captured)}",
              f"store {counter} {start}, ptr %{loop}.counter",
              f"%{loop}.most = call i32 @omp_get_max_threads()",
              f"%{loop}.several = icmp sgt i32 %{loop}.most, 1",
              f"%{loop}.threads = select i1 %{loop}.several, i32 {threads}, i32 1",
              f"call void @GOMP_parallel(ptr {worker}, ptr {context}, i32 %{loop}.threads, i32 0)"]
    return f"  {context} = alloca {struct}, align 64", lines


def worker_head(loop: str, captured: list[tuple[str, str]], counter: str) -> list[str]:
    """The worker's first lines: read the captured values back under their own names, and find the
    counter (the renderer then writes the loop that claims iterations from it)."""
    struct = context_type(captured, counter)
    lines = []
    for field, (name, t) in enumerate(captured):
        lines += [f"{name}.slot = getelementptr inbounds {struct}, ptr %context, i32 0, i32 {field}",
                  f"{name} = load {t}, ptr {name}.slot"]
    return lines + [f"%{loop}.counter = getelementptr inbounds {struct}, ptr %context, i32 0, "
                    f"i32 {len(captured)}"]


def worker_function(worker: str, allocas: list[str], lines: list[str]) -> str:
    """The worker's whole text: its own local arrays (one per thread), its head and body, `ret`."""
    return "\n".join([f"define internal void {worker}(ptr %context) nounwind {{", "entry:", *allocas,
                      *lines, "  ret void", "}"])
