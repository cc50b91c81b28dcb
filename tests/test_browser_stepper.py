"""The schedule stepper's static page and the loop-nest pictures as a reader of a saved notebook
sees them: a notebook shows chapter 2's schedule with ``stepper(sch, live=False)``, the loop nest
with the tiles of one iteration, and a visit-order animation; its HTML export, opened in headless
Chromium, must be readable in JupyterLab's light and dark themes (text contrast, pictures on
their own white background) and never wider than the page, with every step unfolded. The
animation's buttons step its frames. Screenshots land in pytest's tmp_path."""
from pathlib import Path

import pytest
from nbconvert import HTMLExporter

from browser import assert_readable, run_cells, show, show_notebook, snapshot
from browser import COLOURS, contrast_ratio
from test_notebooks import kernel_config  # noqa: F401  (a fixture)

TESTS = Path(__file__).resolve().parent
CELLS = [
    f"""import sys
sys.path.insert(0, {str(TESTS)!r})
from mlc_lab.viz.loop_nest import animate_visit_order, loop_nest
from mlc_lab.viz.stepper import stepper
from test_viz_loop_nest import tiled
from test_viz_stepper import chapter_schedule

sch = chapter_schedule()""",
    "stepper(sch, live=False)",
    'loop_nest(sch, "Y_update", loop="j_0", at=1)',
    'animate_visit_order(tiled(8)[0], "C")',
]
STEPPER_CELL, NEST_CELL, ANIMATION_CELL = 1, 2, 3
NO_OVERFLOW = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"


@pytest.fixture(scope="module")
def executed(kernel_config, tmp_path_factory):  # noqa: F811  (the imported fixture)
    """The notebook run in a fresh kernel (kept as stepper.ipynb for a person to open)."""
    return run_cells(CELLS, kernel_config, tmp_path_factory.mktemp("stepper-notebook"), "stepper")


def test_notebook_shows_static_html_for_every_view(executed):
    for index in (STEPPER_CELL, NEST_CELL, ANIMATION_CELL):
        [out] = [out for out in executed.cells[index].outputs if "text/html" in out.get("data", {})]
    errors = [out for cell in executed.cells for out in cell.outputs
              if out.output_type == "error" or out.get("name") == "stderr"]
    assert not errors, errors


def assert_text_contrast(locator, what: str) -> None:
    """Every text-bearing element under ``locator`` stands out from what it is drawn on."""
    elements = locator.locator(".mlc-lab-step > summary, .mlc-lab-step > summary code, "
                               ".mlc-lab-stepper > p, .mlc-lab-step p, .mlc-lab-step details > summary, "
                               ".mlc-lab-step-ir")
    for index in range(elements.count()):
        element = elements.nth(index)
        if not element.is_visible() or not element.inner_text().strip():
            continue
        colours = element.evaluate(COLOURS)
        ratio = contrast_ratio(colours["text"], colours["background"])
        assert ratio >= 4.5, f"{what}: {element.inner_text()[:40]!r} has contrast {ratio:.1f} ({colours})"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_stepper_and_pictures_are_readable_in_chromium(executed, page, theme, tmp_path):  # noqa: F811
    show_notebook(page, executed, theme, tmp_path / f"stepper-{theme}.html")

    stepper = page.locator(".mlc-lab-stepper")
    assert stepper.count() == 1 and stepper.is_visible()
    steps = stepper.locator("details.mlc-lab-step")
    assert steps.count() == 7
    assert steps.nth(2).locator("summary").first.inner_text() == \
        "step 3: l4, l5 = sch.split(loop=l2, factors=[None, 4])"
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate(NO_OVERFLOW), f"the page scrolls sideways ({theme} theme)"
    viewport = page.viewport_size["width"]
    for name, locator in {"stepper": stepper, "nest": page.locator(".mlc-lab-loop-nest").last,
                          "animation": page.locator(".mlc-lab-visit-order")}.items():
        box = locator.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport, f"{name}: {box}"

    split = steps.nth(2)
    assert_readable(snapshot(split.locator(".mlc-lab-loop-nest"), tmp_path / f"split-nest-{theme}.png"),
                    f"loop nest of the split step ({theme} theme)")
    snapshot(split.locator(".mlc-lab-step-diff"), tmp_path / f"split-diff-{theme}.png")   # styled by ir.diff
    assert_text_contrast(split, f"split step ({theme} theme)")
    assert_text_contrast(steps.nth(0), f"get_block step ({theme} theme)")

    nest = page.locator(".mlc-lab-loop-nest").last      # the cell's own picture, after the stepper's
    pictures = nest.locator("svg")
    assert pictures.count() == 2                         # the nest and the tiles
    for index, name in enumerate(["nest", "tiles"]):
        box = pictures.nth(index).bounding_box()
        assert box["width"] > 300 and box["height"] > 200, f"{name}: {box}"
        assert_readable(snapshot(pictures.nth(index), tmp_path / f"{name}-{theme}.png"),
                        f"{name} ({theme} theme)")
    labels = pictures.nth(0).locator("text").evaluate_all("texts => texts.map(t => t.textContent)")
    assert "for j_0 in range(32)  (iteration 1 pictured)" in labels and "serial" in labels
    regions = pictures.nth(1).locator("rect.region")
    assert regions.count() == 4


def test_animation_buttons_step_the_frames(executed, page, tmp_path):  # noqa: F811
    html, _ = HTMLExporter(template_name="lab", theme="light").from_notebook_node(executed)
    show(page, html, tmp_path / "animation.html")
    animation = page.locator(".mlc-lab-visit-order")
    caption = animation.locator(".caption")
    assert caption.inner_text() == "frame 1 / 128: writes C[0, 0]; reads A[0, 0:4], B[0:4, 0]"
    next_button = animation.locator("button[data-step='1']")
    for _ in range(17):
        next_button.click()
    assert caption.inner_text() == "frame 18 / 128: writes C[0, 1]; reads A[0, 4:8], B[4:8, 1]"
    fills = animation.locator("rect[data-i]").evaluate_all("cells => cells.map(c => c.getAttribute('fill'))")
    assert fills[128 + 1] == "#dd6b20"                   # C[0, 1], written now (C's cells follow A's and B's)
    assert fills.count("#f7d9bd") == 15                  # the rest of the first tile of C, written before
    animation.locator("button[data-step='-1']").click()
    assert caption.inner_text().startswith("frame 17 / 128")
    assert_readable(snapshot(animation, tmp_path / "animation.png"), "visit-order animation")
