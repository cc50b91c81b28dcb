"""Pictures of a loop nest: what the loops are, and what one iteration of a loop touches.

    loop_nest(sch, "Y")                     the nest holding block Y as nested boxes, one colour
                                            per loop kind (serial, parallel, vectorized, ...)
    loop_nest(sch, "Y", loop=j_0, at=1)     ... beside the tiles that iteration 1 of j_0 reads
                                            and writes, drawn on a grid of each buffer
    touched_regions(sch, j_0, at=1)         those tiles as numbers: buffer -> read/written boxes
    animate_visit_order(sch, "Y")           the order one block visits its buffers (small sizes)

``sch`` may also be an IRModule or a PrimFunc, and blocks and loops may be given by name.
The tiles come from the blocks' T.reads/T.writes, relaxed over the loops inside the chosen one
with the schedule's own region arithmetic, so the picture shows what the compiler infers.
Every picture is SVG with its own white background (readable on light and dark pages) and
prints as text outside a notebook.
"""
from __future__ import annotations

import html
import itertools
from dataclasses import dataclass


from ..arith import int_bound, simplify
from ..ir.module import IRModule
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.function import PrimFunc
from ..tir.schedule import BlockRV, LoopRV, Schedule
from ..tir.schedule.func_index import FuncIndex, child_blocks
from ..tir.intervals import relax_region
from ..tir.stmt_functor import substitute

# loop kind -> (outline, fill); thread-bound loops show their tag instead of the kind
KIND_COLOURS = {"serial": ("#56657a", "#f2f4f7"), "parallel": ("#2e7d32", "#e6f4e7"),
                "vectorized": ("#c75000", "#fff0de"), "unrolled": ("#7b1fa2", "#f5e6f8"),
                "thread_binding": ("#c62828", "#fde8e8")}
BLOCK_COLOURS = ("#1f5f99", "#e3eefa")
ROLE_COLOURS = {"read": "#4c72b0", "write": "#dd6b20", "read+write": "#8e5ab5"}
WRITTEN_BEFORE = "#f7d9bd"   # the animation's cells written in an earlier frame
INK, FONT = "#1f2328", "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace"
CHAR_W, ROW, INDENT, WIDTH = 7.3, 20, 14, 600
MAX_SIDE, MAX_FRAMES, MAX_ITERATIONS = 16, 1024, 1 << 16
Box = tuple   # one (start, stop) pair per buffer dimension, stop exclusive


# ----------------------------------------------------------------------------------------------
# The public functions
def loop_nest(target, block=None, *, loop=None, at: int = 0, func_name: str | None = None,
              highlight=()) -> "LoopNestPicture":
    """The loop nest holding ``block`` (all of the function without one) as nested boxes, each
    loop labelled with its name, range and kind, the block innermost. With ``loop``, also the
    tiles that iteration ``at`` of that loop touches (see ``touched_regions``); ``highlight``
    (loops or blocks) draws those boxes with a thick outline."""
    func, name, sch = _function(target, func_name, (block, loop))
    index = FuncIndex(func)
    realize = _block(index, block, sch, name) if block is not None else None
    chosen = _loop(index, loop, realize, name) if loop is not None else None
    marked = {id(_marked(index, h, sch, name)) for h in highlight}
    items = _boxes(func.body.block.body if isinstance(func.body, S.BlockRealize) else func.body)
    if realize is not None:
        items = [item for item in items if item.holds(realize)]
    nest = _NestDrawing(items, realize, chosen, at, marked)
    touched = _touched(index, chosen, at, None) if chosen is not None else None
    return LoopNestPicture(nest.svg(), nest.text(), touched, _tiles_title(chosen, at) if touched else "")


def touched_regions(target, loop, at: int = 0, block=None, func_name: str | None = None) -> dict:
    """What iteration ``at`` (0 = the first) of ``loop`` touches: buffer name -> ``Touched``
    (read and written boxes, one ``(start, stop)`` per dimension, stop exclusive). Loops outside
    ``loop`` sit at their first iteration, loops inside it take their whole range; the blocks
    under it (only ``block``, when given) contribute their T.reads and T.writes."""
    func, name, sch = _function(target, func_name, (block, loop))
    index = FuncIndex(func)
    realize = _block(index, block, sch, name) if block is not None else None
    return _touched(index, _loop(index, loop, realize, name), at, realize)


