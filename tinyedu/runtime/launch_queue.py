"""ASYNC=1: the C device's kernels run on a launcher thread, in order, while Python goes on.

An eager step often spends more time in Python (building the graph, scheduling, the realizer's own
work) than its kernels take, and without this the two never overlap: each kernel is called from the
Python thread, which waits for it. With `ASYNC=1` the realizer hands each C kernel to a queue and
goes on at once; a thread of this module's small C library takes the kernels off the queue and calls
them one after another. So while step n's kernels run, Python is already building step n+1. With
ASYNC=1, THREADS defaults to the number of cores minus one (tinyedu/runtime/device.py's
thread_count), so that the Python thread keeps a core: on 2 cores, the kernels run on one thread
on one core while Python runs on the other.

It is off by default because it changes what a timer measures: `realize()` returns before its
kernels ran, so a learner timing it would time only the queueing. Reading a value waits; a bench
that times a block of steps waits for the queue at the end (`QUEUE.drain()`).

Why the thread is C's, not Python's: a Python thread needs the interpreter lock after every kernel,
and the Python thread holding it gives it up only every few milliseconds (sys.getswitchinterval),
so the launcher would sit idle while the queue is full. This thread never runs Python: it reads
plain structs (a function's address, its pointer arguments) and calls the functions.

One rule keeps this correct: **the host waits before it touches memory that a queued kernel uses.**
Each Buffer keeps `pending`, the number of the last launch that reads or writes it; reading or
writing its memory from Python (`as_numpy`, `copyin`, `host_address` for a kernel called directly)
waits for that launch first (see `InFlight` in tinyedu/runtime/device.py). The queue runs kernels in
the order they were queued, so a kernel that reads another's output needs no wait at all. The queue
also holds every buffer a queued kernel uses, so that none dies (and gives its memory to the pool)
while a kernel still uses it; they are let go, on the Python thread, once their kernels finished.
Copies between buffers of the C device (an optimizer's update copying a new value into a weight, a
snapshot of old values) are queued the same way, as a memcpy. Python runs at most MAX_QUEUED
kernels, and MAX_QUEUED_BYTES of their outputs, ahead of the launcher: beyond, it waits for the
oldest. Before a library is unloaded, before fork() and at exit, everything queued runs first.

DEBUG=2 (which times each kernel) and TinyJit's recording (which watches each program) run the
kernels on the Python thread as without ASYNC. `GlobalCounters.time_sum_s` counts only the time
to queue a kernel.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
from collections import deque
from typing import TYPE_CHECKING

from tinyedu.core.helpers import getenv
from tinyedu.runtime.compile_cache import CachedFile
from tinyedu.runtime.device import InFlight
from tinyedu.runtime.toolchain import BASE_FLAGS, compile_library, compiler_version, find_compiler

if TYPE_CHECKING:
    from tinyedu.runtime.device import Buffer

MAX_ARGS = 64     # pointers a queued kernel may take; a kernel with more runs on the Python thread
MAX_QUEUED = 128             # kernels queued at most: beyond, Python waits for the oldest to finish
MAX_QUEUED_BYTES = 256 << 20  # and the bytes their outputs hold: memory Python allocated ahead of them


def _call_cases() -> str:
    """The switch that calls a function with n pointer arguments, for each n up to MAX_ARGS (C cannot
    call a function with a number of arguments known only at run time)."""
    cases = []
    for n in range(1, MAX_ARGS + 1):
        params = ", ".join(["void *"] * n)
        args = ", ".join(f"a[{i}]" for i in range(n))
        cases.append(f"    case {n}: ((void (*)({params}))l->fn)({args}); break;")
    return "\n".join(cases)


# --8<-- [start:source]
SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct launch { void *fn; int n; void *args[MAX_ARGS]; struct launch *next; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued = PTHREAD_COND_INITIALIZER, finished = PTHREAD_COND_INITIALIZER;
static struct launch *head, *tail;          /* the queue: head runs next (or is running) */
static long long submitted_count, finished_count;
static int started;

static void call(struct launch *l) {
  void **a = l->args;
  switch (l->n) {
CASES
  }
}

static void *launcher(void *unused) {
  (void)unused;
  for (;;) {
    pthread_mutex_lock(&lock);
    while (head == NULL) pthread_cond_wait(&queued, &lock);
    struct launch *l = head;            /* stays at the head while it runs: submit only appends */
    pthread_mutex_unlock(&lock);
    call(l);
    pthread_mutex_lock(&lock);
    head = l->next;
    if (head == NULL) tail = NULL;
    finished_count++;
    pthread_cond_broadcast(&finished);
    pthread_mutex_unlock(&lock);
    free(l);
  }
  return NULL;
}

/* Queue fn(args[0], ..., args[n-1]); returns its launch number (1, 2, ...), or -1 if it cannot. */
long long launch_submit(void *fn, int n, void **args) {
  struct launch *l = malloc(sizeof *l);
  if (l == NULL || n < 1 || n > MAX_ARGS) { free(l); return -1; }
  l->fn = fn; l->n = n; l->next = NULL;
  memcpy(l->args, args, n * sizeof(void *));
  pthread_mutex_lock(&lock);
  if (!started) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, launcher, NULL) != 0) {
      pthread_mutex_unlock(&lock);
      free(l);
      return -1;
    }
    pthread_detach(thread);
    started = 1;
  }
  if (tail != NULL) tail->next = l; else head = l;
  tail = l;
  long long number = ++submitted_count;
  pthread_cond_signal(&queued);
  pthread_mutex_unlock(&lock);
  return number;
}

long long launch_finished(void) {
  pthread_mutex_lock(&lock);
  long long count = finished_count;
  pthread_mutex_unlock(&lock);
  return count;
}

/* A copy queued like a kernel (a host copy of the C device's memory, behind the kernels it needs). */
void launch_copy(void *to, void *from, void *nbytes) { memcpy(to, from, (size_t)(uintptr_t)nbytes); }

void launch_wait(long long number) {
  pthread_mutex_lock(&lock);
  while (finished_count < number) pthread_cond_wait(&finished, &lock);
  pthread_mutex_unlock(&lock);
}

/* In a child made by fork() (the queue was empty: the parent waited): no launcher thread was copied,
   and the lock may have been copied held. Start over, keeping the counts (buffers hold numbers). */
void launch_after_fork(void) {
  pthread_mutex_init(&lock, NULL);
  pthread_cond_init(&queued, NULL);
  pthread_cond_init(&finished, NULL);
  head = tail = NULL;
  started = 0;
}
""".replace("MAX_ARGS", str(MAX_ARGS)).replace("CASES", _call_cases())
# --8<-- [end:source]


