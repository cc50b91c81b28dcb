"""Parallel loops of compiled CPU code: the ``mlc_parallel_for`` the llvm target's code calls.

    i32 mlc_parallel_for(ptr body, i64 extent, ptr closure, i32 threads)

runs ``body(begin, end, closure)`` over chunks covering ``[0, extent)`` on up to ``threads``
threads at once (0: every core), waits for all of them and returns the first non-zero status.

Two implementations, chosen once per process:

* ``native`` (the default wherever POSIX threads are found): a pool of worker threads written in
  LLVM IR (``parallel_pool.ll``). The calling thread publishes the loop; it and the workers claim
  chunks (a few per thread) with an atomic compare-and-swap, and the caller does every chunk
  that nobody else has claimed. It never waits for a worker that has not started, so on a busy
  machine (a shared JupyterHub server, a laptop compiling in the background) a loop runs at one
  core's speed at worst, instead of stalling at the end of every loop until the operating system
  schedules the last worker, as a fork-join runtime such as OpenMP does. Idle workers spin for
  some 20 microseconds (enough for back-to-back kernels), then sleep on a condition variable.
  The pool shares no state with any OpenMP runtime, so torch or numpy's BLAS in the same process
  change nothing. After ``fork`` the child starts with no workers and starts new ones as needed.
* ``python``: a persistent ``ThreadPoolExecutor`` whose workers call the body through ctypes
  (which releases the GIL). It needs nothing but costs tens of microseconds per loop.
  ``MLC_LAB_PARALLEL=python`` forces it.

``backend()`` says which one runs; ``prepare(n)`` before a compiled call clears the error slot
and makes sure ``n`` threads can run its loops. Code built without ``-num-cores`` runs on
``default_threads()``: ``MLC_LAB_NUM_THREADS``, else ``OMP_NUM_THREADS`` (as OpenMP programs and
numpy's BLAS read it: the grader's sandbox sets it to 1), else the cores this process may use.
"""
from __future__ import annotations

import ctypes
import os
import platform
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import llvmlite.binding as llvm

from ..codegen.llvm_stmt import STATUS_OK, STATUS_RUNTIME_ERROR

_BODY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                 ctypes.c_int32)
_HOOK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64)

# Per calling thread: its thread count and the last error a compiled call reported. Errors raised
# on other threads (pool workers) land in _last_error too.
_state = threading.local()
_last_error = None
_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()
_hook = None
_native = None     # the _Pool once loaded


