"""Simplification rules: what `+ - * // % <`, `Node.sum` and `Node.ands` do while they build.

Every rule is an identity on integers that holds for *all* values the variables can take (their
bounds are part of the node), so simplifying never changes what an expression evaluates to; it
only makes the expression shorter, which makes generated kernels shorter.

Index expressions come out of reshapes as "split a flat index into (row, column)":
`(flat // 3) % 2`. When `flat` is itself `row*3 + column`, the rules here collapse it back to
`row`. That is most of what they are for.
"""

from __future__ import annotations

import math

from tinyedu.shape.symbolic import AndNode, DivNode, LtNode, ModNode, MulNode, Node, NumNode, SumNode


def fold(node: Node) -> Node:
    """A node whose bounds meet can only take one value: replace it by that constant."""
    if node.min == node.max and not isinstance(node, NumNode):
        return NumNode(node.min)
    return node


def terms_and_constant(x: Node) -> tuple[list[Node], int]:
    """View `x` as a sum: its non-constant terms and its constant part."""
    if isinstance(x, NumNode):
        return [], x.b
    if isinstance(x, SumNode):
        terms = [t for t in x.nodes if not isinstance(t, NumNode)]
        return terms, sum(t.b for t in x.nodes if isinstance(t, NumNode))
    return [x], 0


def base_and_coefficient(term: Node) -> tuple[Node, int]:
    """`a*3` is (a, 3); any other term is (term, 1)."""
    return (term.a, term.b) if isinstance(term, MulNode) else (term, 1)


def mul(x: Node, b: int) -> Node:
    """x * b: `x*0 -> 0`, `x*1 -> x`, `(a*2)*3 -> a*6`, and multiply sums term by term."""
    if b == 0:
        return NumNode(0)
    if b == 1:
        return x
    if isinstance(x, NumNode):
        return NumNode(x.b * b)
    if isinstance(x, MulNode):
        return mul(x.a, x.b * b)
    if isinstance(x, SumNode):
        return sum_nodes([mul(t, b) for t in x.nodes])
    return fold(MulNode(x, b))


def sum_nodes(nodes: list[Node]) -> Node:
    """The sum of `nodes` with like terms merged (`a*2 + a*3 -> a*5`) and constants folded."""
    coefficients: dict[Node, int] = {}  # base -> total coefficient, in order of first appearance
    constant = 0
    pending = list(nodes)
    while pending:
        node = pending.pop(0)
        if isinstance(node, SumNode):
            pending[0:0] = node.nodes
        elif isinstance(node, NumNode):
            constant += node.b
        else:
            base, k = base_and_coefficient(node)
            coefficients[base] = coefficients.get(base, 0) + k
    # (a // n)*n*k + (a % n)*k == a*k : re-joining an index that a reshape split apart.
    for base, k in coefficients.items():
        if isinstance(base, ModNode) and k != 0:
            quotient = DivNode(base.a, base.b)
            if coefficients.get(quotient) == k * base.b:
                rest = [mul(b, c) for b, c in coefficients.items() if b not in (base, quotient)]
                return sum_nodes(rest + [mul(base.a, k), NumNode(constant)])
    terms = [base if k == 1 else MulNode(base, k) for base, k in coefficients.items() if k != 0]
    if constant != 0:
        terms.append(NumNode(constant))
    if not terms:
        return NumNode(0)
    return terms[0] if len(terms) == 1 else fold(SumNode(tuple(terms)))