class LaunchQueue:
    """The Python side of the queue: queues kernels, waits for them, and holds their buffers meanwhile."""

    def __init__(self) -> None:
        self._library: ctypes.CDLL | None = None
        self.held: deque[tuple[int, list[Buffer]]] = deque()  # (launch number, its buffers), oldest first
        self.held_bytes = 0  # the bytes of their outputs (buffers[0])
        self.copy_address = 0  # launch_copy's, once the library is loaded
        self.lock = threading.Lock()

    def library(self) -> ctypes.CDLL:
        """The C library, compiled (once, into the compile cache) and loaded on first use."""
        if self._library is None:
            compiler = find_compiler()
            flags = (*BASE_FLAGS, "-pthread")
            key = "\0".join([SOURCE, compiler, compiler_version(compiler), *flags])
            entry = CachedFile(key, ".so", lambda path: compile_library("C", compiler, flags, SOURCE, path))
            library = ctypes.CDLL(str(entry.path()))
            library.launch_submit.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
            library.launch_submit.restype = ctypes.c_longlong
            library.launch_finished.restype = ctypes.c_longlong
            library.launch_wait.argtypes = (ctypes.c_longlong,)
            self.copy_address = ctypes.cast(library.launch_copy, ctypes.c_void_p).value
            self._library = library
        return self._library

    def submit(self, function: int, buffers: list[Buffer], *numbers: int) -> bool:
        """Queue `function(*buffers' memory, *numbers)`; False if it takes too many arguments (run it
        directly)."""
        n = len(buffers) + len(numbers)
        if n > MAX_ARGS:
            return False
        addresses = (ctypes.c_void_p * n)(*[b.host_address(queued=True) for b in buffers], *numbers)
        number = self.library().launch_submit(function, n, addresses)
        if number < 0:
            raise RuntimeError("ASYNC=1: the launcher thread could not be started (or memory ran out); "
                               "run without ASYNC")
        for b in buffers:
            b.pending = number
        buffers[0].pending_write = number  # (a kernel writes its first buffer and reads the others)
        self.held.append((number, buffers))
        self.held_bytes += buffers[0].nbytes
        self.release()  # (what finished meanwhile goes back now: memory is not held longer than needed)
        while len(self.held) > MAX_QUEUED or (self.held_bytes > MAX_QUEUED_BYTES and len(self.held) > 1):
            self.wait(self.held[0][0])
        return True

    def submit_copy(self, to: Buffer, source: Buffer) -> bool:
        """Queue a copy of `source`'s memory into `to`'s (of the same size), behind the queued kernels."""
        self.library()
        return self.submit(self.copy_address, [to, source], to.nbytes)

    def release(self) -> None:
        """Let go of the buffers of the kernels that finished (on a Python thread: a lock keeps two
        from each taking an entry off after checking the same one)."""
        if self.held:
            with self.lock:
                InFlight.finished = finished = self._library.launch_finished()
                held = self.held
                while held and held[0][0] <= finished:
                    self.held_bytes -= held.popleft()[1][0].nbytes

    def wait(self, number: int) -> None:
        """Wait until launch `number` finished (the C call lets other Python threads run meanwhile)."""
        if number > InFlight.finished:
            self._library.launch_wait(number)
            self.release()

    def drain(self) -> None:
        """Wait for every queued kernel."""
        if self.held:
            self.wait(self.held[-1][0])

    def after_fork_in_child(self) -> None:
        if self._library is not None:
            self._library.launch_after_fork()


QUEUE = LaunchQueue()
InFlight.wait = QUEUE.wait
atexit.register(QUEUE.drain)  # (a kernel still running at exit would write memory being freed)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=QUEUE.drain, after_in_child=QUEUE.after_fork_in_child)


def enabled() -> bool:
    """ASYNC=1 (read by the realizer once per schedule)."""
    return getenv("ASYNC", 0) != 0
