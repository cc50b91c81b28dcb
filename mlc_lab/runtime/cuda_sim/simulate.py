"""``simulate(kernel, args)``: run one kernel launch on the CPU, as a GPU would, and count.

    run = simulate(kernel, {A: a, B: b, C: c})    # numpy arrays, written in place
    run.counters.buffers["A"].sectors_per_request
    print(run.report("nvidia/a100"))

Blocks run in batches (as many as fit in ``BATCH_LANES`` threads); each batch runs every
statement of the kernel once, for all its threads at once (see ``executor``). Shared memory is
fresh for each block, local memory for each thread.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...tir import expr as E
from ...tir.buffer import Buffer
from ..interpreter.expr import np_dtype
from .counters import BufferCounters, KernelCounters
from .executor import Machine
from .gpus import Occupancy, gpu_spec, occupancy
from .memory import GlobalMemory, Lanes, buffer_size, itemsize
from .prepare import PreparedKernel
from .races import RaceDetector
from .trace import Trace

BATCH_LANES = 1 << 15          # threads simulated at once
BATCH_LOCAL_BYTES = 64 << 20   # local memory of one batch


@dataclass
class KernelRun:
    """One simulated launch: its counters, the registers per thread used for occupancy (the
    simulator's estimate unless given), the trace if one was asked for, and how long the
    simulation took (``wall_seconds``, seconds on this CPU, not on a GPU)."""
    kernel: object
    counters: KernelCounters
    registers: int
    trace: Trace | None
    wall_seconds: float
    target: object = None
    blocks_run: int = 0        # blocks simulated (all of the grid unless ``blocks`` chose some)

    @property
    def shared_bytes(self) -> int:
        """Shared memory per block."""
        return self.kernel.shared_bytes

    def occupancy(self, target=None) -> Occupancy:
        return occupancy(gpu_spec(target or self.target), self.kernel.threads_per_block,
                         self.registers, self.shared_bytes)

    def estimate(self, target=None):
        from .timing import estimate
        return estimate(self, target or self.target)

    def report(self, target=None):
        """A ``Profile``: the counters as a table (``str``, HTML in Jupyter) and a plot."""
        from .report import Profile
        return Profile(self, target or self.target)


def simulate(kernel, args, target=None, check: bool = True, counters: bool = True,
             trace=False, registers: int | None = None, blocks=None) -> KernelRun:
    """Run ``kernel`` (from ``split_host_device``) on ``args``: a dict from each parameter (the
    Buffer or Var, or its name) to a numpy array (flat or any C-contiguous shape of the right
    size, written in place) or a scalar; or a list in ``kernel.params`` order.

    ``check``: detect data races on shared memory and barriers that part of a block skips
    (bounds are always checked). ``counters``: count memory requests, sectors, bank conflicts
    and flops. ``trace``: True or a ``Trace`` to record stores and one warp's accesses.
    ``registers``: registers per thread (from ``ptxas -v``) instead of the estimate.
    ``target``: the GPU that reports and estimates refer to by default.
    ``blocks``: run only some blocks: a number (spread evenly over the grid) or a list of
    blocks (linear ids or ``(x, y, z)``). Only their outputs are written; the counters are theirs,
    and ``estimate`` scales them up to the whole grid (exact when all blocks do the same)."""
    start = time.perf_counter()
    prep = _prepared(kernel)
    chosen = _chosen_blocks(kernel, blocks)
    found = KernelCounters(threads=len(chosen) * kernel.threads_per_block)
    memories, scalars = _bind(kernel, args, found)
    allocated = {b: _counters(found, b) for b in (*kernel.shared, *kernel.local)}
    recorder = Trace() if trace is True else (trace or None)
    per_batch = _blocks_per_batch(kernel)
    with np.errstate(all="ignore"):   # masked-off lanes may divide by zero; their values are unused
        for first in range(0, len(chosen), per_batch):
            lanes = Lanes(kernel, chosen[first:first + per_batch])
            races = RaceDetector(lanes, kernel.name, prep.origin) if check else None
            if recorder is not None:
                recorder.begin(kernel, lanes)
            machine = Machine(prep, lanes, memories, scalars, allocated, races,
                              found if counters else None, recorder)
            machine.run(prep.body)
    return KernelRun(kernel, found, registers or prep.registers, recorder,
                     time.perf_counter() - start, target, len(chosen))


def simulate_program(program, arrays, **options) -> list:
    """Run every kernel of a ``DeviceProgram`` in order on ``arrays`` (one per parameter of
    ``program.func``); scratch buffers are allocated here. Returns one KernelRun per kernel."""
    params = program.func.params
    if len(arrays) != len(params):
        raise TypeError(f"{program.name} takes {len(params)} arguments "
                        f"({', '.join(p.name for p in params)}), got {len(arrays)}")
    bound = dict(zip(params, arrays))
    for buffer in program.scratch:
        if buffer_size(buffer) is None:
            raise ValueError(f"{program.name}: scratch buffer {buffer.name} has the symbolic "
                             f"shape {buffer.shape}; simulate its kernels one by one instead")
        bound[buffer] = np.zeros(buffer_size(buffer), np_dtype(buffer.dtype))
    return [simulate(k, {p: bound[p] for p in k.params}, **options) for k in program.kernels]


_PREPARED: dict = {}   # id(kernel) -> PreparedKernel, for the last few kernels simulated


def _prepared(kernel) -> PreparedKernel:
    found = _PREPARED.get(id(kernel))
    if found is None or found.kernel is not kernel or found.source is not kernel.body:
        if len(_PREPARED) >= 32:
            _PREPARED.pop(next(iter(_PREPARED)))
        found = _PREPARED[id(kernel)] = PreparedKernel(kernel)
    return found


def _counters(found: KernelCounters, buffer) -> BufferCounters:
    name = buffer.name
    while name in found.buffers:
        name += "'"
    scope = "shared" if buffer.scope.startswith("shared") else \
        "local" if buffer.scope != "global" else "global"
    found.buffers[name] = BufferCounters(name, scope, itemsize(buffer.dtype))
    return found.buffers[name]


def _bind(kernel, args, found) -> tuple[dict, dict]:
    if not isinstance(args, dict):
        args = list(args)
        if len(args) != len(kernel.params):
            raise TypeError(f"{kernel.name} takes {len(kernel.params)} arguments "
                            f"({', '.join(p.name for p in kernel.params)}), got {len(args)}")
        args = dict(zip(kernel.params, args))
    by_name = {k: v for k, v in args.items() if isinstance(k, str)}
    memories, scalars = {}, {}
    for param in kernel.params:
        value = args[param] if param in args else by_name.get(param.name)
        if value is None:
            raise TypeError(f"{kernel.name}: no argument for parameter {param.name}")
        if isinstance(param, E.Var):
            scalars[param] = np_dtype(param.dtype).type(value)
            continue
        flat = _flat(kernel, param, value)
        memories[param] = GlobalMemory(param, flat, flat.size, _counters(found, param))
    return memories, scalars


def _flat(kernel, param: Buffer, array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{kernel.name}: parameter {param.name} needs a numpy array, got "
                        f"{type(array).__name__}")
    want = np_dtype(param.dtype)
    if array.dtype != want:
        raise TypeError(f"{kernel.name}: parameter {param.name} holds {want}, got an array of "
                        f"{array.dtype}")
    if buffer_size(param) not in (None, array.size):   # a symbolic shape takes the array's
        raise ValueError(f"{kernel.name}: parameter {param.name} has {buffer_size(param)} "
                         f"elements, got an array of {array.size}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{kernel.name}: the array for {param.name} must be C-contiguous, as "
                         "the kernel writes it in place (np.ascontiguousarray makes a copy)")
    return array.reshape(-1)


def _chosen_blocks(kernel, blocks) -> np.ndarray:
    total = kernel.num_blocks
    if blocks is None:
        return np.arange(total, dtype=np.int64)
    if isinstance(blocks, (int, np.integer)):
        count = min(max(int(blocks), 1), total)
        return np.unique(np.linspace(0, total - 1, count).astype(np.int64))
    gx, gy, _ = kernel.grid
    ids = [b if isinstance(b, (int, np.integer)) else b[0] + gx * (b[1] + gy * b[2])
           for b in blocks]
    bad = [b for b in ids if not 0 <= b < total]
    if bad or not ids:
        raise ValueError(f"{kernel.name}: blocks {bad or '[]'} are not in the grid {kernel.grid} "
                         f"({total} blocks)")
    return np.asarray(ids, dtype=np.int64)


def _blocks_per_batch(kernel) -> int:
    threads = kernel.threads_per_block
    local = sum(buffer_size(b) * itemsize(b.dtype) for b in kernel.local) or 1
    return max(1, min(kernel.num_blocks, BATCH_LANES // threads,
                      BATCH_LOCAL_BYTES // (local * threads)))
