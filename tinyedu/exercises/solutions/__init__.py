"""Reference solutions, one module per chapter (`chapter00.py` for notebook 00).

Try the exercises first: the notebooks check your answers and give hints. Each module defines, under
the names the answer cells use, an answer that passes its checker, and `MISTAKES`: typical wrong
answers with the hint each must get. The test suite runs both, so every exercise is solvable and
every checker can fail. The site shows these solutions collapsed, included from these files.
"""
