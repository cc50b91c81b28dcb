"""Integer expressions every thread evaluates alike, compiled to one Python function each.

Loop counters, the offsets they give (``i_2 * 8 + k_1``) and the conditions on them are the
same for all threads: the simulator evaluates them as numpy scalars, millions of times in a
large kernel. Going through the expression evaluator node by node costs a Python call per node;
here each such expression becomes the body of one ``lambda env: ...``, e.g.
``lambda env: env[i_2] * c8 + env[k_1]`` with ``c8 = np.int32(8)``. Values stay numpy scalars
of the expression's dtype, so results (overflow included) are those of the evaluator.

A variable is *uniform* when it cannot differ between threads: a scalar parameter, the counter
of a serial loop whose bounds are uniform, a let variable bound to a uniform value. Vectorized
loop variables are arrays (one element per vector lane) and never uniform.
"""
from __future__ import annotations

import numpy as np

from ...tir import dtype as dt
from ...tir import expr as E
from ...tir import stmt as S
from ..interpreter.expr import _trunc_div, np_dtype

_INFIX = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%", E.EQ: "==",
          E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "&", E.Or: "|"}
_CALLS = {E.Min: "min", E.Max: "max", E.Div: "trunc_div", E.Mod: "fmod"}


def uniform_vars(body, scalars) -> set:
    """The variables of ``body`` that hold one value for every thread (see above)."""
    found = set(scalars)

    def visit(stmt):
        if isinstance(stmt, S.For):
            if stmt.kind != "vectorized" and _uses_only(stmt.min, found) and \
                    _uses_only(stmt.extent, found):
                found.add(stmt.loop_var)
        elif isinstance(stmt, S.LetStmt) and _uses_only(stmt.value, found):
            found.add(stmt.var)
        for _, value in stmt.fields():
            for v in (value if isinstance(value, tuple) else (value,)):
                if isinstance(v, S.Stmt):
                    visit(v)
    visit(body)
    return found


def compile_uniform(e, uniform: set):
    """``lambda env: value of e`` when ``e`` is a uniform integer or boolean expression made of
    the nodes above, else None."""
    if dt.lanes(e.dtype) != 1 or not (dt.is_int(e.dtype) or e.dtype == "bool"):
        return None
    names = {"trunc_div": _trunc_div, "fmod": np.fmod, "np": np}
    try:
        source = _source(e, uniform, names)
    except _NotUniform:
        return None
    return eval(f"lambda env: {source}", names)   # noqa: S307 (source built from IR nodes only)


class _NotUniform(Exception):
    pass


def _source(e, uniform, names) -> str:
    kind = type(e)
    if isinstance(e, E.Var):
        if e not in uniform:
            raise _NotUniform
        return f"env[{_name(e, names)}]"
    if kind is E.IntImm:
        return _name(np_dtype(e.dtype).type(e.value), names)
    if kind in _INFIX and dt.lanes(e.a.dtype) == 1 and not dt.is_float(e.a.dtype):
        return f"({_source(e.a, uniform, names)} {_INFIX[kind]} {_source(e.b, uniform, names)})"
    if kind in _CALLS and not dt.is_float(e.dtype):
        return f"{_CALLS[kind]}({_source(e.a, uniform, names)}, {_source(e.b, uniform, names)})"
    if kind is E.Not:
        return f"(~{_source(e.a, uniform, names)})"
    if kind is E.Cast and (dt.is_int(e.dtype) or e.dtype == "bool") and \
            not dt.is_float(e.value.dtype):
        cast = _name(np_dtype(e.dtype).type, names)
        return f"{cast}({_source(e.value, uniform, names)})"
    raise _NotUniform


def _name(value, names) -> str:
    name = f"k{len(names)}"
    names[name] = value
    return name


def _uses_only(e, allowed) -> bool:
    if isinstance(e, E.Var):
        return e in allowed
    return not isinstance(e, E.BufferLoad) and all(_uses_only(c, allowed) for c in children(e))


def children(e):
    """The expressions directly inside the expression ``e``."""
    for _, value in e.fields():
        if isinstance(value, E.PrimExpr):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, E.PrimExpr))