def animate_visit_order(target, block, func_name: str | None = None):
    """The order in which ``block`` visits the elements of its buffers, one frame per element
    (or tile) it writes: what it writes then, what it reads for it, and what it wrote before.
    A slider steps through the frames in a notebook. Small programs only: at most 16 x 16
    elements per buffer and 1024 frames, else a ValueError says what to shrink."""
    func, name, sch = _function(target, func_name, (block,))
    index = FuncIndex(func)
    realize = _block(index, block, sch, name)
    from .visit_order import VisitOrderAnimation, visits
    return VisitOrderAnimation(realize.block.name_hint, *visits(index, realize))


# ----------------------------------------------------------------------------------------------
# Finding the function, the block and the loop
def _function(target, func_name, handles):
    sch = target if isinstance(target, Schedule) else None
    mod = target.mod if sch is not None else target
    if isinstance(mod, PrimFunc):
        return mod, func_name or str(mod.attr_dict.get("global_symbol", "main")), None
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected a tir.Schedule, an IRModule or a PrimFunc, got {type(target).__name__}")
    name = func_name or next((h.func_name for h in handles if isinstance(h, (BlockRV, LoopRV))), None)
    if name is None:
        prim_funcs = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, PrimFunc)]
        if len(prim_funcs) != 1:
            raise ValueError(f"the module holds the functions {prim_funcs}: say which with func_name=")
        name = prim_funcs[0]
    return mod[name], name, sch


def _block(index: FuncIndex, block, sch, func_name: str) -> S.BlockRealize:
    if isinstance(block, BlockRV):
        name = sch.get(block).name_hint if sch is not None else block.name
    elif isinstance(block, str):
        name = block
    else:
        raise TypeError(f"a block is given as a BlockRV or a name, got {type(block).__name__}: {block!r}")
    if name not in index.blocks or name == "root":
        raise ValueError(f'no block "{name}" in function {func_name}; its blocks are '
                         + ", ".join(b for b in index.blocks if b != "root"))
    return index.blocks[name]


def _marked(index: FuncIndex, handle, sch, func_name: str):
    """The For or BlockRealize a ``highlight`` entry names (a block name before a loop name)."""
    if isinstance(handle, LoopRV) or (isinstance(handle, str) and handle not in index.blocks):
        return _loop(index, handle, None, func_name)
    return _block(index, handle, sch, func_name)


def _loop(index: FuncIndex, loop, realize, func_name: str) -> S.For:
    """The For of a LoopRV, or of a loop name (among the loops above ``realize`` when given)."""
    if isinstance(loop, LoopRV):
        found = index.loops.get(id(loop.var))
        if found is None:
            raise ValueError(f"loop {loop.var.name} is not in function {func_name} any more "
                             "(a later primitive replaced it: take fresh handles with sch.get_loops)")
        return found
    if not isinstance(loop, str):
        raise TypeError(f"a loop is given as a LoopRV or a name, got {type(loop).__name__}: {loop!r}")
    candidates = ([n for n in index.path(realize) if isinstance(n, S.For)] if realize is not None
                  else list(index.loops.values()))
    found = [f for f in candidates if f.loop_var.name == loop]
    if len(found) != 1:
        where = f"above block {realize.block.name_hint}" if realize is not None else f"in {func_name}"
        names = ", ".join(f.loop_var.name for f in candidates)
        raise ValueError(f"{len(found)} loops named {loop!r} {where} (loops: {names}); "
                         + ("name a block too, or " if realize is None and found else "")
                         + "pass a LoopRV")
    return found[0]


# ----------------------------------------------------------------------------------------------
# The nest as boxes
@dataclass
class _Box:
    node: object        # S.For or S.BlockRealize
    children: list

    def holds(self, realize) -> bool:
        return self.node is realize or any(child.holds(realize) for child in self.children)


