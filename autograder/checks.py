"""What a test cell checks, the same in a student's notebook and in the grader.

    checks.numerics(func, reference)          build and run ``func`` on fresh random inputs; compare
    checks.model_numerics(mod, reference, shapes)   a relax module through relax.build and the VM
    checks.run_model(mod, *arrays)            a relax module's ``main`` on given arrays: its output
    checks.same_structure(func, expected)     the IR is the target form (structural equality)
    checks.loops(func, block)                 the loop extents and kinds above a block
    checks.replays(schedule, original)        a schedule's trace, replayed, gives its module
    checks.speedup(func, baseline)            time both, interleaved, in one process: the ratio
    checks.by_ratio(ratio, full, partial, points=N)   the points a speed ratio earns (a Score)
    checks.partial(fraction, points, message) a share of a cell's points (a Score)
    checks.gpu(func, reference)               a GPU kernel on the cuda-sim simulator: results,
                                              races, global sectors, bank conflicts

A failed check raises ``GradingFailure`` (an AssertionError) whose message tells the student what
is wrong without showing expected values. A test cell that gives part of its points ends with an
expression whose value is a ``Score`` (nbgrader's convention: the number a graded cell displays
is the points it earned; see ``autograder/scoring.py``). Nothing here writes to stderr, which
nbgrader scores as a failure. Inputs are drawn fresh for every call (seeded from the OS), so an
answer that hard-codes outputs for the inputs a student saw fails. Programs are built and run
where ``autograder.executor`` says: in the grader, a sandboxed process that never holds an
expected value (bounds-checked, so an access out of bounds fails naming the buffer).
"""
from __future__ import annotations

import html
import inspect
import statistics

import numpy as np


class GradingFailure(AssertionError):
    """A check that failed; its message is shown to the student."""


class Score(float):
    """The points a test cell earned, and in ``message`` why not all of them. It prints as the
    bare number, which is what nbgrader parses from the cell's displayed value."""

    def __new__(cls, points: float, message: str = ""):
        score = super().__new__(cls, points)
        score.message = message
        return score

    def __repr__(self) -> str:
        return float.__repr__(self)

    __str__ = __repr__

    def _repr_html_(self):     # Jupyter shows this beside text/plain: the student sees why
        if self.message:
            return f"<pre>{float.__repr__(self)}</pre><p>{html.escape(self.message)}</p>"
        return None


def partial(fraction: float, points: float, message: str = "") -> Score:
    """``fraction`` (clipped to [0, 1]) of a cell's ``points``, rounded so that the number shown
    and the number graded are the same."""
    return Score(round(min(max(float(fraction), 0.0), 1.0) * points, 4), message)


def fail(message: str):
    raise GradingFailure(message)


# -- numerics -------------------------------------------------------------------------------------
def random_array(shape, dtype: str, rng) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-8 if dtype.kind == "i" else 0, 9, shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    raise GradingFailure(f"no random inputs for dtype {dtype}")


def prim_func(func, func_name: str | None = None):
    """The PrimFunc to check: ``func`` itself, or the one named ``func_name`` (or the only one) of
    a module."""
    from mlc_lab.ir.module import IRModule
    from mlc_lab.tir.function import PrimFunc
    if isinstance(func, PrimFunc):
        return func
    if isinstance(func, IRModule):
        names = [gv.name_hint for gv, f in func.functions.items() if isinstance(f, PrimFunc)]
        if func_name is None:
            if len(names) != 1:
                fail(f"the module should hold one prim_func, it holds {len(names)}: {', '.join(names)}")
            func_name = names[0]
        if func_name not in names:
            fail(f"the module has no prim_func named {func_name!r} (it has {', '.join(names) or 'none'})")
        return func[func_name]
    fail(f"expected a PrimFunc or an IRModule, got a {type(func).__name__}")


def buffer_params(func) -> list:
    from mlc_lab.tir.buffer import Buffer
    params = list(func.params)
    if not all(isinstance(p, Buffer) for p in params):
        fail(f"{_name(func)} takes scalar parameters; this task wants buffers only")
    return params


def _static_shape(buf) -> tuple:
    try:
        return tuple(int(d) for d in buf.shape)
    except TypeError:
        fail(f"buffer {buf.name} has a symbolic shape; this task wants static shapes")


