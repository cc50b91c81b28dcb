"""Drawing a ``model.Graph`` as SVG without Graphviz: boxes placed by ``layout``, a
cluster's inside laid out first so that the cluster is one big box outside. The picture is a
white card with dark text, so it reads the same in JupyterLab's light and dark themes; each node
is ``<g class="node KIND">`` (``call`` too for calls, ``changed`` for a diff's highlights), as
in the SVG Graphviz draws from ``dot``. Also the HTML that lets it shrink with the page."""
from __future__ import annotations

import html
from dataclasses import dataclass

from .layout import layered_layout
from ..html import pictures, svg_size

FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace"
CHAR_EM = 0.62             # advance of a monospace character, in ems (0.60 in most such fonts)
TITLE_PX, DETAIL_PX = 13, 11
PAD_X, PAD_Y, LINE_GAP = 10, 7, 4
CLUSTER_PAD, CLUSTER_TITLE = 10, 22
MARGIN, CAPTION_H, LEGEND_GAP = 12, 24, 16
INK, FAINT, EDGE, CHANGED = "#111827", "#374151", "#4b5563", "#db2777"
# kind: (fill, stroke, text colour, corner radius ("pill" = half the height), dash, legend label)
STYLES = {
    "param": ("#dbeafe", "#1d4ed8", INK, "pill", "", "parameter"),
    "const": ("#f3f4f6", "#6b7280", INK, 2, "4 3", "constant"),
    "op": ("#fef3c7", "#b45309", INK, 6, "", "relax op"),
    "kernel": ("#dcfce7", "#15803d", INK, 6, "", "call_tir kernel"),
    "fused": ("#ffedd5", "#c2410c", INK, 6, "", "fused"),
    "packed": ("#ede9fe", "#6d28d9", INK, 6, "", "packed function"),
    "call": ("#e2e8f0", "#334155", INK, 6, "", "function call"),
    "port": ("#ffffff", "#c2410c", "#7c2d12", "pill", "3 2", "fused function's parameter"),
    "output": ("#1f2937", "#1f2937", "#ffffff", "pill", "", "output"),
}
CLUSTER_FILL = "#fff7ed"


def node_lines(node) -> list:
    """(text, font size, bold, colour) for each line of a node's label: its name, then (calls,
    parameters, constants) the shape and dtype, smaller and lighter."""
    if node.kind in ("port", "output"):
        return [(node.title, DETAIL_PX, False, STYLES[node.kind][2])]
    lines = [(node.title, TITLE_PX, True, STYLES[node.kind][2])]
    return lines + [(node.detail, DETAIL_PX, False, FAINT)] if node.detail else lines


def node_size(node) -> tuple:
    """(width, height) of a node's box: its text, estimated for a monospace font, plus padding."""
    lines = node_lines(node)
    width = max(len(text) * CHAR_EM * px for text, px, *_ in lines) + 2 * PAD_X
    return max(width, 40.0), sum(px for _, px, *_ in lines) + LINE_GAP * (len(lines) - 1) + 2 * PAD_Y


def tooltip(node, inputs: list) -> str:
    """What hovering over a node tells: the binding it draws, as one line."""
    if node.is_call:
        return f"{node.var} = {node.title}({', '.join(inputs)}) -> {node.detail}"
    if node.kind == "output":
        return f"returns {', '.join(inputs)}"
    return f"{STYLES[node.kind][5]} {node.var}: {node.detail}"


@dataclass
class _Placed:
    boxes: dict       # node id -> (left, top, width, height)
    routes: list      # (edge, [(x, y), ...])
    width: float
    height: float

    def moved(self, dx: float, dy: float) -> "_Placed":
        boxes = {k: (x + dx, y + dy, w, h) for k, (x, y, w, h) in self.boxes.items()}
        routes = [(edge, [(x + dx, y + dy) for x, y in points]) for edge, points in self.routes]
        return _Placed(boxes, routes, self.width, self.height)


