"""Index arithmetic: bounds and simplification rules."""
import pytest

from mlc_lab.arith import can_prove, int_bound, simplify
from mlc_lab.ir import structural_equal
from mlc_lab.tir import FloorDiv, Max, Min, Range, SizeVar, Var, const

i, j = Var("i"), Var("j")
RANGES = {i: Range(const(0), const(32)), j: Range(const(0), const(4))}


def same(a, b):
    return structural_equal(a, b, map_free_vars=False)


@pytest.mark.parametrize("expr, expected", [
    ((i * 4 + j) // 4, i),
    ((i * 4 + j) % 4, j),
    (((i * 4 + j) // 4) * 4 + (i * 4 + j) % 4, i * 4 + j),
    (i * 4 + j - i * 4, j),
    ((i + 1) * 2 - 2 * i, const(2)),
    (Min(i, const(100)), i),
    (Max(i, const(100)), const(100)),
    ((i * 8 + j) // 8, i),
    (FloorDiv(FloorDiv(i, 2), 4), FloorDiv(i, 8)),
])
def test_simplify_rules(expr, expected):
    assert same(simplify(expr, RANGES), expected), simplify(expr, RANGES)


def test_simplify_folds_constants_and_comparisons():
    assert simplify(const(3) * 4 + 1).value == 13
    assert simplify(i * 4 + j < 128, RANGES).value == 1
    assert simplify(i * 4 + j >= 0, RANGES).value == 1
    not_provable = simplify(i * 4 + j < 100, RANGES)
    assert not isinstance(not_provable, type(const(1)))
    assert can_prove(i < 32, RANGES) and not can_prove(i < 31, RANGES)


def test_truncating_division_constant_folding():
    from mlc_lab.tir import Div, Mod
    assert simplify(Div(const(-7), const(2))).value == -3
    assert simplify(Mod(const(-7), const(2))).value == -1
    assert simplify(FloorDiv(const(-7), const(2))).value == -4


def test_int_bound():
    assert int_bound(i * 4 + j, RANGES) == (0, 127)
    assert int_bound(i - j, RANGES) == (-3, 31)
    assert int_bound((i * 4 + j) % 8, RANGES) == (0, 7)
    assert int_bound(Var("free") + 1) == (None, None)
    assert int_bound(SizeVar("n") + 1) == (1, None)


def test_floor_division_and_modulo_of_one_value_recombine():
    x, y = Var("x"), Var("y")
    fused = x * 4 + y
    assert str(simplify(fused // 8 * 8 + fused % 8 + 256)) == "x * 4 + y + 256"
    assert str(simplify(fused // 8 * 16 + fused % 8 * 2)) == "x * 8 + y * 2"
    # coefficients that do not match stay as they are
    assert "% 8" in str(simplify(fused // 8 * 8 + fused % 8 * 2))
    assert "% 8" in str(simplify(fused // 4 * 8 + fused % 8))
