"""GPU lowering: a lowered PrimFunc whose loops are bound to ``blockIdx``/``threadIdx`` becomes
kernels a GPU launches, checked against the target's limits.

    program = split_host_device(lowered_func, Target("nvidia/a100"))
    for kernel in program.kernels:          # launched one after another, in this order
        kernel.name, kernel.grid, kernel.block, kernel.params, kernel.body

Each outermost thread-bound loop of the function starts one kernel. Inside it every loop bound
to a thread tag disappears: its variable becomes that tag's index (``threadIdx.x``, ...), and the
tag's extent becomes a launch dimension. Two loops bound to the same ``threadIdx`` tag, one
inside the other, are the same thread index (a cooperative fetch: each thread of the block
copies its share); they must have the same extent, as must every loop bound to one tag in one
kernel. ``shared`` allocations are one array per block, ``local`` ones one per thread, and a
barrier (``T.tvm_storage_sync("shared")``, ``__syncthreads()`` in CUDA) goes wherever threads
read shared memory other threads wrote, or overwrite what they read (``inject_sync``).

The host side of a GPU function only launches kernels: the function body must be a sequence of
kernels, with global scratch buffers allocated around them. A statement outside every kernel is
an error, because a GPU function's host part cannot touch device memory.

``GPUError`` names the rule broken and shows the function with the culprit underlined. The GPU
backends run this (and then ``inject_sync``) as passes of the lowering pipeline
(``device_passes``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..function import PrimFunc
from ..stmt_functor import StmtReplacer, and_all, free_buffers, free_vars, loads_in, substitute, uses_var
from .inject_sync import inject_sync

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
TAGS = BLOCK_TAGS + THREAD_TAGS


class GPUError(ValueError):
    """A GPU function breaks a rule of the execution model or a limit of the target."""

    def __init__(self, message: str, func: PrimFunc | None = None, node=None, rule: str = ""):
        shown = ""
        if func is not None and node is not None:
            try:
                text = func.script(underline=[node], name=func.name or "main")
                shown = "\n" + "\n".join("    " + line for line in text.splitlines())
            except Exception:   # the message alone still names the culprit
                shown = ""
        super().__init__(message + (f" ({rule})" if rule else "") + shown)
        self.rule, self.node = rule, node


@dataclass
class Kernel:
    """One kernel launch. ``body`` is flat lowered TIR in which the Vars of ``thread_vars`` (int32,
    keyed by tag) are the block and thread indices; ``params`` are the global buffers (flat) and
    scalar Vars it uses, in the function's parameter order, then scratch buffers."""
    name: str
    params: tuple
    grid: tuple
    block: tuple
    thread_vars: dict
    body: S.Stmt
    shared: tuple = ()       # Buffers allocated in "shared" scope: one per block
    local: tuple = ()        # Buffers allocated in "local" (or "warp", "wmma.*") scope: per thread

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def num_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def shared_bytes(self) -> int:
        return sum(_size(b) * _itemsize(b.dtype) for b in self.shared)


@dataclass
class DeviceProgram:
    """A GPU function: its lowered PrimFunc, the kernels it launches in order and the global
    scratch buffers (``scratch``) the host allocates for them."""
    name: str
    func: PrimFunc
    kernels: tuple
    scratch: tuple = field(default_factory=tuple)


def split_host_device(func: PrimFunc, target=None, name: str | None = None,
                      sync: bool = True) -> DeviceProgram:
    """Kernels of the lowered ``func``, checked against ``target`` (a cuda or cuda-sim Target;
    its max-threads-per-block and max-shared-memory-per-block). ``sync=False`` leaves out the
    barriers ``inject_sync`` would add (to show, e.g. in the simulator, the races they prevent)."""
    name = name or func.name or "main"
    body, scratch, on_chip = func.body, [], []
    while isinstance(body, S.Allocate):
        # global scratch is the host's to allocate; shared or local memory left outside the
        # kernels (lowering could not place it lower) belongs to each kernel that uses it
        (scratch if body.buffer.scope == "global" else on_chip).append(body.buffer)
        body = body.body
    stmts = list(body.seq) if isinstance(body, S.SeqStmt) else [body]
    _check_on_chip_used_once(func, name, stmts, on_chip)
    kernels = []
    for stmt in stmts:
        if not (isinstance(stmt, S.For) and stmt.kind == "thread_binding"):
            raise GPUError(_outside_kernel(stmt, name), func, stmt, "host code only launches kernels")
        used = {id(b) for b in free_buffers(stmt)}
        for buffer in on_chip:
            if id(buffer) in used:
                stmt = S.Allocate(buffer, stmt)
        kernel_name = f"{name}_kernel{len(kernels)}"
        kernels.append(_make_kernel(func, kernel_name, stmt, scratch))
    for kernel in kernels:
        check_limits(kernel, target, func)
    program = DeviceProgram(name, func, tuple(kernels), tuple(scratch))
    return with_barriers(program) if sync else program


