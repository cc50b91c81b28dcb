"""The warp-level PTX tensor-core instructions on the simulator, on per-lane registers.

Unlike wmma, these instructions name each lane's registers: every thread passes its own local
array and offset, and the instruction moves data *between* the lanes of a warp in the layouts the
PTX ISA documents (``mma_layout``). The simulator gathers the fragments from the 32 lanes, does
the arithmetic once per warp, and scatters the result back, so a kernel that places its data in
another layout gets other numbers, as on a GPU.

* ``ptx_ldmatrix(trans, num, ".b16", local.data, local_offset, smem.data, smem_offset)``: ``num``
  (1, 2 or 4) 8 x 8 matrices of 16-bit elements from shared memory. Lanes ``8q .. 8q + 7`` give
  the addresses (``smem_offset``, per lane) of the 8 rows of matrix ``q``; lane ``t`` receives, in
  its elements ``local_offset + 2q`` and ``+ 2q + 1``, row ``t // 4``, columns ``2 (t % 4)`` and
  ``2 (t % 4) + 1`` of matrix ``q`` (of its transpose with ``trans``).
* ``ptx_mma("m16n8k16", "row", "col", "fp16", "fp16", "fp32", a.data, a_offset, b.data, b_offset,
  c.data, c_offset, saturate)``: ``D = A @ B + C`` with each lane's 8 A, 4 B and 4 C elements at
  its offsets; D replaces C. Float16 inputs with a float32 (or float16) accumulator.

Arithmetic follows ``tensor_core.mma``. All 32 lanes of a warp must execute either instruction.
"""
from __future__ import annotations

import numpy as np

from ...tir import expr as E
from .errors import SimulatorError
from .memory import LocalMemory
from .mma_layout import WARP, fragment_map
from .tensor_core import _Op, calls_extern, mma

PTX_OPS = ("ptx_ldmatrix", "ptx_mma")
_DTYPES = {"fp16": np.float16, "fp32": np.float32}


def is_ptx_op(call) -> bool:
    return calls_extern(call, PTX_OPS)


def run_ptx_op(machine, call, mask) -> None:
    name, args = call.args[0].value, call.args[1:]
    op = _Op(machine, name, mask)
    if op.warps.size == 0:
        return
    if name == "ptx_ldmatrix":
        _ldmatrix(op, args)
    else:
        _mma(op, args)


def _const(op, e, what):
    if isinstance(e, E.StringImm):
        return e.value
    if isinstance(e, E.IntImm):
        return int(e.value)
    raise SimulatorError(f"{op.kernel}: {op.name}: the {what} must be a constant, got {e}",
                         op.machine._shown())


def _registers(op, pointer, offset_e):
    """(local memory, per-lane offsets (lanes,)) of a lane's register array argument."""
    buffer, base = op.pointer_lanes(pointer)
    memory = op.machine.memory(buffer)
    if not isinstance(memory, LocalMemory):
        raise SimulatorError(f"{op.kernel}: {op.name} works on each thread's registers (a local "
                             f"or warp buffer), but {buffer.name} is in {buffer.scope} memory",
                             op.machine._shown())
    return memory, base + op.per_lane(offset_e)


def _local_positions(op, memory, offsets, count):
    """Positions (count, lanes) of ``count`` elements from each lane's offset, bounds-checked."""
    position = offsets[None, :] + np.arange(count)[:, None]
    return op.machine.checked(memory, position, op.lane_mask(), "accesses")


