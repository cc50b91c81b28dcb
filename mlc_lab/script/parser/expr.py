"""Expression half of the script parser: names, constants, operators, calls, buffer loads and regions.

Expressions evaluate to Python values: Python numbers stay numbers until they meet IR (so
``n // 4`` with ``n = 128`` folds to 32, and ``i + 1`` takes ``i``'s dtype), PrimExprs combine with
their Python operators, and ``T.`` helpers are called as ordinary functions.
"""
from __future__ import annotations

import ast
import builtins
import contextvars
import difflib
import operator
import types
from dataclasses import dataclass

from ...tir import expr as E
from ...tir.buffer import Buffer
from ...tir.stmt import BufferRegion, Range
from .. import ir as ir_namespace
from .. import tir as tir_namespace
from ..errors import ScriptError

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
# Python syntax the script language leaves out, named for the error message.
UNSUPPORTED = {
    "While": "while loops", "Try": "try statements", "TryStar": "try statements",
    "Return": "return statements", "Delete": "del statements", "Import": "imports",
    "ImportFrom": "imports", "Global": "global declarations", "Nonlocal": "nonlocal declarations",
    "Raise": "raise statements", "Assert": "assert statements", "Break": "break statements",
    "Continue": "continue statements", "Match": "match statements", "FunctionDef": "nested functions",
    "AsyncFunctionDef": "nested functions", "ClassDef": "class definitions", "AsyncFor": "async loops",
    "AsyncWith": "async with statements", "Lambda": "lambdas", "ListComp": "list comprehensions",
    "SetComp": "set comprehensions", "DictComp": "dict comprehensions", "GeneratorExp": "generator expressions",
    "Await": "await expressions", "Yield": "yield expressions", "YieldFrom": "yield expressions",
    "JoinedStr": "f-strings", "NamedExpr": "assignment expressions (:=)", "Starred": "starred arguments",
    "Set": "set literals",
}


# Safe parsing (``from_source(text, safe=True)``), for text nobody vouches for, such as a student's
# submission: names resolve to T, I, R and these builtins only, no attribute starting with "_" is
# read, and no module other than the script namespaces is reached, so the text can only build IR.
SAFE_BUILTINS = {name: getattr(builtins, name) for name in
                 ("range", "int", "float", "bool", "min", "max", "len", "abs", "tuple", "list")}
SAFE = contextvars.ContextVar("mlc_lab_script_safe", default=False)


def safe_getattr(parser, owner, node: ast.Attribute):
    """``getattr(owner, node.attr)``, refused in safe mode where it could leave the IR world."""
    if SAFE.get():
        if node.attr.startswith("_") or (isinstance(owner, types.ModuleType) and
                                         node.attr not in getattr(owner, "__all__", ())):
            raise parser.error(node, f"'{ast.unparse(node)}' is not allowed in safe mode (only the "
                                     "public T., I. and R. functions and IR attributes are)")
        value = getattr(owner, node.attr)
        if not _safe_value(value):
            raise parser.error(node, f"'{ast.unparse(node)}' is not allowed in safe mode (it is "
                                     f"a {type(value).__name__}, not IR)")
        return value
    return getattr(owner, node.attr)


def _ours(obj) -> bool:
    return getattr(obj, "__module__", None) is not None and str(obj.__module__).startswith("mlc_lab.")


def _safe_value(value) -> bool:
    """What safe mode lets an attribute give: plain values, IR objects, mlc_lab's own classes and
    functions, and methods of IR objects; not a module, nor a foreign object such as the numpy
    array inside a constant (whose ``tofile`` writes files)."""
    if value is None or type(value) in (int, float, bool, str, tuple, list, dict):
        return True
    if isinstance(value, types.MethodType):
        return _ours(type(value.__self__))
    if isinstance(value, (type, types.FunctionType)):
        return _ours(value)
    if type(value) is types.SimpleNamespace:      # a namespace of script functions, such as R.nn
        return all(_safe_value(v) for v in vars(value).values())
    return _ours(type(value)) and not isinstance(value, types.ModuleType)


@dataclass
class SourceInfo:
    """Where the parsed text came from, to map AST positions back to the real file."""
    filename: str
    lines: list            # the text's lines as they are in the file (not dedented)
    first_line: int = 1    # file line number of the text's first line
    col_shift: int = 0     # indentation removed before parsing


class HandleParam:
    """A ``T.handle`` parameter waiting for its ``T.match_buffer``."""

    def __init__(self, name: str):
        self.name, self.buffer = name, None


