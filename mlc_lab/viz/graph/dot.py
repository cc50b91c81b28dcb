"""Drawing a ``model.Graph`` with Graphviz: the DOT text (styled like ``svg``'s
drawing) and ``dot -Tsvg`` run on it, where the ``dot`` program is installed."""
from __future__ import annotations

import html
import re
import subprocess

from .svg import CHANGED, CLUSTER_FILL, EDGE, STYLES, node_lines, tooltip


def dot_source(model, caption: str) -> str:
    """The graph in Graphviz's DOT language, nodes styled as in ``python_svg``."""
    lines = ["digraph G {",
             f'  graph [label="{_dot_escape(caption)}", labelloc=t, labeljust=l, fontname="monospace", '
             'fontsize=11, fontcolor="#374151", bgcolor="white", nodesep=0.25, ranksep=0.35, pad=0.2];',
             '  node [fontname="monospace", fontsize=11, shape=box, penwidth=1.2, height=0.3, width=0.4, '
             'margin="0.12,0.05"];',
             f'  edge [color="{EDGE}", arrowsize=0.7];']
    inputs: dict = {}
    for edge in _all_edges(model):
        inputs.setdefault(edge.dst, []).append(edge.tensor)
    _dot_nodes(model, lines, "  ", inputs)
    for edge in _all_edges(model):
        lines.append(f'  "{edge.src_port or edge.src}" -> "{edge.dst_port or edge.dst}" '
                     f'[tooltip="{_dot_escape(edge.tensor)}"];')
    return "\n".join(lines + ["}"]) + "\n"


def _all_edges(model):
    for edge in model.edges:
        yield edge
    for node in model.nodes:
        if node.inner is not None:
            yield from _all_edges(node.inner)


def _dot_nodes(model, lines: list, indent: str, inputs: dict) -> None:
    for node in model.nodes:
        if node.inner is not None:
            stroke = CHANGED if node.changed else STYLES["fused"][1]
            lines += [f'{indent}subgraph "cluster_{node.id}" {{',
                      f'{indent}  graph [label=<<B>{html.escape(node.title)}</B>>, labeljust=l, '
                      f'class="fused{" changed" if node.changed else ""}", style="dashed,rounded,filled", '
                      f'fillcolor="{CLUSTER_FILL}", color="{stroke}", '
                      f'penwidth={3.5 if node.changed else 1.5}];']
            _dot_nodes(node.inner, lines, indent + "  ", inputs)
            lines.append(f"{indent}}}")
            continue
        fill, stroke, _, _, dash, _ = STYLES[node.kind]
        label = "<BR/>".join(f'<FONT POINT-SIZE="{px - 2}" COLOR="{colour}">'
                             + (f"<B>{html.escape(text)}</B>" if bold else html.escape(text)) + "</FONT>"
                             for text, px, bold, colour in node_lines(node))
        classes = [node.kind] + (["call"] if node.is_call else []) + (["changed"] if node.changed else [])
        width = 3.5 if node.changed else 2.0 if node.kind == "fused" else 1.2
        lines.append(f'{indent}"{node.id}" [id="{node.id}", class="{" ".join(classes)}", label=<{label}>, '
                     f'style="filled,rounded{",dashed" if dash else ""}", fillcolor="{fill}", '
                     f'color="{CHANGED if node.changed else stroke}", penwidth={width}, '
                     f'tooltip="{_dot_escape(tooltip(node, inputs.get(node.id, [])))}"];')


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def dot_svg(model, caption: str, dot: str) -> str:
    """Run ``dot -Tsvg``; the SVG without its XML prologue, sized in CSS pixels."""
    done = subprocess.run([dot, "-Tsvg"], input=dot_source(model, caption), capture_output=True, text=True,
                          check=True, timeout=60)
    svg = done.stdout[done.stdout.index("<svg"):]

    def pixels(match):
        return f'{match.group(1)}="{float(match.group(2)) * 4 / 3:.0f}"'
    head, rest = svg.split(">", 1)
    head = re.sub(r'\b(width|height)="([\d.]+)pt"', pixels, head).replace("<svg", '<svg class="mlc-graph"', 1)
    return f"{head}>{rest}"
