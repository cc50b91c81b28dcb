"""The script parser: Python source of a ``@T.prim_func`` (or an ``@I.ir_module`` class) -> IR.
``@R.function`` graph-level functions are parsed by :mod:`relax`.

The parser walks the function's AST. Expressions are evaluated to Python values and IR
(:mod:`expr`), statements become loop IR (:mod:`stmt`), and blocks, iterators and
buffer declarations are handled in :mod:`block`. Free names resolve to the Python values
they have where the function was defined (globals and closure variables).

Entry points: :func:`parse_function` (used by ``T.prim_func``) and :func:`from_source`.
"""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap

from ...ir.module import IRModule
from ...tir import expr as E
from ...tir import stmt as S
from ...tir.buffer import Buffer
from ...tir.function import PrimFunc
from .. import ir as ir_namespace
from . import relax_module as parser_relax_module
from .. import relax as relax_namespace
from .. import tir as tir_namespace
from ..errors import ScriptError, short_traceback
from .block import BlockParser
from .expr import SAFE, HandleParam, SourceInfo
from .stmt import FuncFrame, nop


def read_function(func, decorator: str):
    """The ``def`` node of ``func``, where its source lines come from, and its closure values."""
    if not inspect.isfunction(func):
        raise TypeError(f"{decorator} decorates a function, got {type(func).__name__}")
    try:
        lines, first_line = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise ScriptError(f"cannot read the source of {func.__qualname__} ({exc}); for text, use "
                          "mlc_lab.script.from_source(text)") from None
    filename = inspect.getsourcefile(func) or func.__code__.co_filename
    source = SourceInfo(filename, lines, max(first_line, 1))
    tree = _parse_text("".join(lines), source)
    fdef = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if not isinstance(fdef, ast.FunctionDef):
        raise ScriptError(f"could not find the definition of {func.__qualname__} in its source", filename)
    closure = {}
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:  # a closure variable not assigned yet
            pass
    for name, value in enclosing_locals(func).items():
        closure.setdefault(name, value)
    return fdef, source, closure


def enclosing_locals(func) -> dict:
    """Local variables of the functions and class bodies that lexically enclose ``func`` and are
    still running (the decorator is called from them). Under ``from __future__ import
    annotations`` a name used only in an annotation, ``A: T.Buffer[(n,), "float32"]``, is not a
    closure variable, yet the annotation means the enclosing ``n``."""
    enclosing = [part for part in func.__qualname__.split(".")[:-1] if part != "<locals>"]
    found: dict = {}
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("mlc_lab."):
        frame = frame.f_back
    while frame is not None and enclosing and frame.f_code.co_name != "<module>":
        name = frame.f_code.co_name
        if name not in enclosing:
            break
        enclosing = enclosing[:enclosing.index(name)]   # only names further out may follow
        for key, value in frame.f_locals.items():
            found.setdefault(key, value)
        frame = frame.f_back
    return found


def parse_function(func, private: bool = False) -> PrimFunc:
    """Parse a Python function written in the script language into a PrimFunc."""
    fdef, source, closure = read_function(func, "@T.prim_func")
    parser = FunctionParser(source, func.__globals__, closure, dict(getattr(func, "__annotations__", {})))
    try:
        return parser.parse(fdef, private)
    except ScriptError as err:
        raise short_traceback(err) from None


def from_source(text: str, extra_vars: dict | None = None, filename: str = "<string>", safe: bool = False):
    """Parse script text: an ``@I.ir_module`` class gives an IRModule, a ``@T.prim_func`` a PrimFunc,
    an ``@R.function`` a relax Function.

    Names used in the text resolve to ``T``, ``I``, ``R`` and ``extra_vars`` (e.g. ``metadata``:
    ``{"relax.expr.Constant": [...]}`` for the large constants the printer leaves out).
    ``safe=True`` parses text nobody vouches for (a student's submission): only the public
    ``T.``/``I.``/``R.`` functions, IR attributes and a few builtins (``range``, ``min``, ...)
    can be named, so the text builds IR and can do nothing else (``expr.SAFE``).
    """
    token = SAFE.set(bool(safe))
    try:
        return _from_source(text, extra_vars, filename)
    finally:
        SAFE.reset(token)


def _from_source(text: str, extra_vars, filename: str):
    source = SourceInfo(filename, text.splitlines(keepends=True))
    globals_ = {"T": tir_namespace, "I": ir_namespace, "R": relax_namespace, **(extra_vars or {})}
    try:
        tree = _parse_text(text, source)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                return _parse_class(node, source, globals_)
            if isinstance(node, ast.FunctionDef):
                relax_func = parser_relax_module.parse_function_node(node, source, globals_)
                if relax_func is not None:
                    return relax_func
                return FunctionParser(source, globals_, {}, {}).parse(node, _is_private(node, source, globals_))
    except ScriptError as err:
        raise short_traceback(err) from None
    raise ScriptError("the text defines no @T.prim_func or @R.function function, nor an @I.ir_module class",
                      filename)


def _parse_text(text: str, source: SourceInfo) -> ast.Module:
    dedented = textwrap.dedent(text)
    first_original = next((ln for ln in text.splitlines() if ln.strip()), "")
    first_dedented = next((ln for ln in dedented.splitlines() if ln.strip()), "")
    source.col_shift = len(first_original) - len(first_dedented)
    try:
        return ast.parse(dedented)
    except SyntaxError as exc:
        line = (exc.lineno or 1) - 1
        src = source.lines[line] if 0 <= line < len(source.lines) else None
        column = (exc.offset or 1) - 1 + source.col_shift
        raise ScriptError(f"invalid Python syntax: {exc.msg}", source.filename, source.first_line + line,
                          column, None, src) from None


