"""Pictures of the GPU execution model, drawn with matplotlib from plain arrays (the cuda-sim
simulator's trace gives them; any array of the right shape will do).

    draw_thread_grid(block_of, thread_of)     which block and thread computed each output element
    draw_warp_access(addresses, "global")     one warp's accesses against 32-byte memory sectors
    draw_warp_access(addresses, "shared")     ... against the 32 banks of shared memory
    draw_attention_tiles(n, tile, query_tile) what a flash-attention block keeps in shared memory

``sectors_and_wavefronts`` does the counting the pictures show, so a picture and the numbers
under it cannot disagree.
"""
from __future__ import annotations

import numpy as np

WARP = 32
SECTOR_BYTES = 32
BANKS = 32
BANK_BYTES = 4


def sectors_and_wavefronts(byte_addresses, kind: str = "global") -> int:
    """Global: how many 32-byte sectors the active threads' addresses touch. Shared: how many
    wavefronts the access needs (1 without bank conflicts; threads reading one word share it).
    Inactive threads are marked by a negative address."""
    addresses = np.asarray(byte_addresses, dtype=np.int64)
    active = addresses[addresses >= 0]
    if active.size == 0:
        return 0
    if kind == "global":
        return int(np.unique(active // SECTOR_BYTES).size)
    if kind == "shared":
        words = np.unique(active // BANK_BYTES)
        return int(np.bincount(words % BANKS, minlength=BANKS).max())
    raise ValueError(f"kind must be 'global' or 'shared', got {kind!r}")


def draw_thread_grid(block_of, thread_of, ax=None, title: str | None = None, numbers: bool | None = None):
    """Colour each element of an output (1-D or 2-D arrays ``block_of`` and ``thread_of`` of its
    shape: the linear block and thread index that wrote it, -1 for none) by its block, lighter
    for higher thread numbers, and print the thread number in small grids. Black lines part the
    blocks; where threads write several elements each, white lines part the threads' regions.
    Returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import hsv_to_rgb
    block_of, thread_of = np.atleast_2d(block_of), np.atleast_2d(thread_of)
    if block_of.shape != thread_of.shape:
        raise ValueError(f"block_of {block_of.shape} and thread_of {thread_of.shape} must have one shape")
    if ax is None:
        rows, cols = block_of.shape
        _, ax = plt.subplots(figsize=(min(10, 1 + cols * 0.35), min(6, 1 + rows * 0.35 + 0.6)))
    threads = max(int(thread_of.max()) + 1, 1)
    hue = (block_of % 10) / 10.0
    value = 0.95 - 0.45 * thread_of / max(threads - 1, 1)
    rgb = hsv_to_rgb(np.stack([hue, np.full(hue.shape, 0.55), value], axis=-1))
    rgb[block_of < 0] = 1.0
    ax.imshow(rgb, interpolation="nearest", aspect="auto")
    if numbers is None:
        numbers = block_of.size <= 256
    if numbers:
        for (r, c), t in np.ndenumerate(thread_of):
            if t >= 0:
                ax.text(c, r, str(t), ha="center", va="center", fontsize=7, color="black")
    _draw_owner_boundaries(ax, block_of, thread_of)
    blocks = int(block_of.max()) + 1
    ax.set_title(title or f"{blocks} block(s) x {threads} thread(s): colour = block, "
                          "shade and number = thread")
    ax.set_xlabel("column" if block_of.shape[0] > 1 else "element")
    if block_of.shape[0] == 1:
        ax.set_yticks([])
    return ax


def _draw_owner_boundaries(ax, block_of, thread_of) -> None:
    """Lines between neighbouring elements of different blocks (black) and, when a thread owns
    more than one element on average, of different threads of one block (white)."""
    from matplotlib.collections import LineCollection
    owner = block_of * (int(thread_of.max()) + 1) + thread_of
    per_thread = owner.size / max(np.unique(owner[block_of >= 0]).size, 1)
    block_lines, thread_lines = [], []
    for axis in (0, 1):
        first = [slice(None), slice(None)]
        second = [slice(None), slice(None)]
        first[axis], second[axis] = slice(None, -1), slice(1, None)
        other_block = block_of[tuple(first)] != block_of[tuple(second)]
        other_thread = (owner[tuple(first)] != owner[tuple(second)]) & ~other_block
        for found, lines in ((other_block, block_lines), (other_thread, thread_lines)):
            for r, c in zip(*np.nonzero(found)):
                if axis == 0:    # between rows r and r + 1
                    lines.append([(c - 0.5, r + 0.5), (c + 0.5, r + 0.5)])
                else:            # between columns c and c + 1
                    lines.append([(c + 0.5, r - 0.5), (c + 0.5, r + 0.5)])
    if thread_lines and per_thread > 1:
        ax.add_collection(LineCollection(thread_lines, colors="white", linewidths=0.8))
    if block_lines:
        ax.add_collection(LineCollection(block_lines, colors="black", linewidths=1.5))


def draw_warp_access(byte_addresses, kind: str = "global", ax=None, title: str | None = None):
    """One warp's access: each of the 32 threads (top row) joined to the byte address it touches.
    Global memory is drawn as 32-byte sectors (the ones touched shaded), and the title compares
    the distinct bytes asked for (threads sharing an address count once, as in the simulator's
    coalescing efficiency) with the bytes moved; shared memory as its 32 banks, each word once,
    stacked above earlier distinct words of the same bank (the stack's height is the number of
    wavefronts). Returns the Axes."""
    import matplotlib.pyplot as plt
    addresses = np.asarray(byte_addresses, dtype=np.int64)
    if addresses.shape != (WARP,):
        raise ValueError(f"a warp has {WARP} threads: give {WARP} addresses (negative = inactive), "
                         f"got shape {addresses.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.2))
    count = sectors_and_wavefronts(addresses, kind)
    active = addresses >= 0
    if kind == "global":
        _draw_global(ax, addresses, active, count)
    else:
        _draw_shared(ax, addresses, active, count)
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title)
    return ax


def _draw_global(ax, addresses, active, sectors: int) -> None:
    lo = int(addresses[active].min()) // SECTOR_BYTES * SECTOR_BYTES if active.any() else 0
    hi = (int(addresses[active].max()) // SECTOR_BYTES + 1) * SECTOR_BYTES if active.any() \
        else SECTOR_BYTES
    span = hi - lo                                          # whole sectors, the last one included
    touched = {int(a) // SECTOR_BYTES for a in addresses[active]}
    scale = WARP / span                                     # memory row drawn as wide as the warp
    for sector in range(lo // SECTOR_BYTES, (lo + span + SECTOR_BYTES - 1) // SECTOR_BYTES):
        x0 = (sector * SECTOR_BYTES - lo) * scale
        ax.add_patch(_rect(x0, 0, SECTOR_BYTES * scale, 1, "#e4a33a" if sector in touched else "#dddddd"))
    for t in range(WARP):
        ax.add_patch(_rect(t, 3, 0.9, 1, "#4c72b0" if active[t] else "#eeeeee"))
        if active[t]:
            ax.plot([t + 0.45, (addresses[t] - lo + 2) * scale], [3, 1], color="#333333", lw=0.6)
    requested = 4 * int(np.unique(addresses[active]).size)   # a shared address is fetched once
    ax.set_title(f"global: {sectors} sector(s) of 32 B for {requested} B requested "
                 f"({100 * requested / max(32 * sectors, 1):.0f}% of the bytes moved are used)")
    ax.set_xlim(-0.5, WARP + 0.5)
    ax.set_ylim(-0.3, 4.3)
    ax.text(-0.4, 3.5, "threads", ha="right", va="center", fontsize=8)
    ax.text(-0.4, 0.5, "memory", ha="right", va="center", fontsize=8)


def _draw_shared(ax, addresses, active, wavefronts: int) -> None:
    readers: dict = {}                                      # word -> threads, in thread order
    for t in np.flatnonzero(active):
        readers.setdefault(int(addresses[t]) // BANK_BYTES, []).append(int(t))
    rows: dict = {}                                         # bank -> its distinct words so far
    for word, threads in readers.items():
        bank = word % BANKS
        row = len(rows.setdefault(bank, []))
        rows[bank].append(word)
        label = str(threads[0]) if len(threads) == 1 else f"\u00d7{len(threads)}"
        ax.add_patch(_rect(bank, row, 0.9, 0.9, "#4c72b0" if row == 0 else "#c44e52"))
        ax.text(bank + 0.45, row + 0.45, label, ha="center", va="center", fontsize=7, color="white")
    ax.set_xlim(-0.5, BANKS + 0.5)
    ax.set_ylim(-0.8, max(wavefronts, 1) + 0.5)
    for bank in range(0, BANKS, 4):
        ax.text(bank + 0.45, -0.5, str(bank), ha="center", fontsize=7)
    ax.set_title(f"shared: {wavefronts} wavefront(s) "
                 + ("(no bank conflict)" if wavefronts <= 1 else f"({wavefronts}-way bank conflict)"))
    ax.set_xlabel("bank (a box is a word, numbered by the thread that uses it, \u00d7n when n threads "
                  "share it; red ones wait for a later wavefront)", fontsize=8)


def _rect(x, y, w, h, color):
    from matplotlib.patches import Rectangle
    return Rectangle((x, y), w, h, facecolor=color, edgecolor="white", linewidth=0.5)


def draw_attention_tiles(n: int, tile: int, query_tile: int, ax=None, title: str | None = None):
    """The shared-memory picture of a flash-attention block: the ``n x n`` causal score matrix cut
    into ``tile x tile`` tiles (query tiles down, key tiles across), with the block that owns query
    tile ``query_tile``. Its Q tile (left strip) sits in shared memory for the whole kernel; at
    step s it copies K/V tile s - 1 (top strip) into shared memory and computes the score tile
    marked s; the tiles past the diagonal are never loaded (hatched). Only the marked tiles of
    scores ever exist, one at a time, in the threads' registers. Returns the Axes."""
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.patches import Polygon, Rectangle
    for name, value in (("n", n), ("tile", tile)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"draw_attention_tiles: {name} must be a positive int, got {value!r}")
    tiles = -(-n // tile)
    if not 0 <= query_tile < tiles:
        raise ValueError(f"draw_attention_tiles: query_tile must be in [0, {tiles}) for n={n} "
                         f"and tile={tile}, got {query_tile}")
    blue, orange, green, grey = (matplotlib.colormaps["tab10"].colors[i] for i in (0, 1, 2, 7))
    if ax is None:
        side = min(7.5, 2.5 + 0.6 * tiles)
        _, ax = plt.subplots(figsize=(side + 1.2, side))
        ax.figure.set_facecolor("white")      # readable on a light or a dark notebook page
    ax.set_facecolor("white")
    font = max(6, 10 - tiles // 3)

    def box(x, y, color, alpha, hatch=None, w=1.0, h=1.0):
        ax.add_patch(Rectangle((x, y), w, h, facecolor=color, alpha=alpha, hatch=hatch,
                               edgecolor="black", linewidth=0.6))

    for r in range(tiles):
        for c in range(tiles):
            mine = r == query_tile
            if c > r:                                   # past the diagonal: skipped by every block
                box(c, r, "white", 1.0, hatch="//" if mine else "..")
            else:
                box(c, r, blue if mine else grey, 0.55 if mine else 0.12)
                if c == r:                              # the diagonal tile is masked inside
                    ax.add_patch(Polygon([(c, r), (c + 1, r), (c + 1, r + 1)], closed=True,
                                         facecolor="white", alpha=0.8, edgecolor="none"))
            if mine and c <= r:
                ax.text(c + 0.3, r + 0.7, f"step {c + 1}", ha="center", va="center",
                        fontsize=font, color="black")
            elif mine:
                ax.text(c + 0.5, r + 0.5, "skipped", ha="center", va="center", fontsize=font - 1,
                        color="black", backgroundcolor="white")
    for r in range(tiles):                              # Q tiles, left
        box(-1.4, r, orange if r == query_tile else grey, 0.75 if r == query_tile else 0.12)
    ax.text(-0.9, query_tile + 0.5, "Q tile\nshared,\nonce", ha="center", va="center",
            fontsize=font - 1, color="black")
    for c in range(tiles):                              # K/V tiles, top
        loaded = c <= query_tile
        box(c, -1.4, green if loaded else "white", 0.6 if loaded else 1.0, None if loaded else "//")
        ax.text(c + 0.5, -0.9, f"K/V {c}\nstep {c + 1}" if loaded else "never\nloaded",
                ha="center", va="center", fontsize=font - 1, color="black",
                backgroundcolor="none" if loaded else "white")
    ax.set_xlim(-1.6, tiles + 0.1)
    ax.set_ylim(tiles + 0.1, -1.6)
    ax.set_xticks([c + 0.5 for c in range(tiles)], [f"{c * tile}" for c in range(tiles)],
                  fontsize=font)
    ax.set_yticks([r + 0.5 for r in range(tiles)], [f"{r * tile}" for r in range(tiles)],
                  fontsize=font)
    ax.set_xlabel("key position (first of each tile)")
    ax.set_ylabel("query position (first of each tile)")
    ax.set_aspect("equal")
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(title or f"flash attention, n={n}, tiles of {tile}: the block of query tile "
                          f"{query_tile} ({query_tile + 1} of {tiles} K/V tiles loaded)",
                 fontsize=font + 1)
    return ax
