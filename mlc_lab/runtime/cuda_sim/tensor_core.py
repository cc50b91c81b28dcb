"""Tensor-core instructions on the simulator: the ``wmma`` fragment API, run one warp at a time.

A wmma instruction is *warp-wide*: the 32 threads of a warp execute it together, on fragments
that belong to the warp as a whole (on a GPU each thread holds a slice in its registers, in a
layout the hardware does not document). So the simulator keeps a fragment as the warp's logical
tile: the ``m x k`` A operand, the ``k x n`` B operand or the ``m x n`` accumulator, whatever
layout the memory it was loaded from had.

* ``tvm_fill_fragment(frag, m, n, k, index, value)`` sets every element of an accumulator tile;
* ``tvm_load_matrix_sync(frag, m, n, k, index, ptr, ldm, layout)`` reads a tile from shared or
  global memory starting at ``ptr``, row ``r`` at ``ptr + r * ldm`` ("row_major") or column
  ``c`` at ``ptr + c * ldm`` ("col_major");
* ``tvm_mma_sync(d, di, a, ai, b, bi, c, ci)``: ``D = A @ B + C``;
* ``tvm_store_matrix_sync(frag, m, n, k, index, ptr, ldm, layout)`` writes an accumulator back.

A fragment is named by where it starts in its fragment buffer (the element offset of the
pointer ``frag``); the ``index`` argument is not used. Loads and stores go through the same
bounds checks, counters and race detection as other accesses: element ``e`` of the tile (row
by row) is accessed by lane ``e % 32`` of the warp, one warp-wide request per 32 elements.

Arithmetic is as on the hardware: float16 products are exact in float32 (and int8 products in
int32); the ``k`` products of one output are summed exactly (in float64) and rounded once to
float32 before the accumulator is added, in float32. A float16 accumulator is rounded to float16.
"""
from __future__ import annotations

import numpy as np

from ...tir import expr as E
from ...tir.buffer import BUFFER_DATA
from ..interpreter.expr import _poison, np_dtype
from .errors import SimulatorError
from .memory import buffer_size

WARP = 32
WMMA_OPS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync")
# (m, n, k) the hardware's wmma API offers for 16-bit operands
WMMA_SHAPES = ((16, 16, 16), (32, 8, 16), (8, 32, 16))


class WarpDivergenceError(SimulatorError):
    """A warp-wide instruction (wmma, mma.sync, ldmatrix) ran with only some lanes of a warp, or
    the lanes of a warp disagreed on one of its warp-uniform arguments."""


class FragmentError(SimulatorError):
    """A fragment was used in a way no GPU could: read before any instruction wrote it, read as
    another shape, accessed element by element, or placed outside its buffer."""


