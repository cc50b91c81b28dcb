"""Names and expressions of the ``@R.function`` parser.

Names resolve to the function's variables, its symbolic sizes, ``cls`` / the class name (a
:class:`ModuleRef` whose attributes are the module's GlobalVars), then the Python names the
function sees. Calls run the ``R.`` functions; a TypeError from one (wrong arity, unknown
keyword) is reported with the function's script name, at the call.
"""
from __future__ import annotations

import ast
import difflib
import inspect

from ... import relax as relax_package
from ...ir.module import GlobalVar
from ...relax.expr import Expr, TupleGetItem
from ...relax.struct_info import TupleStructInfo
from ...tir import expr as E
from .. import relax as relax_namespace
from .. import tir as tir_namespace
from .expr import ExprParser, SourceInfo, safe_getattr
from .relax_struct_info import sinfo_text

_R_NAMESPACES = {id(relax_namespace): ("R", relax_namespace.__all__),
                 id(relax_namespace.nn): ("R.nn", sorted(vars(relax_namespace.nn)))}


class ModuleRef:
    """``cls`` (or the class name) inside an ``@I.ir_module``: its attributes are the GlobalVars
    of the module's functions. ``context`` parses sibling functions on demand."""

    def __init__(self, context):
        self.context = context

    def __repr__(self) -> str:
        return f"<module {self.context.class_name}>"


