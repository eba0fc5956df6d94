"""Stage 2: turn the lazy graph into kernels (schedule.py) and run them (realize.py)."""
