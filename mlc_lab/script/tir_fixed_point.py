"""Fixed-point multiplication of quantized kernels, ``T.q_multiply_shift`` and
``T.q_multiply_shift_per_axis``: built as the integer arithmetic the reference compiler lowers
them to, so every backend runs them (a shift by k is a product or a floor division by 2**k)."""
from __future__ import annotations

from ..tir import expr as E


def q_multiply_shift(x, y, q, s, dtype: str | None = None) -> E.PrimExpr:
    """``T.q_multiply_shift(x, y, q, s)``: the int32 ``x`` times the Q-``q`` fixed-point number
    ``y`` (the real number ``y / 2**q``), scaled by ``2**s``, rounded half up, in int64:
    ``(((x * y) << s) + 2**(q - 1)) >> q``, a negative ``s`` adding ``-s`` to the right shift.

    >>> from mlc_lab.script import tir as T
    >>> T.q_multiply_shift(T.int32(10), 1 << 30, 31, 0)     # 10 * 0.5
    T.Cast("int32", (T.int64(10) * T.int64(1073741824) + T.int64(1073741824)) // T.int64(2147483648))
    """
    x, y, q, s = (_int32_arg(v, "q_multiply_shift") for v in (x, y, q, s))
    _check_dtype(dtype, "q_multiply_shift")
    if isinstance(s, E.IntImm):
        return _q_multiply(x, y, q, E.const(max(s.value, 0)), E.const(max(-s.value, 0)), s.value > 0)
    zero = E.const(0)
    left, right = E.Select(s > zero, s, zero), E.Select(s > zero, zero, -s)
    return _q_multiply(x, y, q, left, right, E.NE(left, zero))


def q_multiply_shift_per_axis(x, y, left_shift, right_shift, q, is_lshift_required,
                              is_rshift_required, dtype: str | None = None) -> E.PrimExpr:
    """``T.q_multiply_shift_per_axis(x, y, ls, rs, q, lshift, rshift)``: ``T.q_multiply_shift``
    with the shift given as a left part ``ls`` (applied where ``lshift`` holds) and a right part
    ``rs`` (always applied, as the reference compiler does: ``rshift`` is taken for its
    signature), as per-channel quantized kernels store them."""
    x, y, left, right, q = (_int32_arg(v, "q_multiply_shift_per_axis")
                            for v in (x, y, left_shift, right_shift, q))
    _check_dtype(dtype, "q_multiply_shift_per_axis")
    # Kept as a condition even when constant, as the reference lowering selects on it: the left
    # shift stays part of the value (a block computing it reads it).
    required = E.const(is_lshift_required, "bool") if isinstance(is_lshift_required, (bool, int)) \
        else E.convert(is_lshift_required)
    return _q_multiply(x, y, q, left, right, required)


def _int32_arg(value, what: str) -> E.PrimExpr:
    value = E.convert(value)
    if value.dtype != "int32":
        raise TypeError(f"T.{what} computes on int32 values, got {value} of dtype {value.dtype}")
    return value


def _check_dtype(dtype, what: str) -> None:
    if dtype is not None and dtype != "int32":
        raise TypeError(f"T.{what} computes int32, but dtype={dtype!r} was given")


def _q_multiply(x, y, q, left, right, lshift_required) -> E.PrimExpr:
    """int32(((x * y << left if lshift_required) + 2**(right + q - 1)) >> (right + q)), in int64."""
    wide = _wide(x) * _wide(y)   # then shifted left: the same in int64, and x, y, left, right
    if lshift_required is True:  # appear in the order of the arguments
        wide = wide * _power_of_two(left)
    elif lshift_required is not False:
        wide = E.Select(lshift_required, wide * _power_of_two(left), wide)
    if isinstance(right, E.IntImm) and isinstance(q, E.IntImm):
        total = right.value + q.value
        half, whole = _power_of_two(E.const(total - 1)), _power_of_two(E.const(total))
    else:
        total = right + q
        half, whole = _power_of_two(total - E.const(1)), _power_of_two(total)
    return E.Cast("int32", E.FloorDiv(wide + half, whole))


def _wide(value: E.PrimExpr) -> E.PrimExpr:
    """``value`` as an int64 (a constant is converted in place)."""
    return E.const(value.value, "int64") if isinstance(value, E.IntImm) else E.Cast("int64", value)


def _power_of_two(k: E.PrimExpr) -> E.PrimExpr:
    """2**k as an int64 for k in 0 .. 62: a constant when k is one, else the exact float64 power."""
    if isinstance(k, E.IntImm):
        if not 0 <= k.value <= 62:
            raise ValueError(f"a fixed-point shift of {k.value} bits is out of range (0 .. 62)")
        return E.const(1 << k.value, "int64")
    return E.Cast("int64", E.call_intrin("pow", E.FloatImm("float64", 2.0), E.Cast("float64", k)))
