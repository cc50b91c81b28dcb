"""Cross-cutting IR: the node base, IRModule/GlobalVar, structural equality, diffs."""
from .module import GlobalVar, IRModule
from .node import Node
from .structural import assert_structural_equal, structural_equal, structural_hash

__all__ = ["GlobalVar", "IRModule", "Node", "assert_structural_equal", "structural_equal",
           "structural_hash"]
