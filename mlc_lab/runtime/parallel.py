"""Parallel loops of compiled CPU code: the ``mlc_parallel_for`` the llvm target's code calls.

    i32 mlc_parallel_for(ptr body, i64 extent, ptr closure)

splits ``[0, extent)`` into one contiguous chunk per thread, runs ``body(begin, end, closure)`` on
each chunk at the same time, waits for all of them and returns the first non-zero status.

Two implementations, chosen once per process:

* ``openmp`` (the default where libgomp is found, which every machine with gcc has): a few lines
  of LLVM IR around ``GOMP_parallel``. The calling thread runs chunk 0 itself; forking and joining
  costs a few microseconds, so even small kernels gain from a second core.
* ``python``: a persistent ``ThreadPoolExecutor`` whose workers call the body through ctypes
  (which releases the GIL). It needs nothing but costs tens of microseconds per loop.
  ``MLC_LAB_PARALLEL=python`` forces it.

``backend()`` says which one runs. The thread count is per calling thread: ``prepare(n)`` before a
compiled call sets it (the function's ``-num-cores``).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

from ..codegen.llvm_stmt import STATUS_OK, STATUS_RUNTIME_ERROR

_BODY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)
_HOOK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64)

# Per calling thread: its thread count and the last error a compiled call reported. Errors raised
# on other threads (OpenMP workers) land in _last_error too.
_state = threading.local()
_last_error = None
_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()
_hook = None
_native = None     # _OpenMP once loaded


def record_error(error) -> None:
    """Note an error of a compiled call (a bounds error's ``(buffer_id, index)``, an exception)
    for the caller to report, from whichever thread it happened on."""
    global _last_error
    _state.error = _last_error = error


def prepare(num_cores: int) -> None:
    """Before a compiled call: clear the error slot and run parallel loops on ``num_cores``."""
    global _last_error
    state = _state
    state.error = _last_error = None
    if getattr(state, "num_cores", None) != num_cores:
        state.num_cores = num_cores
        if _native is not None:
            _native.set_num_threads(num_cores)


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


def _parallel_for(body_address: int, extent: int, closure: int) -> int:
    try:
        if extent <= 0:
            return STATUS_OK
        body = _BODY(body_address)
        num_cores = getattr(_state, "num_cores", 1)
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

# -- OpenMP ---------------------------------------------------------------------------------------
_OPENMP_IR = r"""
%args = type { ptr, i64, ptr, i32 }
@mlc_chunk_hook = global ptr null
declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @omp_get_thread_num()
declare i32 @omp_get_num_threads()
declare i32 @omp_get_max_threads()

define internal void @mlc_parallel_worker(ptr %a) {
entry:
  %tid32 = call i32 @omp_get_thread_num()
  %n32 = call i32 @omp_get_num_threads()
  %tid = sext i32 %tid32 to i64
  %n = sext i32 %n32 to i64
  %body = load ptr, ptr %a
  %extent.p = getelementptr %args, ptr %a, i32 0, i32 1
  %extent = load i64, ptr %extent.p
  %closure.p = getelementptr %args, ptr %a, i32 0, i32 2
  %closure = load ptr, ptr %closure.p
  %lo.x = mul i64 %extent, %tid
  %lo = sdiv i64 %lo.x, %n
  %next = add i64 %tid, 1
  %hi.x = mul i64 %extent, %next
  %hi = sdiv i64 %hi.x, %n
  %nonempty = icmp slt i64 %lo, %hi
  br i1 %nonempty, label %check_hook, label %done
check_hook:
  %hook = load ptr, ptr @mlc_chunk_hook
  %has_hook = icmp ne ptr %hook, null
  br i1 %has_hook, label %call_hook, label %call_body
call_hook:
  %hook.status = call i32 %hook(i64 %lo, i64 %hi)
  %hook.ok = icmp eq i32 %hook.status, 0
  br i1 %hook.ok, label %call_body, label %record
call_body:
  %body.status = call i32 %body(i64 %lo, i64 %hi, ptr %closure)
  %body.ok = icmp eq i32 %body.status, 0
  br i1 %body.ok, label %done, label %record
record:
  %status = phi i32 [ %hook.status, %call_hook ], [ %body.status, %call_body ]
  %status.p = getelementptr %args, ptr %a, i32 0, i32 3
  %old = cmpxchg ptr %status.p, i32 0, i32 %status seq_cst seq_cst
  br label %done
done:
  ret void
}

define i32 @mlc_parallel_for(ptr %body, i64 %extent, ptr %closure) {
entry:
  %args = alloca %args
  %empty = icmp sle i64 %extent, 0
  br i1 %empty, label %nothing, label %run
nothing:
  ret i32 0
run:
  %max32 = call i32 @omp_get_max_threads()
  %max = sext i32 %max32 to i64
  %fewer = icmp slt i64 %extent, %max
  %n = select i1 %fewer, i64 %extent, i64 %max
  %n32 = trunc i64 %n to i32
  store ptr %body, ptr %args
  %extent.p = getelementptr %args, ptr %args, i32 0, i32 1
  store i64 %extent, ptr %extent.p
  %closure.p = getelementptr %args, ptr %args, i32 0, i32 2
  store ptr %closure, ptr %closure.p
  %status.p = getelementptr %args, ptr %args, i32 0, i32 3
  store i32 0, ptr %status.p
  call void @GOMP_parallel(ptr @mlc_parallel_worker, ptr %args, i32 %n32, i32 0)
  %status = load atomic i32, ptr %status.p seq_cst, align 4
  ret i32 %status
}
"""


def _libgomp_candidates() -> list[str]:
    found = ctypes.util.find_library("gomp")
    names = [found] if found else []
    for path in sys.path:   # the copies scikit-learn and torch wheels carry
        names += sorted(glob.glob(os.path.join(path, "scikit_learn.libs", "libgomp*.so*")))
        names += sorted(glob.glob(os.path.join(path, "torch", "lib", "libgomp*.so*")))
    return names


class _OpenMP:
    """The ``mlc_parallel_for`` above, JIT-compiled once against a loaded libgomp."""

    def __init__(self, library: str, machine):
        if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
            # Idle workers spin about 10 microseconds (not libgomp's default of up to 0.2 s)
            # before sleeping: enough for back-to-back kernels, and they leave the cores to numpy
            # and to other programs soon after. Read when libgomp loads.
            os.environ["GOMP_SPINCOUNT"] = "10000"
        llvm.load_library_permanently(library)
        self.library = library
        self._set_threads = ctypes.CDLL(library).omp_set_num_threads
        module = llvm.parse_assembly(_OPENMP_IR)
        module.verify()
        self.engine = llvm.create_mcjit_compiler(module, machine)
        self.engine.finalize_object()
        self.address = self.engine.get_function_address("mlc_parallel_for")
        self._hook_slot = ctypes.c_void_p.from_address(self.engine.get_global_value_address("mlc_chunk_hook"))

    def set_num_threads(self, n: int) -> None:
        self._set_threads(ctypes.c_int(n))

    def set_hook(self, callback) -> None:
        self._hook_slot.value = ctypes.cast(callback, ctypes.c_void_p).value if callback else None


def install(machine) -> str:
    """Register ``mlc_parallel_for`` with the JIT (called once, before any module is compiled):
    the OpenMP version when libgomp loads, else the thread pool. Returns the backend's name."""
    global _native
    if os.environ.get("MLC_LAB_PARALLEL", "").lower() != "python":
        for library in _libgomp_candidates():
            try:
                _native = _OpenMP(library, machine)
                break
            except (OSError, RuntimeError, AttributeError):
                continue
    address = _native.address if _native is not None else \
        ctypes.cast(_PYTHON_PARALLEL_FOR, ctypes.c_void_p).value
    llvm.add_symbol("mlc_parallel_for", address)
    if _hook is not None:
        set_chunk_hook(_hook)
    return backend()


# The least work (flops) for which a loop split over the cores beats one core: forking and
# joining costs about 1 microsecond with OpenMP and 0.1 ms with the thread pool.
MIN_PARALLEL_FLOPS = {"openmp": 5e4, "python": 5e7}


def backend() -> str:
    """``"openmp"`` or ``"python"``: what runs parallel loops in this process."""
    return "openmp" if _native is not None else "python"