class FragmentMemory:
    """The wmma fragments of one buffer, for every warp of a batch: ``tiles`` maps a fragment's
    start (element offset in the buffer) to its tiles, an array ``(warps, rows, cols)``."""

    scope = "fragment"

    def __init__(self, buffer, lanes):
        self.buffer, self.name, self.size = buffer, buffer.name, buffer_size(buffer)
        self.dtype = np_dtype(buffer.dtype)
        self.warps = -(-lanes.size // WARP)
        self.tiles: dict = {}

    def kind(self) -> str:
        return self.buffer.scope.partition(".")[2]   # matrix_a, matrix_b or accumulator


def calls_extern(call, names) -> bool:
    """``call`` is a ``T.call_extern`` of one of ``names``."""
    return (isinstance(call, E.Call) and call.op == "call_extern" and call.args
            and isinstance(call.args[0], E.StringImm) and call.args[0].value in names)


def is_tensor_op(call) -> bool:
    return calls_extern(call, WMMA_OPS)


def run_tensor_op(machine, call, mask) -> None:
    """Run the wmma instruction ``call`` for the warps of ``mask``."""
    name, args = call.args[0].value, call.args[1:]
    op = _Op(machine, name, mask)
    if op.warps.size == 0:
        return
    if name == "tvm_fill_fragment":
        frag, (m, n, k) = op.fragment(args[0]), op.shape(args[1:4])
        value = op.uniform(args[5], "value")
        op.check_fragment(frag, "accumulator")
        op.write(frag, args[0], np.broadcast_to(value.astype(frag.dtype)[:, None, None],
                                                 (op.warps.size, m, n)))
    elif name == "tvm_load_matrix_sync":
        frag, (m, n, k) = op.fragment(args[0]), op.shape(args[1:4])
        rows, cols = {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}[frag.kind()]
        tile = op.memory_tile(args[5], args[6], args[7], rows, cols, write=None)
        op.write(frag, args[0], tile.astype(frag.dtype))
    elif name == "tvm_store_matrix_sync":
        frag, (m, n, k) = op.fragment(args[0]), op.shape(args[1:4])
        op.check_fragment(frag, "accumulator")
        tile = op.read(frag, args[0], m, n)
        op.memory_tile(args[5], args[6], args[7], m, n, write=tile)
    else:   # tvm_mma_sync(d, di, a, ai, b, bi, c, ci)
        d, a, b, c = (op.fragment(args[i]) for i in (0, 2, 4, 6))
        for frag, kind in ((d, "accumulator"), (a, "matrix_a"), (b, "matrix_b"), (c, "accumulator")):
            op.check_fragment(frag, kind)
        a_tile = op.read(a, args[2])
        b_tile = op.read(b, args[4], a_tile.shape[2])
        m, k, n = a_tile.shape[1], a_tile.shape[2], b_tile.shape[2]
        c_tile = op.read(c, args[6], m, n)
        op.write(d, args[0], mma(a_tile, b_tile, c_tile, d.dtype))
        op.count_mma(m, n, k)


def mma(a, b, c, out_dtype) -> np.ndarray:
    """``a @ b + c`` (batched over warps) as tensor cores compute it (see the module docstring)."""
    out_dtype = np.dtype(out_dtype)
    if out_dtype.kind in "iu":
        return (np.matmul(a.astype(np.int64), b.astype(np.int64)) + c).astype(out_dtype)
    products = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    return (products + c.astype(np.float32)).astype(out_dtype)


class _Op:
    """One warp-wide instruction: the warps that run it and the checks on its arguments."""

    def __init__(self, machine, name, mask):
        self.machine, self.name, self.mask = machine, name, mask
        lanes = machine.lanes
        self.kernel = lanes.kernel.name
        if lanes.threads % WARP:
            active = np.ones(lanes.size, bool) if mask is True else np.broadcast_to(mask, (lanes.size,))
            if active.any():
                raise WarpDivergenceError(
                    f"{self.kernel}: {name} is a warp-wide instruction, but a block has "
                    f"{lanes.threads} threads, so its last warp has only {lanes.threads % WARP} of "
                    "the 32 lanes; use a multiple of 32 threads per block", machine._shown())
        self.lane_count = lanes.size
        if mask is True:
            self.warps = np.arange(lanes.size // WARP)
        else:
            per_warp = np.broadcast_to(mask, (lanes.size,)).reshape(-1, WARP)
            some, every = per_warp.any(axis=1), per_warp.all(axis=1)
            split = np.flatnonzero(some & ~every)
            if split.size:
                warp = int(split[0])
                inside = np.flatnonzero(per_warp[warp])
                outside = np.flatnonzero(~per_warp[warp])
                thread, block = lanes.where(warp * WARP)
                raise WarpDivergenceError(
                    f"{self.kernel}: {name} is a warp-wide instruction that all 32 lanes of a warp "
                    f"must execute together, but in the warp starting at thread {thread} of block "
                    f"{block} lanes {_lanes_text(inside)} execute it and lanes "
                    f"{_lanes_text(outside)} do not (an if or loop bound that depends on "
                    "threadIdx.x splits the warp)", machine._shown(), thread=thread, block=block)
            self.warps = np.flatnonzero(every)

    # -- arguments --------------------------------------------------------------------------
    def uniform(self, e, what: str) -> np.ndarray:
        """``e`` per active warp (all lanes of a warp must agree)."""
        value = np.asarray(self.machine.ev.eval(e, self.mask))
        if value.ndim == 0:
            return np.broadcast_to(value, (self.warps.size,))
        per_lane = np.broadcast_to(value, value.shape[:-1] + (self.lane_count,))
        if per_lane.ndim != 1:
            raise SimulatorError(f"{self.kernel}: {self.name}: the {what} is a vector",
                                 self.machine._shown())
        rows = per_lane.reshape(-1, WARP)[self.warps]
        differ = np.flatnonzero((rows != rows[:, :1]).any(axis=1))
        if differ.size:
            warp = int(self.warps[differ[0]])
            thread, block = self.machine.lanes.where(warp * WARP)
            values = sorted(set(rows[differ[0]].tolist()))[:4]
            raise WarpDivergenceError(
                f"{self.kernel}: {self.name}: the lanes of the warp starting at thread {thread} of "
                f"block {block} disagree on the {what} ({', '.join(map(str, values))}, ...); a "
                "warp-wide instruction takes one value for the whole warp", self.machine._shown(),
                thread=thread, block=block)
        return rows[:, 0]

    def per_lane(self, e) -> np.ndarray:
        """``e`` for every lane of the batch, shape (lanes,) (masked-off lanes: any value)."""
        value = np.asarray(self.machine.ev.eval(e, self.mask))
        if value.ndim > 1:
            raise SimulatorError(f"{self.kernel}: {self.name}: an offset is a vector",
                                 self.machine._shown())
        return np.broadcast_to(value, (self.lane_count,)).astype(np.int64)

    def pointer_lanes(self, e):
        """(buffer, per-lane element offset) of ``A.data`` (or ``T.tvm_access_ptr`` of it)."""
        if isinstance(e, E.Call) and e.op == "call_extern" and e.args[0].value == "tvm_access_ptr":
            buffer, offset = self.pointer_lanes(e.args[2])
            return buffer, offset + self.per_lane(e.args[3])
        if not (isinstance(e, E.Call) and e.op == BUFFER_DATA):
            raise SimulatorError(f"{self.kernel}: {self.name} takes a buffer's address (A.data), "
                                 f"got {e}", self.machine._shown())
        load = e.args[0]
        return load.buffer, self.per_lane(load.indices[0])

    def lane_mask(self) -> np.ndarray:
        if self.mask is True:
            return np.ones(self.lane_count, bool)
        return np.broadcast_to(self.mask, (self.lane_count,))

    def shape(self, args) -> tuple:
        shape = tuple(int(a.value) if isinstance(a, E.IntImm) else -1 for a in args)
        if shape not in WMMA_SHAPES and not (shape == (8, 8, 32)):
            raise SimulatorError(f"{self.kernel}: {self.name} with the shape m, n, k = {shape}; the "
                                 f"wmma shapes are {', '.join('x'.join(map(str, s)) for s in WMMA_SHAPES)}",
                                 self.machine._shown())
        return shape

    def pointer(self, e):
        """(buffer, per-warp element offset) of ``A.data`` (or ``T.tvm_access_ptr`` of it)."""
        extra = None
        if isinstance(e, E.Call) and e.op == "call_extern" and e.args[0].value == "tvm_access_ptr":
            e, extra = e.args[2], e.args[3]
        if not (isinstance(e, E.Call) and e.op == BUFFER_DATA):
            raise SimulatorError(f"{self.kernel}: {self.name} takes a buffer's address (A.data), "
                                 f"got {e}", self.machine._shown())
        load = e.args[0]
        offset = self.uniform(load.indices[0], f"address in {load.buffer.name}")
        if extra is not None:
            offset = offset + self.uniform(extra, "pointer offset")
        return load.buffer, offset.astype(np.int64)

    def fragment(self, e) -> FragmentMemory:
        buffer, _ = self.pointer(e)
        memory = self.machine.memory(buffer)
        if not isinstance(memory, FragmentMemory):
            raise FragmentError(f"{self.kernel}: {self.name} takes a fragment (a buffer in a wmma "
                                f"scope), but {buffer.name} is in {buffer.scope} memory",
                                self.machine._shown())
        return memory

    def check_fragment(self, frag, kind: str) -> None:
        if frag.kind() != kind:
            raise FragmentError(f"{self.kernel}: {self.name} needs a wmma.{kind} fragment, but "
                                f"{frag.name} is in {frag.buffer.scope}", self.machine._shown())

    # -- fragments ---------------------------------------------------------------------------
    def write(self, frag, pointer, tiles) -> None:
        _, offsets = self.pointer(pointer)
        rows, cols = tiles.shape[1:]
        for start in np.unique(offsets):
            self._check_inside(frag, int(start), rows * cols)
            store = frag.tiles.get(int(start))
            if store is None or store.shape[1:] != (rows, cols):
                store = frag.tiles[int(start)] = np.full((frag.warps, rows, cols), _poison(frag.dtype),
                                                         frag.dtype)
            chosen = offsets == start
            store[self.warps[chosen]] = tiles[chosen]

    def read(self, frag, pointer, rows=None, cols=None) -> np.ndarray:
        _, offsets = self.pointer(pointer)
        out = None
        for start in np.unique(offsets):
            store = frag.tiles.get(int(start))
            if store is None:
                raise FragmentError(f"{self.kernel}: {self.name} reads the fragment at element "
                                    f"{int(start)} of {frag.name}, which no wmma instruction has "
                                    "filled (fill_fragment, load_matrix_sync or mma_sync)",
                                    self.machine._shown(), buffer=frag.name, index=int(start))
            if rows is not None and store.shape[1] != rows or cols is not None and store.shape[2] != cols:
                raise FragmentError(f"{self.kernel}: {self.name} reads the {store.shape[1]}x"
                                    f"{store.shape[2]} fragment at element {int(start)} of "
                                    f"{frag.name} as a {rows}x{cols} one", self.machine._shown())
            if out is None:
                out = np.empty((self.warps.size,) + store.shape[1:], store.dtype)
            chosen = offsets == start
            out[chosen] = store[self.warps[chosen]]
        return out

    def _check_inside(self, frag, start: int, elements: int) -> None:
        if start < 0 or start + elements > frag.size:
            raise FragmentError(f"{self.kernel}: {self.name}: a {elements}-element fragment at "
                                f"element {start} of {frag.name} does not fit in its {frag.size} "
                                "elements", self.machine._shown(), buffer=frag.name, index=start)

    # -- memory ------------------------------------------------------------------------------
    def memory_tile(self, pointer, ldm_e, layout_e, rows, cols, write):
        """Read (``write`` None) or write the ``rows x cols`` tile at ``pointer`` in memory."""
        buffer, base = self.pointer(pointer)
        ldm = self.uniform(ldm_e, "leading dimension").astype(np.int64)
        layout = layout_e.value if isinstance(layout_e, E.StringImm) else None
        if layout not in ("row_major", "col_major"):
            raise SimulatorError(f"{self.kernel}: {self.name}: the layout is \"row_major\" or "
                                 f"\"col_major\", got {layout_e}", self.machine._shown())
        r, c = np.divmod(np.arange(rows * cols), cols)
        major, minor = (r, c) if layout == "row_major" else (c, r)
        per_warp = base[:, None] + major[None, :] * ldm[:, None] + minor[None, :]   # (warps, E)
        return self.access(buffer, per_warp, rows, cols, write)

    def access(self, buffer, per_warp, rows, cols, write):
        """Elements ``per_warp`` (warps, E) of ``buffer``, through the machine's checks."""
        machine = self.machine
        memory = machine.memory(buffer)
        if isinstance(memory, FragmentMemory) or memory.scope == "local":
            raise SimulatorError(f"{self.kernel}: {self.name} moves tiles between fragments and "
                                 f"shared or global memory, not {buffer.scope} memory "
                                 f"({buffer.name})", machine._shown())
        slots = per_warp.shape[1] // WARP
        all_warps = np.zeros((self.lane_count // WARP, per_warp.shape[1]), np.int64)
        all_warps[self.warps] = per_warp
        position = all_warps.reshape(-1, slots, WARP).transpose(1, 0, 2).reshape(slots, -1)
        mask = self.mask if self.mask is True else np.broadcast_to(self.mask, (self.lane_count,))
        verb = "writes" if write is not None else "reads"
        position = machine.checked(memory, position, mask, verb)
        if machine.counters is not None:
            machine.count(memory, position, mask, None, write is not None, 1.0)
        races = machine.races if memory.scope == "shared" else None
        if write is None:
            if races is not None:
                races.read(memory, position, mask, machine.stmt)
            values = memory.load(position).reshape(slots, -1, WARP).transpose(1, 0, 2)
            return values.reshape(-1, rows, cols)[self.warps]
        if races is not None:
            races.write(memory, position, mask, machine.stmt)
        values = np.zeros((self.lane_count // WARP, rows * cols), memory.flat.dtype)
        values[self.warps] = write.reshape(self.warps.size, -1).astype(memory.flat.dtype)
        memory.store(position, values.reshape(-1, slots, WARP).transpose(1, 0, 2).reshape(slots, -1),
                     mask)
        return None

    def count_mma(self, m, n, k) -> None:
        counters = self.machine.counters
        if counters is not None:
            counters.tensor_instructions += self.warps.size
            counters.tensor_flops += 2 * m * n * k * self.warps.size


def _lanes_text(lanes) -> str:
    lanes = [int(x) for x in lanes]
    runs, start = [], lanes[0]
    for prev, cur in zip(lanes, lanes[1:] + [None]):
        if cur != prev + 1 if cur is not None else True:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return ", ".join(runs)