def _boxes(stmt) -> list:
    """The loops and blocks of ``stmt`` as a forest, in program order."""
    if isinstance(stmt, S.For):
        return [_Box(stmt, _boxes(stmt.body))]
    if isinstance(stmt, S.BlockRealize):
        return [_Box(stmt, _boxes(stmt.block.body))]
    if isinstance(stmt, S.SeqStmt):
        return [box for part in stmt.seq for box in _boxes(part)]
    inner = [getattr(stmt, attr, None) for attr in ("then_case", "else_case", "body")]
    return [box for part in inner if isinstance(part, S.Stmt) for box in _boxes(part)]


def _loop_label(loop: S.For) -> str:
    lo, extent = simplify(loop.min), simplify(loop.extent)
    bounds = str(extent) if isinstance(lo, E.IntImm) and lo.value == 0 else f"{lo}, {simplify(lo + extent)}"
    return f"for {loop.loop_var.name} in range({bounds})"


def _kind_word(loop: S.For) -> str:
    return loop.thread_binding if loop.kind == "thread_binding" and loop.thread_binding else loop.kind


def _block_lines(realize: S.BlockRealize) -> list[str]:
    block = realize.block
    axes = ", ".join(f"{iv.var.name}: {iv.iter_type[0].upper()}" for iv in block.iter_vars)
    lines = [f'block "{block.name_hint}"' + (f"  ({axes})" if axes else "")]
    if block.reads:
        lines.append("reads  " + ", ".join(str(r) for r in block.reads))
    if block.writes:
        lines.append("writes " + ", ".join(str(w) for w in block.writes))
    return lines


class _NestDrawing:
    """Lays the boxes out top to bottom, each child indented inside its parent."""

    def __init__(self, items, realize, chosen, at, marked):
        self.items, self.realize, self.chosen, self.at, self.marked = items, realize, chosen, at, marked

    def _annotation(self, loop) -> str:
        return f"   <- iteration {self.at} pictured" if loop is self.chosen else ""

    def text(self) -> str:
        lines = []

        def walk(box, depth):
            pad = "  " * depth
            if isinstance(box.node, S.For):
                label = _loop_label(box.node)
                lines.append(f"{pad}{label:<{max(34 - 2 * depth, len(label))}}  {_kind_word(box.node)}"
                             + self._annotation(box.node))
            else:
                mark = "   <- this block" if box.node is self.realize else ""
                block_lines = _block_lines(box.node)
                lines.extend([pad + block_lines[0] + mark] + [pad + "  " + ln for ln in block_lines[1:]])
            for child in box.children:
                walk(child, depth + 1)
        for item in self.items:
            walk(item, 0)
        return "\n".join(lines) or "(no loops)"

    def svg(self) -> str:
        legend_h = 30
        parts, height = [], legend_h
        for item in self.items:
            height = self._draw(item, 0, height, parts) + 8
        head = _legend(list(KIND_COLOURS) + ["block"], 6, 8)
        return _svg(WIDTH, height, head + "".join(parts), "mlc-lab-loop-nest-svg")

    def _draw(self, box, depth, y, parts) -> float:
        """Draw ``box`` with its top at ``y``; return where its bottom is."""
        x, width = 4 + depth * INDENT, WIDTH - 8 - 2 * depth * INDENT
        node = box.node
        thick = id(node) in self.marked or node is self.realize or node is self.chosen
        if isinstance(node, S.For):
            outline, fill = KIND_COLOURS.get(node.kind, KIND_COLOURS["serial"])
            rows = [_loop_label(node) + (f"  (iteration {self.at} pictured)" if node is self.chosen else "")]
            attrs = (f'class="loop" data-loop="{html.escape(node.loop_var.name)}" data-kind="{node.kind}" '
                     f'data-extent="{html.escape(str(node.extent))}"')
            tag = _kind_word(node)
        else:
            outline, fill = BLOCK_COLOURS
            rows = _block_lines(node)
            attrs = f'class="block" data-block="{html.escape(node.block.name_hint)}"'
            tag = ""
        index_parts = len(parts)
        parts.append("")                        # the box itself, once its height is known
        text_y = y + 14
        room = int((width - 16 - CHAR_W * (len(tag) + 2)) / CHAR_W)
        for row in rows:
            parts.append(_text(x + 8, text_y, _fit(row, room), weight="bold" if row is rows[0] else None,
                               title=row))
            text_y += 16
        if tag:
            parts.append(f'<text class="kind" x="{x + width - 8:.1f}" y="{y + 14:.1f}" text-anchor="end" '
                         f'fill="{outline}" font-weight="bold">{html.escape(tag)}</text>')
        bottom = y + 6 + 16 * len(rows)
        for child in box.children:
            bottom = self._draw(child, depth + 1, bottom, parts) + 6
        height = max(bottom - y, ROW) + (4 if box.children else 0)
        dash = ' stroke-dasharray="6 3"' if node is self.chosen else ""
        parts[index_parts] = (f'<rect {attrs} x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
                              f'height="{height:.1f}" rx="4" fill="{fill}" stroke="{outline}" '
                              f'stroke-width="{3 if thick else 1.3}"{dash}/>')
        return y + height


