"""GPU pictures: the counts they print, and that they draw what they are given."""
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from mlc_lab.viz.gpu import draw_thread_grid, draw_warp_access, sectors_and_wavefronts  # noqa: E402


@pytest.mark.parametrize("addresses, kind, expected", [
    (np.arange(32) * 4, "global", 4),          # consecutive floats: 128 B in four sectors
    (np.arange(32) * 4 + 16, "global", 5),     # the same, misaligned by half a sector
    (np.arange(32) * 128, "global", 32),       # a column of a 32-float-wide matrix
    (np.zeros(32, int), "global", 1),          # everyone reads one float
    (np.arange(32) * 4, "shared", 1),          # one word per bank
    (np.arange(32) * 8, "shared", 2),          # stride 2: two words in every other bank
    (np.arange(32) * 128, "shared", 32),       # stride 32: all in bank 0
    (np.zeros(32, int), "shared", 1),          # one word: broadcast
    (np.where(np.arange(32) < 16, np.arange(32) * 4, -1), "global", 2),   # half the warp inactive
])
def test_sector_and_wavefront_counts(addresses, kind, expected):
    assert sectors_and_wavefronts(addresses, kind) == expected


def test_warp_access_titles_state_the_counts():
    ax = draw_warp_access(np.arange(32) * 128, "global")
    assert ax.get_title().startswith("global: 32 sector(s) of 32 B for 128 B requested (12%")
    ax = draw_warp_access(np.arange(32) * 8, "shared")
    assert ax.get_title() == "shared: 2 wavefront(s) (2-way bank conflict)"
    red = [p for p in ax.patches if p.get_facecolor()[0] > 0.7]
    assert len(red) == 16                       # threads 16..31 wait for the second wavefront


def test_thread_grid_colours_blocks_and_numbers_threads():
    index = np.arange(32)
    ax = draw_thread_grid(index // 8, index % 8)
    image = ax.get_images()[0].get_array()
    assert image.shape[:2] == (1, 32)
    assert not np.allclose(image[0, 0], image[0, 8])     # another block: another colour
    assert not np.allclose(image[0, 0], image[0, 1])     # another thread: another shade
    assert [t.get_text() for t in ax.texts[:9]] == [str(t) for t in range(8)] + ["0"]
    assert "4 block(s) x 8 thread(s)" in ax.get_title()


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="a warp has 32 threads: give 32 addresses"):
        draw_warp_access(np.arange(16), "global")
    with pytest.raises(ValueError, match="must have one shape"):
        draw_thread_grid(np.zeros(4, int), np.zeros(5, int))


def test_threads_sharing_an_address_count_once():
    # two rows of a matrix, each read by 16 threads: 8 distinct bytes in 2 sectors (12%)
    rows = np.repeat([0, 512], 16)
    assert draw_warp_access(rows, "global").get_title().startswith(
        "global: 2 sector(s) of 32 B for 8 B requested (12%")
    # four words of bank 0, each read by 8 threads: one box per word, labelled with its readers
    ax = draw_warp_access(np.repeat([0, 256, 512, 768], 8), "shared")
    assert ax.get_title() == "shared: 4 wavefront(s) (4-way bank conflict)"
    assert len(ax.patches) == 4
    assert [t.get_text() for t in ax.texts[:4]] == ["\u00d78"] * 4


def test_thread_grid_parts_blocks_and_the_tiles_of_threads():
    rows, cols = np.indices((4, 4))
    quadrant = rows // 2 * 2 + cols // 2
    # four blocks of 2 x 2 threads, one element each: black lines around the blocks only
    [lines] = draw_thread_grid(quadrant, rows % 2 * 2 + cols % 2).collections
    assert len(lines.get_segments()) == 8 and tuple(lines.get_colors()[0][:3]) == (0, 0, 0)
    # one block whose four threads write a 2 x 2 tile each: white lines around the tiles only
    [lines] = draw_thread_grid(np.zeros((4, 4), int), quadrant).collections
    assert len(lines.get_segments()) == 8 and tuple(lines.get_colors()[0][:3]) == (1, 1, 1)


@pytest.mark.parametrize("addresses", [np.arange(32) * 4 + 16, np.repeat([0, 512], 16), np.arange(32) * 32])
def test_memory_row_ends_with_a_whole_sector(addresses):
    ax = draw_warp_access(addresses, "global")
    memory = [p for p in ax.patches if p.get_y() == 0]      # the sectors; threads sit at y = 3
    assert len(memory) == addresses.max() // 32 - addresses.min() // 32 + 1
    assert max(p.get_x() + p.get_width() for p in memory) == pytest.approx(32)
