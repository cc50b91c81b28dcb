"""Cross-cutting IR: the node base, IRModule/GlobalVar, structural equality, diffs, and the pass
infrastructure (``ir.transform``, also reachable as ``mlc_lab.transform``)."""
from . import transform
from .diff import diff, show_diff
from .module import GlobalVar, IRModule
from .node import Node
from .structural import assert_structural_equal, structural_equal, structural_hash

__all__ = ["diff", "show_diff", "GlobalVar", "IRModule", "Node", "assert_structural_equal", "structural_equal",
           "structural_hash", "transform"]
