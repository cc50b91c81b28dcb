"""Random schedule steps. A step names what it works on by block name and loop position
(``sch.get_loops(block)[k]``), not by handle, so a step list replays on a fresh schedule and stays
meaningful when the shrinker drops steps before it (a step whose block or loop is gone is skipped,
as a step the schedule refuses is)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...tir.schedule.func_index import FuncIndex
from . import layout_steps
from .layout_steps import SCOPES


@dataclass(frozen=True)
class Step:
    op: str
    block: str | None = None
    loops: tuple = ()
    args: dict = field(default_factory=dict)
    other: str | None = None   # a second block (compute_at's place holder, ...)

    def code(self) -> str:
        """The step as Python over a schedule ``sch`` (for reproducer scripts)."""
        blk = f'sch.get_block("{self.block}")' if self.block else None
        loop = lambda k, b=blk: f"sch.get_loops({b})[{k}]"  # noqa: E731
        a = self.args
        if self.op in ("split",):
            return f"sch.split({loop(self.loops[0])}, factors={list(a['factors'])})"
        if self.op == "tile":
            return (f"sch.split({loop(self.loops[0])}, factors=sch.sample_perfect_tile("
                    f"{loop(self.loops[0])}, n={a['n']}, max_innermost_factor={a['max']}, "
                    f"decision={list(a['decision'])}))")
        if self.op == "fuse":
            return f"sch.fuse({', '.join(loop(k) for k in self.loops)})"
        if self.op == "reorder":
            return f"sch.reorder({', '.join(loop(k) for k in self.loops)})"
        if self.op in ("parallel", "vectorize", "unroll", "blockize"):
            return f"sch.{self.op}({loop(self.loops[0])})"
        if self.op in ("compute_at", "reverse_compute_at"):
            target = loop(self.loops[0], f'sch.get_block("{self.other}")')
            return (f"sch.{self.op}({blk}, {target}, preserve_unit_loops={a['keep']}, "
                    f"index={a['index']})")
        if self.op == "sampled_compute_at":
            return (f"sch.compute_at({blk}, sch.sample_compute_location({blk}, "
                    f"decision={a['decision']}))")
        if self.op in ("compute_inline", "reverse_compute_inline"):
            return f"sch.{self.op}({blk})"
        if self.op in ("cache_read", "cache_write", "set_scope"):
            return f'sch.{self.op}({blk}, {a["index"]}, "{a["scope"]}")'
        if self.op == "decompose_reduction":
            return f"sch.decompose_reduction({blk}, {loop(self.loops[0])})"
        if self.op == "rfactor":
            return f"sch.rfactor({loop(self.loops[0])}, factor_axis={a['axis']})"
        other = f'sch.get_block("{self.other}")' if self.other else None
        text = layout_steps.code(self.op, blk, self.loops, loop, a, other)
        if text is not None:
            return text
        if self.op == "annotate_unroll":
            return (f'sch.annotate({blk}, "pragma_auto_unroll_max_step", sch.sample_categorical('
                    f"[0, 16, 64], [0.3, 0.3, 0.4], decision={a['decision']}))")
        raise ValueError(f"unknown step {self.op}")

    def apply(self, sch) -> None:
        namespace = {"sch": sch}
        exec(self.code(), namespace)   # one spelling of each step: the reproducer's


def random_step(sch, rng) -> Step | None:
    """A random step on the current schedule (None when the drawn primitive has no target)."""
    func = sch.mod["main"]
    index = FuncIndex(func)
    names = [n for n in index.blocks if n != "root"]
    if not names:
        return None
    block = names[int(rng.integers(len(names)))]
    path_loops = index.loops_above(index.blocks[block])
    op = OPS[int(rng.integers(len(OPS)))]
    n = len(path_loops)
    pick = lambda: int(rng.integers(n))  # noqa: E731
    realize = index.blocks[block]
    if op in ("split", "tile", "parallel", "vectorize", "unroll", "blockize", "decompose_reduction",
              "rfactor") and n == 0:
        return None
    if op == "split":
        k = pick()
        extent = getattr(path_loops[k].extent, "value", None)
        parts = int(rng.integers(2, 4))
        factors = [int(rng.integers(1, 9)) for _ in range(parts)]
        if extent is None or rng.random() < 0.7:
            factors[int(rng.integers(parts))] = None
        return Step("split", block, (k,), {"factors": tuple(factors)})
    if op == "tile":
        k = pick()
        extent = getattr(path_loops[k].extent, "value", None)
        if extent is None:
            return None
        parts = int(rng.integers(2, 4))
        decision = _random_factorization(extent, parts, rng)
        return Step("tile", block, (k,), {"n": parts, "max": max(decision[-1], 16), "decision": tuple(decision)})
    if op in ("parallel", "vectorize", "unroll", "blockize", "decompose_reduction"):
        return Step(op, block, (pick(),))
    if op == "rfactor":
        ndim = len(realize.block.writes[0].buffer.shape) if realize.block.writes else 0
        return Step(op, block, (pick(),), {"axis": int(rng.integers(-ndim - 1, ndim + 1))})
    if op == "fuse" and n >= 2:
        k = int(rng.integers(n - 1))
        return Step(op, block, tuple(range(k, k + int(rng.integers(2, min(3, n - k) + 1)))))
    if op == "reorder" and n >= 2:
        chosen = sorted(rng.choice(n, size=min(n, int(rng.integers(2, 4))), replace=False).tolist())
        return Step(op, block, tuple(rng.permutation(chosen).tolist()))
    if op in ("compute_at", "reverse_compute_at") and len(names) > 1:
        other = [x for x in names if x != block][int(rng.integers(len(names) - 1))]
        other_loops = index.loops_above(index.blocks[other])
        if not other_loops:
            return None
        return Step(op, block, (int(rng.integers(len(other_loops))),),
                    {"keep": bool(rng.random() < 0.5), "index": int(rng.choice([-1, 0, 1, -2]))}, other)
    if op == "sampled_compute_at":
        return Step(op, block, (), {"decision": int(rng.integers(-2, n + 2))})
    if op in ("compute_inline", "reverse_compute_inline"):
        return Step(op, block)
    if op == "cache_read" and realize.block.reads:
        return Step(op, block, (), {"index": int(rng.integers(len(realize.block.reads))),
                                    "scope": SCOPES[int(rng.integers(3))]})
    if op in ("cache_write", "set_scope") and realize.block.writes:
        return Step(op, block, (), {"index": 0, "scope": SCOPES[int(rng.integers(3))]})
    if op in layout_steps.OPS or op == "transform_layout":
        fields = layout_steps.draw(op, func, index, names, block, rng)
        return Step(block=block, **fields) if fields else None
    if op == "annotate_unroll":
        return Step(op, block, (), {"decision": int(rng.integers(3))})
    return None


def _random_factorization(extent: int, parts: int, rng) -> list:
    factors, rest = [], extent
    for _ in range(parts - 1):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = divisors[int(rng.integers(len(divisors)))]
        factors.append(d)
        rest //= d
    factors.append(rest)
    return [int(f) for f in rng.permutation(factors)]


OPS = ("split", "split", "tile", "fuse", "reorder", "reorder", "parallel", "vectorize", "unroll",
       "compute_at", "compute_at", "reverse_compute_at", "reverse_compute_at", "sampled_compute_at",
       "compute_inline", "reverse_compute_inline", "cache_read", "cache_write", "set_scope",
       "decompose_reduction", "rfactor", "blockize", "transform_layout", "annotate_unroll"
       ) + layout_steps.OPS
