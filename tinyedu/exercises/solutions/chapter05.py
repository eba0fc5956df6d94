"""Chapter 05 (the C backend): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

import math

from tinyedu.core.dtype import dtypes
from tinyedu.exercises.registry import Mistake
from tinyedu.renderer import cstyle

# --8<-- [start:c_expressions]
c_expressions = {
    # the sigmoid written with exp2: NEG, MUL by 1/ln 2, EXP2, ADD 1, RECIP: 1 / (1 + 2^(-x / ln 2))
    "sigmoid": "1.0f/(1.0f+exp2f((-val0)*1.442695f))",
    # MUL by 0.1 (a float literal: 0.1f), ADD, then relu as WHERE(v < 0, 0, v): NaN and -0.0 stay
    "relu_of_affine": "((val0*0.1f)+val1 < 0.0f) ? 0.0f : (val0*0.1f)+val1",
}
# --8<-- [end:c_expressions]

# --8<-- [start:conv_loops]
conv_loops = {
    "matmul": [3, 2, 5],        # (3, 5) @ (5, 2): 3 x 2 outputs, each a sum over 5
    "padded_conv": [2, 4, 4, 3, 3],  # 2 filters x 4 x 4 output pixels, each a sum over the 3 x 3 window
    # (the one input channel is a loop that runs once: no loop)
}
# --8<-- [end:conv_loops]

# --8<-- [start:compiles]
# a*2 and b*2 are the same computation on other data: one source. a.T*2 reads through another view
# (the index math differs), and a*3 has another constant: two more sources, so 3 compiles.
compiles = 3
# --8<-- [end:compiles]


# --8<-- [start:c_literal]
c_literal = cstyle.c_literal
# --8<-- [end:c_literal]

# --8<-- [start:max_float32]
# NaN wins, as in np.maximum (a != a only for NaN; if b is NaN, a > b is false and b is returned);
# when a == b (0.0 and -0.0 are equal) the result is b, as np.maximum(0.0, -0.0) is -0.0.
max_float32 = cstyle.HELPERS["max_float32"]
# --8<-- [end:max_float32]


# ---- typical mistakes -------------------------------------------------------------------------------
def _literal_without(*, suffix=True, parens=True, special=True, int_min=True, bools=True, sign=True):
    def literal(value, dtype):
        if dtype == dtypes.bool:
            return ("true" if value else "false") if bools else ("True" if value else "False")
        if dtype.is_float and (not special) and not math.isfinite(value):
            return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        if dtype.is_float and not sign and value == 0:
            return "0.0f"
        text = c_literal(value, dtype)
        if dtype.is_float and not suffix:
            text = text.replace("f", "").replace("ININITY", "INFINITY")
        if not int_min and value == -2**31 and not dtype.is_float:
            text = "(-2147483648)"
        if not parens:
            text = text[1:-1] if text.startswith("(-") else text
        return text
    return literal


MISTAKES = [
    Mistake("05.c_expression", dict(c_expressions, relu_of_affine=("(val0*0.1+val1 < 0.0f) ? 0.0f : "
                                                                   "val0*0.1+val1")),
            "without the f suffix is a double"),
    Mistake("05.c_expression",
            dict(c_expressions, relu_of_affine="(0.0f < (val0*0.1f)+val1) ? (val0*0.1f)+val1 : 0.0f"),
            "your expression gives 0.0, the kernel nan", "relu as where(0 < v, v, 0): NaN becomes 0"),
    Mistake("05.c_expression", dict(c_expressions, sigmoid="1.0f/(1.0f+exp2f(-val0*1.442695f)"),
            "compiler rejects this expression"),
    Mistake("05.loop_bounds", dict(conv_loops, padded_conv=[4, 4, 2, 3, 3]), "wrong order"),
    Mistake("05.loop_bounds", dict(conv_loops, matmul=[3, 5, 5]), "broadcast (n, m, k)"),
    Mistake("05.compile_count", 4, "fewer compiles than 4"),
    Mistake("05.compile_count", 2, "more compiles than 2"),
    Mistake("05.c_literal", _literal_without(suffix=False), "is a double"),
    Mistake("05.c_literal", _literal_without(parens=False), "put it in parentheses"),
    Mistake("05.c_literal", _literal_without(special=False), "INFINITY and NAN"),
    Mistake("05.c_literal", _literal_without(int_min=False), "does not fit in an int"),
    Mistake("05.c_literal", _literal_without(bools=False), "spells them true and false"),
    Mistake("05.c_literal", _literal_without(sign=False), "loses the sign of -0.0"),
    Mistake("05.c_literal", lambda value, dtype: f"{value}f" if dtype.is_float and math.isfinite(value)
            else c_literal(value, dtype), "put it in parentheses", "Python's repr with an f: -2.5f after a "
                                                                   "minus"),
    Mistake("05.max_float32", "static inline float max_float32(float a, float b) { return fmaxf(a, b); }",
            "fmaxf ignores NaN"),
    Mistake("05.max_float32", "static inline float max_float32(float a, float b) { return a > b ? a : b; }",
            "np.maximum returns NaN"),
    Mistake("05.max_float32", "static inline float max_float32(float a, float b) { return (a >= b || a != a) "
            "? a : b; }", "np.maximum returns b"),
    Mistake("05.max_float32", "static inline float max_float32(float a, float b) { return a > b ? a : b }",
            "the C compiler rejects your max_float32"),
    Mistake("05.max_float32", 42, "write the C source of a function"),
]