def _fit(text: str, room: int) -> str:
    return text if len(text) <= room else text[:max(room - 1, 1)] + "\u2026"


def _text(x, y, text, weight=None, title=None) -> str:
    """SVG text; ``title`` (the whole of a shortened label) shows on hovering."""
    bold = f' font-weight="{weight}"' if weight else ""
    tip = f"<title>{html.escape(title)}</title>" if title and title != text else ""
    return f'<text x="{x:.1f}" y="{y:.1f}"{bold}>{tip}{html.escape(text)}</text>'


def _legend(entries, x, y) -> str:
    out = []
    colours = {**KIND_COLOURS, "block": BLOCK_COLOURS, **{r: (c, c) for r, c in ROLE_COLOURS.items()},
               "written before": ("#aeb5bd", WRITTEN_BEFORE)}
    for entry in entries:
        outline, fill = colours[entry]
        label = {"thread_binding": "thread-bound"}.get(entry, entry)
        out.append(f'<rect class="legend" data-kind="{entry}" x="{x}" y="{y}" width="14" height="12" rx="2" '
                   f'fill="{fill}" stroke="{outline}" stroke-width="2"/>')
        out.append(_text(x + 19, y + 10, label))
        x += 19 + CHAR_W * len(label) + 14
    return "".join(out)


def _svg(width, height, body, cls) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            'style="max-width:100%;height:auto" '
            f'font-family="{FONT}" font-size="12" fill="{INK}">'
            f'<rect x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>{body}</svg>')


# ----------------------------------------------------------------------------------------------
# What one iteration touches
@dataclass
class Touched:
    """The boxes of one buffer that an iteration reads and writes."""
    buffer: str
    shape: tuple
    reads: list
    writes: list

    def cells(self, role: str) -> set:
        """Every element (an index tuple) in the read or written boxes."""
        boxes = self.reads if role == "read" else self.writes
        return {cell for box in boxes for cell in itertools.product(*(range(a, b) for a, b in box))}


def _touched(index: FuncIndex, loop: S.For, at: int, only) -> dict:
    extent = simplify(loop.extent)
    if isinstance(extent, E.IntImm) and not 0 <= at < extent.value:
        raise ValueError(f"at={at} is not an iteration of loop {loop.loop_var.name} "
                         f"(it has {extent.value}: 0 .. {extent.value - 1})")
    under = [r for r in blocks_under(loop) if only is None or r is only]
    if only is not None and not under:
        raise ValueError(f"block {only.block.name_hint} is not inside loop {loop.loop_var.name}")
    out: dict = {}
    for realize in under:
        values, relaxed, guards = _iteration(index, realize, loop, at)
        for role, regions in (("read", realize.block.reads), ("write", realize.block.writes)):
            for region in regions:
                buf = region.buffer
                touched = out.setdefault(buf.name, Touched(buf.name, _shape(buf), [], []))
                relaxed_region = relax_region(region, relaxed, binding=values, guards=guards)
                box = _box(relaxed_region, relaxed, touched.shape)
                boxes = touched.reads if role == "read" else touched.writes
                if box not in boxes:
                    boxes.append(box)
    return out


