"""Stage 4: from UOps to source code (cstyle.py: C)."""
