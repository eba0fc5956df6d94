"""Running aarch64 kernels on an x86-64 machine: one long-lived harness process under qemu-user.

qemu-user (`qemu-aarch64`) runs a Linux aarch64 program on another CPU: it translates the
program's instructions to the host's as they run, and passes its system calls to the host kernel.
`qemu-aarch64 -L /usr/aarch64-linux-gnu prog` also finds the aarch64 dynamic loader and libc there.

Starting qemu costs tens of milliseconds, far more than a small kernel runs, so it is started
once (lazily, per NEON device) with a small C program, the *harness*, that waits for commands on
its stdin and answers on its stdout, one line each:

    map <bytes> <path>          map the shared arena file (MAP_SHARED), replacing the previous one
    load <slot> <symbol> <path> dlopen a kernel library, remember its entry point in `slot`
    run <slot> <n> <off>...     call the entry with n pointers: arena + each offset
    unload <slot>               dlclose it
    -> `ok` or `error <what went wrong>`

Buffers travel through the *arena*, a shared-memory file (memfd) mapped by Python and by the
harness: Python copies a kernel's buffers in, the harness runs the kernel on them in place, and
Python copies the output back. No data goes through the pipes. Measured on an x86-64 machine (a
loaded one, so only the ratios mean much): starting the harness about 80 ms, loading a kernel
library about 8 ms, a call of a small kernel about 20 us, against 80+ ms for starting qemu for
every call. The copies cost 10-20% of a call (`x*3+1` on 4M floats: 7 ms of 39 ms; the rest is the
emulated kernel), which is why buffers are copied rather than allocated in shared memory: the
simpler design costs little next to the emulation. The arena grows for a big call and shrinks back
after it, so a 2 GB kernel does not keep 2 GB of shared memory.

If the harness dies (a kernel that crashes takes it down), the error says how it died, and the
next call starts a new one.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

# --8<-- [start:harness]
HARNESS_SOURCE = r"""
/* tinyedu's qemu harness: runs kernel libraries on a shared arena, on command (see qemu.py). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_SLOTS 4096
#define MAX_ARGS 4096
typedef void (*entry_fn)(void **args);

static char *arena = NULL;
static size_t arena_size = 0;
static void *handles[MAX_SLOTS];
static entry_fn entries[MAX_SLOTS];
static void *args[MAX_ARGS];

static void reply_error(const char *what, const char *detail) {
  printf("error %s%s\n", what, detail ? detail : "");
}

int main(void) {
  static char line[1 << 20];
  setvbuf(stdout, NULL, _IOLBF, 0);  /* one answer per line, flushed at once */
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    int slot = -1, used = 0;
    if (!strncmp(line, "map ", 4)) {
      size_t size = 0;
      if (sscanf(line + 4, "%zu %n", &size, &used) != 1) { reply_error("bad map command", NULL); continue; }
      if (arena) munmap(arena, arena_size);
      arena = NULL;
      int fd = open(line + 4 + used, O_RDWR);
      if (fd < 0) { reply_error("cannot open the arena ", line + 4 + used); continue; }
      void *mapped = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (mapped == MAP_FAILED) { reply_error("cannot map the arena", NULL); continue; }
      arena = mapped; arena_size = size;
      printf("ok\n");
    } else if (!strncmp(line, "load ", 5)) {
      char symbol[512];
      if (sscanf(line + 5, "%d %511s %n", &slot, symbol, &used) != 2 || slot < 0 || slot >= MAX_SLOTS) {
        reply_error("bad load command", NULL); continue;
      }
      void *handle = dlopen(line + 5 + used, RTLD_NOW | RTLD_LOCAL);
      if (!handle) { reply_error("dlopen: ", dlerror()); continue; }
      entry_fn entry = (entry_fn)dlsym(handle, symbol);
      if (!entry) { dlclose(handle); reply_error("no entry point ", symbol); continue; }
      handles[slot] = handle; entries[slot] = entry;
      printf("ok\n");
    } else if (!strncmp(line, "run ", 4)) {
      int n = 0;
      char *p = line + 4;
      if (sscanf(p, "%d %d%n", &slot, &n, &used) != 2 || slot < 0 || slot >= MAX_SLOTS || !entries[slot] ||
          n < 0 || n > MAX_ARGS) {
        reply_error("bad run command", NULL); continue;
      }
      p += used;
      int ok = 1;
      for (int i = 0; i < n && ok; i++) {
        size_t offset;
        ok = sscanf(p, "%zu%n", &offset, &used) == 1 && offset <= arena_size;
        args[i] = arena + offset; p += used;
      }
      if (!ok) { reply_error("bad offsets", NULL); continue; }
      entries[slot](args);
      printf("ok\n");
    } else if (!strncmp(line, "unload ", 7)) {
      if (sscanf(line + 7, "%d", &slot) != 1 || slot < 0 || slot >= MAX_SLOTS || !handles[slot]) {
        reply_error("bad unload command", NULL); continue;
      }
      dlclose(handles[slot]);
      handles[slot] = NULL; entries[slot] = NULL;
      printf("ok\n");
    } else {
      reply_error("unknown command: ", line);
    }
  }
  return 0;
}
"""
# --8<-- [end:harness]

ALIGN = 64          # every buffer starts on a cache line in the arena, as in host memory
KEEP_ARENA = 64 << 20  # an arena grown past this for one big call is shrunk back afterwards


class HarnessError(RuntimeError):
    """The harness could not do what it was asked (or died doing it)."""


class Harness:
    """One aarch64 harness process under qemu-user, and the arena it shares with Python.

    `load(path, symbol)` gives a slot; `run(slot, arrays)` runs that kernel on copies of the arrays
    in the arena and copies the first one (the output) back. Thread-safe: one command at a time.
    """

    def __init__(self, qemu: str, sysroot: str, harness_binary: Path):
        self.qemu, self.sysroot, self.binary = qemu, sysroot, harness_binary
        self.process: subprocess.Popen | None = None
        self.loaded: dict[int, tuple[str, str]] = {}   # slot -> (path, symbol) in this process
        self.lock = threading.Lock()
        self.arena_fd = os.memfd_create("tinyedu-neon-arena")
        self.arena_size = 0
        self.arena: mmap.mmap | None = None
        self.mapped_size = 0   # the size the harness has mapped (0: not mapped yet)
        self.stderr = tempfile.TemporaryFile()
        self.deaths = 0        # how many harness processes died under us (for tests and messages)

    # ---- the process ----
    def start(self) -> None:
        self.stderr.seek(0)
        self.stderr.truncate()
        # (not a sanitizer preloaded into python: it is an x86-64 library)
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        self.process = subprocess.Popen([self.qemu, "-L", self.sysroot, str(self.binary)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                        text=True, bufsize=1, env=env)
        self.loaded.clear()
        self.mapped_size = 0

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self, line: str) -> str:
        """Send one command and wait for its answer (starting the harness if needed)."""
        if not self.alive():
            self.start()
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
        except (BrokenPipeError, OSError):
            answer = ""
        if not answer:  # end of file: the harness died
            raise self._died(line)
        answer = answer.rstrip("\n")
        if answer != "ok":
            raise HarnessError(f"NEON harness: {answer.removeprefix('error ')} (command: {line[:200]})")
        return answer

    def _died(self, line: str) -> HarnessError:
        assert self.process is not None
        code = self.process.wait()
        self.process = None
        self.deaths += 1
        self.loaded.clear()
        self.stderr.seek(0)
        detail = self.stderr.read().decode(errors="replace").strip()[-2000:]
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        what = line.split(" ")[0]
        return HarnessError(f"NEON harness (aarch64 under qemu-user) {how} during `{what}`"
                            f"{': ' + detail if detail else ''}. A kernel that crashes takes the harness "
                            "down with it; the next call starts a new one.")

    def close(self) -> None:
        if self.alive():
            assert self.process is not None and self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait()
        self.process = None
        if self.arena is not None:
            self.arena.close()
            self.arena = None
        os.close(self.arena_fd)
        self.stderr.close()

    # ---- kernels ----
    def load(self, slot: int, path: Path, symbol: str) -> None:
        with self.lock:
            self.command(f"load {slot} {symbol} {path}")
            self.loaded[slot] = (str(path), symbol)

    def unload(self, slot: int) -> None:
        with self.lock:
            if slot in self.loaded and self.alive():
                self.command(f"unload {slot}")
            self.loaded.pop(slot, None)

    # --8<-- [start:run]
    def run(self, slot: int, path: Path, symbol: str, arrays: list[np.ndarray]) -> None:
        """Run a kernel on the arrays ([out, *inputs]): copies in, run in the arena, output copied back.

        An array passed twice (the same memory) gets one place in the arena.
        """
        with self.lock:
            if slot not in self.loaded:  # a new harness (the old one died): load the library again
                self.command(f"load {slot} {symbol} {path}")
                self.loaded[slot] = (str(path), symbol)
            offsets, places, total = [], {}, 0
            for a in arrays:
                key = (a.ctypes.data, a.nbytes)
                if key not in places:
                    places[key] = total
                    total += -(-max(a.nbytes, 1) // ALIGN) * ALIGN
                offsets.append(places[key])
            self._ensure_arena(total)
            assert self.arena is not None
            view = np.frombuffer(self.arena, dtype=np.uint8, count=total)
            for a, offset in zip(arrays, offsets, strict=True):
                view[offset:offset + a.nbytes] = a.reshape(-1).view(np.uint8)
            self.command(f"run {slot} {len(arrays)} {' '.join(map(str, offsets))}")
            out = arrays[0]
            out.reshape(-1).view(np.uint8)[:] = view[offsets[0]:offsets[0] + out.nbytes]
            del view
            if self.arena_size > KEEP_ARENA:  # give a big arena's memory back
                self._resize(KEEP_ARENA)
    # --8<-- [end:run]

    def _ensure_arena(self, size: int) -> None:
        if size > self.arena_size:
            self._resize(max(size, 1 << 20))
        if self.mapped_size != self.arena_size:
            self.command(f"map {self.arena_size} /proc/{os.getpid()}/fd/{self.arena_fd}")
            self.mapped_size = self.arena_size

    def _resize(self, size: int) -> None:
        if self.arena is not None:
            self.arena.close()
        os.ftruncate(self.arena_fd, size)
        self.arena = mmap.mmap(self.arena_fd, size)
        self.arena_size = size
        # the harness still maps the old size: `map` again before the next run
        if self.mapped_size and self.alive():
            self.command(f"map {size} /proc/{os.getpid()}/fd/{self.arena_fd}")
            self.mapped_size = size
