"""Pictures and views for the chapters, each HTML or SVG in Jupyter and text elsewhere
(matplotlib and ipywidgets are imported only when a view needs them):

    viz.graph(mod), viz.graph_diff(a, b)     a relax function as a graph; before/after a pass
    viz.IRDiff(a, b), viz.pipeline(mod, ps)  IR diffs that fit their box; one section per pass
    viz.loop_nest.loop_nest(sch, block)      the loop nest and the tiles an iteration touches
    viz.stepper.stepper(sch)                 a slider over a schedule's trace (sch.stepper())
    viz.roofline.roofline(points)            this machine's roofline with measured kernels
    viz.gpu                                  thread grids and warp accesses
"""
from . import gpu, ir_diff, loop_nest, roofline, stepper
from .graph import graph, graph_diff
from .ir_diff import IRDiff, PassDiff, PipelineView, pipeline

__all__ = ["gpu", "ir_diff", "loop_nest", "roofline", "stepper", "graph", "graph_diff", "IRDiff",
           "PassDiff", "PipelineView", "pipeline"]
