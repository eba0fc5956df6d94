"""Stage 3: kernel AST -> UOps (kernel.py: the loop shape; linearizer.py: the UOps; uops.py: vocabulary)."""