def default_threads() -> int:
    """Threads for parallel loops of code built without ``-num-cores`` (see the module
    docstring)."""
    for name in ("MLC_LAB_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def record_error(error) -> None:
    """Note an error of a compiled call (a bounds error's ``(buffer_id, index)``, an exception)
    for the caller to report, from whichever thread it happened on."""
    global _last_error
    _state.error = _last_error = error


def prepare(num_cores: int) -> None:
    """Before a compiled call: clear the error slot and make sure ``num_cores`` threads (the
    caller and its workers) can run the call's parallel loops."""
    global _last_error
    _state.error = _last_error = None
    if _native is not None and num_cores > _native.threads:
        _native.grow(num_cores)


def last_error():
    return getattr(_state, "error", None) or _last_error


def set_chunk_hook(hook) -> None:
    """Debugging aid: call ``hook(begin, end)`` on the thread that runs each chunk of a parallel
    loop, just before the chunk runs (None turns it off). An exception from the hook fails the call."""
    global _hook
    _hook = hook
    if _native is not None:
        _native.set_hook(_HOOK_CALLBACK if hook is not None else None)


def _call_hook(begin: int, end: int) -> int:
    try:
        if _hook is not None:
            _hook(begin, end)
        return STATUS_OK
    except BaseException as exc:  # an exception must not cross into compiled code
        record_error(exc)
        return STATUS_RUNTIME_ERROR


# -- the python thread pool -----------------------------------------------------------------------
def thread_pool(num_cores: int) -> ThreadPoolExecutor:
    """The persistent pool that runs parallel loops of functions built with ``-num-cores``."""
    with _lock:
        if num_cores not in _pools:
            _pools[num_cores] = ThreadPoolExecutor(num_cores, thread_name_prefix=f"mlc_lab-cpu{num_cores}")
        return _pools[num_cores]


def _split(extent: int, parts: int) -> list[tuple[int, int]]:
    parts = max(1, min(parts, extent))
    bounds = [extent * k // parts for k in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _run_chunk(body, begin: int, end: int, closure: int):
    _state.error = None
    status = _call_hook(begin, end)
    if status == STATUS_OK:
        status = body(begin, end, closure)
    return status, getattr(_state, "error", None)


def _parallel_for(body_address: int, extent: int, closure: int, threads: int) -> int:
    try:
        if extent <= 0:
            return STATUS_OK
        body = _BODY(body_address)
        num_cores = threads or default_threads()
        futures = [thread_pool(num_cores).submit(_run_chunk, body, lo, hi, closure)
                   for lo, hi in _split(extent, num_cores)]
        status = STATUS_OK
        for future in futures:   # wait for every chunk: none may outlive the closure
            chunk_status, error = future.result()
            if chunk_status != STATUS_OK and status == STATUS_OK:
                status = chunk_status
                record_error(error)
        return status
    except BaseException as exc:  # an exception must not cross into compiled code
        record_error(exc)
        return STATUS_RUNTIME_ERROR


# Module-level so the callbacks live as long as the process (compiled code holds their addresses).
_PYTHON_PARALLEL_FOR = _PARALLEL_FOR(_parallel_for)
_HOOK_CALLBACK = _HOOK(_call_hook)

# -- the native pool ------------------------------------------------------------------------------
_WORKER = ctypes.CFUNCTYPE(None)
_POSIX = ("pthread_mutex_lock", "pthread_mutex_unlock", "pthread_cond_wait",
          "pthread_cond_broadcast", "sched_yield")


def _pool_ir() -> str:
    """parallel_pool.ll with the host's spin-wait hint and cycle counter filled in."""
    text = (Path(__file__).with_name("parallel_pool.ll")).read_text()
    machine = platform.machine().lower()
    x86 = machine in ("x86_64", "amd64", "i386", "i686")
    arm = machine in ("arm64", "aarch64")
    pause = ("call void @llvm.x86.sse2.pause()" if x86 else
             "call void @llvm.aarch64.hint(i32 1)" if arm else "fence seq_cst")
    declare = ("declare i64 @llvm.readcyclecounter()\ndeclare void @llvm.x86.sse2.pause()" if x86 else
               "declare void @llvm.aarch64.hint(i32)" if arm else "")
    # About 20 microseconds of spinning: by the cycle counter on x86, else by count.
    fills = {"@PAUSE@": pause, "@NOW@": "call i64 @llvm.readcyclecounter()" if x86 else "add i64 0, 0",
             "@DECLARE@": declare,
             "@SPIN_CYCLES@": "60000" if x86 else "-1", "@SPIN_ITERS@": "200000" if x86 else "4000",
             "@CHUNKS_PER_THREAD@": "4"}
    for key, value in fills.items():
        text = text.replace(key, value)
    return text


class _Pool:
    """The pool of parallel_pool.ll, JIT-compiled once; worker threads are started as needed."""

    def __init__(self, machine):
        libc = ctypes.CDLL(None)
        for name in _POSIX:   # AttributeError where the C library has no POSIX threads
            llvm.add_symbol(name, ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
        # pthread_mutex_t / pthread_cond_t are at most 64 / 48 bytes on the platforms we know.
        self._sync = (ctypes.c_uint64 * 16)(), (ctypes.c_uint64 * 16)()
        self._init_sync = lambda: (libc.pthread_mutex_init(self._sync[0], None),
                                   libc.pthread_cond_init(self._sync[1], None))
        self._init_sync()
        module = llvm.parse_assembly(_pool_ir())
        module.verify()
        self.engine = llvm.create_mcjit_compiler(module, machine)
        self.engine.finalize_object()
        self.address = self.engine.get_function_address("mlc_parallel_for")
        self._worker = _WORKER(self.engine.get_function_address("mlc_pool_worker"))

        def slot(name, ctype):
            return ctype.from_address(self.engine.get_global_value_address(name))
        self._workers, self._sleepers = slot("mlc_pool_workers", ctypes.c_int32), slot("mlc_pool_sleepers", ctypes.c_int32)
        self._hook_slot = slot("mlc_chunk_hook", ctypes.c_void_p)
        slot("mlc_pool_mutex", ctypes.c_void_p).value = ctypes.addressof(self._sync[0])
        slot("mlc_pool_cond", ctypes.c_void_p).value = ctypes.addressof(self._sync[1])
        self.threads = 1
        slot("mlc_pool_default", ctypes.c_int32).value = default_threads()
        self._grow_lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def grow(self, threads: int) -> None:
        """Start workers until ``threads`` threads (the caller's included) can run a loop."""
        with self._grow_lock:
            while self.threads < threads:
                threading.Thread(target=self._worker, daemon=True,
                                 name=f"mlc_lab-worker{self.threads}").start()
                self.threads += 1
                self._workers.value = self.threads - 1

    def _after_fork(self) -> None:
        # The child has only the thread that forked: no workers, nobody asleep, fresh locks.
        self._init_sync()
        self._workers.value = self._sleepers.value = 0
        self.threads = 1
        self._grow_lock = threading.Lock()

    def set_hook(self, callback) -> None:
        self._hook_slot.value = ctypes.cast(callback, ctypes.c_void_p).value if callback else None


def install(machine) -> str:
    """Register ``mlc_parallel_for`` with the JIT (called once, before any module is compiled):
    the native pool where POSIX threads are found, else the Python thread pool. Returns the
    backend's name."""
    global _native
    if os.environ.get("MLC_LAB_PARALLEL", "").lower() != "python":
        try:
            _native = _Pool(machine)
        except (OSError, RuntimeError, AttributeError):
            _native = None
    address = _native.address if _native is not None else \
        ctypes.cast(_PYTHON_PARALLEL_FOR, ctypes.c_void_p).value
    llvm.add_symbol("mlc_parallel_for", address)
    if _hook is not None:
        set_chunk_hook(_hook)
    return backend()


# The least work (flops) for which a loop split over the cores beats one core: publishing a loop
# to spinning workers costs about a microsecond with the native pool, 0.1 ms with Python's.
MIN_PARALLEL_FLOPS = {"native": 5e4, "python": 5e7}


def backend() -> str:
    """``"native"`` or ``"python"``: what runs parallel loops in this process."""
    return "native" if _native is not None else "python"
