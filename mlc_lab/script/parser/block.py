"""Block half of the script parser: ``with T.block``, iterators, ``T.where/reads/writes/block_attr``,
``with T.init()``, and the buffer declarations ``T.alloc_buffer`` / ``T.match_buffer``."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ...tir import dtype as dt
from ...tir import expr as E
from ...tir import stmt as S
from ...tir.buffer import decl_buffer
from .. import tir as tir_namespace
from .expr import HandleParam, describe_error, kind_of
from .stmt import FuncFrame, StmtParser, nop, statement_hint

_ITER_TYPES = {"axis.spatial": "spatial", "axis.reduce": "reduce", "axis.opaque": "opaque",
               "axis.scan": "scan"}
_REMAP_KINDS = {"S": "spatial", "R": "reduce"}


@dataclass
class BlockFrame:
    """Everything a block's header declares, collected while its statements are parsed."""
    name: str
    iter_vars: list = field(default_factory=list)
    iter_values: list = field(default_factory=list)
    predicate: E.PrimExpr | None = None
    reads: tuple | None = None
    writes: tuple | None = None
    annotations: dict | None = None
    alloc_buffers: list = field(default_factory=list)
    match_buffers: list = field(default_factory=list)
    init: S.Stmt | None = None


@dataclass
class BufferSpec:
    """The arguments of T.alloc_buffer / T.match_buffer. ``align`` is checked (and warned about)
    where it is read; ``elem_offset`` and ``offset_factor`` are claims about where the buffer starts
    in its storage, checked by the caller."""
    shape: object
    dtype: str = "float32"
    strides: tuple = ()
    scope: str = "global"
    elem_offset: object = None
    offset_factor: int = 0
    axis_separators: tuple = ()


