"""From a kernel AST to UOps.

Stage 3: kernel.py lays the AST's buffers out in one loop shape (sum_blocks.py splits a long float
sum into blocks), linearizer.py writes the loops as UOps (tinyedu/core/uops.py: the vocabulary and
its builder; index.py: index expressions as UOps). Stage 5 makes the loops fast: opts.py applies an
opt (opt.py: what one is) to a Kernel, heuristics.py and search.py choose them; the linearizer writes
them with vectorize.py (vector values) and local_arrays.py (threads' partial sums, packed tiles).
"""
