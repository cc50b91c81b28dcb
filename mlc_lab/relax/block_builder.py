"""BlockBuilder: build graph-level functions binding by binding, and the module around them.

    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit_te(te_linear, x, w)          # adds a PrimFunc, emits R.call_tir(...)
            gv = bb.emit_output(relax.op.nn.relu(lv))
        bb.emit_func_output(gv)
    mod = bb.get()

Emitted expressions are normalized: their structure info is filled in and nested calls in
arguments are bound to variables of their own first (so every call's arguments are variables,
constants, shapes or tuples of them).
"""
from __future__ import annotations

import contextlib
import keyword
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..ir.module import GlobalVar, IRModule
from ..ir.structural import structural_equal, structural_hash
from ..tir.expr import Var as TirVar
from ..tir.function import PrimFunc
from ..tir.stmt_functor import free_vars
from .expr import (BindingBlock, Call, DataflowBlock, DataflowVar, Expr, Function, PrimValue,
                   SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var, VarBinding, as_expr,
                   is_leaf)
from .struct_info import (FuncStructInfo, ObjectStructInfo, TensorStructInfo, TupleStructInfo)


class BlockBuilderError(RuntimeError):
    """A BlockBuilder method was called where it does not belong (e.g. emit outside a function)."""


@dataclass
class _BlockFrame:
    is_dataflow: bool
    bindings: list = field(default_factory=list)


@dataclass
class _FunctionFrame:
    name: str
    params: Optional[tuple]
    attrs: dict
    pure: bool
    blocks: list = field(default_factory=list)
    done: bool = False


