"""tir.IndexMap: construction from functions, shape maps, inverses and the padding they locate."""
import itertools

import numpy as np
import pytest

from mlc_lab import tir
from mlc_lab.ir import structural_equal
from mlc_lab.runtime.interpreter import Evaluator
from mlc_lab.tir.index_map import IndexMapError


def evaluate(expr, env):
    return int(np.asarray(Evaluator({v: np.int64(x) for v, x in env.items()}, {}).eval(expr)))


def check_inverse(index_map, shape):
    """Brute force: the inverse sends every reached place back to its element, and the padding
    condition holds exactly at the places no element reaches."""
    inverse, padding = index_map.non_surjective_inverse(shape)
    new_shape = [d.value for d in index_map.map_shape(shape)]
    reached = {}
    for point in itertools.product(*[range(d) for d in shape]):
        env = dict(zip(index_map.initial_indices, point))
        image = tuple(evaluate(e, env) for e in index_map.final_indices)
        assert all(0 <= x < d for x, d in zip(image, new_shape)), (point, image, new_shape)
        assert image not in reached, "not one-to-one"
        reached[image] = point
    for place in itertools.product(*[range(d) for d in new_shape]):
        env = dict(zip(inverse.initial_indices, place))
        pad = evaluate(padding, env) if not isinstance(padding, tir.IntImm) else padding.value
        assert bool(pad) == (place not in reached), (place, padding)
        if place in reached:
            assert tuple(evaluate(e, env) for e in inverse.final_indices) == reached[place]


@pytest.mark.parametrize("func, shape", [
    (lambda i: (i // 4, i % 4), [14]),
    (lambda i: (i // 4, i % 4), [16]),
    (lambda i, j: (j // 4, i, j % 4), [3, 10]),
    (lambda i: (i // 16, i % 16 // 4, i % 4), [30]),
    (lambda i, j: (i * 6 + j,), [4, 6]),
    (lambda r, c: (r // 8, c // 8, r % 8 * 9 + c % 8), [16, 16]),     # a padded row per tile
    (lambda i: ((i + 1) // 8, (i + 1) % 8), [16]),
    (lambda i: (2 * i,), [5]),
    (lambda n, h, w: (n * 12 + h * 4 + w,), [1, 3, 4]),
])
def test_inverse_and_padding_by_brute_force(func, shape):
    check_inverse(tir.IndexMap.from_func(func, index_dtype="int32"), shape)


def test_from_func_forms():
    m = tir.IndexMap.from_func(lambda *indices, k: [*indices, k // 4, k % 4], ndim=3)
    assert [v.name for v in m.initial_indices] == ["indices_0", "indices_1", "k"]
    assert len(m.final_indices) == 4 and m.initial_indices[0].dtype == "int64"
    with pytest.raises(IndexMapError, match="ndim"):
        tir.IndexMap.from_func(lambda *i: i)
    m, separators = tir.IndexMap.from_func_with_separators(
        lambda i, j: (i, tir.IndexMap.AXIS_SEPARATOR, j), index_dtype="int32")
    assert separators == [1] and len(m) == 2
    with pytest.raises(IndexMapError, match="from_func_with_separators"):
        tir.IndexMap.from_func(lambda i, j: (i, tir.IndexMap.AXIS_SEPARATOR, j))
    assert str(tir.IndexMap.from_func(lambda i: i * 2, index_dtype="int32")) == \
        "IndexMap(lambda i: (i * 2,))"


def test_map_indices_shape_and_equivalence():
    m = tir.IndexMap.from_func(lambda i, j: (j // 4, i, j % 4), index_dtype="int32")
    assert [d.value for d in m.map_shape([3, 8])] == [2, 3, 4]
    x = tir.Var("x")
    assert structural_equal(m.map_indices([x, tir.const(5)])[0], tir.const(1))
    same = tir.IndexMap.from_func(lambda a, b: (b // 4, a, b - b // 4 * 4), index_dtype="int32")
    assert m.is_equivalent_to(same)
    assert not m.is_equivalent_to(tir.IndexMap.from_func(lambda a, b: (b // 4, a, b), index_dtype="int32"))
    inverse = m.inverse([3, 8])
    assert m.is_equivalent_to(m) and len(inverse.final_indices) == 2
    with pytest.raises(IndexMapError, match="onto"):
        tir.IndexMap.from_func(lambda i: (i // 4, i % 4), index_dtype="int32").inverse([14])


def test_symbolic_split():
    n = tir.Var("n")
    m = tir.IndexMap.from_func(lambda i, j: (i * n + j,), index_dtype="int32")
    assert str(m.map_shape([8, n])[0]) == "n * 8"
    inverse = m.inverse([8, n])
    assert [str(e) for e in inverse.final_indices] == ["axis0 // n", "axis0 % n"]


def test_maps_without_an_inverse():
    for func in (lambda i, j: (i + j,), lambda i: (i % 4,), lambda i, j: (i * j,)):
        with pytest.raises(IndexMapError):
            tir.IndexMap.from_func(func, index_dtype="int32").non_surjective_inverse([8, 8][:func.__code__.co_argcount])


def test_with_dtype_retypes_constants():
    m = tir.IndexMap.from_func(lambda i: (i // 4, i % 4), index_dtype="int32").with_dtype("int64")
    assert all(e.dtype == "int64" for e in m.final_indices)
    assert m.final_indices[0].b.dtype == "int64"