def split(x: Node, n: int) -> tuple[Node, Node]:
    """Write x as `quotient*n + rest` with rest >= 0, pulling every multiple of n out of rest.

    Terms whose coefficient is a multiple of n go to the quotient. The constant c is split as
    `q*n + r` with r chosen as small as possible while keeping rest non-negative; that way
    `rest // n` and `rest % n` are safe to print as C's `/` and `%`, even when x itself can be
    negative (as it can be inside a padded view).
    """
    terms, constant = terms_and_constant(x)
    quotient: list[Node] = []
    rest: list[Node] = []
    for term in terms:
        base, k = base_and_coefficient(term)
        if k % n == 0:
            quotient.append(mul(base, k // n))
        else:
            rest.append(term)
    low = max(0, -sum(t.min for t in rest))
    r = low + (constant - low) % n
    quotient.append(NumNode((constant - r) // n))
    return sum_nodes(quotient), sum_nodes(rest + [NumNode(r)])


def split_coefficients(x: Node, n: int) -> tuple[Node, Node]:
    """Write x as `quotient*n + rest`, also splitting every coefficient k as `(k//n)*n + k%n`.

    `split` keeps `c + d*29` whole for n = 28; here it is `d*28 + (c + d)`, and when `c + d` stays
    within one multiple of 28 (as in the index of a convolution's window, row + column*29 with a
    short row) `// 28` is `d` and `% 28` is `c + d`: the pair of views merges into one.
    """
    terms, constant = terms_and_constant(x)
    pairs = [base_and_coefficient(term) for term in terms]
    quotient = [mul(base, k // n) for base, k in pairs] + [NumNode(constant // n)]
    rest = [mul(base, k % n) for base, k in pairs] + [NumNode(constant % n)]
    return sum_nodes(quotient), sum_nodes(rest)


def common_factor(x: Node, n: int) -> int:
    """The largest g dividing n, the constant and every coefficient of x."""
    terms, constant = terms_and_constant(x)
    return math.gcd(n, constant, *(base_and_coefficient(t)[1] for t in terms))


def exact_div(x: Node, g: int) -> Node:
    """x / g for a g that divides the constant and every coefficient of x (no rounding)."""
    terms, constant = terms_and_constant(x)
    return sum_nodes([mul(base, k // g) for base, k in map(base_and_coefficient, terms)]
                     + [NumNode(constant // g)])


def div(x: Node, n: int) -> Node:
    """x // n (floor) for n > 0.

    `(a*4)//2 -> a*2`, `(a*4 + b)//4 -> a + b//4`, then `b//4 -> 0` when 0 <= b < 4,
    `(a*2 + b*4)//8 -> (a + b*2)//4`, `(a//2)//3 -> a//6`.
    """
    if n == 1:
        return x
    if isinstance(x, NumNode):
        return NumNode(x.b // n)
    quotient, rest = split(x, n)
    if rest.min // n == rest.max // n:  # rest never crosses a multiple of n
        return sum_nodes([quotient, NumNode(rest.min // n)])
    whole, small = split_coefficients(x, n)
    if small.min // n == small.max // n:  # the same, once every coefficient is reduced mod n
        return sum_nodes([whole, NumNode(small.min // n)])
    g = common_factor(rest, n)
    if g > 1:
        return sum_nodes([quotient, div(exact_div(rest, g), n // g)])
    if isinstance(rest, DivNode):
        return sum_nodes([quotient, div(rest.a, rest.b * n)])
    return sum_nodes([quotient, fold(DivNode(rest, n))])


def mod(x: Node, n: int) -> Node:
    """x % n for n > 0.

    `(a*n + b) % n -> b % n`, then `b % n -> b` when 0 <= b < n, `(a*2) % 4 -> (a%2)*2`,
    `(a % 8) % 4 -> a % 4`.
    """
    if n == 1:
        return NumNode(0)
    if isinstance(x, NumNode):
        return NumNode(x.b % n)
    _, rest = split(x, n)
    if rest.min // n == rest.max // n:  # within one period, % n is a plain subtraction
        return sum_nodes([rest, NumNode(-(rest.min // n) * n)])
    _, small = split_coefficients(x, n)
    if small.min // n == small.max // n:  # the same, once every coefficient is reduced mod n
        return sum_nodes([small, NumNode(-(small.min // n) * n)])
    g = common_factor(rest, n)
    if g > 1:
        return mul(mod(exact_div(rest, g), n // g), g)
    if isinstance(rest, ModNode) and rest.b % n == 0:
        return mod(rest.a, n)
    return fold(ModNode(rest, n))


def lt(x: Node, b: int) -> Node:
    """x < b as 0/1: decided by bounds when possible, else with the constant moved to b.

    `x + 3 < 5 -> x < 2`, `x*4 < 9 -> x < 3`, `x//4 < 2 -> x < 8`.
    """
    if x.max < b:
        return NumNode(1)
    if x.min >= b:
        return NumNode(0)
    terms, constant = terms_and_constant(x)
    if constant != 0:
        return lt(sum_nodes(terms), b - constant)
    g = math.gcd(*(abs(base_and_coefficient(t)[1]) for t in terms))
    if g > 1:  # g*y < b  <=>  y < ceil(b / g), for integer y
        return lt(exact_div(x, g), -(-b // g))
    if isinstance(x, DivNode):  # a//n < b  <=>  a < b*n
        return lt(x.a, b * x.b)
    return LtNode(x, b)


def ands(nodes: list[Node]) -> Node:
    """AND of 0/1 nodes: drop the ones known true, become 0 on one known false, drop repeats."""
    flat: list[Node] = []
    for node in nodes:
        flat.extend(node.nodes if isinstance(node, AndNode) else [node])
    kept: dict[Node, None] = {}
    for node in flat:
        if node.min < 0 or node.max > 1:
            raise ValueError(f"Node.ands: {node.render()} takes values in [{node.min}, {node.max}]; "
                             "only 0/1-valued nodes (comparisons) can be ANDed")
        if node.max == 0:
            return NumNode(0)
        if node.min == 0:
            kept[node] = None
    if not kept:
        return NumNode(1)
    return next(iter(kept)) if len(kept) == 1 else AndNode(tuple(kept))