def _place(model) -> _Placed:
    """Lay out ``model``, each cluster's inside first so that the cluster is one big box."""
    sizes, inner = {}, {}
    for node in model.nodes:
        if node.inner is None:
            sizes[node.id] = node_size(node)
            continue
        inner[node.id] = _place(node.inner)
        title_width = len(node.title) * CHAR_EM * TITLE_PX
        sizes[node.id] = (max(inner[node.id].width, title_width) + 2 * CLUSTER_PAD,
                          inner[node.id].height + CLUSTER_TITLE + 2 * CLUSTER_PAD)

    def port_dx(owner: str, port) -> float:
        if port is None or owner not in inner:
            return 0.0
        left, _, width, _ = inner[owner].boxes[port]
        return left + width / 2 - inner[owner].width / 2

    edges = [(e.src, e.dst, port_dx(e.src, e.src_port),
              port_dx(e.dst, e.dst_port) if e.dst in inner else None) for e in model.edges]
    ports = [node.id for node in model.nodes if node.kind == "port"]
    layout = layered_layout([n.id for n in model.nodes], sizes, edges, first=ports, last=model.results)
    placed = _Placed({}, [], layout.width, layout.height)
    for node in model.nodes:
        (x, y), (w, h) = layout.centres[node.id], sizes[node.id]
        placed.boxes[node.id] = (x - w / 2, y - h / 2, w, h)
        if node.id in inner:
            content = inner[node.id].moved(x - inner[node.id].width / 2,
                                           y - h / 2 + CLUSTER_TITLE + CLUSTER_PAD)
            placed.boxes.update(content.boxes)
            placed.routes += content.routes
    for edge, points in zip(model.edges, layout.routes):
        if edge.src_port is not None:
            left, top, w, h = placed.boxes[edge.src_port]
            points = [(left + w / 2, top + h)] + points
        if edge.dst_port is not None:
            left, top, w, h = placed.boxes[edge.dst_port]
            points = points + [(left + w / 2, top)]
        placed.routes.append((edge, points))
    return placed


def python_svg(model, caption: str) -> str:
    """The whole picture: a card with the caption, clusters, edges, nodes and a legend."""
    placed = _place(model)
    nodes = list(model.walk())
    legend, legend_width, legend_height = _legend(nodes, max(placed.width, 360.0))
    width = max(placed.width, legend_width, len(caption) * CHAR_EM * 12) + 2 * MARGIN
    height = MARGIN + CAPTION_H + placed.height + LEGEND_GAP + legend_height + MARGIN
    placed = placed.moved((width - placed.width) / 2, MARGIN + CAPTION_H)
    inputs: dict = {}
    for edge, _ in placed.routes:
        inputs.setdefault(edge.dst, []).append(edge.tensor)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="mlc-graph" width="{width:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="{html.escape(FONT)}" '
           f'role="img" aria-label="{html.escape(caption)}">',
           f'<rect class="card" x="0.5" y="0.5" width="{width - 1:.0f}" height="{height - 1:.0f}" rx="6" '
           'fill="#ffffff" stroke="#d0d7de"/>',
           _text(MARGIN, MARGIN + 8, caption, 12, FAINT, anchor="start", css="caption")]
    clusters = [node for node in nodes if node.inner is not None]
    out += [_cluster(node, placed.boxes[node.id]) for node in clusters]
    out += [_edge(edge, points) for edge, points in placed.routes]
    out += [_cluster_title(node, placed.boxes[node.id]) for node in clusters]
    out += [_node(node, placed.boxes[node.id], inputs.get(node.id, [])) for node in nodes if node.inner is None]
    legend_top = MARGIN + CAPTION_H + placed.height + LEGEND_GAP
    out.append(f'<g class="legend" transform="translate({MARGIN},{legend_top:.1f})">{legend}</g>')
    return "\n".join(out + ["</svg>"])


def _text(x, y, text, px, fill, bold=False, anchor="middle", css=None, extra="") -> str:
    weight = ' font-weight="bold"' if bold else ""
    klass = f' class="{css}"' if css else ""
    return (f'<text{klass} x="{x:.1f}" y="{y:.1f}" font-size="{px}"{weight} fill="{fill}" '
            f'text-anchor="{anchor}" dominant-baseline="central"{extra}>{html.escape(text)}</text>')


def _rect(left, top, w, h, kind, changed=False) -> str:
    fill, stroke, _, radius, dash, _ = STYLES[kind]
    radius = h / 2 if radius == "pill" else radius
    width = 3.5 if changed else 2.0 if kind == "fused" else 1.2
    dash = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<rect x="{left:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{radius:.1f}" '
            f'fill="{fill}" stroke="{CHANGED if changed else stroke}" stroke-width="{width}"{dash}/>')