class ExprParser:
    def __init__(self, source: SourceInfo, globals_: dict, closure: dict):
        self.source = source
        self.globals = globals_
        self.closure = closure
        self.scopes: list[dict] = [{}]
        self.bound_vars: dict[int, str] = {}   # id(var) -> "loop variable", "parameter", ...

    # -- errors ------------------------------------------------------------------------------------
    def error(self, node, message: str) -> ScriptError:
        src = self.source
        if node is None or not hasattr(node, "lineno"):
            return ScriptError(message, src.filename)
        index = node.lineno - 1
        line = src.lines[index] if 0 <= index < len(src.lines) else None
        column = node.col_offset + src.col_shift
        end = node.end_col_offset + src.col_shift if node.end_lineno == node.lineno else None
        return ScriptError(message, src.filename, src.first_line + index, column, end, line)

    def unsupported(self, node) -> ScriptError:
        what = UNSUPPORTED.get(type(node).__name__, f"{type(node).__name__} nodes")
        return self.error(node, f"{what} are not supported in T.prim_func")

    # -- names -------------------------------------------------------------------------------------
    def define(self, name: str, value) -> None:
        self.scopes[-1][name] = value

    def push_scope(self) -> None:
        self.scopes.append({})

    def pop_scope(self) -> None:
        self.scopes.pop()

    def is_defined(self, name: str) -> bool:
        return self._find(name)[0]

    def lookup(self, name: str, node):
        found, value = self._find(name)
        if found:
            return value
        known = {n for scope in self.scopes for n in scope} | set(self.closure)
        known |= {n for n in self.globals if not n.startswith("__")}
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise self.error(node, f"name '{name}' is not defined{hint}")

    def _find(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return True, scope[name]
        names = SAFE_BUILTINS if SAFE.get() else vars(builtins)
        for table in (self.closure, self.globals, names, {"T": tir_namespace, "I": ir_namespace}):
            if name in table:
                return True, table[name]
        return False, None

    # -- evaluation --------------------------------------------------------------------------------
    def eval(self, node):
        """Evaluate an expression node to a Python value (PrimExpr, number, Buffer, T. function...)."""
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        try:
            return method(node)
        except ScriptError:
            raise
        except Exception as exc:  # an IR constructor refused the values: report it at this node
            raise self.error(node, describe_error(exc)) from None

    def eval_expr(self, node) -> E.PrimExpr:
        return self.to_expr(self.eval(node), node)

    def to_expr(self, value, node) -> E.PrimExpr:
        if isinstance(value, E.PrimExpr):
            return value
        if isinstance(value, str):
            return E.StringImm(value)
        try:
            return E.convert(value)
        except TypeError:
            raise self.error(node, f"expected an expression here, got {kind_of(value)}") from None

    def eval_Constant(self, node: ast.Constant):
        return node.value

    def eval_Name(self, node: ast.Name):
        value = self.lookup(node.id, node)
        if isinstance(value, HandleParam):
            raise self.error(node, f"the T.handle parameter '{node.id}' can only be used as the first "
                                   "argument of T.match_buffer")
        return value

    def eval_Attribute(self, node: ast.Attribute):
        owner = self.eval(node.value)
        if isinstance(owner, Buffer) and node.attr == "elem_offset" and \
                id(owner) in getattr(self, "view_layouts", {}):
            offset = self.view_layouts[id(owner)][1]   # a matched region: where it starts
            if offset is None:
                raise self.error(node, f"{owner.name}.elem_offset: this parser cannot work out where the "
                                       "region it views starts")
            return offset
        try:
            return safe_getattr(self, owner, node)
        except AttributeError:
            pass
        prefix = ast.unparse(node.value)
        if owner is tir_namespace and node.attr in tir_namespace.RETIRED:
            raise self.error(node, tir_namespace.RETIRED[node.attr])
        if owner is tir_namespace or isinstance(owner, tir_namespace._Axis) or owner is ir_namespace:
            names = (tir_namespace.__all__ if owner is tir_namespace else ir_namespace.__all__
                     if owner is ir_namespace else ["spatial", "reduce", "opaque", "scan", "remap", "S", "R"])
            close = difflib.get_close_matches(node.attr, names, n=1)
            hint = f"; did you mean {prefix}.{close[0]}?" if close else ""
            raise self.error(node, f"unknown function {prefix}.{node.attr}{hint}")
        raise self.error(node, f"{prefix} ({kind_of(owner)}) has no attribute '{node.attr}'")

    def eval_Tuple(self, node: ast.Tuple):
        return tuple(self.eval(e) for e in node.elts)

    def eval_List(self, node: ast.List):
        return [self.eval(e) for e in node.elts]

    def eval_Dict(self, node: ast.Dict):
        if any(k is None for k in node.keys):
            raise self.error(node, "dict unpacking (**) is not supported in T.prim_func")
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}

    def eval_BinOp(self, node: ast.BinOp):
        op = _BINARY.get(type(node.op))
        if op is None:
            raise self.error(node, f"the operator {type(node.op).__name__} is not supported in T.prim_func")
        left, right = self.eval(node.left), self.eval(node.right)
        self.check_mix(left, right, node)
        return op(left, right)

    def check_mix(self, a, b, node) -> None:
        """Refuse an implicit int/float mix of two expressions (``A[i] + B[i]`` with A float32
        and B int32); a Python number takes the other side's dtype, so ``A[i] + 1`` is fine."""
        if not (isinstance(a, E.PrimExpr) and isinstance(b, E.PrimExpr)):
            return
        if _is_float(a.dtype) != _is_float(b.dtype) and "bool" not in (a.dtype, b.dtype):
            f, i = (a, b) if _is_float(a.dtype) else (b, a)
            raise self.error(node, f"implicit conversion between {f.dtype} and {i.dtype}: "
                                   f"convert {i} explicitly, e.g. T.{f.dtype}({i}) or "
                                   f"T.Cast(\"{f.dtype}\", {i})")

    def eval_UnaryOp(self, node: ast.UnaryOp):
        value = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return E.Not(value) if isinstance(value, E.PrimExpr) else not value
        if isinstance(node.op, ast.UAdd):
            return value
        return -value if isinstance(node.op, ast.USub) else ~value

    def eval_BoolOp(self, node: ast.BoolOp):
        result = self.eval(node.values[0])
        for operand in node.values[1:]:
            result = self.logical(isinstance(node.op, ast.And), result, self.eval(operand), node)
        return result

    def logical(self, is_and: bool, a, b, node):
        if not isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
            return (a and b) if is_and else (a or b)
        a, b = self.to_expr(a, node), self.to_expr(b, node)
        return E.And(*E.unify_operands(a, b)) if is_and else E.Or(*E.unify_operands(a, b))

    def eval_Compare(self, node: ast.Compare):
        left, result = self.eval(node.left), None
        for op, comparator in zip(node.ops, node.comparators):
            fn = _COMPARE.get(type(op))
            if fn is None:
                raise self.error(node, f"the comparison {type(op).__name__} is not supported in T.prim_func")
            right = self.eval(comparator)
            self.check_mix(left, right, node)
            part = fn(left, right)
            result = part if result is None else self.logical(True, result, part, node)
            left = right
        return result

    def eval_IfExp(self, node: ast.IfExp):
        cond = self.eval(node.test)
        if isinstance(cond, E.PrimExpr):
            return tir_namespace.Select(cond, self.eval(node.body), self.eval(node.orelse))
        return self.eval(node.body) if cond else self.eval(node.orelse)

    def eval_Slice(self, node: ast.Slice):
        if node.step is not None:
            raise self.error(node, "slices with a step are not supported in buffer regions")
        lower = None if node.lower is None else self.eval(node.lower)
        upper = None if node.upper is None else self.eval(node.upper)
        return slice(lower, upper)

    def eval_Call(self, node: ast.Call):
        func = self.eval(node.func)
        if isinstance(func, tir_namespace.ScriptOnly):
            raise self.error(node, statement_only_hint(func.name))
        if isinstance(func, tir_namespace.DTypeFunc) and not node.args and not node.keywords:
            raise self.error(node, f"T.{func.dtype}() declares a symbolic variable: write it as its own "
                                   f"statement, `n = T.{func.dtype}()`")
        args, kwargs = self.call_args(node)
        if any(func is h for h in _MIXING_HELPERS) and len(args) == 2:
            self.check_mix(args[0], args[1], node)
        try:
            return func(*args, **kwargs)
        except TypeError as exc:
            name = getattr(func, "__name__", None)
            if getattr(func, "__module__", None) != tir_namespace.__name__ or not name:
                raise
            raise TypeError(str(exc).replace(f"{name}()", f"T.{name}()", 1)) from None

    def call_args(self, node: ast.Call):
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.unsupported(a)
        if any(k.arg is None for k in node.keywords):
            raise self.error(node, "**kwargs in calls are not supported in T.prim_func")
        return [self.eval(a) for a in node.args], {k.arg: self.eval(k.value) for k in node.keywords}

    def eval_Subscript(self, node: ast.Subscript):
        owner = self.eval(node.value)
        if not isinstance(owner, Buffer):
            if not hasattr(owner, "__getitem__") or isinstance(owner, (E.PrimExpr, str)):
                raise self.error(node.value, f"`{ast.unparse(node.value)}` is {kind_of(owner)}, not a buffer, "
                                             "so it cannot be indexed")
            return owner[self.eval(node.slice)]
        indices = self.buffer_indices(owner, node, allow_slices=False)
        return owner[tuple(indices)]

    def buffer_indices(self, buffer: Buffer, node: ast.Subscript, allow_slices: bool) -> list:
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(parts) != buffer.ndim:
            raise self.error(node, f"buffer {buffer.name} has {buffer.ndim} dimension(s) but is indexed "
                                   f"with {len(parts)} index(es)")
        out = []
        for part in parts:
            if isinstance(part, ast.Slice) and not allow_slices:
                raise self.error(part, f"a slice of buffer {buffer.name} is a region: regions are only "
                                       "allowed in T.reads, T.writes and T.match_buffer")
            value = self.eval(part)
            if not isinstance(value, (slice, E.PrimExpr, int)) or isinstance(value, bool):
                raise self.error(part, f"buffer {buffer.name} is indexed with {kind_of(value)}; "
                                       "indices must be integer expressions")
            if isinstance(value, E.PrimExpr) and not _is_index_dtype(value.dtype):
                raise self.error(part, f"buffer {buffer.name} is indexed with an expression of dtype "
                                       f"{value.dtype}; indices must be integers")
            out.append(value)
        return out

    # -- buffer regions (T.reads / T.writes / T.match_buffer) --------------------------------------
    def eval_region(self, node) -> BufferRegion:
        if isinstance(node, ast.Subscript):
            owner = self.eval(node.value)
            if isinstance(owner, Buffer):
                ranges = []
                for part, value in zip(self._index_nodes(node), self.buffer_indices(owner, node, True)):
                    ranges.append(self.region_range(value, owner, len(ranges), part))
                return BufferRegion(owner, tuple(ranges))
        value = self.eval(node)
        if isinstance(value, Buffer):
            return BufferRegion.full(value)
        if isinstance(value, BufferRegion):
            return value
        raise self.error(node, f"expected a buffer region such as A[vi, 0:128], got {kind_of(value)}")

    @staticmethod
    def _index_nodes(node: ast.Subscript) -> list:
        return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]

    def region_range(self, value, buffer: Buffer, dim: int, node) -> Range:
        if not isinstance(value, slice):
            idx = self.to_expr(value, node)
            return Range(idx, E.const(1, idx.dtype))
        start = 0 if value.start is None else value.start
        stop = buffer.shape[dim] if value.stop is None else value.stop
        return self.make_range(start, stop, node)

    def make_range(self, start, stop, node) -> Range:
        """Range(start, stop - start), folding the extent (``vi*4:vi*4 + 4`` has extent 4)."""
        from ...arith import simplify

        if isinstance(start, int) and isinstance(stop, int):
            extent = stop - start
        elif isinstance(start, int) and start == 0:
            extent = stop
        else:
            extent = simplify(self.to_expr(stop, node) - start)
        extent = self.to_expr(extent, node)
        if not _is_index_dtype(extent.dtype):
            raise self.error(node, f"a range must have an integer extent, got dtype {extent.dtype}")
        return Range.from_min_extent(start, extent)