class BlockBuilder:
    """Builds functions (``function``, ``dataflow``, ``emit*``) into a module (``get``)."""

    def __init__(self, mod: Optional[IRModule] = None):
        self._functions: dict[GlobalVar, Any] = dict(mod.functions) if mod is not None else {}
        self._func: Optional[_FunctionFrame] = None
        self._blocks: list[_BlockFrame] = []
        self._name_counts: dict[str, int] = {}
        self._bindings: dict[Var, Expr] = {}
        self._dedup: dict[int, list[GlobalVar]] = {}

    # -- functions and blocks --------------------------------------------------------------
    @contextlib.contextmanager
    def function(self, name: str, params=None, attrs: Optional[dict] = None, pure: bool = True,
                 private: bool = False):
        """Start the function ``name`` with ``params`` (a Var or a list of Vars; or give them to
        ``emit_func_output``). The block must end with ``bb.emit_func_output(...)``."""
        if self._func is not None:
            raise BlockBuilderError(f"bb.function({name!r}) inside bb.function({self._func.name!r}): "
                                    "functions cannot nest; build each one on its own")
        if not isinstance(name, str) or not name:
            raise TypeError(f"bb.function: the name must be a non-empty str, got {name!r}")
        attrs = dict(attrs or {})
        if not private:
            attrs.setdefault("global_symbol", name)
        frame = _FunctionFrame(name, None if params is None else _check_params(name, params), attrs, pure)
        self._func = frame
        self._blocks = [_BlockFrame(False)]
        try:
            yield frame
            if not frame.done:
                raise BlockBuilderError(f"the `with bb.function({name!r})` block ended without "
                                        "bb.emit_func_output(...)")
        finally:
            self._func = None
            self._blocks = []

    @contextlib.contextmanager
    def dataflow(self):
        """A dataflow block: ``emit`` gives DataflowVars; ``emit_output`` gives the Vars that are
        visible after the block."""
        frame = self._require_function("bb.dataflow()")
        if self.current_block_is_dataflow():
            raise BlockBuilderError("bb.dataflow() inside another dataflow block: they cannot nest")
        frame.blocks.append(self.end_block())
        self.begin_dataflow_block()
        yield
        if self._func is frame:
            frame.blocks.append(self.end_block())
            self.begin_binding_block()

    def begin_dataflow_block(self) -> None:
        self._blocks.append(_BlockFrame(True))

    def begin_binding_block(self) -> None:
        self._blocks.append(_BlockFrame(False))

    def end_block(self) -> BindingBlock:
        """Close the innermost block and return it."""
        if not self._blocks:
            raise BlockBuilderError("end_block: no block is open")
        frame = self._blocks.pop()
        return (DataflowBlock if frame.is_dataflow else BindingBlock)(tuple(frame.bindings))

    def current_block_is_dataflow(self) -> bool:
        return bool(self._blocks) and self._blocks[-1].is_dataflow

    # -- emitting --------------------------------------------------------------------------
    def emit(self, expr, name_hint: str = "") -> Var:
        """Bind ``expr`` (normalized) to a new variable and return it: a DataflowVar inside a
        dataflow block (named lv, lv1, ...), else a Var (gv, gv1, ...)."""
        self._require_block("bb.emit")
        value = self.normalize(expr)
        dataflow = self.current_block_is_dataflow()
        var_cls = DataflowVar if dataflow else Var
        var = var_cls(self._fresh_name(name_hint or ("lv" if dataflow else "gv")), value.struct_info)
        self.emit_normalized(VarBinding(var, value))
        return var

    def emit_output(self, output, name_hint: str = "") -> Var:
        """Bind ``output`` (an expression or a list of them) to a Var visible after the dataflow block."""
        if not self.current_block_is_dataflow():
            raise BlockBuilderError("bb.emit_output must be called inside `with bb.dataflow():` "
                                    "(outside one, use bb.emit)")
        value = self.normalize(output)
        var = Var(self._fresh_name(name_hint or "gv"), value.struct_info)
        self.emit_normalized(VarBinding(var, value))
        return var

    def emit_normalized(self, binding: VarBinding) -> None:
        """Append an already-normalized binding to the current block."""
        self._require_block("bb.emit_normalized")
        self._blocks[-1].bindings.append(binding)
        self._bindings[binding.var] = binding.value

    def emit_func_output(self, output, params=None) -> Var | Expr:
        """End the current function, returning ``output`` (an expression or a list of them)."""
        frame = self._require_function("bb.emit_func_output")
        if self.current_block_is_dataflow():
            raise BlockBuilderError("bb.emit_func_output must be called after the `with bb.dataflow()` "
                                    "block has closed; inside it, use bb.emit_output")
        if frame.done:
            raise BlockBuilderError(f"bb.emit_func_output was already called for {frame.name!r}")
        if params is not None:
            if frame.params is not None:
                raise BlockBuilderError(f"the parameters of {frame.name!r} were already given to bb.function")
            frame.params = _check_params(frame.name, params)
        if frame.params is None:
            raise BlockBuilderError(f"function {frame.name!r} has no parameters: give them to "
                                    "bb.function(name, params) or bb.emit_func_output(output, params)")
        value = self.normalize(output)
        if not is_leaf(value):
            value = self.emit(value)
        value = _exported_as(frame.blocks, value)
        _check_no_dataflow_var(value)
        frame.blocks.append(self.end_block())
        blocks = [b for b in frame.blocks if b.bindings]
        func = Function(frame.params, SeqExpr(blocks, value), value.struct_info, frame.attrs, frame.pure)
        gv = GlobalVar(frame.name)
        if gv in self._functions:
            raise BlockBuilderError(f"the module already has a function named {frame.name!r}")
        self._functions[gv] = func
        frame.done = True
        self._blocks = [_BlockFrame(False)]
        return value

    # -- tensor expressions ----------------------------------------------------------------
    def call_te(self, te_func: Callable, *args, **kwargs) -> Call:
        """Call ``te_func`` on te placeholders standing for the relax arguments, make the result
        a PrimFunc of the module (named ``primfunc_name_hint`` or after ``te_func``; an identical
        PrimFunc already there is reused) and return the ``call_tir`` that runs it.

        Relax tensors among ``args``/``kwargs`` (also inside lists) become placeholders; other
        values (ints, axes, PrimExprs) are passed to ``te_func`` unchanged."""
        from .. import te
        from .op.call import call_tir

        name_hint = kwargs.pop("primfunc_name_hint", None) or _func_name(te_func)
        extra_attrs = kwargs.pop("primfunc_attrs", None) or {}
        placeholders: dict[int, Any] = {}
        inputs: list[Expr] = []

        def convert(value):
            if isinstance(value, (list, tuple)) and not isinstance(value, Tuple):
                return type(value)(convert(v) for v in value)
            if isinstance(value, Tuple):
                return [convert(f) for f in value.elements]
            if isinstance(value, PrimValue):
                return value.value
            if isinstance(value, ShapeExpr):
                return list(value.values)
            if not isinstance(value, Expr):
                return value
            value = self.normalize(value)
            if id(value) not in placeholders:
                sinfo = value.struct_info
                if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
                    raise TypeError(f"bb.call_te({name_hint}): tensor arguments need a known shape, got "
                                    f"{sinfo.script() if sinfo is not None else 'no struct info'}")
                name = value.name_hint if isinstance(value, Var) else "rxplaceholder"
                placeholders[id(value)] = te.placeholder(sinfo.shape, sinfo.dtype, name)
                inputs.append(value)
            return placeholders[id(value)]

        te_args = [convert(a) for a in args]
        te_kwargs = {k: convert(v) for k, v in kwargs.items()}
        result = te_func(*te_args, **te_kwargs)
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
        for out in outs:
            if not isinstance(out, te.Tensor):
                raise TypeError(f"bb.call_te: {name_hint} must return a te.Tensor (or a list of them), "
                                f"got {out!r}")
        in_tensors = [placeholders[id(v)] for v in inputs]
        extra_vars = _unbound_vars(in_tensors, outs)
        func = te.create_prim_func(in_tensors + outs + extra_vars, name_hint)
        for key, value in extra_attrs.items():
            func = func.with_attr(key, value)
        gvar = self.add_func(func, name_hint)
        out_sinfo = [TensorStructInfo(o.shape, o.dtype) for o in outs]
        return call_tir(gvar, inputs, out_sinfo if len(outs) > 1 else out_sinfo[0],
                        tir_vars=extra_vars or None)

    def emit_te(self, te_func: Callable, *args, **kwargs) -> Var:
        """``bb.emit(bb.call_te(te_func, *args, **kwargs))``; ``name_hint=`` names the variable."""
        name_hint = kwargs.pop("name_hint", "")
        return self.emit(self.call_te(te_func, *args, **kwargs), name_hint=name_hint)

    # -- the module ------------------------------------------------------------------------
    def add_func(self, func, func_name: str) -> GlobalVar:
        """Add ``func`` under a unique name based on ``func_name`` (and return its GlobalVar). A
        structurally equal function already in the module is reused instead."""
        key = structural_hash(_without_symbol(func))
        for gv in self._dedup.get(key, []):
            if gv in self._functions and structural_equal(_without_symbol(self._functions[gv]),
                                                          _without_symbol(func)):
                return gv
        gv = GlobalVar(self._unique_function_name(func_name))
        if _attrs_of(func).get("global_symbol") not in (None, gv.name_hint):
            func = func.with_attr("global_symbol", gv.name_hint)
        self._functions[gv] = func
        self._dedup.setdefault(key, []).append(gv)
        return gv

    def update_func(self, gv: GlobalVar, func) -> None:
        """Replace the function ``gv`` (or add it under exactly that name)."""
        self._functions[gv] = func

    def get(self) -> IRModule:
        """The module built so far."""
        return IRModule(self._functions)

    finalize = get

    def lookup_binding(self, var: Var) -> Optional[Expr]:
        """The value bound to ``var`` by a binding emitted through this builder, or None."""
        return self._bindings.get(var)

    # -- normalization ---------------------------------------------------------------------
    def normalize(self, expr) -> Expr:
        """``expr`` with structure info everywhere. Inside a block, nested calls in arguments are
        emitted as bindings of their own first."""
        expr = as_expr(expr)
        if isinstance(expr, Call):
            args = tuple(self._normalize_arg(a) for a in expr.args)
            if expr.struct_info is not None and all(a is b for a, b in zip(args, expr.args)):
                return expr
            call = expr.replace(args=args, struct_info=None)
            return call.replace(struct_info=self._infer_call(call))
        if isinstance(expr, Tuple):
            fields = tuple(self._normalize_arg(f) for f in expr.elements)
            if expr.struct_info is not None and all(a is b for a, b in zip(fields, expr.elements)):
                return expr
            return Tuple(fields)
        if isinstance(expr, TupleGetItem):
            value = self._normalize_arg(expr.tuple_value)
            if expr.struct_info is not None and value is expr.tuple_value:
                return expr
            if not isinstance(value.struct_info, TupleStructInfo):
                raise TypeError(f"TupleGetItem: the value indexed is not a tuple: {value.struct_info!r}")
            return TupleGetItem(value, expr.index)
        return expr

    def _normalize_arg(self, arg):
        if isinstance(arg, GlobalVar):
            return arg
        arg = self.normalize(arg)
        if self._blocks and not is_leaf(arg) and not isinstance(arg, Function):
            return self.emit(arg)
        return arg

    def _infer_call(self, call: Call):
        from .op.registry import infer_struct_info
        from .expr import Op
        if isinstance(call.op, Op):
            return infer_struct_info(call)
        if call.sinfo_args:
            sinfo = call.sinfo_args
            return sinfo[0] if len(sinfo) == 1 else TupleStructInfo(sinfo)
        if isinstance(call.op, GlobalVar):
            func = self._functions.get(call.op)
            if func is None:
                raise KeyError(f"call to {call.op.name_hint}: the module has no such function")
            if isinstance(func, PrimFunc):
                raise TypeError(f"{call.op.name_hint} is a PrimFunc; call it with "
                                "relax.op.call_tir(gvar, args, out_sinfo)")
            return func.ret_struct_info
        if isinstance(call.op, Var) and isinstance(call.op.struct_info, FuncStructInfo):
            return call.op.struct_info.ret
        return ObjectStructInfo()

    # -- helpers ---------------------------------------------------------------------------
    def _require_function(self, what: str) -> _FunctionFrame:
        if self._func is None:
            raise BlockBuilderError(f"{what} must be called inside `with bb.function(name, params):`")
        return self._func

    def _require_block(self, what: str) -> None:
        if not self._blocks:
            raise BlockBuilderError(f"{what} must be called inside `with bb.function(name, params):` "
                                    "(or a block opened with begin_binding_block)")

    def _fresh_name(self, hint: str) -> str:
        count = self._name_counts.get(hint, 0)
        self._name_counts[hint] = count + 1
        return hint if count == 0 else f"{hint}{count}"

    def _unique_function_name(self, hint: str) -> str:
        taken = {gv.name_hint for gv in self._functions}
        name, k = hint, 0
        while name in taken:
            k += 1
            name = f"{hint}{k}"
        return name


