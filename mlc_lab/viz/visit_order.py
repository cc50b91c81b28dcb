"""The order in which one block visits the elements of its buffers, frame by frame, for small
programs: ``animate_visit_order`` in ``mlc_lab.viz.loop_nest`` builds it."""
from __future__ import annotations

import html
import json
import uuid
from dataclasses import dataclass

import numpy as np

from ..arith import simplify
from ..runtime.interpreter.expr import Evaluator
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.schedule.func_index import FuncIndex
from .loop_nest import (MAX_FRAMES, MAX_ITERATIONS, MAX_SIDE, ROLE_COLOURS, WRITTEN_BEFORE,
                        _container, _legend, _shape, _slice_text, _svg, _text)


# ----------------------------------------------------------------------------------------------
# The visit order of one block
@dataclass
class Frame:
    """One step of the visit order: the cells (buffer -> set of index tuples) written and read."""
    writes: dict
    reads: dict

    def describe(self) -> str:
        def part(cells: dict) -> str:
            return ", ".join(f"{name}[{_cells_text(c)}]" for name, c in cells.items() if c)
        reads = f"; reads {part(self.reads)}" if any(self.reads.values()) else ""
        return f"writes {part(self.writes)}{reads}"


def _cells_text(cells: set) -> str:
    lows = [min(c[d] for c in cells) for d in range(len(next(iter(cells))))]
    highs = [max(c[d] for c in cells) + 1 for d in range(len(lows))]
    if len(cells) == int(np.prod([h - lo for lo, h in zip(lows, highs)])):
        return _slice_text(tuple(zip(lows, highs)))
    return f"{len(cells)} elements"


def visits(index: FuncIndex, realize):
    """(buffers drawn: name -> shape, frames) for ``realize``'s iterations in execution order,
    consecutive iterations writing the same elements merged into one frame."""
    name = realize.block.name_hint
    shapes = {}
    for region in realize.block.reads + realize.block.writes:
        shape = _shape(region.buffer)
        if len(shape) <= 2 and None not in shape:
            if max(shape, default=1) > MAX_SIDE:
                raise ValueError(f"animate_visit_order draws buffers of at most {MAX_SIDE} x {MAX_SIDE} "
                                 f"elements; buffer {region.buffer.name} of block {name} is "
                                 f"{' x '.join(map(str, shape))}. Animate a small version of the "
                                 "program (the same schedule on 8 x 8 buffers, say)")
            shapes[region.buffer.name] = shape if len(shape) == 2 else (1,) + shape
    path = index.path(realize) + [realize]
    loops = [n for n in path if isinstance(n, S.For)]
    extents = []
    for loop in loops:
        extent = simplify(loop.extent)
        if not isinstance(extent, E.IntImm):
            raise ValueError(f"loop {loop.loop_var.name} has extent {extent}, not a constant: "
                             "animate_visit_order needs constant loop extents")
        extents.append(extent.value)
    total = int(np.prod(extents, dtype=np.int64))
    if total > MAX_ITERATIONS:
        raise ValueError(f"block {name} runs {total} iterations; animate_visit_order steps through at "
                         f"most {MAX_ITERATIONS}: animate a smaller version of the program")
    grid = np.indices(extents).reshape(len(extents), total) if extents else np.zeros((0, 1), int)
    env, mask = {}, np.ones(total, bool)
    evaluate = Evaluator(env, {})

    def values(e):
        return np.broadcast_to(np.asarray(evaluate.eval(e), dtype=np.int64), (total,))
    for node in path:
        if isinstance(node, S.For):
            env[node.loop_var] = values(node.min) + grid[loops.index(node)]
        else:
            for iv, value in zip(node.block.iter_vars, node.iter_values):
                env[iv.var] = values(value)
            mask &= np.broadcast_to(np.asarray(evaluate.eval(node.predicate), bool), (total,))
    accesses = [(role, region.buffer.name, [(values(r.min), values(r.extent)) for r in region.region])
                for role, regions in (("write", realize.block.writes), ("read", realize.block.reads))
                for region in regions if region.buffer.name in shapes]
    steps = np.flatnonzero(mask)
    written = np.stack([bound for role, _, dims in accesses if role == "write" for dim in dims
                        for bound in dim] or [np.zeros(total, np.int64)])[:, steps]
    moved = np.any(written[:, 1:] != written[:, :-1], axis=0)
    starts = np.flatnonzero(np.r_[True, moved]) if steps.size else []
    if len(starts) > MAX_FRAMES:
        raise ValueError(f"block {name} moves to another output element {len(starts)} times, one "
                         f"frame each; animate_visit_order shows at most {MAX_FRAMES} frames: "
                         "animate a smaller version of the program")
    frames = []
    for first, stop in zip(starts, list(starts[1:]) + [steps.size]):
        cells = {"write": {b: set() for b in shapes}, "read": {b: set() for b in shapes}}
        for step in steps[first:stop]:
            for role, buf, dims in accesses:
                box = tuple((int(lo[step]), int(lo[step] + ext[step])) for lo, ext in dims)
                cells[role][buf].update(_box_cells(box if len(box) == 2 else ((0, 1),) + box))
        frames.append(Frame(cells["write"], cells["read"]))
    return shapes, frames


def _box_cells(box) -> list:
    return [(r, c) for r in range(*box[0]) for c in range(*box[1])]


