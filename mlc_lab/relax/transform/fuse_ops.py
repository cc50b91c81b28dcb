# FuseOps: group R.call_tir bindings of each dataflow block by TVM's fusion rules and lift every group
# into a private relax function with attr "Primitive": 1. Expects PrimFuncs annotated with "op_pattern".
"""``relax.transform.FuseOps()``: decide which kernels run as one.

Before (after LegalizeOps and AnnotateTIROpPattern)::

    lv = R.call_tir(cls.matmul, (x, w), ...)       # out_elemwise_fusable
    lv1 = R.call_tir(cls.add, (lv, b), ...)         # elemwise
    gv = R.call_tir(cls.relu, (lv1,), ...)          # elemwise

After::

    @R.function(private=True)
    def fused_matmul_add_relu(x, w, b):
        R.func_attr({"Primitive": 1})
        with R.dataflow():
            lv = R.call_tir(cls.matmul, (x, w), ...)
            lv1 = R.call_tir(cls.add, (lv, b), ...)
            gv = R.call_tir(cls.relu, (lv1,), ...)
            R.output(gv)
        return gv

    # in main:
    gv = cls.fused_matmul_add_relu(x, w, b)

The rules are TVM's graph partitioner: a node is fused into its immediate post-dominator (the
first node every path from it passes through) when the kinds on the way allow it:

- out_elemwise_fusable (matmul, conv2d): when the post-dominator is reached through elemwise
  edges only and everything in between is at most broadcast (so a bias add and a relu join it);
- elemwise / broadcast: into a post-dominator that is injective or a reduction, when the nodes
  in between are at most injective;
- injective: (in a second round, so matmuls finish first) when everything up to the
  post-dominator is at most injective;
- comm_reduce and opaque nodes never fuse into what follows; a value visible outside the
  dataflow block ends its group.

``FuseOps(windows=True)`` (``relax.build``'s pipeline) adds one rule: a pooling (a reduction
over windows that reuses no data, out_elemwise_fusable by the rules above) joins the group of
an anchor whose one value it alone reads, so that ``DefaultSchedule`` can compute the pooling
inside the convolution's tile while its rows are in cache (conv-bias-relu-pool as one kernel).

An edge into a broadcast op counts as elemwise when the argument already has the output's shape.
PrimFuncs without "op_pattern" are opaque. Identical groups share one function.
"""
from __future__ import annotations

from ...ir.transform import Pass, PassInfo
from ...tir.function import PrimFunc
from ..analysis import is_call_tir, leaves, substitute, used_vars  # the first three re-exported
from ..block_builder import BlockBuilder
from ..expr import (Call, DataflowBlock, DataflowVar, Function, SeqExpr, Tuple, TupleGetItem, Var,
                    VarBinding)
from ..struct_info import TensorStructInfo, struct_info_equal
from ...tir.schedule.policy.blocks import has_data_reuse
from .annotate_tir_op_pattern import (BROADCAST, COMM_REDUCE, ELEMWISE, INJECTIVE, OPAQUE,
                                      OUT_EWISE_FUSABLE, func_blocks)


class _Group:
    __slots__ = ("parent", "pattern", "anchor")

    def __init__(self, pattern: int, anchor: bool):
        self.parent, self.pattern, self.anchor = None, pattern, anchor

    def root(self) -> "_Group":
        group = self
        while group.parent is not None:
            group = group.parent
        return group


