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
