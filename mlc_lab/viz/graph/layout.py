"""A layered layout of a small directed acyclic graph, top to bottom, in pure Python (the
fallback for ``graph`` where Graphviz's ``dot`` is not installed). The steps are Sugiyama's:

1. Layers: the longest path from the sources; then a source (a parameter, a constant) moves
   down to just above its first reader, and ``last`` nodes (a fused function's result) to the
   bottom layer. Empty layers are dropped.
2. An edge spanning several layers gets a dummy node in each layer between, so that it is
   routed between the boxes there instead of through them.
3. Order in each layer: barycentric sweeps, down then up (a node goes to the mean position of
   its neighbours in the layer above, then below), keeping the order with fewest crossings.
   An edge ending at a cluster's port, off the cluster's centre, counts a fraction of a place
   to that side, in the barycentres and in the crossings.
4. x: each node is pulled to the mean x of its neighbours, moving as little as the order and
   the spacing allow: under the constraints x[i+1] - x[i] >= gap, that is isotonic regression,
   solved by pooling adjacent violators. Then the dummies of each long edge are lined up at one
   x where they fit, and the edges into a box are spread along its top.
5. y: layer by layer, each as tall as its tallest box; a source sits at the bottom of its
   layer (near its readers), any other box at the top.

An edge's route runs down from its source to the bottom of the source's layer, crosses each gap
between layers (where the drawing bends it), runs down through each dummy's layer and at last
into the top of its target: so it bends only between layers, and never through a box. Boxes of
one layer never overlap (step 4), nor do boxes of different layers (step 5).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

NODE_GAP = 18.0      # horizontal space between neighbouring boxes
DUMMY_WIDTH = 6.0    # the room a passing edge takes in a layer
LAYER_GAP = 34.0     # vertical space between layers
SWEEPS = 12
ROUNDS = 6


@dataclass
class Layout:
    centres: dict    # node id -> (x, y) of its box's centre
    routes: list     # per edge: [(x, y), ...] from the source's bottom to the target's top
    width: float
    height: float


def layered_layout(ids, sizes: dict, edges, first=(), last=()) -> Layout:
    """Place boxes ``sizes[id] = (width, height)`` for ``edges`` = [(src, dst, src_dx, dst_dx)]:
    the ``dx`` move an edge's end off the box's centre (a cluster's port); ``dst_dx=None`` lets
    the edges into a box arrive side by side along its top, ordered by where they come from.
    ``first`` nodes go in the top layer, ``last`` ones (without successors) in the bottom one."""
    ids = list(ids)
    layer = _layers(ids, edges, set(first), set(last))
    width = {v: sizes[v][0] for v in ids}
    rows = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for v in ids:
        rows[layer[v]].append(v)
    chains, links = [], []              # chains: per edge, its source, dummies and target
    for i, (src, dst, src_dx, dst_dx) in enumerate(edges):
        chain = [src] + [("dummy", i, rank) for rank in range(layer[src] + 1, layer[dst])] + [dst]
        for dummy in chain[1:-1]:
            layer[dummy], width[dummy] = dummy[2], DUMMY_WIDTH
            rows[dummy[2]].append(dummy)
        for k, (a, b) in enumerate(zip(chain, chain[1:])):
            links.append((a, b, src_dx if k == 0 else 0.0, (dst_dx or 0.0) if b == dst else 0.0))
        chains.append(chain)
    up = {v: [] for row in rows for v in row}        # v -> [(neighbour above, its dx, v's dx)]
    down = {v: [] for row in rows for v in row}
    for a, b, a_dx, b_dx in links:
        up[b].append((a, a_dx, b_dx))
        down[a].append((b, b_dx, a_dx))
    rows = _order(rows, up, down, links, width)
    x = _x_positions(rows, width, up, down)
    _straighten(chains, rows, x, width)
    ends = _spread_ends(edges, chains, x, width)
    heights = [max((sizes[v][1] for v in row if v in sizes), default=0.0) for row in rows]
    tops = [sum(heights[:i]) + LAYER_GAP * i for i in range(len(rows))]
    bottoms = [top + height for top, height in zip(tops, heights)]
    centres, targets, sources = {}, {e[1] for e in edges}, {e[0] for e in edges}
    for v in ids:    # sources sit low in their layer, near their readers; the others high
        high = v in targets or v not in sources
        top = tops[layer[v]] if high else bottoms[layer[v]] - sizes[v][1]
        centres[v] = (x[v], top + sizes[v][1] / 2)
    routes = []
    for (src, dst, src_dx, _), chain, end_dx in zip(edges, chains, ends):
        start, end = x[src] + src_dx, x[dst] + end_dx
        points = [(start, centres[src][1] + sizes[src][1] / 2), (start, bottoms[layer[src]])]
        for dummy in chain[1:-1]:
            points += [(x[dummy], tops[layer[dummy]]), (x[dummy], bottoms[layer[dummy]])]
        points += [(end, tops[layer[dst]]), (end, centres[dst][1] - sizes[dst][1] / 2)]
        routes.append([p for k, p in enumerate(points) if k == 0 or p != points[k - 1]])
    right = max((x[v] + width[v] / 2 for row in rows for v in row), default=0.0)
    return Layout(centres, routes, right, bottoms[-1] if rows else 0.0)


def _straighten(chains: list, rows: list, x: dict, width: dict) -> None:
    """Line up the dummies of each long edge at one x (its target's, its source's or their
    median) where that fits between their neighbours, so that the edge runs straight."""
    slot = {v: (row, i) for row in rows for i, v in enumerate(row)}

    def fits(v, value) -> bool:
        row, i = slot[v]
        left = i == 0 or x[row[i - 1]] + (width[row[i - 1]] + width[v]) / 2 + NODE_GAP <= value
        right = i == len(row) - 1 or value + (width[row[i + 1]] + width[v]) / 2 + NODE_GAP <= x[row[i + 1]]
        return left and right
    for chain in chains:
        dummies = chain[1:-1]
        if not dummies:
            continue
        middle = sorted(x[d] for d in dummies)[len(dummies) // 2]
        for value in (x[chain[-1]], x[chain[0]], middle):
            if all(fits(d, value) for d in dummies):
                for d in dummies:
                    x[d] = value
                break


def _spread_ends(edges, chains: list, x: dict, width: dict) -> list:
    """The x offset of each edge's end: its dst_dx, or for dst_dx None, a place along the top
    of the target, left to right in the order of where the edges come from."""
    ends = [dst_dx or 0.0 for *_, dst_dx in edges]
    arriving: dict = {}
    for i, (_, dst, _, dst_dx) in enumerate(edges):
        if dst_dx is None:
            arriving.setdefault(dst, []).append(i)
    for dst, found in arriving.items():
        found.sort(key=lambda i: x[chains[i][-2]] + (edges[i][2] if len(chains[i]) == 2 else 0.0))
        step = min(14.0, 0.6 * width[dst] / max(len(found) - 1, 1))
        for k, i in enumerate(found):
            ends[i] = (k - (len(found) - 1) / 2) * step
    return ends


def _layers(ids: list, edges, first: set, last: set) -> dict:
    preds = {v: [] for v in ids}
    succs = {v: [] for v in ids}
    for src, dst, *_ in edges:
        succs[src].append(dst)
        preds[dst].append(src)
    layer: dict = {}
    pending = list(ids)
    while pending:                        # longest path, in topological order
        ready = [v for v in pending if all(p in layer for p in preds[v])] or pending[:1]
        for v in ready:
            layer[v] = 0 if v in first else 1 + max((layer.get(p, 0) for p in preds[v]), default=-1)
        pending = [v for v in pending if v not in layer]
    for v in ids:
        if not preds[v] and succs[v] and v not in first:
            layer[v] = max(min(layer[s] for s in succs[v]) - 1, 0)
    bottom = max(layer.values(), default=0)
    for v in last:
        if not succs[v]:
            layer[v] = bottom
    compact = {rank: i for i, rank in enumerate(sorted(set(layer.values())))}
    return {v: compact[rank] for v, rank in layer.items()}


def _order(rows: list, up: dict, down: dict, links: list, width: dict) -> list:
    best, fewest = [row[:] for row in rows], _crossings(rows, links, width)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        for rank in (range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)):
            neighbours, reference = (up, rows[rank - 1]) if downward else (down, rows[rank + 1])
            where = {v: i for i, v in enumerate(reference)}
            here = {v: i for i, v in enumerate(rows[rank])}
            key = partial(_barycentre, neighbours=neighbours, where=where, here=here, width=width)
            rows[rank].sort(key=key)
        count = _crossings(rows, links, width)
        if count < fewest:
            best, fewest = [row[:] for row in rows], count
    return best


def _barycentre(v, neighbours: dict, where: dict, here: dict, width: dict) -> tuple:
    """Sort key: the mean position of v's neighbours in the reference layer (v's own position
    when it has none there), ties kept in the current order. An edge ending off a neighbour's
    centre (at a cluster's port) counts a fraction of a place to that side."""
    found = [where[n] + n_dx / (width[n] + 1.0) for n, n_dx, _ in neighbours[v]]
    return (sum(found) / len(found) if found else here[v], here[v])


def _crossings(rows: list, links: list, width: dict) -> int:
    """Pairs of links between the same two layers whose ends are in opposite orders (an end at
    a port counts a fraction of a place off its node, as in _barycentre)."""
    position = {v: i for row in rows for i, v in enumerate(row)}
    rank_of = {v: rank for rank, row in enumerate(rows) for v in row}
    between: dict = {}
    for a, b, a_dx, b_dx in links:
        between.setdefault(rank_of[a], []).append((position[a] + a_dx / (width[a] + 1.0),
                                                   position[b] + b_dx / (width[b] + 1.0)))
    return sum(1 for ends in between.values() for i, (a1, b1) in enumerate(ends)
               for a2, b2 in ends[i + 1:] if (a1 - a2) * (b1 - b2) < 0)


def _x_positions(rows: list, width: dict, up: dict, down: dict) -> dict:
    x = {}
    for row in rows:
        cursor = 0.0
        for v in row:
            x[v] = cursor + width[v] / 2
            cursor += width[v] + NODE_GAP
    for round_ in range(ROUNDS):
        if round_ < ROUNDS - 2:
            downward = round_ % 2 == 0
            ranks = range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)
            sides = (up,) if downward else (down,)
        else:
            ranks, sides = range(len(rows)), (up, down)
        for rank in ranks:
            row = rows[rank]
            targets, weights = [], []
            for v in row:
                pulls = [x[n] + n_dx - v_dx for side in sides for n, n_dx, v_dx in side[v]]
                targets.append(sum(pulls) / len(pulls) if pulls else x[v])
                weights.append((2.0 if isinstance(v, tuple) else 1.0) * max(len(pulls), 1))
            for v, value in zip(row, _fit_in_order(targets, weights, [width[v] for v in row])):
                x[v] = value
    left = min((x[v] - width[v] / 2 for row in rows for v in row), default=0.0)
    return {v: value - left for v, value in x.items()}


def _fit_in_order(targets: list, weights: list, widths: list) -> list:
    """Positions closest to ``targets`` (weighted least squares) that keep the order and leave
    half of each neighbour's width plus NODE_GAP between centres: with offsets o[i] of a tight
    packing, y = x - o must not decrease, so y is the isotonic regression of targets - o."""
    offsets = [0.0]
    for left, right in zip(widths, widths[1:]):
        offsets.append(offsets[-1] + (left + right) / 2 + NODE_GAP)
    blocks: list = []                    # [mean, weight, count], pooled adjacent violators
    for target, offset, weight in zip(targets, offsets, weights):
        blocks.append([target - offset, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean2, weight2, count2 = blocks.pop()
            mean1, weight1, count1 = blocks.pop()
            total = weight1 + weight2
            blocks.append([(mean1 * weight1 + mean2 * weight2) / total, total, count1 + count2])
    fitted = [mean for mean, _, count in blocks for _ in range(count)]
    return [y + offset for y, offset in zip(fitted, offsets)]