# T. helpers that combine two operands like an operator does.
_MIXING_HELPERS = (tir_namespace.max, tir_namespace.min, tir_namespace.floordiv, tir_namespace.floormod,
                   tir_namespace.truncdiv, tir_namespace.truncmod)


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _is_index_dtype(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def kind_of(value) -> str:
    """What ``value`` is, for an error message ("an expression of dtype int32", "the buffer A")."""
    if isinstance(value, E.PrimExpr):
        return f"an expression of dtype {value.dtype}"
    if isinstance(value, Buffer):
        return f"the buffer {value.name}"
    return f"a {type(value).__name__} ({value!r})"


def describe_error(exc: Exception) -> str:
    """The message of ``exc`` for a ScriptError, naming its type unless it is a plain
    TypeError/ValueError/IndexError."""
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, (TypeError, ValueError, IndexError)) else f"{type(exc).__name__}: {text}"


_STATEMENT_HINTS = {
    "block": 'T.block is used as `with T.block("name"):`',
    "init": "T.init is used as `with T.init():` directly inside a T.block",
    "alloc_buffer": "T.alloc_buffer is used as `X = T.alloc_buffer(shape, dtype)`",
    "match_buffer": "T.match_buffer is used as `A = T.match_buffer(a, shape, dtype)`",
    "allocate": 'T.allocate is used as `X = T.allocate(shape, dtype, "local")`',
    "allocate_const": 'T.allocate_const is used as `c = T.allocate_const([0.5, 1.5], "float32", [2])`',
    "var": 'T.var is used as `n = T.var("int64")`',
}


def statement_only_hint(name: str) -> str:
    """Why ``T.<name>`` cannot be used inside an expression, and how it is written."""
    if name in _STATEMENT_HINTS:
        return _STATEMENT_HINTS[name] + ", not inside an expression"
    if name.startswith("axis."):
        return f"T.{name} declares a block iterator: write `v = T.{name}(...)` directly inside a T.block"
    return f"T.{name}(...) is a statement of its own and cannot be used inside an expression"
