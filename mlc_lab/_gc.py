"""Pausing Python's cyclic garbage collector around a compilation.

Lowering and code generation allocate hundreds of thousands of small objects (IR nodes, tuples,
llvmlite values) in a burst, almost none of them in reference cycles. Each burst of allocations
starts a collection, and the older generations are scanned again and again over everything the
process holds (the IR, numpy, llvmlite): a tenth of a build's time, freeing next to nothing.
``paused()`` turns the collector off for the duration of a ``with`` (nested and concurrent uses
share one pause) and back on after the outermost one, when it was on before; garbage in cycles
made meanwhile (llvmlite's module graph) is collected by the next automatic collection.
"""
from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_resume = False


@contextlib.contextmanager
def paused():
    """Run the body with the cyclic garbage collector off (see the module docstring).

    >>> import gc
    >>> with paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
