"""Cross-cutting IR: the node base, IRModule/GlobalVar, structural equality, diffs, and the pass
infrastructure (``ir.transform``, also reachable as ``mlc_lab.transform``)."""
from . import hooks, transform
from .diff import diff, show_diff
from .errors import TVMError
from .module import GlobalVar, IRModule
from .node import Node
from .structural import assert_structural_equal, structural_equal, structural_hash



def __getattr__(name: str):
    # ``ir.Op`` is the relax operator (``tvm.ir.Op.get("relax.add")``), a relax expression; relax
    # builds on this package and provides it as a hook, looked up when asked for.
    if name == "Op":
        return hooks.need("relax.Op")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["diff", "show_diff", "GlobalVar", "IRModule", "Node", "TVMError", "assert_structural_equal",
           "structural_equal", "structural_hash", "transform"]
