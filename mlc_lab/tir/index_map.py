"""IndexMap: a map from the indices of one layout to those of another, such as
``lambda i, j: (j // 4, i, j % 4)``, with its shape map, its inverse and the places a map leaves
unused (padding).

The inverse is found for maps built from splits and fuses of the inputs ("digits" of each input:
``x``, ``x // d``, ``x % m``, ``(x + c) // d % m``, each input's digits covering it exactly once,
each output a sum of digits with constant or symbolic coefficients in mixed radix).

>>> m = IndexMap.from_func(lambda i: (i // 4, i % 4), index_dtype="int32")
>>> m
IndexMap(lambda i: (i // 4, i % 4))
>>> m.map_shape([14])
[4, 4]
>>> inverse, padding = m.non_surjective_inverse([14])
>>> inverse
IndexMap(lambda axis0, axis1: (axis0 * 4 + axis1,))
>>> padding
axis0 == 3 and axis1 >= 2
"""
from __future__ import annotations

import inspect

from ..arith import int_bound, simplify
from ..ir.structural import structural_equal
from . import dtype as dt
from . import expr as E
from .functor import StmtExprMutator
from .index_map_digits import Decomposition, IndexMapError, fold_div_mod  # noqa: F401
from .stmt import Range
from .stmt_functor import substitute

AXIS_SEPARATOR = "axis_separator"