def _parse_class(node: ast.ClassDef, source: SourceInfo, globals_: dict) -> IRModule:
    def prim_func(item: ast.FunctionDef) -> PrimFunc:
        return FunctionParser(source, globals_, {}, {}).parse(item, _is_private(item, source, globals_))

    return IRModule(parser_relax_module.parse_class_node(node, source, globals_, prim_func))


def _is_private(node: ast.FunctionDef, source: SourceInfo, globals_: dict) -> bool:
    """Check the decorators of a function in text: @T.prim_func or @T.prim_func(private=...)."""
    evaluator = FunctionParser(source, globals_, {}, {})
    for dec in node.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        if evaluator.eval(call.func if call else dec) is tir_namespace.prim_func:
            _, kwargs = evaluator.call_args(call) if call else ([], {})
            return bool(kwargs.get("private", False))
    raise evaluator.error(node, f"function {node.name} is not decorated with @T.prim_func or @R.function")


def _declarations(body: list):
    """(name node, call node) of ``n = T.int64()`` and of each part of ``n, m = T.int64(), T.int64()``
    at the top of a function body."""
    for node in body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Call):
            yield target, value
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            yield from ((t, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name))


class FunctionParser(BlockParser):
    def __init__(self, source: SourceInfo, globals_: dict, closure: dict, live_annotations: dict):
        super().__init__(source, globals_, closure)
        self.live_annotations = live_annotations
        self.loop_ranges: dict = {}      # loop Var -> Range, for T.axis.remap
        self.symbolic_vars: dict = {}    # `n = T.int64()` at the top of the body, declared up front
        self.block_depth = 0
        self.saw_block = False
        self.view_layouts: dict = {}     # id(matched buffer) -> (its strides, its offset or None)

    def parse(self, fdef: ast.FunctionDef, private: bool = False) -> PrimFunc:
        self.check_signature(fdef)
        self.declare_symbolic_vars(fdef.body)
        params = [self.parameter(arg) for arg in fdef.args.posonlyargs + fdef.args.args]
        frame = FuncFrame()
        body = self.parse_body(fdef.body, frame) or nop()
        for arg, p in zip(fdef.args.posonlyargs + fdef.args.args, params):
            if isinstance(p, HandleParam) and p.buffer is None:
                raise self.error(arg, f"the T.handle parameter '{p.name}' is never matched to a buffer: add "
                                      f"`{p.name.upper()} = T.match_buffer({p.name}, shape, dtype)` to the body")
        params = [p.buffer if isinstance(p, HandleParam) else p for p in params]
        attrs = dict(frame.attrs)
        if "global_symbol" not in attrs and not private:
            attrs["global_symbol"] = fdef.name
        return PrimFunc(tuple(params), self.wrap_root(body, frame), tuple(sorted(attrs.items())))

    def wrap_root(self, body: S.Stmt, frame: FuncFrame) -> S.Stmt:
        """Put the body under the implicit root block when it has blocks or top-level buffers."""
        explicit = (isinstance(body, S.BlockRealize) and body.block.name_hint == "root"
                    and not body.block.iter_vars)
        if explicit:
            allocs = tuple(frame.alloc_buffers) + body.block.alloc_buffers
            return body.replace(block=body.block.replace(alloc_buffers=allocs))
        if not (self.saw_block or frame.alloc_buffers):
            return body
        root = S.Block("root", (), (), (), body, None, tuple(frame.alloc_buffers))
        return S.BlockRealize((), E.IntImm("bool", 1), root)

    def check_signature(self, fdef: ast.FunctionDef) -> None:
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs:
            raise self.error(fdef, "T.prim_func parameters must be plain positional parameters (no *args, "
                                   "**kwargs or keyword-only parameters)")
        if a.defaults:
            raise self.error(a.defaults[0], "T.prim_func parameters cannot have default values")

    def declare_symbolic_vars(self, body: list) -> None:
        """Define `n = T.int64()` / `n = T.var("int64")` first: parameter annotations may use them."""
        for target, call in _declarations(body):
            if not self.is_declaration(call):
                continue
            func = self.eval(call.func)
            if isinstance(func, tir_namespace.DTypeFunc):
                dtype = func.dtype
            else:
                args, kwargs = self.call_args(call)
                dtype = (args or [kwargs.get("dtype", "int32")])[0]
            var = E.Var(target.id, dtype)
            self.bound_vars[id(var)] = "size variable"
            self.symbolic_vars[var.name] = var
            self.define(var.name, var)

    def parameter(self, arg: ast.arg):
        if arg.annotation is None:
            raise self.error(arg, f"parameter '{arg.arg}' needs an annotation such as "
                                  'T.Buffer((128,), "float32"), T.handle or T.int32')
        try:
            kind = self.eval(arg.annotation)
        except ScriptError:
            kind = self.live_annotations.get(arg.arg)
            if kind is None or isinstance(kind, str):
                raise
        if isinstance(kind, Buffer):
            param = kind.replace(name=arg.arg)
        elif isinstance(kind, tir_namespace.DTypeFunc):
            param = E.Var(arg.arg, kind.dtype)
            self.bound_vars[id(param)] = "parameter"
        elif isinstance(kind, tir_namespace._Handle):
            param = HandleParam(arg.arg)
        else:
            raise self.error(arg.annotation, f"parameter '{arg.arg}' must be annotated with T.Buffer(...), "
                                             f"T.handle or a dtype such as T.int32, got {ast.unparse(arg.annotation)}")
        self.define(arg.arg, param)
        return param


__all__ = ["FunctionParser", "enclosing_locals", "from_source", "parse_function", "read_function"]
