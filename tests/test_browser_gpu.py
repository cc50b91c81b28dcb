"""The GPU pictures and the simulator's profile as a learner sees them. A notebook builds chapter 6's
window sum with shared memory for the simulator, draws who wrote each output (a thread grid) and
one warp's global and shared accesses, and shows ``lib.profile(...)``; its HTML export, opened in
headless Chromium, must show both pictures big and readable and the profile table with legible
text, in JupyterLab's light and dark themes. Screenshots land in pytest's tmp_path."""
import pytest

from browser import COLOURS, assert_readable, contrast_ratio, run_cells, show_notebook, snapshot
from test_notebooks import kernel_config  # noqa: F401  (a fixture)

# The kernel inherits MPLBACKEND=Agg from conftest; a learner's Jupyter shows figures inline.
CELLS = [
    """%matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
import mlc_lab
from mlc_lab.testing import gpu_schedules
from mlc_lab.viz import gpu as gpu_viz

lib = mlc_lab.build(gpu_schedules.window_sum(1024, shared=True).mod, target="cuda-sim")
args, expected = gpu_schedules.arrays("window_sum", 1024)""",
    """block_of, thread_of = lib.who_wrote("C", *args)
gpu_viz.draw_thread_grid(block_of.reshape(8, 128), thread_of.reshape(8, 128))
plt.show()""",
    """[run] = lib.simulate(*args, trace=True)
first = {acc.scope: acc for acc in reversed(run.trace.warp_accesses) if acc.kind == "load"}
fig, axes = plt.subplots(2, 1, figsize=(9, 6))
for ax, scope in zip(axes, ["global", "shared"]):
    gpu_viz.draw_warp_access(first[scope].addresses[:, 0] * 4, scope, ax=ax)
plt.tight_layout()
plt.show()""",
    "lib.profile(*args)",
]
GRID_CELL, WARP_CELL, PROFILE_CELL = 1, 2, 3
# The text colour of an element and the colour it is drawn on: the background of the nearest
# ancestor (itself included) whose background is not transparent.



@pytest.fixture(scope="module")
def executed(kernel_config, tmp_path_factory):  # noqa: F811  (the imported fixture)
    """The notebook run in a fresh kernel (kept as gpu.ipynb for a person to open)."""
    return run_cells(CELLS, kernel_config, tmp_path_factory.mktemp("gpu-notebook"), "gpu")


def test_notebook_shows_two_pictures_and_a_profile_table(executed):
    for index in (GRID_CELL, WARP_CELL):
        pictures = [out for out in executed.cells[index].outputs if "image/png" in out.get("data", {})]
        assert len(pictures) == 1, f"cell {index}: {len(pictures)} pictures"
    [profile] = [out for out in executed.cells[PROFILE_CELL].outputs if out.output_type == "execute_result"]
    assert "<table class='mlc-counters'>" in profile.data["text/html"] and "A_shared" in profile.data["text/plain"]
    errors = [out for cell in executed.cells for out in cell.outputs
              if out.output_type == "error" or out.get("name") == "stderr"]
    assert not errors, errors


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_gpu_pictures_and_profile_are_readable_in_chromium(executed, page, theme, tmp_path):  # noqa: F811
    show_notebook(page, executed, theme, tmp_path / f"gpu-{theme}.html")

    pictures = page.locator(".jp-RenderedImage img")
    assert pictures.count() == 2, f"{pictures.count()} pictures"
    for index, name in enumerate(["thread-grid", "warp-access"]):
        picture = pictures.nth(index)
        assert picture.is_visible(), name
        assert picture.evaluate("img => img.complete && img.naturalWidth > 0"), f"{name}: did not decode"
        box = picture.bounding_box()
        assert box["width"] > 400 and box["height"] > 150, f"{name}: {box}"
        assert_readable(snapshot(picture, tmp_path / f"{name}-{theme}.png"), f"{name} ({theme} theme)")

    table = page.locator(".mlc-lab-cuda-sim")
    assert table.count() == 1 and table.is_visible()
    box = table.bounding_box()
    assert box["width"] > 400 and box["height"] > 150, f"profile: {box}"
    snapshot(table, tmp_path / f"profile-{theme}.png")
    text = table.inner_text()
    for expected in ["main_kernel0", "occupancy", "estimated", "coalesced", "wavefronts",
                     "A_shared", "1.00-way", "100%"]:
        assert expected in text, f"{expected!r} not in the profile ({theme} theme):\n{text}"
    cells = table.locator("td, th")
    assert cells.count() > 40
    for index in range(cells.count()):
        colours = cells.nth(index).evaluate(COLOURS)
        ratio = contrast_ratio(colours["text"], colours["background"])
        assert ratio >= 4.5, f"profile cell {cells.nth(index).inner_text()!r}: contrast {ratio:.1f} ({colours})"