class IndexMap:
    """``final_indices`` (expressions) of the ``initial_indices`` (variables).

    ``IndexMap(initial_indices, final_indices, inverse_index_map=None)``; usually made with
    :meth:`from_func`. A given ``inverse_index_map`` (an IndexMap or a function) is trusted by
    :meth:`inverse`."""

    AXIS_SEPARATOR = AXIS_SEPARATOR

    def __init__(self, initial_indices, final_indices, inverse_index_map=None):
        self.initial_indices = list(initial_indices)
        self.final_indices = [E.convert(e) for e in final_indices]
        if inverse_index_map is not None and not isinstance(inverse_index_map, IndexMap):
            inverse_index_map = IndexMap.from_func(inverse_index_map)
        self.inverse_index_map = inverse_index_map

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def from_func(mapping_function, ndim=None, inverse_index_map=None, *, index_dtype="int64"):
        """The map a Python function computes: called with one variable per parameter (and
        ``ndim`` in all when it takes ``*args``); it returns an expression or a list of them."""
        index_map, separators = IndexMap.from_func_with_separators(
            mapping_function, ndim, inverse_index_map, index_dtype=index_dtype)
        if separators:
            raise IndexMapError("IndexMap.from_func: the function returns IndexMap.AXIS_SEPARATOR; "
                                "use IndexMap.from_func_with_separators")
        return index_map

    @staticmethod
    def from_func_with_separators(mapping_function, ndim=None, inverse_index_map=None, *,
                                  index_dtype="int64"):
        """``(IndexMap, axis_separators)``: as :meth:`from_func`, where the function may also
        return ``IndexMap.AXIS_SEPARATOR`` between outputs; the separators are the positions
        (counted in outputs) where they stood."""
        positional, var_name, keyword = [], None, []
        for name, param in inspect.signature(mapping_function).parameters.items():
            if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                positional.append(E.Var(name, index_dtype))
            elif param.kind is param.VAR_POSITIONAL:
                var_name = name
            elif param.kind is param.KEYWORD_ONLY:
                keyword.append(E.Var(name, index_dtype))
            else:
                raise IndexMapError(f"an index map cannot take **{name}")
        if var_name is not None:
            if ndim is None:
                raise IndexMapError(f"the index map takes *{var_name}: give ndim, the number of "
                                    "indices it maps")
            positional += [E.Var(f"{var_name}_{k}", index_dtype)
                           for k in range(ndim - len(positional) - len(keyword))]
        out = mapping_function(*positional, **{v.name: v for v in keyword})
        outputs = list(out) if isinstance(out, (list, tuple)) else [out]
        final, separators = [], []
        for value in outputs:
            if isinstance(value, str) and value == AXIS_SEPARATOR:
                separators.append(len(final))
            elif isinstance(value, (E.PrimExpr, int, float)) and not isinstance(value, bool):
                final.append(E.const(int(value), index_dtype) if isinstance(value, int)
                             else E.convert(value))
            else:
                raise IndexMapError(f"an index map returns expressions (or IndexMap.AXIS_SEPARATOR), "
                                    f"got {value!r} of type {type(value).__name__}")
        return IndexMap(positional + keyword, final, inverse_index_map), separators

    # -- use ---------------------------------------------------------------------------------
    def __len__(self):
        return len(self.final_indices)

    @property
    def ndim(self) -> int:
        return len(self.initial_indices)

    def map_indices(self, indices, var_ranges: dict | None = None) -> list:
        """The outputs at ``indices`` (simplified, using ``var_ranges`` of their variables)."""
        if len(indices) != self.ndim:
            raise IndexMapError(f"the index map {self} takes {self.ndim} indices, got {len(indices)}")
        binding = dict(zip(self.initial_indices, [E.convert(i) for i in indices]))
        return [simplify(substitute(e, binding), var_ranges) for e in self.final_indices]

    def map_shape(self, shape) -> list:
        """The shape of the outputs over the box ``shape`` of inputs (each output's largest
        value + 1)."""
        shape = [E.convert(d) for d in shape]
        dec = Decomposition.of(self, shape)
        if dec is not None:
            return dec.shape()
        domain = {v: Range(E.const(0, d.dtype), d) for v, d in zip(self.initial_indices, shape)}
        out = []
        for e in self.final_indices:
            hi = int_bound(e, domain)[1]
            if hi is None:
                raise IndexMapError(f"cannot bound {e} over the shape ({', '.join(map(str, shape))})")
            out.append(E.const(hi + 1, e.dtype))
        return out

    def inverse(self, shape) -> "IndexMap":
        """The inverse over the box ``shape`` of inputs; the map must be one-to-one and onto its
        output shape (see :meth:`non_surjective_inverse` otherwise)."""
        if self.inverse_index_map is not None:
            return self.inverse_index_map
        inverse, padding = self.non_surjective_inverse(shape)
        if not (isinstance(padding, E.IntImm) and padding.value == 0):
            raise IndexMapError(f"the index map {self} is not onto its shape over "
                                f"({', '.join(map(str, _extents(shape)))}): {padding} marks unused places")
        return inverse

    def non_surjective_inverse(self, shape) -> tuple:
        """``(inverse, padding)``: the inverse map, and the condition on its inputs that marks the
        places of the output shape that no input reaches (the constant false when none)."""
        dec = Decomposition.of(self, [E.convert(d) for d in _extents(shape)])
        if dec is None:
            raise IndexMapError(f"the index map {self} is not a bijective affine map (split and "
                                "fuse of its inputs); its inverse is unknown")
        new_vars, final, padding = dec.inverse()
        return IndexMap(new_vars, final), padding

    def is_equivalent_to(self, other: "IndexMap") -> bool:
        """Both maps give the same outputs for the same inputs."""
        if self.ndim != other.ndim or len(self) != len(other):
            return False
        dtype = self.initial_indices[0].dtype if self.initial_indices else "int32"
        mine = [simplify(e) for e in self.final_indices]
        theirs = other.with_dtype(dtype).map_indices(self.initial_indices)
        return all(structural_equal(simplify(a - b), E.const(0, a.dtype)) or structural_equal(a, b)
                   for a, b in zip(mine, theirs))

    def with_dtype(self, dtype: str) -> "IndexMap":
        """The same map over indices of ``dtype`` (constants of the outputs follow)."""
        if all(v.dtype == dtype for v in self.initial_indices):
            return self
        new_vars = [E.Var(v.name, dtype) for v in self.initial_indices]
        retype = _Retype(dtype, dict(zip(self.initial_indices, new_vars)))
        final = [simplify(retype.visit(e)) for e in self.final_indices]
        return IndexMap(new_vars, final, self.inverse_index_map)

    def to_python(self) -> str:
        """The map as the source of a Python lambda: ``lambda i, j: (j, i)``."""
        names = ", ".join(v.name for v in self.initial_indices)
        body = ", ".join(_script(e) for e in self.final_indices)
        return f"lambda {names}: ({body}{',' if len(self) == 1 else ''})"

    def __repr__(self) -> str:
        return f"IndexMap({self.to_python()})"

    __str__ = __repr__


def _extents(shape) -> list:
    return [d.extent if isinstance(d, Range) else d for d in shape]


def _script(e) -> str:
    text = e.script() if hasattr(e, "script") else str(e)
    return text


class _Retype(StmtExprMutator):
    """Integer constants and casts to another index dtype."""

    def __init__(self, dtype, variables):
        super().__init__()
        self.dtype, self.variables = dtype, {id(k): v for k, v in variables.items()}

    def visit_IntImm(self, e):
        return E.IntImm(self.dtype, e.value) if dt.is_int(e.dtype) and e.dtype != "bool" else e

    def visit_Var(self, v):
        return self.variables.get(id(v), v)