# cell states: 0 untouched, 1 written in an earlier frame, 2 read now, 3 written now, 4 both now
STATE_FILLS = ["#ffffff", WRITTEN_BEFORE, ROLE_COLOURS["read"], ROLE_COLOURS["write"],
               ROLE_COLOURS["read+write"]]


class VisitOrderAnimation:
    """Frames of a block's visit order; a slider with previous/next buttons in a notebook
    (a small script colours the cells), every frame's text elsewhere; ``frame_svg(t)`` draws
    frame ``t`` alone."""

    def __init__(self, block: str, shapes: dict, frames: list):
        self.block, self.shapes, self.frames = block, shapes, frames
        self._cells = [(buf, cell) for buf, (rows, cols) in shapes.items()
                       for cell in _box_cells(((0, rows), (0, cols)))]

    def __len__(self) -> int:
        return len(self.frames)

    def states(self, t: int) -> list:
        """The state (see STATE_FILLS) of every cell at frame ``t``, in ``_cells`` order."""
        done = {(b, c) for frame in self.frames[:t] for b, cells in frame.writes.items() for c in cells}
        frame = self.frames[t]
        out = []
        for buf, cell in self._cells:
            read, written = cell in frame.reads[buf], cell in frame.writes[buf]
            out.append(4 if read and written else 3 if written else 2 if read else int((buf, cell) in done))
        return out

    def frame_svg(self, t: int) -> str:
        """Frame ``t`` (0 = the first) as SVG: one grid per buffer, each cell coloured by its state."""
        states = self.states(t)
        body, x, height, k = [], 8, 0, 0
        for buf, (rows, cols) in self.shapes.items():
            cell = 18.0
            size = f"{rows} \u00d7 {cols}" if rows > 1 else str(cols)
            body.append(_text(x, 40, f"{buf}  {size}", weight="bold"))
            for r in range(rows):
                for c in range(cols):
                    body.append(f'<rect data-i="{k}" x="{x + c * cell:.0f}" y="{48 + r * cell:.0f}" '
                                f'width="{cell:.0f}" height="{cell:.0f}" fill="{STATE_FILLS[states[k]]}" '
                                'stroke="#aeb5bd"/>')
                    k += 1
            x += max(cols * cell, 80) + 24
            height = max(height, 48 + rows * cell)
        legend = _legend(["read", "write", "read+write", "written before"], 8, height + 10)
        title = _text(8, 18, f"visit order of block {self.block}: {len(self)} frames")
        return _svg(max(x, 480), height + 30, title + "".join(body) + legend, "mlc-lab-visit-order-svg")

    def _repr_html_(self) -> str:
        uid = "mlc-visit-" + uuid.uuid4().hex[:10]
        index = {key: i for i, key in enumerate(self._cells)}
        data = [{"w": [index[(b, c)] for b, cells in f.writes.items() for c in sorted(cells)],
                 "r": [index[(b, c)] for b, cells in f.reads.items() for c in sorted(cells)],
                 "text": f.describe()} for f in self.frames]
        controls = (f'<div style="display:flex;gap:8px;align-items:center;flex-wrap:wrap">'
                    f'<button data-step="-1">\u25c0 prev</button><input type="range" min="0" '
                    f'max="{len(self) - 1}" value="0" style="width:220px"><button data-step="1">next '
                    f'\u25b6</button><span class="caption" style="font-family:monospace">frame 1 / '
                    f'{len(self)}: {html.escape(self.frames[0].describe())}</span></div>')
        script = _ANIMATION_JS.replace("UID", uid).replace("FILLS", json.dumps(STATE_FILLS)).replace(
            "FRAMES", json.dumps(data).replace("</", "<\\/"))
        return _container(controls + self.frame_svg(0) + f"<script>{script}</script>",
                          cls="mlc-lab-visit-order", element_id=uid)

    def __str__(self) -> str:
        lines = [f"visit order of block {self.block}: {len(self)} frames"]
        lines += [f"  {t + 1:>3}. {frame.describe()}" for t, frame in enumerate(self.frames)]
        return "\n".join(lines)

    __repr__ = __str__


_ANIMATION_JS = """(function () {
  const root = document.getElementById("UID"), frames = FRAMES, fills = FILLS;
  const slider = root.querySelector("input"), caption = root.querySelector(".caption");
  const cells = Array.from(root.querySelectorAll("rect[data-i]"));
  function show(t) {
    t = Math.max(0, Math.min(frames.length - 1, t));
    const state = new Array(cells.length).fill(0);
    for (let s = 0; s < t; s++) for (const i of frames[s].w) state[i] = 1;
    for (const i of frames[t].r) state[i] = 2;
    for (const i of frames[t].w) state[i] = state[i] === 2 ? 4 : 3;
    cells.forEach((cell, i) => cell.setAttribute("fill", fills[state[i]]));
    slider.value = t;
    caption.textContent = "frame " + (t + 1) + " / " + frames.length + ": " + frames[t].text;
  }
  slider.addEventListener("input", () => show(Number(slider.value)));
  root.querySelectorAll("button").forEach(b => b.addEventListener("click",
    () => show(Number(slider.value) + Number(b.dataset.step))));
})();"""


__all__ = ["Frame", "VisitOrderAnimation", "visits"]
