"""Which lane of a warp holds which element of an ``mma.sync.m16n8k16`` operand (16-bit inputs,
32-bit accumulator), as the PTX ISA documents the fragments ("Matrix Fragments for mma.m16n8k16
with floating point type"). With ``group = lane // 4`` and ``pair = lane % 4``:

* A (16 x 16, row-major), 8 halves per lane (4 registers of ``half2``): element ``r`` of a lane
  sits at row ``group + 8 * (r // 2 % 2)``, column ``2 * pair + r % 2 + 8 * (r // 4)``;
* B (16 x 8, k by n, "col"), 4 halves per lane (2 ``half2``): row ``2 * pair + r % 2 + 8 * (r // 2)``,
  column ``group``;
* C and D (16 x 8), 4 floats per lane: row ``group + 8 * (r // 2)``, column ``2 * pair + r % 2``.

>>> a_position(5, 3)        # lane 5 (group 1, pair 1), its 4th element
(9, 3)
>>> [c_position(lane, 0) for lane in (0, 1, 4)]
[(0, 0), (0, 2), (1, 0)]
"""
from __future__ import annotations

import numpy as np

WARP = 32
SHAPES = {"A": (16, 16, 8), "B": (16, 8, 4), "C": (16, 8, 4)}   # rows, columns, elements per lane


def a_position(lane: int, r: int) -> tuple:
    group, pair = lane // 4, lane % 4
    return group + 8 * (r // 2 % 2), 2 * pair + r % 2 + 8 * (r // 4)


def b_position(lane: int, r: int) -> tuple:
    group, pair = lane // 4, lane % 4
    return 2 * pair + r % 2 + 8 * (r // 2), group


def c_position(lane: int, r: int) -> tuple:
    group, pair = lane // 4, lane % 4
    return group + 8 * (r // 2), 2 * pair + r % 2


POSITION = {"A": a_position, "B": b_position, "C": c_position}


def fragment_map(operand: str) -> tuple:
    """(rows, cols) index arrays of shape (32, elements per lane): where each lane's elements of
    ``operand`` ("A", "B" or "C") lie in the tile."""
    _, _, per_lane = SHAPES[operand]
    where = np.array([[POSITION[operand](lane, r) for r in range(per_lane)] for lane in range(WARP)])
    return where[..., 0], where[..., 1]


def owner_grid(operand: str) -> tuple:
    """(lane, element) arrays shaped like the tile: who holds each element of ``operand``."""
    rows, cols, per_lane = SHAPES[operand]
    lane_of, slot_of = np.zeros((rows, cols), int), np.zeros((rows, cols), int)
    r_idx, c_idx = fragment_map(operand)
    for lane in range(WARP):
        for r in range(per_lane):
            lane_of[r_idx[lane, r], c_idx[lane, r]] = lane
            slot_of[r_idx[lane, r], c_idx[lane, r]] = r
    return lane_of, slot_of