def _node(node, box, inputs) -> str:
    left, top, w, h = box
    classes = ["node", node.kind] + (["call"] if node.is_call else []) + (["changed"] if node.changed else [])
    parts = [f'<g class="{" ".join(classes)}" id="{node.id}">'
             f'<title>{html.escape(tooltip(node, inputs))}</title>',
             _rect(left, top, w, h, node.kind, node.changed)]
    y = top + PAD_Y
    for text, px, bold, colour in node_lines(node):
        parts.append(_text(left + w / 2, y + px / 2, text, px, colour, bold))
        y += px + LINE_GAP
    return "".join(parts) + "</g>"


def _cluster(node, box) -> str:
    """The frame of an expanded fused function (its name is drawn over the edges: _cluster_title)."""
    left, top, w, h = box
    classes = "cluster fused" + (" changed" if node.changed else "")
    stroke = CHANGED if node.changed else STYLES["fused"][1]
    return (f'<g class="{classes}" id="{node.id}"><title>fused function {html.escape(node.title)} -> '
            f'{html.escape(node.detail)}</title>'
            f'<rect x="{left:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}" rx="8" fill="{CLUSTER_FILL}" '
            f'stroke="{stroke}" stroke-width="{3.5 if node.changed else 1.5}" stroke-dasharray="6 3"/></g>')


def _cluster_title(node, box) -> str:
    """A cluster's name, haloed in the cluster's fill so that edges passing under it stay apart."""
    left, top = box[:2]
    return _text(left + CLUSTER_PAD, top + CLUSTER_TITLE / 2 + 3, node.title, TITLE_PX, "#7c2d12", True,
                 "start", "cluster-title", f' stroke="{CLUSTER_FILL}" stroke-width="4" paint-order="stroke"')


def _edge(edge, points) -> str:
    (x, y), path = points[0], [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for qx, qy in points[1:]:
        if abs(qx - x) < 0.5:
            path.append(f"L{qx:.1f},{qy:.1f}")
        else:
            middle = (y + qy) / 2
            path.append(f"C{x:.1f},{middle:.1f} {qx:.1f},{middle:.1f} {qx:.1f},{qy:.1f}")
        x, y = qx, qy
    head = f"M{x - 4:.1f},{y - 8:.1f}L{x + 4:.1f},{y - 8:.1f}L{x:.1f},{y:.1f}Z"
    return (f'<g class="edge"><title>{html.escape(edge.tensor)}</title><path d="{" ".join(path)}" fill="none" '
            f'stroke="{EDGE}" stroke-width="1.3"/><path d="{head}" fill="{EDGE}"/></g>')


def _legend(nodes, room: float) -> tuple:
    """The legend for the kinds present, in rows no wider than ``room``: (svg, width, height)."""
    kinds = [kind for kind in STYLES if any(node.kind == kind for node in nodes)]
    if any(node.inner is not None for node in nodes) and "fused" not in kinds:
        kinds.append("fused")
    items = [(kind, STYLES[kind][5]) for kind in kinds]
    if any(node.changed for node in nodes):
        items.append(("changed", "changed"))
    parts, x, y, widest = [], 0.0, 0.0, 0.0
    for kind, label in items:
        step = 22 + len(label) * CHAR_EM * DETAIL_PX + 16
        if x > 0 and x + step > room:
            x, y = 0.0, y + 20
        swatch = (_rect(x, y + 4, 18, 12, kind) if kind != "changed" else
                  f'<rect x="{x:.1f}" y="{y + 4:.1f}" width="18" height="12" rx="3" fill="#ffffff" '
                  f'stroke="{CHANGED}" stroke-width="3"/>')
        parts += [swatch, _text(x + 22, y + 10, label, DETAIL_PX, FAINT, anchor="start")]
        x += step
        widest = max(widest, x - 16)
    return "".join(parts), widest, (y + 20 if items else 0.0)


def html_wrap(svg: str) -> str:
    """One graph as HTML: an SVG that shrinks with the output area."""
    return pictures([svg], "mlc-graph-output")


def html_side_by_side(svgs: list) -> str:
    """Panels side by side while they fit, under each other when the output area is narrower."""
    return pictures(svgs, "mlc-graph-diff", "mlc-graph-panel")


def svg_side_by_side(svgs: list, gap: float = 12) -> str:
    """One SVG holding ``svgs`` in a row (for front ends that show SVG but not HTML)."""
    width, height = sum(map(svg_size, svgs)) + gap * (len(svgs) - 1), max(svg_size(s, "height") for s in svgs)
    x, out = 0.0, []
    for svg in svgs:
        out.append(f'<g transform="translate({x:.0f},0)">{svg}</g>')
        x += svg_size(svg) + gap
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">{"".join(out)}</svg>')
