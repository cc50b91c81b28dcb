"""Statement half of the script parser: stores, loops, if/else, let bindings, T.evaluate, T.allocate.

Blocks, block iterators and buffer declarations live in :mod:`block`.
"""
from __future__ import annotations

import ast
import builtins
import warnings
from dataclasses import dataclass, field

import numpy as np

from ...tir import dtype as dt
from ...tir import expr as E
from ...tir import stmt as S
from ...tir.buffer import Buffer, decl_buffer
from .. import tir as tir_namespace
from ..errors import ScriptError
from .expr import ExprParser, describe_error, kind_of, statement_only_hint

_BINARY_STORE = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.Div: "__truediv__",
                 ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__"}


@dataclass
class FuncFrame:
    """What the top level of a function body declares besides statements."""
    attrs: dict = field(default_factory=dict)
    alloc_buffers: list = field(default_factory=list)


@dataclass
class Consumed:
    """A statement that took the rest of its statement list as its body (LetStmt, Allocate)."""
    stmt: S.Stmt


def nop() -> S.Stmt:
    return S.Evaluate(E.IntImm("int32", 0))


class StmtParser(ExprParser):
    """``frame`` is the FuncFrame or BlockFrame whose statement list is being parsed directly,
    or None inside loops, ifs and other nested bodies."""

    def parse_body(self, stmts: list, frame) -> S.Stmt | None:
        out: list[S.Stmt] = []
        for index, node in enumerate(stmts):
            result = self.parse_stmt(node, frame, stmts[index + 1:])
            if isinstance(result, Consumed):
                out.append(result.stmt)
                break
            if result is not None:
                out.append(result)
        return S.seq(*out) if out else None

    def parse_nested(self, stmts: list) -> S.Stmt:
        self.push_scope()
        try:
            return self.parse_body(stmts, None) or nop()
        finally:
            self.pop_scope()

    def parse_stmt(self, node, frame, rest: list):
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        try:
            return method(node, frame, rest)
        except ScriptError:
            raise
        except Exception as exc:  # an IR constructor refused the values: report it at this statement
            raise self.error(node, describe_error(exc)) from None

    # -- simple statements -----------------------------------------------------------------------
    def stmt_Pass(self, node, frame, rest):
        return None

    def stmt_Expr(self, node: ast.Expr, frame, rest):
        value_node = node.value
        if isinstance(value_node, ast.Constant) and isinstance(value_node.value, str):
            return None  # a docstring
        if isinstance(value_node, ast.Call):
            func = self.eval(value_node.func)
            if isinstance(func, tir_namespace.ScriptOnly):
                return self.script_call(func.name, value_node, frame)
        value = self.eval(value_node)
        if isinstance(value, E.PrimExpr):
            return S.Evaluate(value)
        raise self.error(node, f"this statement computes {kind_of(value)} and does nothing with it")

    def script_call(self, name: str, node: ast.Call, frame):
        """T.func_attr / T.where / T.reads / T.writes / T.block_attr used as statements."""
        if name == "func_attr":
            if not isinstance(frame, FuncFrame):
                raise self.error(node, "T.func_attr must be at the top level of the function body")
            args, kwargs = self.call_args(node)
            if len(args) != 1 or kwargs or not isinstance(args[0], dict):
                raise self.error(node, 'T.func_attr takes one dict, e.g. T.func_attr({"global_symbol": "main"})')
            for key, value in args[0].items():
                if not isinstance(key, str):
                    raise self.error(node, f"T.func_attr keys must be strings, got {key!r}")
                if isinstance(value, E.IntImm) and dt.is_bool(value.dtype):
                    value = bool(value.value)   # T.bool(True) is the flag True, as the reference reads it
                frame.attrs[key] = value
            return None
        if name in ("where", "reads", "writes", "block_attr"):
            return self.block_statement(name, node, frame)
        raise self.error(node, statement_hint(name))

    def stmt_Assign(self, node: ast.Assign, frame, rest):
        if len(node.targets) != 1:
            raise self.error(node, "chained assignments (a = b = ...) are not supported in T.prim_func")
        target, value_node = node.targets[0], node.value
        if isinstance(target, ast.Subscript):
            return self.buffer_store(target, value_node, None, node)
        if isinstance(value_node, ast.Call):
            func = self.eval(value_node.func)
            if isinstance(func, tir_namespace.ScriptOnly) or (
                    isinstance(func, tir_namespace.DTypeFunc) and not value_node.args and not value_node.keywords):
                return self.script_assign(func, target, value_node, frame, rest)
        if isinstance(target, ast.Tuple) and isinstance(value_node, ast.Tuple) \
                and len(target.elts) == len(value_node.elts) and all(map(self.is_declaration, value_node.elts)):
            for t, v in zip(target.elts, value_node.elts):   # n, m = T.int64(), T.int64()
                self.script_assign(self.eval(v.func), t, v, frame, rest)
            return None
        if isinstance(target, ast.Tuple):
            values = self.eval(value_node)
            if not isinstance(values, (tuple, list)) or len(values) != len(target.elts):
                raise self.error(node, "tuple assignment needs a tuple of the same length on the right")
            for t, v in zip(target.elts, values):
                self.bind_python_name(t, v)
            return None
        if not isinstance(target, ast.Name):
            raise self.error(target, f"cannot assign to {ast.unparse(target)} in T.prim_func")
        self.check_rebinding(target)
        value = self.eval(value_node)
        if isinstance(value, E.PrimExpr):
            return self.let(target.id, value, frame, rest)
        self.bind_python_name(target, value)
        return None

    def is_declaration(self, node) -> bool:
        """Whether ``node`` declares a symbolic variable: ``T.int64()`` or ``T.var("int64")``."""
        if not isinstance(node, ast.Call):
            return False
        try:
            func = self.eval(node.func)
        except ScriptError:
            return False
        return func is tir_namespace.var or (isinstance(func, tir_namespace.DTypeFunc)
                                             and not node.args and not node.keywords)

    def bind_python_name(self, target, value) -> None:
        if not isinstance(target, ast.Name):
            raise self.error(target, f"cannot assign to {ast.unparse(target)} in T.prim_func")
        if isinstance(value, E.PrimExpr):
            raise self.error(target, "unpacking expressions into several variables is not supported; "
                                     "bind them one per line")
        self.check_rebinding(target)
        self.define(target.id, value)

    def check_rebinding(self, target: ast.Name) -> None:
        """Loop variables, block iterators, parameters and buffers cannot be reassigned: the new
        value would silently become a different variable."""
        if not any(target.id in scope for scope in self.scopes):
            return   # a new name, or one from the enclosing Python code
        old = self._find(target.id)[1]
        if isinstance(old, Buffer):
            raise self.error(target, f"cannot assign to the buffer {target.id}; store to its elements "
                                     f"instead, e.g. {target.id}[i] = ...")
        if isinstance(old, E.Var) and id(old) in self.bound_vars:
            raise self.error(target, f"cannot assign to the {self.bound_vars[id(old)]} {target.id}; "
                                     "name the new value differently")

    def stmt_AnnAssign(self, node: ast.AnnAssign, frame, rest):
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, f"cannot annotate {ast.unparse(node.target)} in T.prim_func")
        dtype_func = self.eval(node.annotation)
        if not isinstance(dtype_func, tir_namespace.DTypeFunc):
            raise self.error(node.annotation, "a variable annotation must be a dtype such as T.int32 or "
                                              f"T.float32, got {ast.unparse(node.annotation)}")
        if node.value is None:
            raise self.error(node, f"{node.target.id}: T.{dtype_func.dtype} needs a value: "
                                   f"`{node.target.id}: T.{dtype_func.dtype} = ...`")
        value = self.eval(node.value)
        if isinstance(value, E.PrimExpr):
            if value.dtype != dtype_func.dtype:
                raise self.error(node.value, f"{node.target.id} is declared T.{dtype_func.dtype} but its value "
                                             f"has dtype {value.dtype}; convert it with T.{dtype_func.dtype}(...)")
        else:
            value = dtype_func(value)
        return self.let(node.target.id, value, frame, rest, dtype_func.dtype)

    def let(self, name: str, value: E.PrimExpr, frame, rest, dtype: str | None = None) -> Consumed:
        var = E.Var(name, dtype or value.dtype)
        return Consumed(S.LetStmt(var, value, self.rest_with(name, var, frame, rest)))

    def rest_with(self, name: str, value, frame, rest: list) -> S.Stmt:
        """The statements after this one, parsed in a scope where ``name`` is ``value`` (the
        variable of a let, the buffer of an allocation)."""
        self.push_scope()
        try:
            self.define(name, value)
            return self.parse_body(rest, frame) or nop()
        finally:
            self.pop_scope()

    def stmt_AugAssign(self, node: ast.AugAssign, frame, rest):
        if not isinstance(node.target, ast.Subscript):
            raise self.error(node, "augmented assignment (+=, ...) only works on buffer elements "
                                   "in T.prim_func; variables cannot be reassigned")
        method = _BINARY_STORE.get(type(node.op))
        if method is None:
            raise self.error(node, f"the operator {type(node.op).__name__}= is not supported in T.prim_func")
        return self.buffer_store(node.target, node.value, method, node)

    def buffer_store(self, target: ast.Subscript, value_node, update: str | None, stmt_node) -> S.BufferStore:
        if isinstance(target.value, ast.Name) and not self.is_defined(target.value.id):
            raise self.error(target.value, f"assignment to '{target.value.id}', which is not a declared buffer; "
                                           "declare it as a parameter or with T.alloc_buffer first")
        buffer = self.eval(target.value)
        if not isinstance(buffer, Buffer):
            raise self.error(target.value, f"'{ast.unparse(target.value)}' is {kind_of(buffer)}, not a buffer; "
                                           "only buffer elements can be assigned")
        load = buffer[tuple(self.buffer_indices(buffer, target, allow_slices=False))]
        value = self.eval(value_node)
        if update is not None:
            self.check_mix(load, value, stmt_node)
            value = getattr(load, update)(value)
        return S.BufferStore(buffer, self.store_value(buffer, load.dtype, value, value_node), load.indices)

    def store_value(self, buffer: Buffer, dtype: str, value, node) -> E.PrimExpr:
        """The value a store writes, converted to the element type of ``buffer`` (``dtype``, with
        the lanes of a vector store) as the reference compiler's script parser converts it: an
        explicit cast (a constant is converted in place). Storing a float into an integer buffer
        warns, as there; values whose lanes differ, and handles, are refused."""
        if isinstance(value, (bool, int, float)):
            if isinstance(value, float) and not dt.is_float(buffer.dtype) and not value.is_integer():
                warnings.warn(f"storing the float {value} into {buffer.name}, a {buffer.dtype} buffer, "
                              "truncates it", stacklevel=2)
            scalar = store_cast(E.const(value), dt.element_of(dtype))
            return scalar if dt.lanes(dtype) == 1 else E.Broadcast(scalar, dt.lanes(dtype))
        if not isinstance(value, E.PrimExpr):
            raise self.error(node, f"cannot store {kind_of(value)} into buffer {buffer.name}")
        if value.dtype == dtype:
            return value
        if dt.lanes(value.dtype) != dt.lanes(dtype):
            raise self.error(node, f"cannot store a value of dtype {value.dtype} into {buffer.name}, a "
                                   f"{buffer.dtype} buffer, at {dt.lanes(dtype)} lane(s): the value has "
                                   f"{dt.lanes(value.dtype)}; give it as many lanes as the indices "
                                   "(e.g. T.Broadcast(x, n))")
        if "handle" in (value.dtype, buffer.dtype):
            raise self.error(node, f"cannot store a value of dtype {value.dtype} into {buffer.name}, a "
                                   f"{buffer.dtype} buffer: a handle converts to nothing else")
        if dt.is_float(value.dtype) and not dt.is_float(buffer.dtype):
            warnings.warn(f"storing a {value.dtype} value into {buffer.name}, a {buffer.dtype} buffer, "
                          "converts it and may lose precision", stacklevel=2)
        return store_cast(value, dtype)

    def stmt_If(self, node: ast.If, frame, rest):
        cond = self.eval(node.test)
        if not isinstance(cond, E.PrimExpr):
            chosen = node.body if cond else node.orelse   # decided now, like Python
            return self.parse_body(chosen, frame)
        if not dt.is_bool(cond.dtype):
            raise self.error(node.test, f"an if condition must be a bool expression, got dtype {cond.dtype}")
        then_case = self.parse_nested(node.body)
        else_case = self.parse_nested(node.orelse) if node.orelse else None
        return S.IfThenElse(cond, then_case, else_case)

    # -- loops -----------------------------------------------------------------------------------
    def stmt_For(self, node: ast.For, frame, rest):
        if node.orelse:
            raise self.error(node, "for ... else is not supported in T.prim_func")
        specs = self.loop_specs(node.iter)
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        for t in targets:
            if not isinstance(t, ast.Name):
                raise self.error(t, "loop variables must be plain names")
        if len(targets) != len(specs):
            raise self.error(node.target, f"the loop header names {len(targets)} variable(s) for "
                                          f"{len(specs)} loop(s)")
        loops = []
        self.push_scope()
        try:
            for t, spec in zip(targets, specs):
                rng = self.make_range(0, spec.start, node.iter) if spec.stop is None else \
                    self.make_range(spec.start, spec.stop, node.iter)
                var = E.Var(t.id, rng.extent.dtype)
                self.define(t.id, var)
                self.bound_vars[id(var)] = "loop variable"
                self.loop_ranges[var] = rng
                loops.append((var, rng, spec))
            body = self.parse_body(node.body, None) or nop()
        finally:
            self.pop_scope()
            for var, _, _ in loops:
                self.loop_ranges.pop(var, None)
        for var, rng, spec in reversed(loops):
            annotations = tuple(sorted(spec.annotations.items()))
            body = S.For(var, rng.min, rng.extent, spec.kind, body, spec.thread, annotations)
        return body

    def loop_specs(self, node) -> list:
        if isinstance(node, ast.Call) and self.eval(node.func) is builtins.range:
            args, kwargs = self.call_args(node)
            if kwargs or not 1 <= len(args) <= 2:
                raise self.error(node, "range() takes an extent or a start and a stop (no step) in T.prim_func")
            return [tir_namespace.serial(*args)]
        value = self.eval(node)
        if isinstance(value, tir_namespace.LoopSpec):
            return [value]
        if isinstance(value, (tuple, list)) and value and all(isinstance(v, tir_namespace.LoopSpec) for v in value):
            return list(value)
        raise self.error(node, f"cannot loop over {kind_of(value)}: use range(), T.grid(), T.serial(), "
                               "T.parallel(), T.vectorized(), T.unroll() or T.thread_binding()")

    # -- T.allocate ------------------------------------------------------------------------------
    def allocate(self, target: ast.Name, node: ast.Call, frame, rest) -> Consumed:
        args, kwargs = self.call_args(node)

        def spec(shape, dtype="float32", scope="global"):
            return decl_buffer(shape, dtype, target.id, (), scope)
        buffer = self.call_spec(spec, args, kwargs, "allocate", node)
        return Consumed(S.Allocate(buffer, self.rest_with(target.id, buffer, frame, rest)))

    def allocate_const(self, target: ast.Name, node: ast.Call, frame, rest) -> Consumed:
        """``c = T.allocate_const([0.5, 1.5], "float32", [2])``: storage holding those values, which
        ``c`` (a buffer of shape ``extents``) indexes, or a ``T.Buffer(..., data=c)`` names."""
        args, kwargs = self.call_args(node)

        def spec(data, dtype="float32", extents=None, annotations=None):
            if annotations:
                raise TypeError("T.allocate_const annotations are not supported")
            values = np.asarray(data).ravel().tolist()
            if not all(isinstance(v, (bool, int, float)) for v in values):
                raise TypeError("T.allocate_const takes a list of numbers, e.g. [0.5, 1.5]")
            return values, decl_buffer(len(values) if extents is None else extents, dtype, target.id)
        values, buffer = self.call_spec(spec, args, kwargs, "allocate_const", node)
        self.check_rebinding(target)
        return Consumed(S.AllocateConst(buffer, self.rest_with(target.id, buffer, frame, rest), tuple(values)))

    def call_spec(self, spec, args: list, kwargs: dict, what: str, node):
        """``spec(*args, **kwargs)``, where ``spec`` takes the arguments of ``T.<what>``: a wrong
        argument is reported at ``node`` as T.<what>'s."""
        try:
            return spec(*args, **kwargs)
        except TypeError as exc:
            raise self.error(node, str(exc).replace("spec()", f"T.{what}()")) from None


def store_cast(value: E.PrimExpr, dtype: str) -> E.PrimExpr:
    """``value`` converted to ``dtype`` (same lanes) as the reference compiler's cast builds it:
    a constant (or the constant a broadcast repeats) becomes a constant of the new type, an
    integer ramp stays a ramp of converted base and stride, anything else is a Cast."""
    element = dt.element_of(dtype)
    if isinstance(value, (E.IntImm, E.FloatImm)) and dt.lanes(dtype) == 1:
        number = value.value
        if not dt.is_float(element):
            number = int(number)   # as C truncates a float into an integer
        return E.const(bool(number) if dt.is_bool(element) else number, element)
    if isinstance(value, E.Broadcast):
        return E.Broadcast(store_cast(value.value, element), value.lanes)
    if isinstance(value, E.Ramp) and dt.is_int(element) and not dt.is_bool(element):
        return E.Ramp(store_cast(value.base, element), store_cast(value.stride, element), value.lanes)
    return E.Cast(dtype, value)


def statement_hint(name: str) -> str:
    """How the statement-only construct ``T.<name>`` is written."""
    return statement_only_hint(name).replace(", not inside an expression", "")