def with_barriers(program: DeviceProgram) -> DeviceProgram:
    """``program`` with ``inject_sync``'s barriers in the body of every kernel."""
    kernels = tuple(replace(k, body=inject_sync(k.body, [k.thread_vars[t] for t in THREAD_TAGS
                                                         if t in k.thread_vars]))
                    for k in program.kernels)
    return replace(program, kernels=kernels)


def _check_on_chip_used_once(func, name: str, stmts: list, on_chip: list) -> None:
    """Shared and local memory live only while a block (a thread) of one kernel runs: a buffer
    there cannot carry values from one kernel to the next."""
    for buffer in on_chip:
        users = [k for k, stmt in enumerate(stmts)
                 if any(b is buffer for b in free_buffers(stmt))]
        if len(users) > 1:
            first, second = (f"{name}_kernel{k}" for k in users[:2])
            raise GPUError(f"{name}: buffer {buffer.name} in {buffer.scope} memory is used by "
                           f"{first} and {second}, but {buffer.scope} memory lives only while one "
                           "kernel's block runs: compute it under the same blockIdx loop as its "
                           "consumer (compute_at), or keep it in global memory",
                           func, stmts[users[1]], "on-chip memory within one kernel")


def _outside_kernel(stmt, name: str) -> str:
    if isinstance(stmt, S.For):
        return (f"{name}: loop {stmt.loop_var.name} is not bound to a GPU block or thread and is "
                "outside every kernel, where nothing may touch device memory: bind it (or an "
                "outer loop) with sch.bind(loop, \"blockIdx.x\") or \"threadIdx.x\"")
    touched = ", ".join(sorted({b.name for b in free_buffers(stmt)})) or "nothing"
    return (f"{name}: a statement outside every kernel touches device memory ({touched}): put it "
            "under a loop bound to blockIdx/threadIdx")