def numerics(func, reference, *, func_name: str | None = None, target: str = "llvm", rtol: float = 1e-4,
             atol: float = 1e-4, trials: int = 2, seed=None) -> None:
    """Build ``func`` for ``target`` and run it ``trials`` times on fresh random inputs: the
    parameters ``reference`` takes (numpy in, outputs out: one array or a tuple) are the inputs,
    the rest are outputs, compared with ``np.testing`` tolerances. The program runs built with
    ``-bounds-check`` (an access out of bounds fails, naming the buffer), where
    ``autograder.executor`` runs programs: never beside the expected values in the grader."""
    func = prim_func(func, func_name)
    params = buffer_params(func)
    n_in = len(inspect.signature(reference).parameters)
    if n_in > len(params):
        fail(f"{_name(func)} takes {len(params)} buffers, the task needs at least {n_in + 1}")
    _check_sizes(func, params)
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        inputs = [random_array(_static_shape(b), b.dtype, rng) for b in params[:n_in]]
        outputs = [np.zeros(_static_shape(b), b.dtype) for b in params[n_in:]]
        ran = _execute(func, "run", (*inputs, *outputs), target=target)
        expected = reference(*[x.copy() for x in inputs])      # only after the program ran elsewhere
        expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        if len(outputs) != len(expected):
            fail(f"{_name(func)} has {len(outputs)} output buffer(s) after its {n_in} input(s); "
                 f"the task wants {len(expected)}")
        for buf, got, want in zip(params[n_in:], ran[n_in:], expected):
            compare(got, np.asarray(want), f"output {buf.name} of {_name(func)}", rtol, atol)


MAX_BUFFER_BYTES = 1 << 28      # no buffer of a checked program may be larger


def _check_sizes(func, params) -> None:
    for buf in params:
        size = int(np.prod(_static_shape(buf), dtype=np.int64)) * np.dtype(buf.dtype).itemsize
        if size > MAX_BUFFER_BYTES:
            fail(f"buffer {buf.name} of {_name(func)} takes {size >> 20} MiB; checks allow "
                 f"{MAX_BUFFER_BYTES >> 20} MiB")


def _execute(func, op: str, *values, **params):
    """``op`` of ``autograder.executor`` on the program ``func`` (and ``values``), wherever
    programs run now: in the grader a sandboxed process without expected values, in a
    notebook this one. A failure becomes a GradingFailure that names the function."""
    from .executor import RunError, current
    try:
        return current()(op, func, *values, **params)
    except RunError as exc:
        fail(f"{_name(func) if hasattr(func, 'attr_dict') else 'the module'} {exc}")


def compare(got, want: np.ndarray, what: str, rtol: float = 1e-4, atol: float = 1e-4) -> None:
    """``got`` matches ``want``; the failure message says where and how far off, never the values."""
    got = np.asarray(got)
    if got.shape != want.shape:
        fail(f"{what} has shape {got.shape}; it should be {want.shape}")
    if got.dtype.kind == "O":
        fail(f"{what} holds Python objects, not numbers")
    bad = ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=False)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        fail(f"{what} differs from the reference at {int(bad.sum())} of {bad.size} elements "
             f"(the first at index {where}); the inputs were random")


def model_numerics(mod, reference, shapes: list, *, target: str = "llvm", dtype: str = "float32",
                   rtol: float = 1e-4, atol: float = 1e-4, seed=None) -> None:
    """Build a relax module with ``relax.build`` and run ``main`` on random inputs of ``shapes``."""
    rng = np.random.default_rng(seed)
    inputs = [random_array(shape, dtype, rng) for shape in shapes]
    got = _execute(mod, "model", tuple(inputs), target=target)
    compare(got, np.asarray(reference(*inputs)), "the module's output", rtol, atol)


def run_model(mod, *arrays, target: str = "llvm"):
    """The output (numpy) of ``mod``'s relax ``main`` on ``arrays``, built with ``relax.build``
    and run where programs run (``autograder.executor``): compare it here, with values the
    student's code never sees."""
    return _execute(mod, "model", tuple(np.ascontiguousarray(a) for a in arrays), target=target)


# -- structure ------------------------------------------------------------------------------------
def same_structure(func, expected, what: str = "the transformed program",
                   differs: str = "is not the target form") -> None:
    """``func`` is structurally equal to ``expected`` (names of loops and variables may differ);
    the failure says "WHAT DIFFERS: where"."""
    from mlc_lab.ir import assert_structural_equal
    try:
        assert_structural_equal(func, expected, map_free_vars=True)
    except ValueError as exc:
        fail(f"{what} {differs}: {_first_line(exc)}")


def loops(func, block: str, *, func_name: str | None = None) -> list:
    """``[(extent, kind), ...]`` of the loops around block ``block``, outermost first
    (kind: "serial", "parallel", "vectorized", "unroll", or a thread tag)."""
    from mlc_lab import tir
    func = prim_func(func, func_name)
    sch = tir.Schedule(func)
    try:
        found = sch.get_loops(sch.get_block(block))
    except Exception:
        fail(f"{_name(func)} has no block named {block!r}")
    out = []
    for rv in found:
        loop = sch.get(rv)
        kind = loop.thread_binding or str(loop.kind)
        out.append((int(loop.extent), kind))
    return out


