"""Entry points of the ``@R.function`` parser, and modules that mix ``@T.prim_func`` with it.

A standalone ``@R.function`` is parsed at once. Inside an ``@I.ir_module`` class, R functions
are parsed after the class is assembled, so ``cls.f`` / ``Module.f`` are the GlobalVars of the
sibling functions; a call ``cls.g(x)`` to another R function parses ``g`` first to learn its
result.
"""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from ...ir.module import GlobalVar
from ...relax.expr import Call, Function
from ...relax.struct_info import ObjectStructInfo
from .. import relax as relax_namespace
from ..errors import ScriptError, short_traceback
from .expr import ExprParser, SourceInfo
from .relax import RelaxParser
from .relax_struct_info import call_result


@dataclass
class FunctionSource:
    """Where an R function's text is, and what its free names mean."""
    fdef: ast.FunctionDef
    source: SourceInfo
    globals: dict
    closure: dict
    private: bool = False
    pure: bool = True

    def parser(self, context=None) -> RelaxParser:
        return RelaxParser(self.source, self.globals, self.closure, context)


class ModuleContext:
    """The module an R function is parsed in: its class name and its functions' GlobalVars."""

    def __init__(self, class_name: str, names, prim_names, relax_sources: dict):
        self.class_name = class_name
        self.global_vars = {name: GlobalVar(name) for name in names}
        self.prim_names = set(prim_names)
        self.sources = relax_sources            # name -> FunctionSource of each R function
        self.parsed: dict[str, Function] = {}
        self.in_progress: set[str] = set()

    def function(self, name: str) -> Function | None:
        """The parsed R function ``name``; None while it is being parsed (a recursive call)."""
        if name not in self.parsed and name not in self.in_progress:
            self.in_progress.add(name)
            try:
                src = self.sources[name]
                self.parsed[name] = src.parser(self).parse(src.fdef, src.private, src.pure)
            finally:
                self.in_progress.discard(name)
        return self.parsed.get(name)

    def global_var(self, name: str, error) -> GlobalVar:
        if name in self.global_vars:
            return self.global_vars[name]
        close = difflib.get_close_matches(name, sorted(self.global_vars), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise error(f"module {self.class_name} has no function named '{name}'{hint}")

    def check_prim_func(self, gv: GlobalVar, error) -> None:
        if gv.name_hint not in self.prim_names:
            raise error(f"R.call_tir calls a T.prim_func, but {gv.name_hint} is an R.function: call it "
                        f"directly, `cls.{gv.name_hint}(...)`")

    def call(self, gv: GlobalVar, args, kwargs, error) -> Call:
        """``cls.f(x, y)``: a call to the R function ``f`` of the module."""
        name = gv.name_hint
        if name in self.prim_names:
            raise error(f"{name} is a T.prim_func: call it with R.call_tir(cls.{name}, (args,), "
                        "out_sinfo=R.Tensor(...))")
        sinfo_args = kwargs.pop("sinfo_args", ())
        if kwargs:
            raise error(f"a call to {name} takes positional arguments only, got {', '.join(kwargs)}=")
        callee = self.function(name)
        if callee is None:
            src = self.sources[name]
            params, ret = src.parser(self).signature(src.fdef)
            ret = ret or ObjectStructInfo()
        else:
            params, ret = callee.params, callee.ret_struct_info
        if len(args) != len(params):
            raise error(f"{name} takes {len(params)} argument(s), got {len(args)}")
        return Call(gv, tuple(args), (), sinfo_args, call_result(params, args, ret))


def parse_python_function(func, private: bool = False, pure: bool = True) -> Function:
    """``@R.function`` outside a class: parse it now."""
    try:
        src = _python_source(func, private, pure)
        return src.parser().parse(src.fdef, private, pure)
    except ScriptError as err:
        raise short_traceback(err) from None


def parse_module_members(class_name: str, members: dict) -> dict:
    """The functions of an ``@I.ir_module`` class: PrimFuncs (already parsed), relax Functions,
    and ``DeferredFunction``s (parsed here, in the module's context)."""
    deferred = {name: m for name, m in members.items() if isinstance(m, relax_namespace.DeferredFunction)}
    try:
        sources = {name: _python_source(m.func, m.private, m.pure) for name, m in deferred.items()}
        return _assemble(class_name, members, sources)
    except ScriptError as err:
        raise short_traceback(err) from None


def parse_class_node(node: ast.ClassDef, source: SourceInfo, globals_: dict, parse_prim_func) -> dict:
    """The functions of an ``@I.ir_module`` class in script text (``from_source``)."""
    members, sources = {}, {}
    evaluator = ExprParser(source, globals_, {})
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            options = relax_options(item, evaluator)
            if options is None:
                members[item.name] = parse_prim_func(item)
            else:
                members[item.name] = None
                sources[item.name] = FunctionSource(item, source, globals_, {}, *options)
        elif not (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)):
            raise evaluator.error(item, "an @I.ir_module class may only contain @T.prim_func and "
                                        "@R.function functions")
    return _assemble(node.name, members, sources)


def parse_function_node(node: ast.FunctionDef, source: SourceInfo, globals_: dict) -> Function | None:
    """A top-level ``@R.function`` in script text, or None when ``node`` is not one."""
    options = relax_options(node, ExprParser(source, globals_, {}))
    if options is None:
        return None
    return FunctionSource(node, source, globals_, {}, *options).parser().parse(node, *options)


def relax_options(node: ast.FunctionDef, evaluator: ExprParser):
    """(private, pure) when ``node`` is decorated with ``@R.function`` / ``@R.function(...)``."""
    for dec in node.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        try:
            target = evaluator.eval(call.func if call else dec)
        except ScriptError:
            continue
        if target is relax_namespace.function:
            _, kwargs = evaluator.call_args(call) if call else ([], {})
            unknown = set(kwargs) - {"private", "pure"}
            if unknown:
                raise evaluator.error(call, f"@R.function takes private= and pure=, got {', '.join(sorted(unknown))}=")
            return bool(kwargs.get("private", False)), bool(kwargs.get("pure", True))
    return None


def _assemble(class_name: str, members: dict, sources: dict) -> dict:
    prim_names = [n for n, m in members.items() if n not in sources and not isinstance(m, Function)]
    context = ModuleContext(class_name, members, prim_names, sources)
    return {name: context.function(name) if name in sources else m for name, m in members.items()}


def _python_source(func, private: bool, pure: bool) -> FunctionSource:
    from . import read_function
    fdef, source, closure = read_function(func, "@R.function")
    return FunctionSource(fdef, source, func.__globals__, closure, private, pure)
