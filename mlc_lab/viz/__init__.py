"""Pictures for the chapters, drawn with matplotlib: ``viz.gpu`` (thread grids, warp accesses)."""
from . import gpu

__all__ = ["gpu"]