class GraphPartitioner:
    """Partition the bindings of one dataflow block into fusion groups (TVM's algorithm)."""

    def __init__(self, mod, bindings: tuple, windows: bool = False):
        self.bindings, self.windows = bindings, windows
        index = {b.var: i for i, b in enumerate(bindings)}
        self.patterns = [self._pattern(mod, b.value) for b in bindings]
        self.pooling = [windows and p == OUT_EWISE_FUSABLE and _is_pooling(mod[b.value.args[0]])
                        for p, b in zip(self.patterns, bindings)]
        self.outputs = [[] for _ in bindings]
        for j, b in enumerate(bindings):
            for leaf in leaves(b.value):
                if isinstance(leaf, Var) and leaf in index:
                    self.outputs[index[leaf]].append((j, self._edge_pattern(leaf, b, j)))
        self.extern = [not isinstance(b.var, DataflowVar) for b in bindings]
        self.groups = [_Group(p, p == OUT_EWISE_FUSABLE) for p in self.patterns]
        self.dom = self._post_dominators()

    @staticmethod
    def _pattern(mod, value) -> int:
        if not is_call_tir(value) or value.args[0] not in mod:
            return OPAQUE
        func = mod[value.args[0]]
        return func.attr_dict.get("op_pattern", OPAQUE) if isinstance(func, PrimFunc) else OPAQUE

    def _edge_pattern(self, arg: Var, consumer: VarBinding, j: int) -> int:
        pattern = self.patterns[j]
        out, given = consumer.var.struct_info, arg.struct_info
        if (pattern == BROADCAST and isinstance(out, TensorStructInfo)
                and isinstance(given, TensorStructInfo) and out.shape is not None
                and given.shape is not None and struct_info_equal(out, given)):
            return ELEMWISE
        return pattern

    def _post_dominators(self) -> list:
        """(parent, depth, pattern of the edges up to it) for each node; parent None at a root."""
        dom: list = [None] * len(self.bindings)
        for i in reversed(range(len(self.bindings))):
            if self.extern[i] or not self.outputs[i]:
                dom[i] = (None, 1, OPAQUE)
                continue
            parent, pattern = self.outputs[i][0][0], self.outputs[i][0][1]
            for node, edge in self.outputs[i][1:]:
                parent, pattern = self._lca(dom, parent, node, max(pattern, edge))
            dom[i] = (parent, dom[parent][1] + 1 if parent is not None else 1, pattern)
        return dom

    @staticmethod
    def _lca(dom, lhs, rhs, pattern):
        while lhs != rhs:
            if lhs is None or rhs is None:
                return None, pattern
            if dom[lhs][1] < dom[rhs][1]:
                pattern, rhs = max(pattern, dom[rhs][2]), dom[rhs][0]
            elif dom[rhs][1] < dom[lhs][1]:
                pattern, lhs = max(pattern, dom[lhs][2]), dom[lhs][0]
            else:
                pattern = max(pattern, dom[lhs][2], dom[rhs][2])
                lhs, rhs = dom[lhs][0], dom[rhs][0]
        return lhs, pattern

    def _check_path(self, src: int, sink: int, ok) -> bool:
        visited: set = set()

        def walk(node: int) -> bool:
            if node in visited:
                return True
            visited.add(node)
            if not ok(self.groups[node].root().pattern, node == sink):
                return False
            return node == sink or all(walk(j) for j, _ in self.outputs[node])
        return all(walk(j) for j, _ in self.outputs[src])

    def _commit(self, src: int, sink: int) -> None:
        target, visited = self.groups[sink], set()

        def merge(node: int) -> None:
            if node == sink or node in visited:
                return
            visited.add(node)
            child, parent = self.groups[node].root(), target.root()
            if child is not parent:
                child.parent = parent
                if child.anchor:
                    parent.anchor = True
                    parent.pattern = max(parent.pattern, child.pattern)
            for j, _ in self.outputs[node]:
                merge(j)
        merge(src)

    def partition(self) -> list:
        """Groups of binding indices (each in binding order), one per fused function to make."""
        for phase in (0, 1):
            for i, group in enumerate(self.groups):
                parent, _, dom_pattern = self.dom[i]
                if group.pattern == OPAQUE or parent is None:
                    continue
                if group.root() is self.groups[parent].root():
                    continue
                if group.pattern == OUT_EWISE_FUSABLE:
                    if phase == 0 and dom_pattern == ELEMWISE and self._check_path(
                            i, parent, lambda kind, sink: kind <= BROADCAST):
                        self._commit(i, parent)
                elif group.pattern <= BROADCAST:
                    if dom_pattern <= INJECTIVE or dom_pattern == COMM_REDUCE:
                        if self._check_path(i, parent, _into_anchor):
                            self._commit(i, parent)
                elif group.pattern == INJECTIVE:
                    if phase == 1 and self._check_path(i, parent, lambda kind, sink: kind <= INJECTIVE):
                        self._commit(i, parent)
        if self.windows:
            self._fuse_windows()
        members: dict = {}
        for i, group in enumerate(self.groups):
            members.setdefault(id(group.root()), []).append(i)
        return [m for m in members.values() if len(m) > 1]


    def _fuse_windows(self) -> None:
        """A pooling joins the anchored group of the one binding it reads, when that binding is
        the group's last, read by nothing else and not visible outside the block."""
        for j, pooling in enumerate(self.pooling):
            if not pooling or self.groups[j].root().parent is not None:
                continue
            inputs = [i for i, outs in enumerate(self.outputs) if any(k == j for k, _ in outs)]
            if len(inputs) != 1 or self.groups[j].root() is not self.groups[j]:
                continue
            i = inputs[0]
            group = self.groups[i].root()
            members = [n for n, g in enumerate(self.groups) if g.root() is group]
            if (not group.anchor or self.extern[i] or [k for k, _ in self.outputs[i]] != [j]
                    or i != max(members) or any(self.extern[n] for n in members)):
                continue
            self.groups[j].parent = group