def blocks_under(stmt) -> list:
    """The innermost blocks under ``stmt`` (a For or a BlockRealize), in program order."""
    return [leaf for child in child_blocks(stmt) for leaf in (blocks_under(child) or [child])]


def _iteration(index: FuncIndex, realize, loop, at: int):
    """For ``realize`` under ``loop``: (values of the loop and block variables outside the
    relaxed loops, Var -> Range of the loops inside ``loop``, the predicates on the way)."""
    values, relaxed, guards, inside = {}, {}, [], False
    for node in index.path(realize) + [realize]:
        if isinstance(node, S.For):
            lo = substitute(node.min, values)
            if node is loop:
                values[node.loop_var], inside = simplify(lo + at), True
            elif inside:
                relaxed[node.loop_var] = S.Range(lo, substitute(node.extent, values))
            else:
                values[node.loop_var] = simplify(lo)
        else:
            for iv, value in zip(node.block.iter_vars, node.iter_values):
                values[iv.var] = substitute(value, values)
            guards.append(substitute(node.predicate, values))
    return values, relaxed, [g for g in guards if not isinstance(g, E.IntImm)]


def _shape(buffer) -> tuple:
    return tuple(int(d.value) if isinstance(d, E.IntImm) else None for d in buffer.shape)


def _box(region, relaxed, shape) -> Box:
    """Each dimension's interval as constants ``(start, stop)``, clipped to the buffer."""
    out = []
    for interval, size in zip(region, shape):
        lo = _constant(interval.lo, relaxed, lower=True) if interval is not None else None
        hi = _constant(interval.hi, relaxed, lower=False) if interval is not None else None
        lo = 0 if lo is None else max(lo, 0)
        if size is not None:
            hi = size - 1 if hi is None else min(hi, size - 1)
        out.append((lo, (lo if hi is None else hi) + 1))
    return tuple(out)


def _constant(e, relaxed, lower: bool):
    e = simplify(e)
    if isinstance(e, E.IntImm):
        return e.value
    return int_bound(e, relaxed)[0 if lower else 1]


def _tiles_title(loop, at) -> str:
    name = loop.loop_var.name
    return (f"iteration {at} of {name}: loops outside {name} at their first iteration, "
            f"loops inside it over their whole range")


def _slice_text(box: Box) -> str:
    return ", ".join(str(a) if b == a + 1 else f"{a}:{b}" for a, b in box)


