"""A relax function drawn as a graph: ``graph(mod, "main")`` and ``graph_diff(before, after)``.

A node per call, labelled with the op or kernel it runs and the shape and dtype it returns;
a node per parameter (blue pill) and per constant (grey dashed box); an edge per use of a
tensor; an ``output`` node per returned value. A call of a fused function (a relax function
marked ``"Primitive"`` by FuseOps, or a ``fused_*`` kernel made by FuseTIR) is drawn in orange;
``expand_fused=True`` draws a fused relax function's own calls inside a cluster named after it.
``graph_diff`` puts two graphs side by side, the calls one lacks outlined in magenta.

In Jupyter the view is an inline SVG, laid out by Graphviz's ``dot`` where that program is
installed (``dot``), else in pure Python (``layout``, drawn by ``svg``);
``mod.show_graph()`` displays one. ``print`` gives one line per node with its inputs::

    >>> from mlc_lab.frontend import nn
    >>> print(graph(nn.Sequential(nn.Linear(4, 3), nn.ReLU()).to_relax((1, 4))))
    main: 4 calls
      x                       param   (1, 4) float32
      c0                      const   (3, 4) float32
      lv  = permute_dims(c0)  op      -> (4, 3) float32
      lv1 = matmul(x, lv)     op      -> (1, 3) float32
      c1                      const   (3,) float32
      lv2 = add(lv1, c1)      op      -> (1, 3) float32
      gv  = nn.relu(lv2)      op      -> (1, 3) float32
      output(gv)              output
"""
from __future__ import annotations

import shutil
import subprocess
import warnings
from typing import Optional

from ..._env import in_notebook
from ...ir import hooks
from . import dot as graph_dot, svg as graph_svg
from .model import Graph, build_graph, mark_changes


class _Displayed:
    def show(self) -> None:
        """Display inside Jupyter, print elsewhere."""
        if in_notebook():
            from IPython.display import display
            display(self)
        else:
            print(self)


class GraphView(_Displayed):
    """A drawn graph: inline SVG in Jupyter (``_repr_html_``, ``_repr_svg_``), text elsewhere.
    ``engine`` is "dot" (Graphviz), "python" (``layout``) or None: dot where installed."""

    def __init__(self, model: Graph, engine: Optional[str] = None, caption: Optional[str] = None):
        if engine not in (None, "dot", "python"):
            raise ValueError(f"engine must be 'dot', 'python' or None (dot where installed), "
                             f"got {engine!r}")
        self.model, self.engine = model, engine
        calls = len(model.calls())
        self.caption = caption or f"{model.name}: {calls} call{'s' if calls != 1 else ''}"
        self._svg: Optional[str] = None

    def svg(self) -> str:
        """The picture as SVG text (drawn once, then kept)."""
        if self._svg is None:
            self._svg = render(self.model, self.caption, self.engine)
        return self._svg

    def _repr_svg_(self) -> str:
        return self.svg()

    def _repr_html_(self) -> str:
        return graph_svg.html_wrap(self.svg())

    def __str__(self) -> str:
        return "\n".join([self.caption] + self.model.lines())

    __repr__ = __str__


class GraphDiff(_Displayed):
    """Two graphs side by side (under each other when the output is narrow); the calls of one with
    no counterpart in the other (``mark_changes``) are outlined in magenta."""

    def __init__(self, before: GraphView, after: GraphView):
        self.before, self.after = before, after

    def _repr_html_(self) -> str:
        return graph_svg.html_side_by_side([self.before.svg(), self.after.svg()])

    def _repr_svg_(self) -> str:
        return graph_svg.svg_side_by_side([self.before.svg(), self.after.svg()])

    def __str__(self) -> str:
        return f"{self.before}\n\n{self.after}"

    __repr__ = __str__


def graph(mod_or_func, func_name: str = "main", expand_fused: bool = False,
          engine: Optional[str] = None) -> GraphView:
    """Draw the relax function ``func_name`` of an IRModule (or a relax Function itself)."""
    return GraphView(build_graph(mod_or_func, func_name, expand_fused), engine)


def graph_diff(before, after, func_name: str = "main", expand_fused: bool = False,
               engine: Optional[str] = None, titles=("before", "after")) -> GraphDiff:
    """``before`` and ``after`` (modules, functions or ``graph`` views) side by side, the calls
    that differ highlighted: e.g. a module before and after a pass."""
    models = [view.model if isinstance(view, GraphView) else build_graph(view, func_name, expand_fused)
              for view in (before, after)]
    models = mark_changes(*models)
    views = []
    for title, model in zip(titles, models):
        calls, changed = model.calls(), sum(node.changed for node in model.walk())
        plural = "s" if len(calls) != 1 else ""
        caption = f"{title}: {model.name}, {len(calls)} call{plural} ({changed} changed)"
        views.append(GraphView(model, engine, caption))
    return GraphDiff(*views)


def render(model: Graph, caption: str, engine: Optional[str] = None) -> str:
    """SVG of ``model``: drawn by Graphviz for ``engine="dot"``, by ``svg`` for "python";
    for None, by Graphviz where its ``dot`` program is installed (falling back, with a warning,
    when it fails)."""
    dot = shutil.which("dot")
    if engine == "dot" and dot is None:
        raise RuntimeError("engine='dot' needs Graphviz's dot program on PATH (apt-get install graphviz, "
                           "or conda install graphviz); engine='python' draws without it")
    if dot is not None and engine in (None, "dot"):
        try:
            return graph_dot.dot_svg(model, caption, dot)
        except (OSError, subprocess.SubprocessError) as err:
            if engine == "dot":
                raise
            warnings.warn(f"Graphviz's dot failed ({err}); drawing the graph with the built-in layout")
    return graph_svg.python_svg(model, caption)


hooks.provide("viz.graph", graph)   # mod.show_graph()

__all__ = ["graph", "graph_diff", "GraphView", "GraphDiff", "build_graph"]