class RelaxExprParser(ExprParser):
    def __init__(self, source: SourceInfo, globals_: dict, closure: dict, context=None):
        super().__init__(source, globals_, closure)
        self.context = context                  # a parser_relax_module.ModuleContext, or None
        self.symbols: dict[str, E.Var] = {}     # symbolic sizes of the function, by name
        self.dataflow_locals: dict[str, int] = {}   # variables hidden after their block -> its line
        self.taken: set[str] = set()            # names bound so far, for fresh names
        self.in_annotation = False

    # -- errors and names --------------------------------------------------------------------
    def unsupported(self, node):
        what = super().unsupported(node).message.replace(" in T.prim_func", "")
        return self.error(node, f"{what} in R.function")

    def _find(self, name: str):
        found, value = super()._find(name)
        if found:
            return found, value
        if name == "R":
            return True, relax_namespace
        if self.context is not None and name in self.context.global_vars:
            return True, self.context.global_vars[name]   # 2022: a sibling named without `cls.`
        return False, None

    def lookup(self, name: str, node):
        if name == "Tensor" and not self.is_defined(name):
            if self.in_annotation:
                return relax_namespace.Tensor     # 2022: bare `Tensor((3, 4), "float32")`
            raise self.error(node, "`Tensor` is not defined here; struct info is written "
                                   'R.Tensor((3, 4), "float32")')
        if not self.is_defined(name) and self.in_annotation and name != "metadata":
            # A size that no parameter defines (e.g. one passed through tir_vars) is printed
            # without a declaration: its first mention in an annotation declares it.
            return self.symbol(name)
        if not self.is_defined(name):
            if name in self.dataflow_locals:
                raise self.error(node, f"'{name}' is a variable of the `with R.dataflow():` block at line "
                                       f"{self.dataflow_locals[name]}, not visible after it: list it "
                                       f"in that block's R.output(...)")
            if name == "metadata":
                raise self.error(node, "this text uses metadata[...] constants, whose values the printer "
                                       "leaves out; pass them as from_source(text, extra_vars={'metadata': "
                                       "{'relax.expr.Constant': [constant, ...]}})")
        return super().lookup(name, node)

    def symbol(self, name: str) -> E.Var:
        """The symbolic size ``name`` of this function (created, and named in the function's
        scope, at its first mention)."""
        if name not in self.symbols:
            self.symbols[name] = self.scopes[0][name] = E.Var(name, "int64")
        return self.symbols[name]

    def fresh_name(self, hint: str) -> str:
        name, k = hint, 0
        while name in self.taken or self.is_defined(name):
            k += 1
            name = f"{hint}{k}"
        self.taken.add(name)
        return name

    # -- expressions -------------------------------------------------------------------------
    def eval_Attribute(self, node: ast.Attribute):
        owner = self.eval(node.value)
        if isinstance(owner, ModuleRef):
            return owner.context.global_var(node.attr, lambda msg: self.error(node, msg))
        if owner is relax_package and not hasattr(owner, node.attr):
            # 2022 scripts spell the R namespace `relax.`: relax.dataflow(), relax.add(x, y).
            owner = relax_namespace
        if id(owner) in _R_NAMESPACES:
            if not hasattr(owner, node.attr):
                prefix, names = _R_NAMESPACES[id(owner)]
                close = difflib.get_close_matches(node.attr, names, n=1)
                hint = f"; did you mean {prefix}.{close[0]}?" if close else ""
                if owner is relax_namespace and hasattr(relax_namespace.nn, node.attr):
                    hint = f"; did you mean R.nn.{node.attr}?"
                hint = _LEGACY_HINTS.get(node.attr, hint)
                raise self.error(node, f"unknown function {prefix}.{node.attr}{hint}")
            return safe_getattr(self, owner, node)
        return super().eval_Attribute(node)

    def eval_Subscript(self, node: ast.Subscript):
        owner = self.eval(node.value)
        if not isinstance(owner, Expr):
            return super().eval_Subscript(node)
        index = self.eval(node.slice)
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.error(node.slice, f"a tuple is indexed with a constant int, got {ast.unparse(node.slice)}")
        if not isinstance(owner.struct_info, TupleStructInfo):
            raise self.error(node.value, f"`{ast.unparse(node.value)}` is {sinfo_text(owner.struct_info)}, "
                                         "not a tuple, so it cannot be indexed")
        return TupleGetItem(owner, index)

    def eval_Call(self, node: ast.Call):
        func = self.eval(node.func)
        if isinstance(func, E.Var):
            name = ast.unparse(node.func)
            why = (f"'{name}' is not defined: in an annotation an unknown name is a symbolic size"
                   if self.in_annotation else f"'{name}' is a symbolic size")
            raise self.error(node.func, f"{why}, which cannot be called; struct info is written "
                                        'R.Tensor((3, 4), "float32")')
        if isinstance(func, relax_namespace.ScriptOnly):
            raise self.error(node, _STATEMENT_HINTS[func.name])
        if isinstance(func, (tir_namespace.ScriptOnly, tir_namespace.DTypeFunc)):
            return super().eval_Call(node)
        args, kwargs = self.call_args(node)
        if isinstance(func, GlobalVar):
            return self.context.call(func, args, kwargs, lambda msg: self.error(node, msg))
        if func is relax_namespace.call_tir and args and isinstance(args[0], GlobalVar) and self.context:
            self.context.check_prim_func(args[0], lambda msg: self.error(node.args[0], msg))
        try:
            return func(*args, **kwargs)
        except TypeError as exc:
            name = relax_namespace.SCRIPT_NAMES.get(func)
            if name is None:
                raise
            raise self.error(node, _signature_message(str(exc), func, name)) from None


def _signature_message(text: str, func, name: str) -> str:
    """``relu() takes 1 positional argument`` -> ``R.nn.relu() takes ...``, with a close keyword."""
    short = f"{func.__name__}()"
    text = text.replace(short, f"{name}()", 1) if text.startswith(short) else text
    if "unexpected keyword argument" in text:
        bad = text.rsplit("'", 2)[-2]
        close = difflib.get_close_matches(bad, list(inspect.signature(func).parameters), n=1)
        if close:
            text += f"; did you mean {close[0]}=?"
    return text


# Script functions of 2022 that have no counterpart here, and what to write instead.
_LEGACY_HINTS = {
    "match_shape": " (a 2022 form, not supported); annotate the variable instead: "
                   '`lv: R.Tensor((n, 4), "float32") = ...`',
}

_STATEMENT_HINTS = {
    "dataflow": "R.dataflow is used as `with R.dataflow():`, not inside an expression",
    "output": "R.output(...) is only allowed as the last statement of a `with R.dataflow():` block",
    "func_attr": "R.func_attr({...}) is a statement of its own at the top of the function body",
}

__all__ = ["ModuleRef", "RelaxExprParser"]