def _is_pooling(func) -> bool:
    """One reduction block (after spatial blocks such as padding) that reuses no data: each
    output reads its own window."""
    if not isinstance(func, PrimFunc):
        return False
    found = func_blocks(func)
    reductions = [b for b in found if any(iv.iter_type != "spatial" for iv in b.iter_vars)]
    return len(reductions) == 1 and reductions[0] is found[-1] and not has_data_reuse(reductions[0])


def _into_anchor(kind: int, is_sink: bool) -> bool:
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= BROADCAST or kind in (COMM_REDUCE, INJECTIVE, OUT_EWISE_FUSABLE)


def _used_vars(func: Function, skip: set) -> set:
    """Vars used by the function outside the bindings at the ids in ``skip``."""
    return used_vars(func.body.body, *(b.value for block in func.body.blocks
                                       for b in block.bindings if id(b) not in skip))


class _Fuser:
    def __init__(self, mod, windows: bool = False):
        self.mod, self.windows = mod, windows
        self.builder = BlockBuilder(mod)

    def fuse_function(self, func: Function) -> Function:
        blocks = []
        for block in func.body.blocks:
            if isinstance(block, DataflowBlock):
                groups = GraphPartitioner(self.mod, block.bindings, self.windows).partition()
                if groups:
                    block = self._rewrite_block(func, block, groups)
            blocks.append(block)
        if all(a is b for a, b in zip(blocks, func.body.blocks)):
            return func
        return func.replace(body=SeqExpr(blocks, func.body.body), struct_info=None)

    def _rewrite_block(self, func: Function, block: DataflowBlock, groups: list) -> DataflowBlock:
        replace_at: dict = {}
        dropped: set = set()
        for group in groups:
            bindings = [block.bindings[i] for i in group]
            replace_at[group[-1]] = self._lift(func, bindings)
            dropped.update(group)
        new = []
        for i, binding in enumerate(block.bindings):
            if i in replace_at:
                new.extend(replace_at[i])
            elif i not in dropped:
                new.append(binding)
        return DataflowBlock(new)

    def _lift(self, func: Function, bindings: list) -> list:
        defined = {b.var for b in bindings}
        used_outside = _used_vars(func, {id(b) for b in bindings})
        outputs = [b.var for b in bindings
                   if b.var in used_outside or not isinstance(b.var, DataflowVar)]
        outputs = outputs or [bindings[-1].var]  # a dead group still computes its last value
        inputs = [leaf for leaf in leaves(*(b.value for b in bindings)) if leaf not in defined]
        mapping: dict = {}
        params = []
        for k, x in enumerate(inputs):
            name = x.name_hint if isinstance(x, Var) else f"const{k}"
            mapping[x] = Var(name, x.struct_info)
            params.append(mapping[x])
        body = []
        for b in bindings:
            var_cls = Var if b.var in outputs else DataflowVar
            new_var = var_cls(b.var.name_hint, b.var.struct_info)
            body.append(VarBinding(new_var, substitute(b.value, mapping)))
            mapping[b.var] = new_var
        result = mapping[outputs[0]] if len(outputs) == 1 else Tuple([mapping[o] for o in outputs])
        fused = Function(params, SeqExpr([DataflowBlock(body)], result), result.struct_info,
                         {"Primitive": 1})
        name = "fused_" + "_".join(b.value.args[0].name_hint for b in bindings)
        gv = self.builder.add_func(fused, name)
        call = Call(gv, tuple(inputs), struct_info=result.struct_info)
        if len(outputs) == 1:
            return [VarBinding(outputs[0], call)]
        packed = DataflowVar(f"{outputs[0].name_hint}_tuple", result.struct_info)
        unpack = [VarBinding(o, TupleGetItem(packed, k)) for k, o in enumerate(outputs)]
        return [VarBinding(packed, call)] + unpack


class FuseOps(Pass):
    """``windows``: also fuse a pooling into the convolution before it (see the module doc)."""

    def __init__(self, *, windows: bool = False):
        self.info = PassInfo(0, "FuseOps")
        self.windows = windows

    def transform_module(self, mod, ctx):
        fuser = _Fuser(mod, self.windows)
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and "Primitive" not in func.attrs:
                fuser.builder.update_func(gv, fuser.fuse_function(func))
        return fuser.builder.get()


__all__ = ["FuseOps", "GraphPartitioner"]