class _KernelBuilder:
    def __init__(self, func: PrimFunc, name: str):
        self.func, self.name = func, name
        self.vars = {tag: E.Var(tag, "int32") for tag in TAGS}
        self.extents: dict[str, tuple] = {}   # tag -> (extent, the first loop bound to it)
        self.shared, self.local = [], []
        self.stores: list = []                # (store to global/shared, thread tags around it)
        self.defined: list = []               # (let or loop variable, what its value depends on)
        self.conditions: list = []            # the conditions of the ifs around the statement visited

    def visit(self, stmt, bound: dict):
        """``stmt`` without thread loops; ``bound`` maps tags to the enclosing loops bound to them."""
        if isinstance(stmt, S.For) and stmt.kind == "thread_binding":
            return self.thread_loop(stmt, bound)
        if isinstance(stmt, S.SeqStmt):
            return S.SeqStmt(tuple(self.visit(s, bound) for s in stmt.seq))
        if isinstance(stmt, S.For):
            self.defined.append((stmt.loop_var, stmt.min + stmt.extent))
            return S.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, self.visit(stmt.body, bound),
                         stmt.thread_binding, stmt.annotations)
        if isinstance(stmt, S.IfThenElse):
            self.conditions.append(stmt.condition)
            other = self.visit(stmt.else_case, bound) if stmt.else_case is not None else None
            then = self.visit(stmt.then_case, bound)
            self.conditions.pop()
            return S.IfThenElse(stmt.condition, then, other)
        if isinstance(stmt, S.LetStmt):
            self.defined.append((stmt.var, stmt.value))
            return S.LetStmt(stmt.var, stmt.value, self.visit(stmt.body, bound))
        if isinstance(stmt, S.Allocate):
            self.allocation(stmt)
            return S.Allocate(stmt.buffer, self.visit(stmt.body, bound))
        if isinstance(stmt, S.BufferStore) and not _per_thread(stmt.buffer):
            self.stores.append((stmt, {t for t in bound if t in THREAD_TAGS}, tuple(self.conditions)))
        return stmt

    def one_thread_stores(self, body):
        """``body`` with each store to global or shared memory that all threads of a block would
        make alike done by one thread: a store outside some of the kernel's thread loops, or
        inside one whose index and value do not depend on its thread index (a copy every thread
        repeats). Made by every thread, the same element is written at once by all, and stores
        such as a reduction's ``B[i] = B[i] + x`` race. The interpreter runs such a store once
        (or repeats the same value), so the kernel makes it on thread index 0 of those axes
        (unless an if around it already chooses the threads of an axis)."""
        launched = [t for t in THREAD_TAGS if t in self.extents]
        varying = {t: self._depending_on(self.vars[t]) for t in launched}
        guards = {}
        for store, inside, conditions in self.stores:
            alike = [t for t in launched if not uses_var(conditions, varying[t])
                     and (t not in inside or _same_for_every_thread(store, varying[t]))]
            if alike:
                cond = and_all([E.EQ(self.vars[t], E.const(0, "int32")) for t in alike])
                guards[id(store)] = S.IfThenElse(cond, store, None)
        return StmtReplacer(guards).visit(body) if guards else body

    def _depending_on(self, index_var) -> list:
        """``index_var`` and the let and loop variables whose values depend on it."""
        found = [index_var]
        for var, value in self.defined:      # definitions come in program order
            if uses_var(value, found):
                found.append(var)
        return found

    def root(self, stmt):
        """The kernel's statement: its root thread loop, under the allocations moved into it."""
        if isinstance(stmt, S.Allocate):
            self.allocation(stmt)
            return S.Allocate(stmt.buffer, self.root(stmt.body))
        return self.visit(stmt, {})

    def allocation(self, alloc: S.Allocate) -> None:
        buffer = alloc.buffer
        if not all(isinstance(d, E.IntImm) for d in buffer.shape):
            raise GPUError(f"{self.name}: buffer {buffer.name} in {buffer.scope} memory has the "
                           f"symbolic shape {buffer.shape}; GPU allocations need constant sizes",
                           self.func, alloc, "constant allocation sizes")
        if buffer.scope.startswith("shared"):
            self.shared.append(buffer)
        elif _per_thread(buffer) or buffer.scope.startswith("wmma."):
            self.local.append(buffer)   # wmma fragments: registers of each thread of a warp
        else:
            raise GPUError(f"{self.name}: buffer {buffer.name} is allocated in {buffer.scope} memory "
                           "inside a kernel; a kernel allocates only 'shared' (per block) or 'local' "
                           "(per thread) memory", self.func, alloc, "kernel allocations")

    def thread_loop(self, loop: S.For, bound: dict):
        tag = loop.thread_binding or ""
        if tag not in TAGS:
            raise GPUError(f"{self.name}: loop {loop.loop_var.name} is bound to {tag!r}, which this "
                           f"GPU backend does not launch; use one of {', '.join(TAGS)}",
                           self.func, loop, "thread tags")
        if not isinstance(loop.extent, E.IntImm) or not isinstance(loop.min, E.IntImm):
            raise GPUError(f"{self.name}: loop {loop.loop_var.name} bound to {tag} has extent "
                           f"{loop.extent}; launch dimensions must be constants", self.func, loop,
                           "constant launch dimensions")
        if tag in bound and tag.startswith("blockIdx"):
            raise GPUError(f"{self.name}: loop {loop.loop_var.name} is bound to {tag} inside loop "
                           f"{bound[tag].loop_var.name}, which is bound to {tag} already; a block "
                           "index can be bound once per kernel", self.func, loop, "block bound twice")
        if tag.startswith("blockIdx"):
            inner = next((t for t in THREAD_TAGS if t in bound), None)
            if inner is not None:
                raise GPUError(f"{self.name}: loop {loop.loop_var.name} is bound to {tag} inside "
                               f"loop {bound[inner].loop_var.name} bound to {inner}; blocks contain "
                               "threads, so blockIdx loops go outside threadIdx loops",
                               self.func, loop, "blocks outside threads")
        extent = loop.extent.value
        if tag in self.extents and self.extents[tag][0] != extent:
            first = self.extents[tag][1]
            raise GPUError(f"{self.name}: loops {first.loop_var.name} and {loop.loop_var.name} are "
                           f"both bound to {tag} but have extents {self.extents[tag][0]} and "
                           f"{extent}; every loop bound to one tag in a kernel must have the same "
                           "extent (split them to match)", self.func, loop, "one extent per tag")
        self.extents.setdefault(tag, (extent, loop))
        index = self.vars[tag]
        value = index if loop.loop_var.dtype == "int32" else E.Cast(loop.loop_var.dtype, index)
        if loop.min.value:
            value = value + E.const(loop.min.value, loop.loop_var.dtype)
        body = substitute(loop.body, {loop.loop_var: value})
        return self.visit(body, {**bound, tag: loop})

    def dims(self, tags) -> tuple:
        return tuple(self.extents[t][0] if t in self.extents else 1 for t in tags)


