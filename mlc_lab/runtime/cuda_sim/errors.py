"""What the simulator reports when a kernel breaks the CUDA execution model.

Each error names the buffer, the element, the thread and the block involved, as
``threadIdx`` and ``blockIdx`` coordinates ``(x, y, z)``, and shows the statement that ran::

    OutOfBoundsError: main_kernel0: thread (5, 0, 0) of block (7, 0, 0) reads A[1030], but A
    (global memory) has 1026 elements
        C[v_blockIdx_x * 128 + v_threadIdx_x] = A[v_blockIdx_x * 128 + v_threadIdx_x + 4]

All of them derive from ``SimulatorError``; ``OutOfBoundsError`` is also an ``IndexError``.
"""
from __future__ import annotations


class SimulatorError(RuntimeError):
    """A kernel did something a GPU would not run correctly. ``buffer``, ``index``, ``thread`` and
    ``block`` say where (None when they do not apply)."""

    def __init__(self, message: str, stmt=None, buffer: str | None = None, index: int | None = None,
                 thread: tuple | None = None, block: tuple | None = None):
        shown = ""
        if stmt is not None:
            shown = "\n" + "\n".join("    " + line for line in str(stmt).splitlines()[:6])
        super().__init__(message + shown)
        self.buffer, self.index, self.thread, self.block = buffer, index, thread, block


class OutOfBoundsError(SimulatorError, IndexError):
    """A thread read or wrote outside a buffer (global, shared or local memory)."""


class DataRaceError(SimulatorError):
    """Two threads of one block touched one shared-memory element with no barrier between them,
    and at least one of them wrote it: the result depends on which ran first. ``kind`` is
    "read after write", "write after read" or "write after write"; ``other_thread`` is the second
    thread."""

    def __init__(self, message: str, stmt=None, kind: str = "", other_thread: tuple | None = None,
                 **where):
        super().__init__(message, stmt, **where)
        self.kind, self.other_thread = kind, other_thread


class BarrierDivergenceError(SimulatorError):
    """A barrier (``__syncthreads()``) was reached by some threads of a block but not all: on a
    GPU the block then hangs or goes on with stale shared memory."""