def replays(schedule, original) -> object:
    """The schedule's trace, replayed here on ``original``, gives the module handed in (so the
    module came from schedule primitives, not from editing text); returns that module."""
    from mlc_lab import tir
    from mlc_lab.tir.schedule import Trace
    try:
        trace = Trace.from_json(schedule.trace)
        sch = tir.Schedule(original)
        trace.apply_to_schedule(sch, remove_postproc=False)
    except Exception as exc:
        fail(f"the schedule's trace does not replay on the original program: {_first_line(exc)}")
    same_structure(schedule.mod, sch.mod, "the module handed in with the schedule",
                   "is not what its trace produces (was it edited after scheduling?)")
    return sch.mod


# -- speed ----------------------------------------------------------------------------------------
def speedup(func, baseline, *, func_name: str | None = None, target: str = "llvm", rounds: int = 7,
            min_seconds: float = 0.02, seed=None) -> float:
    """How many times faster ``func`` runs than ``baseline`` (both PrimFuncs of one signature),
    timed here, interleaved round by round (each round measures both, in alternating order), so
    a busy machine slows both alike: the median of the per-round ratios."""
    func = prim_func(func, func_name)
    baseline = prim_func(baseline)
    params = buffer_params(baseline)
    _check_sizes(baseline, params)
    rng = np.random.default_rng(seed)
    args = tuple(random_array(_static_shape(b), b.dtype, rng) for b in params)
    return statistics.median(_execute(func, "speed", baseline, args, target=target, rounds=rounds,
                                      min_seconds=min_seconds))


RATIO_IN_MESSAGE = r" (\d+(?:\.\d+)?)x[: ]"    # the ratio in by_ratio's messages (mlc-lab calibrate reads it)


def by_ratio(ratio: float, full: float, partial: float | None = None, what: str = "speedup", *,
             points: float) -> Score:
    """The Score a speed ratio earns of a cell's ``points`` (no default: a wrong one would pass
    unnoticed): all from ``ratio >= full``; between ``partial`` and ``full`` a share growing
    linearly from 0.5 to 1; below ``partial`` (or ``full`` when no partial) a failure. End the
    test cell with it, so that its value is the cell's score."""
    if ratio >= full:
        return Score(points, f"{what} {ratio:.2f}x: full points from {full:g}x")
    if partial is not None and ratio >= partial:
        share = 0.5 + 0.5 * (ratio - partial) / (full - partial)
        return Score(round(share * points, 4), f"{what} {ratio:.2f}x: full points need {full:g}x, "
                                               f"this earns {share:.0%} of them")
    fail(f"{what} {ratio:.2f}x is below the {partial if partial is not None else full:g}x this task needs")


# -- GPU kernels on the simulator -----------------------------------------------------------------
def gpu(func, reference, *, func_name: str | None = None, max_sectors_per_request: float | None = None,
        bank_conflicts: bool = True, max_bytes_per_flop: float | None = None, seed=None) -> list:
    """Build ``func`` for CUDA and run it on the cuda-sim simulator with fresh random inputs:
    results match ``reference``; no data race or out-of-bounds access (the simulator raises);
    each global buffer's accesses take at most ``max_sectors_per_request`` 32-byte sectors per
    warp request; with ``bank_conflicts=False`` no shared-memory access conflicts. Returns the
    simulator's runs (one per kernel) for further checks."""
    func = prim_func(func, func_name)
    params = buffer_params(func)
    _check_sizes(func, params)
    n_in = len(inspect.signature(reference).parameters)
    rng = np.random.default_rng(seed)
    inputs = [random_array(_static_shape(b), b.dtype, rng) for b in params[:n_in]]
    outputs = [np.zeros(_static_shape(b), b.dtype) for b in params[n_in:]]
    ran, runs = _execute(func, "simulate", (*inputs, *outputs))
    outputs = list(ran[n_in:])
    expected = reference(*[x.copy() for x in inputs])
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    for buf, got, want in zip(params[n_in:], outputs, expected):
        compare(got, np.asarray(want), f"output {buf.name} of {_name(func)}")
    for run in runs:
        for c in run.counters.buffers.values():
            if (max_sectors_per_request is not None and c.scope == "global" and c.sectors_per_request
                    and c.sectors_per_request > max_sectors_per_request + 1e-9):
                fail(f"{c.name}: {c.sectors_per_request:.1f} sectors per warp request, the budget is "
                     f"{max_sectors_per_request:g} (are neighbouring threads reading neighbouring elements?)")
            if not bank_conflicts and c.scope == "shared" and c.conflict_degree and c.conflict_degree > 1:
                fail(f"{c.name}: {c.conflict_degree:.2f}-way shared-memory bank conflicts")
    return runs


def _name(func) -> str:
    return str(getattr(func, "attr_dict", {}).get("global_symbol", "the function"))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


__all__ = ["GradingFailure", "Score", "by_ratio", "compare", "fail", "gpu", "loops",
           "model_numerics", "numerics", "partial", "replays", "same_structure", "speedup"]
