"""What ``graph`` draws, read off a relax function: nodes (calls, parameters, constants,
outputs), edges (one per use of a tensor) and, for an expanded fused function, the graph inside.

``build_graph(mod, "main")`` walks the bindings with the relax ExprVisitor. Calls become nodes:
``R.call_tir`` by its kernel's name, ``R.call_dps_packed`` by the packed function's name, a relax
op by its name without ``relax.`` (``matmul``, ``nn.relu``), a call of a module function by the
function's name. Tuples and ``TupleGetItem`` become no nodes: their items are followed to the
nodes that made them. Shapes and scalars passed as arguments are not tensors and get no edge.
``mark_changes`` compares two graphs for ``graph_diff``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Optional

from ...ir.module import GlobalVar, IRModule
from ...relax.expr import Call, Constant, ExternFunc, Function, Op, Tuple, TupleGetItem, Var
from ...relax.functor import ExprVisitor
from ...relax.struct_info import TensorStructInfo, TupleStructInfo, shape_text

CALL_KINDS = ("op", "kernel", "fused", "packed", "call")


@dataclass(eq=False)
class Node:
    """One box of the picture. ``kind`` is a call kind (CALL_KINDS) or param, const, port (a
    parameter of a fused function drawn inside its cluster) or output."""
    id: str
    kind: str
    title: str               # op or kernel name; parameter name; "const"; "output"
    detail: str = ""         # the value's shape and dtype, "(1, 64) float32"
    var: str = ""            # the variable bound to it, for the text view and tooltips
    inner: Optional["Graph"] = None     # a fused function drawn as a cluster
    changed: bool = False    # set by graph_diff

    @property
    def is_call(self) -> bool:
        return self.kind in CALL_KINDS


@dataclass
class Edge:
    """One use of a tensor. ``src_port``/``dst_port`` name the node inside a cluster the edge
    really leaves from or goes to (the fused function's result or parameter)."""
    src: str
    dst: str
    tensor: str = ""
    src_port: Optional[str] = None
    dst_port: Optional[str] = None


@dataclass
class Graph:
    """A function's nodes in binding order (parameters first) and its edges; for the graph of an
    expanded fused function, ``results`` names the nodes that return its value."""
    name: str
    nodes: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    results: list = field(default_factory=list)

    def walk(self):
        """Every node, those inside clusters too."""
        for node in self.nodes:
            yield node
            if node.inner is not None:
                yield from node.inner.walk()

    def calls(self) -> list:
        """The calls of the function itself (a fused one counts once, expanded or not)."""
        return [node for node in self.nodes if node.is_call]

    def lines(self, indent: str = "  ") -> list:
        """The text view: one line per node with its inputs (changed nodes marked ``*``)."""
        by_id = {node.id: node for node in self.nodes}
        inputs: dict = {node.id: [] for node in self.nodes}
        for edge in self.edges:
            inputs[edge.dst].append(edge.tensor or by_id[edge.src].var)
        width = max((len(n.var) for n in self.nodes if n.is_call), default=0)
        rows = []
        for node in self.nodes:
            args = ", ".join(inputs[node.id])
            if node.is_call:
                text, tail = f"{node.var:<{width}} = {node.title}({args})", f"{node.kind:<7} -> {node.detail}"
            elif node.kind == "output":
                text, tail = f"{node.title}({args})", "output"
            else:
                text, tail = node.var, f"{node.kind:<7} {node.detail}"
            rows.append((("* " if node.changed else "  "), indent, text, tail, node))
        column = max((len(text) for _, _, text, _, _ in rows), default=0) + 2
        lines = []
        for mark, pad, text, tail, node in rows:
            lines.append(f"{pad[:-2]}{mark}{text:<{column}}{tail}".rstrip())
            if node.inner is not None:
                lines += node.inner.lines(indent + "    ")
        return lines


def mark_changes(before: Graph, after: Graph) -> tuple:
    """Copies of both graphs with ``changed`` set on each call that the other graph lacks: a call
    of the same kind, op or kernel name, result shape and number of inputs (counted with
    multiplicity). A call whose inputs only come from elsewhere (a relu now fed by a fused
    kernel) is not marked, so that the highlights show what a pass replaced."""
    before, after = _copy(before), _copy(after)
    signatures = [_signatures(before), _signatures(after)]
    for mine, theirs in (signatures, signatures[::-1]):
        left = Counter(theirs.values())
        for node, signature in mine.items():
            if left[signature] > 0:
                left[signature] -= 1
            else:
                node.changed = True
    return before, after


def _copy(model: Graph) -> Graph:
    nodes = [replace(n, inner=_copy(n.inner) if n.inner is not None else None) for n in model.nodes]
    return replace(model, nodes=nodes, edges=list(model.edges), results=list(model.results))


def _signatures(model: Graph) -> dict:
    inputs = Counter()
    for g in [model] + [node.inner for node in model.walk() if node.inner is not None]:
        inputs.update(edge.dst for edge in g.edges)
    return {node: (node.kind, node.title, node.detail, inputs[node.id])
            for node in model.walk() if node.is_call}


def build_graph(mod_or_func, func_name: str = "main", expand_fused: bool = False) -> Graph:
    """The graph (nodes and edges, no drawing) of a relax function."""
    if isinstance(mod_or_func, IRModule):
        mod, func = mod_or_func, mod_or_func[func_name]
    else:
        mod, func = None, mod_or_func
    if not isinstance(func, Function):
        raise TypeError(f"graph draws relax functions; {func_name!r} is a {type(func).__name__}"
                        + (" (its loops print with .show())" if hasattr(func, "body") else ""))
    name = func.attrs.get("global_symbol") or func_name
    return _Builder(mod, expand_fused, "").build(func, name, inner=False)


class _Src(NamedTuple):
    """Where a tensor comes from: a node (and the node inside it, for a cluster) and its name."""
    node: str
    port: Optional[str]
    tensor: str


class _Builder(ExprVisitor):
    """Walks one function's bindings, adding a node per call and an edge per tensor use."""

    def __init__(self, mod: Optional[IRModule], expand: bool, prefix: str):
        self.mod, self.expand, self.prefix = mod, expand, prefix
        self.model = Graph("")
        self.values: dict = {}      # relax Var -> _Src, or a tuple of values
        self.constants: dict = {}   # Constant -> _Src (constants are told apart by identity)

    def build(self, func: Function, name: str, inner: bool) -> Graph:
        self.model.name = name
        for param in func.params:
            node = self._add("port" if inner else "param", param.name_hint,
                             _sinfo_text(param.struct_info), param.name_hint)
            self.values[param] = _Src(node.id, None, param.name_hint)
        self.visit_expr(func.body)
        result = self._value(func.body.body)
        if inner:
            self.model.results = [src.port or src.node for src in _flatten(result)]
        else:
            outputs = _flatten(result)
            for i, src in enumerate(outputs):
                node = self._add("output", "output" if len(outputs) == 1 else f"output{i}", "", "")
                self._edge(src, node.id)
        return self.model

    def visit_seq_expr_(self, op) -> None:
        for block in op.blocks:
            self.visit_binding_block(block)

    def visit_var_binding_(self, binding) -> None:
        var, value = binding.var, binding.value
        if isinstance(value, Call):
            self.values[var] = self._call(var, value)
        elif isinstance(value, Constant):
            self.values[var] = self._constant(value, var.name_hint)
        elif not isinstance(value, Function):
            self.values[var] = self._value(value)

    def _call(self, var: Var, call: Call):
        kind, title, args, callee = self._describe(call)
        values = [self._value(arg) for arg in args]      # constants get their nodes first
        node = self._add(kind, title, _sinfo_text(var.struct_info or call.struct_info), var.name_hint)
        if callee is None:
            for src in _flatten(values):
                self._edge(src, node.id)
            return _Src(node.id, None, var.name_hint)
        node.inner = _Builder(self.mod, self.expand, f"{node.id}.").build(callee, title, inner=True)
        ports = [n.id for n in node.inner.nodes if n.kind == "port"]
        for port, value in zip(ports, values):
            for src in _flatten(value):
                self._edge(src, node.id, dst_port=port)
        results = node.inner.results
        if len(results) == 1:
            return _Src(node.id, results[0], var.name_hint)
        return tuple(_Src(node.id, port, f"{var.name_hint}[{i}]") for i, port in enumerate(results))

    def _describe(self, call: Call) -> tuple:
        """(kind, title, argument expressions, fused relax function to expand or None)."""
        op = call.op
        if isinstance(op, Op) and op.name == "relax.call_tir":
            name = call.args[0].name_hint
            return ("fused" if name.startswith("fused_") else "kernel"), name, call.args[1].elements, None
        if isinstance(op, Op) and op.name == "relax.call_dps_packed":
            return "packed", call.args[0].global_symbol, call.args[1].elements, None
        if isinstance(op, Op):
            return "op", op.name.removeprefix("relax."), call.args, None
        if isinstance(op, GlobalVar):
            callee = self.mod[op] if self.mod is not None and op in self.mod else None
            fused = isinstance(callee, Function) and "Primitive" in callee.attrs
            return ("fused" if fused else "call"), op.name_hint, call.args, \
                (callee if fused and self.expand else None)
        if isinstance(op, ExternFunc):
            return "packed", op.global_symbol, call.args, None
        return "call", op.name_hint, call.args, None

    def _value(self, expr):
        """The nodes a value comes from: a _Src, or a tuple of values for a tuple."""
        if isinstance(expr, Var):
            if expr not in self.values:   # a free variable: drawn like a parameter
                node = self._add("param", expr.name_hint, _sinfo_text(expr.struct_info), expr.name_hint)
                self.values[expr] = _Src(node.id, None, expr.name_hint)
            return self.values[expr]
        if isinstance(expr, Constant):
            return self._constant(expr, None)
        if isinstance(expr, Tuple):
            return tuple(self._value(item) for item in expr.elements)
        if isinstance(expr, TupleGetItem):
            whole = self._value(expr.tuple_value)
            if isinstance(whole, tuple):
                return whole[expr.index]
            return whole._replace(tensor=f"{whole.tensor}[{expr.index}]")
        return ()   # shapes, scalars, functions: not tensors

    def _constant(self, const: Constant, name: Optional[str]) -> _Src:
        if const not in self.constants:
            name = name or f"c{sum(n.kind == 'const' for n in self.model.nodes)}"
            node = self._add("const", "const", _sinfo_text(const.struct_info), name)
            self.constants[const] = _Src(node.id, None, name)
        return self.constants[const]

    def _add(self, kind: str, title: str, detail: str, var: str) -> Node:
        node = Node(f"{self.prefix}n{len(self.model.nodes)}", kind, title, detail, var)
        self.model.nodes.append(node)
        return node

    def _edge(self, src: _Src, dst: str, dst_port: Optional[str] = None) -> None:
        self.model.edges.append(Edge(src.node, dst, src.tensor, src.port, dst_port))


def _flatten(value) -> list:
    """The _Src of every tensor in a value (a _Src, or nested tuples of them), in order."""
    if isinstance(value, _Src):
        return [value]
    return [src for item in value for src in _flatten(item)]


def _sinfo_text(sinfo) -> str:
    """A value's shape and dtype as a node shows them: ``(1, 64) float32``."""
    if isinstance(sinfo, TensorStructInfo):
        return f"{shape_text(sinfo.shape)} {sinfo.dtype}"
    if isinstance(sinfo, TupleStructInfo):
        return "(" + ", ".join(_sinfo_text(item) for item in sinfo.elements) + ")"
    return type(sinfo).__name__.removesuffix("StructInfo").lower() if sinfo is not None else ""
