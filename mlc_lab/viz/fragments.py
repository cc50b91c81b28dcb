"""Tensor-core fragment layouts: which lane of a warp holds which element of an
``mma.sync.m16n8k16`` operand (the layouts are in ``runtime.cuda_sim.mma_layout``).

    fig = fragment_layout("A")            # the 16 x 16 A tile, each cell "lane:element"
    fig = fragment_layout(("A", "B", "C"))

Cells are coloured by lane (the 8 lanes of one ``group`` in shades of one hue family), so the
picture shows at a glance that a lane's elements come in pairs (a ``half2`` register) and that
the four quarters of A are one register each.
"""
from __future__ import annotations

from ..runtime.cuda_sim.mma_layout import SHAPES, owner_grid

_TITLES = {"A": "A (16 x 16, row)", "B": "B (16 x 8, k x n, col)", "C": "C / D (16 x 8)"}


def fragment_layout(operands=("A", "B", "C"), ax=None, labels: bool = True):
    """A matplotlib Figure drawing the layout of each of ``operands`` ("A", "B", "C" or a
    sequence of them); with ``ax`` (one operand) it draws into that Axes and returns its Figure."""
    import matplotlib.pyplot as plt
    names = [operands] if isinstance(operands, str) else list(operands)
    for name in names:
        if name not in SHAPES:
            raise ValueError(f"fragment_layout: the operands are 'A', 'B' and 'C', got {name!r}")
    if ax is not None:
        if len(names) != 1:
            raise ValueError("fragment_layout: ax= draws one operand")
        axes = [ax]
        fig = ax.figure
    else:
        widths = [SHAPES[n][1] for n in names]
        fig, axes = plt.subplots(1, len(names), figsize=(0.55 * sum(widths) + 1.5, 7.5),
                                 gridspec_kw={"width_ratios": widths}, squeeze=False)
        axes = list(axes[0])
    cmap = plt.get_cmap("tab20b")
    for name, axis in zip(names, axes):
        lanes, slots = owner_grid(name)
        rows, cols, _ = SHAPES[name]
        axis.imshow(lanes % 20, cmap=cmap, vmin=0, vmax=19, aspect="equal")
        if labels:
            for i in range(rows):
                for j in range(cols):
                    axis.text(j, i, f"{lanes[i, j]}:{slots[i, j]}", ha="center", va="center",
                              fontsize=6, color="white")
        axis.set_title(_TITLES[name])
        axis.set_xticks(range(cols))
        axis.set_yticks(range(rows))
        axis.tick_params(labelsize=7)
    fig.suptitle("mma.sync.m16n8k16: lane:element holding each entry")
    return fig


__all__ = ["fragment_layout"]
