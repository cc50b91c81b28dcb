"""The ``@R.function`` parser: Python source of a graph-level function -> ``relax.Function``.

Expressions evaluate to relax IR by calling the ``R.`` functions (so an op's own shape or dtype
error is reported at the call); each statement ``v = value`` or ``v: R.Tensor(...) = value``
becomes a binding, ``with R.dataflow():`` a dataflow block whose ``R.output(...)`` names the
variables visible after it, and ``return`` the function's result. Nested calls are bound to
variables of their own first, as ``BlockBuilder`` does. Names and expressions are in
:mod:`relax_expr`; module-level entry points (standalone
functions, ``@I.ir_module`` classes mixing ``T.prim_func`` and ``R.function``) are in
:mod:`relax_module`.
"""
from __future__ import annotations

import ast
import contextlib

from ...ir.module import GlobalVar
from ...relax.expr import (BindingBlock, Call, DataflowBlock, DataflowVar, Expr, Function, SeqExpr,
                          Tuple, TupleGetItem, Var, VarBinding, as_expr, is_leaf)
from ...relax.struct_info import StructInfo
from .. import relax as relax_namespace
from .. import tir as tir_namespace
from ..errors import ScriptError
from .expr import SourceInfo
from .relax_expr import ModuleRef, RelaxExprParser
from .relax_struct_info import is_base_of, sinfo_text