def _ldmatrix(op, args):
    trans, num, kind = (_const(op, args[i], w) for i, w in ((0, "trans flag"), (1, "count"),
                                                              (2, "type")))
    if num not in (1, 2, 4) or kind != ".b16":
        raise SimulatorError(f"{op.kernel}: ptx_ldmatrix loads 1, 2 or 4 matrices of .b16, got "
                             f"{num} of {kind}", op.machine._shown())
    local, local_off = _registers(op, args[3], args[4])
    buffer, base = op.pointer_lanes(args[5])
    smem = op.machine.memory(buffer)
    if smem.scope != "shared":
        raise SimulatorError(f"{op.kernel}: ptx_ldmatrix reads shared memory, but {buffer.name} is "
                             f"in {buffer.scope} memory", op.machine._shown())
    rows = base + op.per_lane(args[6])                    # each lane's row address
    lanes = op.lane_count
    giving = (np.arange(lanes) % WARP) < 8 * num          # the lanes whose addresses count
    mask = op.lane_mask() & giving
    position = rows[None, :] + np.arange(8)[:, None]      # (8, lanes): each giving lane's row
    position = op.machine.checked(smem, position, mask, "reads")
    if op.machine.counters is not None:
        op.machine.count(smem, position, mask, None, False, 1.0)
    if op.machine.races is not None:
        op.machine.races.read(smem, position, mask, op.machine.stmt)
    values = smem.load(position)                          # (8 columns, lanes)
    # matrix q of warp w: rows from lanes 8q..8q+7 -> (warps, num, 8 rows, 8 cols)
    per_warp = values.T.reshape(-1, WARP, 8)[:, :8 * num].reshape(-1, num, 8, 8)
    if trans:
        per_warp = per_warp.transpose(0, 1, 3, 2)
    t = np.arange(WARP)
    received = np.empty((per_warp.shape[0], WARP, 2 * num), values.dtype)
    for q in range(num):
        for h in range(2):
            received[:, :, 2 * q + h] = per_warp[:, q, t // 4, 2 * (t % 4) + h]
    target = _local_positions(op, local, local_off, 2 * num)
    written = received.transpose(2, 0, 1).reshape(2 * num, lanes)
    local.store(target, written.astype(local.flat.dtype), op.lane_mask())


def _mma(op, args):
    shape, a_layout, b_layout, a_type, b_type, c_type = (_const(op, args[i], "mma form")
                                                         for i in range(6))
    if (shape, a_layout, b_layout) != ("m16n8k16", "row", "col") or a_type != "fp16" or \
            b_type != "fp16" or c_type not in ("fp16", "fp32"):
        raise SimulatorError(f"{op.kernel}: ptx_mma runs m16n8k16.row.col with fp16 inputs and an "
                             f"fp16 or fp32 accumulator, got {shape}.{a_layout}.{b_layout} "
                             f"{a_type}, {b_type} -> {c_type}", op.machine._shown())
    operands = {}
    for name, (p, o), count in (("A", (6, 7), 8), ("B", (8, 9), 4), ("C", (10, 11), 4)):
        memory, offsets = _registers(op, args[p], args[o])
        position = _local_positions(op, memory, offsets, count)
        operands[name] = (memory, position, memory.load(position))   # (count, lanes)
    tiles = {n: _gather(n, operands[n][2], op) for n in "ABC"}
    d = mma(tiles["A"], tiles["B"], tiles["C"], _DTYPES[c_type])
    memory, position, _ = operands["C"]
    memory.store(position, _scatter("C", d, op).astype(memory.flat.dtype), op.lane_mask())
    op.count_mma(16, 8, 16)


def _gather(operand, values, op):
    """The tiles (warps, rows, cols) of ``operand`` from each lane's elements (count, lanes)."""
    rows, cols = fragment_map(operand)
    per_lane = values.T.reshape(-1, WARP, values.shape[0])[op.warps]     # (warps, 32, count)
    tile = np.zeros((per_lane.shape[0], rows.max() + 1, cols.max() + 1), per_lane.dtype)
    tile[:, rows, cols] = per_lane
    return tile


def _scatter(operand, tiles, op):
    rows, cols = fragment_map(operand)
    per_lane = tiles[:, rows, cols]                                        # (warps, 32, count)
    out = np.zeros((op.lane_count // WARP, WARP, per_lane.shape[2]), tiles.dtype)
    out[op.warps] = per_lane
    return out.reshape(op.lane_count, -1).T