def _make_kernel(func: PrimFunc, name: str, root: S.For, scratch: list) -> Kernel:
    builder = _KernelBuilder(func, name)
    body = builder.one_thread_stores(builder.root(root))
    used_buffers = {id(b) for b in free_buffers(body)}
    used_vars = {id(v) for v in free_vars(body, buffer_shapes=True)}
    params = [p for p in func.params
              if (isinstance(p, Buffer) and id(p) in used_buffers) or
              (isinstance(p, E.Var) and id(p) in used_vars)]
    params += [b for b in scratch if id(b) in used_buffers]
    thread_vars = {t: v for t, v in builder.vars.items() if t in builder.extents}
    known = {id(p) for p in params} | {id(v) for v in thread_vars.values()}
    stray = [v for v in free_vars(body, buffer_shapes=True) if id(v) not in known]
    if stray:
        raise GPUError(f"{name}: the kernel uses {', '.join(v.name for v in stray)}, which is "
                       "neither a parameter nor a block/thread index", func, root, "kernel inputs")
    return Kernel(name, tuple(params), builder.dims(BLOCK_TAGS), builder.dims(THREAD_TAGS),
                  thread_vars, body, tuple(builder.shared), tuple(builder.local))


def check_limits(kernel: Kernel, target, func: PrimFunc | None = None) -> None:
    """The target's per-block limits: threads, shared memory."""
    attrs = getattr(target, "attrs", None) or {}
    max_threads = attrs.get("max-threads-per-block") or 1024
    max_shared = attrs.get("max-shared-memory-per-block") or 48 * 1024
    model = attrs.get("model") or (target.kind.name if target is not None else "cuda")
    if kernel.threads_per_block > max_threads:
        raise GPUError(f"{kernel.name}: a block of {' x '.join(map(str, kernel.block))} = "
                       f"{kernel.threads_per_block} threads is more than the {max_threads} threads "
                       f"per block that {model} allows; bind smaller loops to threadIdx",
                       rule="threads per block")
    if kernel.shared_bytes > max_shared:
        parts = ", ".join(f"{b.name} {_size(b) * _itemsize(b.dtype)} B" for b in kernel.shared)
        raise GPUError(f"{kernel.name}: the block uses {kernel.shared_bytes} bytes of shared memory "
                       f"({parts}), more than the {max_shared} bytes per block that {model} "
                       "allows; use smaller tiles", rule="shared memory per block")


def uses_thread_index(node, kernel: Kernel) -> bool:
    """Whether ``node`` depends on a threadIdx of ``kernel`` (differs between threads of a block)."""
    return uses_var(node, [kernel.thread_vars[t] for t in THREAD_TAGS if t in kernel.thread_vars])


def _same_for_every_thread(store: S.BufferStore, varying: list) -> bool:
    """The store's index and value are the same in every thread of one axis: they use none of
    ``varying`` and read no per-thread (local) memory; an index read from memory counts as
    differing."""
    if uses_var(store.indices, varying) or uses_var(store.value, varying):
        return False
    if any(loads_in(i) for i in store.indices):
        return False
    return not any(_per_thread(load.buffer) for load in loads_in(store.value))


def _per_thread(buffer: Buffer) -> bool:
    return buffer.scope.startswith("local") or buffer.scope == "warp"


def _size(buffer: Buffer) -> int:
    size = 1
    for dim in buffer.shape:
        size *= int(dim.value)
    return size


def _itemsize(dtype: str) -> int:
    from .. import dtype as dt
    return max(8, dt.bits(dtype)) * dt.lanes(dtype) // 8
