"""What the environment asks of the library: the one place that reads MLC_LAB_DEBUG and that
tells whether code runs inside a Jupyter kernel. Imports nothing from mlc_lab, so every layer
may use it."""
from __future__ import annotations

import os


def debug_enabled() -> bool:
    """True when MLC_LAB_DEBUG is set to anything but "" or "0": passes verify the IR after every
    step and the code generators dump what they generate."""
    return os.environ.get("MLC_LAB_DEBUG", "") not in ("", "0")


def in_notebook() -> bool:
    """True inside a Jupyter kernel, where views render as HTML instead of text."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


__all__ = ["debug_enabled", "in_notebook"]