def _exported_as(blocks, value):
    """The Var that an emit_output bound to the DataflowVar ``value``, if there is one, else
    ``value``: code written for TVM passes the dataflow value it gave to emit_output on to
    emit_func_output, and means the exported Var."""
    if not isinstance(value, DataflowVar):
        return value
    for block in blocks:
        for binding in block.bindings:
            if binding.value is value and not isinstance(binding.var, DataflowVar):
                return binding.var
    return value


def _check_params(name: str, params) -> tuple:
    params = (params,) if isinstance(params, Var) else tuple(params)
    for p in params:
        if not isinstance(p, Var) or isinstance(p, DataflowVar):
            raise TypeError(f"bb.function({name!r}): parameters must be relax.Var, got {p!r}")
    return params


def _check_no_dataflow_var(value: Expr) -> None:
    if isinstance(value, DataflowVar):
        raise BlockBuilderError(f"the function output {value.name_hint} is a DataflowVar, which is not "
                                "visible outside its dataflow block; bind it with bb.emit_output")
    if isinstance(value, Tuple):
        for f in value.elements:
            _check_no_dataflow_var(f)


def _func_name(func: Callable) -> str:
    """A name for the PrimFunc emitted from ``func``; a lambda's (``<lambda>``) would be the
    keyword ``lambda``, which no printed module could be read back with, so it is ``te_func``."""
    name = re.sub(r"\W", "_", getattr(func, "__name__", "te_func")).strip("_")
    return name if name and not keyword.iskeyword(name) else "te_func"


def _attrs_of(func) -> dict:
    return dict(func.attrs or ())


def _without_symbol(func):
    attrs = tuple((k, v) for k, v in (func.attrs or ()) if k != "global_symbol")
    return func.replace(attrs=attrs) if len(attrs) != len(func.attrs or ()) else func


def _unbound_vars(inputs: list, outputs: list) -> list:
    """Symbolic sizes of the outputs that no input's shape determines (passed as tir_vars)."""
    seen = {id(v) for v in free_vars([tuple(t.shape) for t in inputs])}
    wanted = free_vars([tuple(t.shape) for t in outputs])
    return [v for v in wanted if isinstance(v, TirVar) and id(v) not in seen]


__all__ = ["BlockBuilder", "BlockBuilderError"]