class RelaxParser(RelaxExprParser):
    def __init__(self, source: SourceInfo, globals_: dict, closure: dict, context=None):
        super().__init__(source, globals_, closure, context)
        self.blocks: list = []
        self.bindings: list = []                # bindings of the block being parsed
        self.dataflow: ast.With | None = None   # the `with R.dataflow()` being parsed
        self.outputs: set[str] = set()
        self.attrs: dict = {}

    # -- the function ------------------------------------------------------------------------
    def parse(self, fdef: ast.FunctionDef, private: bool = False, pure: bool = True) -> Function:
        params, ret_sinfo = self.signature(fdef)
        with self.resolving_symbols():
            body = self.parse_body(fdef)
        body_sinfo = body.struct_info
        if ret_sinfo is None:
            ret_sinfo = body_sinfo
        elif not is_base_of(ret_sinfo, body_sinfo):
            raise self.error(fdef.returns, f"the function returns {sinfo_text(body_sinfo)}, which does not "
                                           f"match its annotation {sinfo_text(ret_sinfo)}")
        attrs = dict(self.attrs)
        if not private:
            attrs.setdefault("global_symbol", fdef.name)
        return Function(params, body, ret_sinfo, attrs, pure)

    def signature(self, fdef: ast.FunctionDef):
        """The parameters and the annotated result (None when not annotated)."""
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
            raise self.error(fdef, "R.function parameters must be plain positional parameters (no *args, "
                                   "**kwargs, keyword-only parameters or default values)")
        if self.context is not None:
            self.define(self.context.class_name, ModuleRef(self.context))
        self.declare_symbolic_vars(fdef.body)
        params = []
        with self.resolving_symbols():
            for arg in a.posonlyargs + a.args:
                if arg.annotation is None:
                    raise self.error(arg, f"parameter '{arg.arg}' needs an annotation such as "
                                          'R.Tensor((1, 784), "float32")')
                params.append(Var(arg.arg, self.eval_sinfo(arg.annotation, f"parameter '{arg.arg}'")))
                self.define(arg.arg, params[-1])
            ret = None if fdef.returns is None else self.eval_sinfo(fdef.returns, "the result")
        return params, ret

    @contextlib.contextmanager
    def resolving_symbols(self):
        """While this function is parsed, R.Tensor(("n", ...)) means this function's size n."""
        token = relax_namespace._symbol_resolver.set(self.symbol)
        try:
            yield
        finally:
            relax_namespace._symbol_resolver.reset(token)

    def declare_symbolic_vars(self, body: list) -> None:
        """`n = T.int64()` statements (or `m, n = T.int64(), T.int64()`) define sizes first:
        parameter annotations may use them."""
        for node in body:
            for name in self.symbolic_declaration(node):
                self.define(name, self.symbol(name))

    def symbolic_declaration(self, node) -> list:
        """The names a size declaration defines (`n = T.int64()`, or one per element of
        `m, n = T.int64(), T.int64()`); empty when ``node`` is no such declaration. A name
        already used by a parameter's annotation (`R.Tensor(("n",), ...)`) means that size."""
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            return []
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name):
            pairs = [(target, value)]
        elif (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
              and len(target.elts) == len(value.elts)):
            pairs = list(zip(target.elts, value.elts))
        else:
            return []
        for name, call in pairs:
            if not (isinstance(name, ast.Name) and isinstance(call, ast.Call) and not call.args
                    and not call.keywords):
                return []
            try:
                func = self.eval(call.func)
            except ScriptError:  # reported when the statement itself is parsed
                return []
            if not (isinstance(func, tir_namespace.DTypeFunc) and func.dtype.startswith("int")):
                return []
        return [name.id for name, _ in pairs]

    def eval_sinfo(self, node, what: str) -> StructInfo:
        self.in_annotation = True
        try:
            value = self.eval(node)
        finally:
            self.in_annotation = False
        if value is relax_namespace.Tensor:
            raise self.error(node, f"{what}: Tensor must be called with a shape and a dtype, e.g. "
                                   'R.Tensor((3, 4), "float32"), or R.Tensor(dtype="float32", ndim=2) '
                                   "when only the rank is known")
        if not isinstance(value, StructInfo):
            raise self.error(node, f"{what} must be annotated with struct info such as "
                                   f'R.Tensor((1, 784), "float32"), got {ast.unparse(node)}')
        return value

    # -- statements --------------------------------------------------------------------------
    def parse_body(self, fdef: ast.FunctionDef) -> SeqExpr:
        body = list(fdef.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        result = None
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.Return):
                if i != len(body) - 1:
                    raise self.error(body[i + 1], "statements after `return` are never run")
                result = self.parse_return(stmt)
            else:
                self.statement(stmt, top_level=True)
        if result is None:
            raise self.error(fdef, f"R.function {fdef.name} has no `return` statement at its end")
        self.close_block()
        return SeqExpr([b for b in self.blocks if b.bindings], result)

    def statement(self, stmt, top_level: bool = False) -> None:
        if isinstance(stmt, ast.Assign):
            sizes = self.symbolic_declaration(stmt)
            for name in sizes:
                self.define(name, self.symbol(name))
            if sizes:
                return
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise self.error(stmt, "bind one name per statement (`t = ...` then `a = t[0]`); tuple "
                                       "unpacking and chained assignment are not supported in R.function")
            self.bind(stmt.targets[0], stmt.value, None)
        elif isinstance(stmt, ast.AnnAssign):
            if not isinstance(stmt.target, ast.Name) or stmt.value is None:
                raise self.error(stmt, "an annotated statement must bind a name: `lv: R.Tensor(...) = value`")
            self.bind(stmt.target, stmt.value, stmt.annotation)
        elif isinstance(stmt, ast.With):
            self.parse_with(stmt, top_level)
        elif isinstance(stmt, ast.Expr):
            self.expression_statement(stmt, top_level)
        elif isinstance(stmt, ast.Return):
            raise self.error(stmt, "`return` must be the last statement of the function, outside "
                                   "`with R.dataflow():`")
        elif isinstance(stmt, ast.Pass):
            pass
        else:
            raise self.unsupported(stmt)

    def expression_statement(self, stmt: ast.Expr, top_level: bool) -> None:
        if _is_docstring(stmt):
            return
        call = stmt.value if isinstance(stmt.value, ast.Call) else None
        func = self.eval(call.func) if call is not None else None
        if func is relax_namespace.func_attr:
            if not top_level:
                raise self.error(stmt, "R.func_attr({...}) belongs at the top of the function body")
            args, kwargs = self.call_args(call)
            if len(args) != 1 or kwargs or not isinstance(args[0], dict):
                raise self.error(call, 'R.func_attr takes one dict, e.g. R.func_attr({"Primitive": 1})')
            self.attrs.update(args[0])
            return
        if func is relax_namespace.output:
            raise self.error(stmt, "R.output(...) is only allowed as the last statement of a "
                                   "`with R.dataflow():` block")
        raise self.error(stmt, "the value of this expression would be lost: bind it to a name "
                               "(`lv = ...`)")

    def parse_with(self, stmt: ast.With, top_level: bool) -> None:
        item = stmt.items[0] if len(stmt.items) == 1 else None
        call = item.context_expr if item is not None else None
        if (not isinstance(call, ast.Call) or item.optional_vars is not None
                or self.eval(call.func) is not relax_namespace.dataflow):
            raise self.error(stmt, "the only `with` in R.function is `with R.dataflow():`")
        if call.args or call.keywords:
            raise self.error(call, "R.dataflow() takes no arguments")
        if not top_level:
            raise self.error(stmt, "`with R.dataflow():` blocks cannot nest; write them one after another")
        outputs = self.output_names(stmt)
        self.close_block()
        self.dataflow, self.outputs = stmt, {name for name, _ in outputs}
        self.push_scope()
        for inner in stmt.body[:-1]:
            self.statement(inner)
        local = self.scopes[-1]
        for name, node in outputs:
            if not isinstance(local.get(name), Var):
                raise self.error(node, f"R.output({name}): '{name}' is not bound in this dataflow block")
        self.pop_scope()
        for name, value in local.items():
            if name in self.outputs:
                self.define(name, value)
            else:
                self.dataflow_locals[name] = stmt.lineno + self.source.first_line - 1
        self.close_block()
        self.dataflow, self.outputs = None, set()

    def output_names(self, stmt: ast.With) -> list:
        last = stmt.body[-1]
        call = last.value if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) else None
        if call is None or self.eval(call.func) is not relax_namespace.output:
            raise self.error(last, "a `with R.dataflow():` block must end with R.output(...), naming the "
                                   "variables used after the block")
        names = []
        for arg in call.args:
            if not isinstance(arg, ast.Name):
                raise self.error(arg, "R.output(...) takes the names of variables bound in the block")
            if any(arg.id == n for n, _ in names):
                raise self.error(arg, f"R.output lists '{arg.id}' twice")
            names.append((arg.id, arg))
        if call.keywords:
            raise self.error(call, "R.output(...) takes only variable names")
        return names

    def close_block(self) -> None:
        """End the current block (a dataflow block, or the bindings between them)."""
        if self.bindings:
            kind = DataflowBlock if self.dataflow is not None else BindingBlock
            self.blocks.append(kind(tuple(self.bindings)))
        self.bindings = []

    def bind(self, target: ast.Name, value_node, annotation) -> None:
        evaluated = self.eval(value_node)
        if isinstance(evaluated, ModuleRef) and annotation is None:   # `cls = Module`
            self.define(target.id, evaluated)
            return
        value = self.normalize(self.relax_value(value_node, evaluated), value_node)
        sinfo = value.struct_info
        if annotation is not None:
            declared = self.eval_sinfo(annotation, f"variable '{target.id}'")
            if sinfo is not None and not is_base_of(declared, sinfo):
                raise self.error(annotation, f"'{target.id}' is annotated {sinfo_text(declared)} but its value "
                                             f"is {sinfo_text(sinfo)}")
            sinfo = declared
        in_dataflow = self.dataflow is not None and target.id not in self.outputs
        var = (DataflowVar if in_dataflow else Var)(target.id, sinfo)
        self.bindings.append(VarBinding(var, value))
        self.taken.add(target.id)
        self.define(target.id, var)

    def parse_return(self, stmt: ast.Return):
        if stmt.value is None:
            raise self.error(stmt, "R.function must return a value: `return gv`")
        value = self.normalize(self.relax_value(stmt.value), stmt.value)
        if not is_leaf(value):
            value = self.emit(value, "gv")
        return value

    # -- values ------------------------------------------------------------------------------
    def relax_value(self, node, value=None) -> Expr:
        value = self.eval(node) if value is None else value
        if isinstance(value, GlobalVar):
            raise self.error(node, f"{ast.unparse(node)} is a function of the module; call it, or pass it "
                                   "to R.call_tir")
        if isinstance(value, StructInfo):
            raise self.error(node, f"{ast.unparse(node)} is struct info (a type), not a value; use it "
                                   "as an annotation")
        return self.relax_value_of(value, node)

    def relax_value_of(self, value, node) -> Expr:
        if isinstance(value, (list, tuple)):
            return Tuple([self.relax_value_of(v, node) for v in value])
        try:
            return as_expr(value)
        except TypeError:
            raise self.error(node, f"expected a relax value here, got {type(value).__name__}: {value!r}") from None

    def normalize(self, value: Expr, node) -> Expr:
        """Bind nested calls in arguments to variables of their own, so arguments are leaves."""
        if isinstance(value, Call):
            args = tuple(self.leaf(a) for a in value.args)
            return value if all(a is b for a, b in zip(args, value.args)) else value.replace(args=args)
        if isinstance(value, Tuple):
            fields = tuple(self.leaf(f) for f in value.elements)
            return value if all(a is b for a, b in zip(fields, value.elements)) else Tuple(fields)
        if isinstance(value, TupleGetItem):
            inner = self.leaf(value.tuple_value)
            return value if inner is value.tuple_value else value.replace(tuple_value=inner)
        return value

    def leaf(self, arg):
        if isinstance(arg, GlobalVar) or is_leaf(arg):
            return arg
        if isinstance(arg, Tuple):
            return Tuple([self.leaf(f) for f in arg.elements])
        return self.emit(self.normalize(arg, None), "lv" if self.dataflow is not None else "gv")

    def emit(self, value: Expr, hint: str) -> Var:
        var = (DataflowVar if self.dataflow is not None else Var)(self.fresh_name(hint), value.struct_info)
        self.bindings.append(VarBinding(var, value))
        return var


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


__all__ = ["ModuleRef", "RelaxParser"]