def _buffer_args(what: str, args: list, kwargs: dict) -> BufferSpec:
    def spec(shape, dtype="float32", strides=None, scope="global", align=0, offset_factor=0,
             elem_offset=None, axis_separators=None):
        tir_namespace._check_buffer_options(align, 0)
        return BufferSpec(shape, dtype, tuple(strides or ()), scope, elem_offset, offset_factor,
                          axis_separators or ())
    try:
        return spec(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(str(exc).replace("spec()", f"T.{what}()")) from None


_OLD_BLOCK_FORM = ('`with T.block([128, 128], "C") as [vi, vj]:` is the 2021 block form, which mlc_lab does '
                   'not take; write the loops and bind the iterators inside the block:\n'
                   '    for i, j in T.grid(128, 128):\n'
                   '        with T.block("C"):\n'
                   '            vi, vj = T.axis.remap("SS", [i, j])')


class BlockParser(StmtParser):
    # -- with T.block / with T.init ----------------------------------------------------------------
    def stmt_With(self, node: ast.With, frame, rest):
        first = node.items[0].context_expr
        if isinstance(first, ast.Call) and first.args and isinstance(first.args[0], (ast.List, ast.Tuple)) \
                and self.eval(first.func) is tir_namespace.block:
            raise self.error(first, _OLD_BLOCK_FORM)
        if len(node.items) != 1 or node.items[0].optional_vars is not None:
            raise self.error(node, "with statements in T.prim_func take exactly one T.block(...) or "
                                   "T.init(), without `as`")
        ctx = node.items[0].context_expr
        func = self.eval(ctx.func) if isinstance(ctx, ast.Call) else None
        if func is tir_namespace.block:
            return self.parse_block(node, ctx, frame)
        if func is tir_namespace.init:
            return self.parse_init(node, frame)
        raise self.error(ctx, f"`with {ast.unparse(ctx)}` is not supported: use `with T.block(\"name\"):` "
                              "or `with T.init():`")

    def parse_block(self, node: ast.With, call: ast.Call, frame) -> S.BlockRealize:
        args, kwargs = self.call_args(call)
        kwargs.pop("no_realize", None)
        name = (args or [kwargs.pop("name_hint", "")])[0]
        if not isinstance(name, str) or len(args) > 1 or kwargs:
            raise self.error(call, 'T.block takes the block name, e.g. T.block("C")')
        block_frame = BlockFrame(name)
        self.saw_block = True
        self.block_depth += 1
        self.push_scope()
        try:
            body = self.parse_body(node.body, block_frame) or nop()
        finally:
            self.pop_scope()
            self.block_depth -= 1
        bf = block_frame
        block = S.Block(name, tuple(bf.iter_vars), bf.reads or (), bf.writes or (), body, bf.init,
                        tuple(bf.alloc_buffers), tuple(bf.match_buffers),
                        tuple(sorted((bf.annotations or {}).items())))
        is_root = name == "root" and isinstance(frame, FuncFrame) and not bf.iter_vars
        if (bf.reads is None or bf.writes is None) and not is_root:
            block = self.infer_access(block, bf, call)
        predicate = bf.predicate if bf.predicate is not None else E.IntImm("bool", 1)
        return S.BlockRealize(tuple(bf.iter_values), predicate, block)

    def infer_access(self, block: S.Block, bf: BlockFrame, call) -> S.Block:
        from ...tir.analysis import block_access_regions
        try:
            reads, writes = block_access_regions(block)
        except Exception as exc:  # the analysis could not bound an index: ask for explicit regions
            raise self.error(call, f"could not infer the regions block {block.name_hint!r} reads and writes "
                                   f"({describe_error(exc)}); give them with T.reads(...) and T.writes(...)") from None
        return block.replace(reads=bf.reads if bf.reads is not None else reads,
                             writes=bf.writes if bf.writes is not None else writes)

    def parse_init(self, node: ast.With, frame):
        if not isinstance(frame, BlockFrame):
            where = ("directly inside its T.block, not nested in a loop, if or let"
                     if self.block_depth else "inside a T.block; here there is no enclosing block")
            raise self.error(node.items[0].context_expr, f"T.init() must be used {where}")
        if frame.init is not None:
            raise self.error(node, f"block {frame.name!r} has two T.init() sections")
        frame.init = self.parse_nested(node.body)
        return None

    # -- statements of a block header -------------------------------------------------------------
    def require_block(self, frame, what: str, node) -> None:
        if not isinstance(frame, BlockFrame):
            where = ("directly inside its T.block, not nested in a loop, if or let"
                     if self.block_depth else "inside a T.block")
            raise self.error(node, f"{what} must be used {where}")

    def block_statement(self, name: str, node: ast.Call, frame):
        self.require_block(frame, f"T.{name}", node)
        if name in ("reads", "writes"):
            if node.keywords:
                raise self.error(node, f"T.{name} takes buffer regions, not keyword arguments")
            parts = node.args
            if len(parts) == 1 and isinstance(parts[0], (ast.List, ast.Tuple)):
                parts = parts[0].elts
            if getattr(frame, name) is not None:
                raise self.error(node, f"block {frame.name!r} has two T.{name}(...) statements")
            setattr(frame, name, tuple(self.eval_region(p) for p in parts))
            return None
        args, kwargs = self.call_args(node)
        if len(args) != 1 or kwargs:
            raise self.error(node, f"T.{name} takes exactly one argument")
        if name == "where":
            cond = self.to_expr(args[0], node.args[0])
            if not dt.is_bool(cond.dtype):
                raise self.error(node.args[0], f"T.where needs a bool condition, got dtype {cond.dtype}")
            if frame.predicate is not None:
                raise self.error(node, f"block {frame.name!r} has two T.where(...) statements")
            frame.predicate = cond
            return None
        if not isinstance(args[0], dict) or not all(isinstance(k, str) for k in args[0]):
            raise self.error(node, 'T.block_attr takes a dict with string keys, e.g. T.block_attr({"k": 1})')
        frame.annotations = {**(frame.annotations or {}), **args[0]}
        return None

    # -- X = T.something(...) ---------------------------------------------------------------------
    def script_assign(self, func, target, call: ast.Call, frame, rest):
        name = func.name if isinstance(func, tir_namespace.ScriptOnly) else "dtype"
        if name == "axis.remap":
            return self.remap(target, call, frame)
        if not isinstance(target, ast.Name):
            raise self.error(target, f"the result of {ast.unparse(call.func)}(...) must be bound to one name")
        if name in ("dtype", "var"):
            return self.symbolic_var(func, target, call, frame)
        if name in _ITER_TYPES:
            return self.axis(_ITER_TYPES[name], target, call, frame)
        if name == "alloc_buffer":
            return self.alloc_buffer(target, call, frame)
        if name == "match_buffer":
            return self.match_buffer(target, call, frame)
        if name == "allocate":
            return self.allocate(target, call, frame, rest)
        if name == "allocate_const":
            return self.allocate_const(target, call, frame, rest)
        raise self.error(call, statement_hint(name))

    def symbolic_var(self, func, target: ast.Name, call: ast.Call, frame):
        if isinstance(func, tir_namespace.DTypeFunc):
            dtype = func.dtype
        else:
            args, kwargs = self.call_args(call)
            dtype = (args or [kwargs.get("dtype", "int32")])[0]
            dtype = dt.check_dtype(dtype)
        if isinstance(frame, FuncFrame) and target.id in self.symbolic_vars:
            return None   # declared ahead of the parameters
        self.define(target.id, E.Var(target.id, dtype))
        return None

    def axis(self, iter_type: str, target: ast.Name, call: ast.Call, frame):
        self.require_block(frame, f"T.axis.{iter_type}", call)
        args, kwargs = self.call_args(call)
        values = args + [kwargs.pop(k) for k in ("dom", "binding", "value") if k in kwargs]
        if len(values) != 2 or kwargs:
            raise self.error(call, f"T.axis.{iter_type} takes a domain and a value, "
                                   f"e.g. {target.id} = T.axis.{iter_type}(128, i)")
        dom, value = values
        dom_node = call.args[0] if call.args else call
        if isinstance(dom, (tuple, list)):
            if len(dom) != 2:
                raise self.error(dom_node, "a domain given as a tuple must be (min, end)")
            rng = self.make_range(dom[0], dom[1], dom_node)
        else:
            rng = self.make_range(0, dom, dom_node)
        if isinstance(value, E.PrimExpr):
            if not dt.is_int(value.dtype):
                raise self.error(call, f"the value of block iterator {target.id} must be an integer "
                                       f"expression, got dtype {value.dtype}")
            rng = self.range_as(rng, value.dtype)
        else:
            value = self.to_expr(E.const(value, rng.extent.dtype) if isinstance(value, int) else value, call)
        self.add_iter(frame, target.id, rng, iter_type, value)
        return None

    @staticmethod
    def range_as(rng: S.Range, dtype: str) -> S.Range:
        """The same range with constant bounds retyped to ``dtype`` (the iterator's)."""
        def retype(x):
            return E.IntImm(dtype, x.value) if isinstance(x, E.IntImm) and x.dtype != dtype else x
        return S.Range(retype(rng.min), retype(rng.extent))

    def add_iter(self, frame, name: str, rng: S.Range, iter_type: str, value: E.PrimExpr) -> None:
        var = E.Var(name, value.dtype)
        frame.iter_vars.append(S.IterVar(var, rng, iter_type))
        frame.iter_values.append(value)
        self.define(name, var)
        self.bound_vars[id(var)] = "block iterator"

    def remap(self, target, call: ast.Call, frame):
        self.require_block(frame, "T.axis.remap", call)
        if len(call.args) != 2 or call.keywords:
            raise self.error(call, 'T.axis.remap takes a kind string and a list of loop variables, '
                                   'e.g. T.axis.remap("SSR", [i, j, k])')
        kinds_node, values_node = call.args
        kinds = self.eval(kinds_node)
        if not isinstance(kinds, str):
            raise self.error(kinds_node, f"T.axis.remap kinds must be a string such as \"SSR\", got {kind_of(kinds)}")
        bad = [k for k in kinds if k not in _REMAP_KINDS]
        if bad:
            raise self.error(kinds_node, f'T.axis.remap got the kind "{bad[0]}" in "{kinds}": each letter must be '
                                         "S (spatial) or R (reduce)")
        values = self.eval(values_node)
        if not isinstance(values, (list, tuple)):
            values, value_nodes = [values], [values_node]
        else:
            value_nodes = values_node.elts if isinstance(values_node, (ast.List, ast.Tuple)) else [values_node] * len(values)
        if len(kinds) != len(values):
            raise self.error(call, f'T.axis.remap got kinds "{kinds}" for {len(values)} loop variables: '
                                   "give one kind letter (S or R) per variable")
        targets = target.elts if isinstance(target, ast.Tuple) else [target]
        if len(targets) != len(values) or not all(isinstance(t, ast.Name) for t in targets):
            raise self.error(target, f"T.axis.remap binds {len(values)} block iterator(s) but the left side "
                                     f"names {len(targets)}")
        for t, kind, value, value_node in zip(targets, kinds, values, value_nodes):
            rng = self.loop_ranges.get(value) if isinstance(value, E.Var) else None
            if rng is None:
                raise self.error(value_node, f"T.axis.remap needs the variables of enclosing loops, but got "
                                             f"`{ast.unparse(value_node)}`; use T.axis.spatial/reduce(dom, value) "
                                             "for other bindings")
            self.add_iter(frame, t.id, rng, _REMAP_KINDS[kind], value)
        return None

    # -- buffers ----------------------------------------------------------------------------------
    def alloc_buffer(self, target: ast.Name, call: ast.Call, frame):
        if not isinstance(frame, (FuncFrame, BlockFrame)):
            raise self.error(call, "T.alloc_buffer must be directly inside a T.block or at the top of the "
                                   "function, not inside a loop or if")
        self.check_rebinding(target)
        args, kwargs = self.call_args(call)
        spec = _buffer_args("alloc_buffer", args, kwargs)
        tir_namespace.check_elem_offset(spec.elem_offset, target.id)
        tir_namespace._check_buffer_options(0, spec.offset_factor)   # its offset, 0, is a multiple of any
        buffer = decl_buffer(spec.shape, spec.dtype, target.id, spec.strides, spec.scope,
                             spec.axis_separators)
        frame.alloc_buffers.append(buffer)
        self.define(target.id, buffer)
        return None

    def match_buffer(self, target: ast.Name, call: ast.Call, frame):
        if not call.args:
            raise self.error(call, "T.match_buffer needs a source: a T.handle parameter, or a region in a block")
        source_node = call.args[0]
        args, kwargs = [self.eval(a) for a in call.args[1:]], {k.arg: self.eval(k.value) for k in call.keywords}
        spec = _buffer_args("match_buffer", args, kwargs)
        buffer = decl_buffer(spec.shape, spec.dtype, target.id, spec.strides, spec.scope,
                             spec.axis_separators)
        if isinstance(frame, FuncFrame):
            tir_namespace.check_elem_offset(spec.elem_offset, target.id)
            tir_namespace._check_buffer_options(0, spec.offset_factor)
            handle = self._find(source_node.id)[1] if isinstance(source_node, ast.Name) else None
            if not isinstance(handle, HandleParam):
                raise self.error(source_node, "T.match_buffer at the top of a function takes a T.handle "
                                              f"parameter, got `{ast.unparse(source_node)}`")
            if handle.buffer is not None:
                raise self.error(call, f"the T.handle parameter '{handle.name}' is already matched to "
                                       f"buffer {handle.buffer.name}")
            handle.buffer = buffer
        elif isinstance(frame, BlockFrame):
            region = self.eval_region(source_node)
            self.check_view(buffer, region, spec, call)
            frame.match_buffers.append(S.MatchBufferRegion(buffer, region))
        else:
            raise self.error(call, "T.match_buffer must be at the top of the function (for a T.handle) or "
                                   "directly inside a T.block (for a region)")
        self.define(target.id, buffer)
        return None

    def bind_offset_name(self, var: E.Var, offset: E.PrimExpr) -> bool:
        """Make the name of ``var``, a variable declared in the enclosing block (``off =
        T.int32()``) and not used yet, stand for ``offset`` from here on; False if it is not one."""
        for scope in reversed(self.scopes):
            if scope.get(var.name) is var:
                scope[var.name] = offset if offset.dtype == var.dtype else offset.astype(var.dtype)
                self.bound_vars[id(var)] = "offset name"
                return True
        return False

    def check_view(self, buffer, region: S.BufferRegion, spec: BufferSpec, call: ast.Call) -> None:
        """A matched region is a view with the strides of the storage it lies in (its last
        dimensions, after the unit ones it drops), starting where the region starts. Declared
        strides, ``elem_offset`` and ``offset_factor`` must agree with that where they are given:
        a stride or offset this parser cannot prove is refused, not assumed."""
        from ...arith import simplify

        source = region.buffer
        strides, base = self.view_layouts.get(id(source), (None, 0))
        if strides is None:
            strides = source.strides or _row_major(source.shape)
        offset = None if base is None else simplify(
            sum((r.min * s for r, s in zip(region.region, strides)), E.const(0, _index_dtype(strides))) + base)
        kept = strides[len(strides) - buffer.ndim:] if buffer.ndim <= len(strides) else None
        if kept is not None:
            for i, (declared, actual) in enumerate(zip(buffer.strides, kept)):
                if isinstance(declared, E.Var) or _proved_zero(declared - actual):
                    continue
                shown = ", ".join(str(simplify(x)) for x in kept)
                raise self.error(call, f"T.match_buffer {buffer.name}: stride {i} is {declared}, but the "
                                       f"region of {source.name} has strides ({shown}) in its storage: a "
                                       "matched buffer views the storage as it is (give those strides, "
                                       "or leave strides out)")
        if isinstance(spec.elem_offset, E.Var) and id(spec.elem_offset) not in self.bound_vars:
            # `off = T.int32()` in the block, then elem_offset=off: off names where the region
            # starts, as the reference compiler binds it; here it stands for that expression.
            if offset is None or not self.bind_offset_name(spec.elem_offset, offset):
                raise self.error(call, f"T.match_buffer {buffer.name}: elem_offset={spec.elem_offset} "
                                       "would name where the region starts, but "
                                       + ("this parser cannot work out that offset" if offset is None
                                          else f"{spec.elem_offset} is not a variable declared in "
                                               "this block with T.int32()"))
            spec = BufferSpec(spec.shape, spec.dtype, spec.strides, spec.scope, None, spec.offset_factor)
        elif isinstance(spec.elem_offset, E.Var) and self.bound_vars.get(id(spec.elem_offset)) not in (
                "loop variable", "block iterator", "parameter"):
            raise self.error(call, f"T.match_buffer {buffer.name}: elem_offset={spec.elem_offset} would "
                                   "bind a variable to where the region starts, and mlc_lab buffers have "
                                   "no offset variable; leave elem_offset out")
        claims = []
        if spec.elem_offset is not None:
            claims.append((f"elem_offset={spec.elem_offset}", lambda o: o - spec.elem_offset))
        if isinstance(spec.offset_factor, int) and spec.offset_factor > 1:
            claims.append((f"offset_factor={spec.offset_factor}",
                           lambda o: E.FloorMod(o, E.const(spec.offset_factor, o.dtype))))
        for text, residue in claims:
            if offset is None or not _proved_zero(residue(offset)):
                where = "an offset this parser cannot work out" if offset is None else f"element {offset}"
                raise self.error(call, f"T.match_buffer {buffer.name}: {text} does not hold: the region "
                                       f"starts at {where} of the storage of {source.name}")
        self.view_layouts[id(buffer)] = (tuple(buffer.strides) or kept, offset)


def _row_major(shape) -> tuple:
    out, step = [], None
    for dim in reversed(shape):
        out.append(E.const(1, dim.dtype) if step is None else step)
        step = dim if step is None else step * dim
    return tuple(reversed(out))


def _index_dtype(strides) -> str:
    return strides[0].dtype if strides else "int32"


def _proved_zero(e) -> bool:
    from ...arith import simplify
    e = simplify(e)
    return isinstance(e, E.IntImm) and e.value == 0