def _draw_tiles(touched: dict, title: str) -> str:
    """One grid per 1-D or 2-D buffer, the read and written boxes coloured on it."""
    panels, x, height, skipped = [], 8, 0, []
    for item in _inputs_first(touched):
        if len(item.shape) > 2 or None in item.shape:
            skipped.append(item.buffer)
            continue
        rows, cols = (1, item.shape[0]) if len(item.shape) == 1 else item.shape
        cell = min(18.0, 200.0 / max(rows, cols))
        grid_w, grid_h = cols * cell, max(rows * cell, 12)
        row_h = grid_h / rows
        roles = _roles(item)
        captions = [(role, f"{role:<10} {item.buffer}[{_slice_text(box)}]") for role, box in roles]
        panel_w = max(grid_w, max((len(c) for _, c in captions), default=0) * CHAR_W + 18, 120)
        body = [_text(x, 40, f"{item.buffer}  " + " \u00d7 ".join(map(str, item.shape)), weight="bold")]
        top = 48
        body.append(f'<rect class="buffer" data-buffer="{html.escape(item.buffer)}" x="{x}" y="{top}" '
                    f'width="{grid_w:.1f}" height="{grid_h:.1f}" fill="#ffffff" stroke="#8a939e"/>')
        every = next(n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1 << 30) if n * cell >= 10)
        lines = [f"M{x + c * cell:.1f} {top}v{grid_h:.1f}" for c in range(every, cols, every)]
        lines += [f"M{x} {top + r * row_h:.1f}h{grid_w:.1f}" for r in range(every, rows, every)]
        if lines:   # a line every cell, or every 2, 4, 8, ... cells where cells are small
            body.append(f'<path d="{"".join(lines)}" stroke="#e1e4e8" stroke-width="1"/>')
        for role, box in reversed(roles):      # what is read on top of what is written
            (r0, r1), (c0, c1) = ((0, 1), box[0]) if len(box) == 1 else box
            body.append(f'<rect class="region" data-buffer="{html.escape(item.buffer)}" data-role="{role}" '
                        f'data-rows="{r0}:{r1}" data-cols="{c0}:{c1}" x="{x + c0 * cell:.2f}" '
                        f'y="{top + r0 * row_h:.2f}" width="{max((c1 - c0) * cell, 2):.2f}" '
                        f'height="{max((r1 - r0) * row_h, 2):.2f}" fill="{ROLE_COLOURS[role]}" '
                        f'fill-opacity="0.8" stroke="{ROLE_COLOURS[role]}"/>')
        y = top + grid_h + 18
        for role, caption in captions:
            body.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{ROLE_COLOURS[role]}"/>')
            body.append(_text(x + 17, y, caption))
            y += 16
        panels.append("".join(body))
        x += panel_w + 24
        height = max(height, y)
    if skipped:
        panels.append(_text(8, height + 6, "not drawn (not 1-D or 2-D): " + ", ".join(skipped)))
        height += 16
    width = max(x, len(title) * CHAR_W + 16)
    head = _text(8, 18, title)
    return _svg(width, height + 4, head + "".join(panels), "mlc-lab-tiles-svg")


def _inputs_first(touched: dict) -> list:
    """Buffers only read, then those read and written (intermediates), then those only written."""
    return sorted(touched.values(), key=lambda t: 2 if not t.reads else 1 if t.writes else 0)


def _roles(item: Touched) -> list:
    both = [box for box in item.reads if box in item.writes]
    return ([("read", b) for b in item.reads if b not in both] + [("read+write", b) for b in both]
            + [("write", b) for b in item.writes if b not in both])


def _container(*svgs, cls: str, element_id: str | None = None) -> str:
    """Pictures side by side, wrapping on a narrow page, on their own white background."""
    inner = "".join(f'<div style="flex:0 1 auto;min-width:0;max-width:100%">{s}</div>' for s in svgs)
    ident = f' id="{element_id}"' if element_id else ""
    return (f'<div class="{cls}"{ident} style="display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;'
            f'background:#ffffff;color:{INK};padding:8px;border-radius:4px;max-width:100%;'
            f'box-sizing:border-box;overflow-x:auto">{inner}</div>')


class LoopNestPicture:
    """What ``loop_nest`` returns: ``svg`` (the nest), ``tiles_svg`` and ``touched`` (with a
    loop), HTML in a notebook and the nest as indented text elsewhere."""

    def __init__(self, svg: str, text: str, touched: dict | None, title: str):
        self.svg, self._text, self.touched = svg, text, touched
        self.tiles_svg = _draw_tiles(touched, title) if touched else None
        self._title = title

    def _repr_html_(self) -> str:
        return _container(self.svg, *([self.tiles_svg] if self.tiles_svg else []), cls="mlc-lab-loop-nest")

    def __str__(self) -> str:
        if not self.touched:
            return self._text
        lines = [self._text, "", self._title + ":"]
        for item in _inputs_first(self.touched):
            lines += [f"  {role:<10} {item.buffer}[{_slice_text(box)}]" for role, box in _roles(item)]
        return "\n".join(lines)

    __repr__ = __str__


__all__ = ["loop_nest", "touched_regions", "animate_visit_order", "blocks_under", "LoopNestPicture",
           "Touched", "KIND_COLOURS"]
