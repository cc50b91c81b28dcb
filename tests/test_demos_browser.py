"""Two schedule steppers side by side, as the classroom demos show them, on a 1024 x 768
projector: a real JupyterLab (the server of test_browser_jupyterlab) in headless Chromium at that
size, in the light and the dark theme, with the demos' large fonts (demos/projector.py). Nothing
may stick out of the notebook column or scroll sideways, no text may be cut off, and the "next"
buttons must move each column on its own. Screenshots land in pytest's tmp_path."""
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from test_browser_jupyterlab import lab, open_notebook, run_all_cells  # noqa: F401  (lab: a fixture)

pytestmark = pytest.mark.notebook
REPO = Path(__file__).resolve().parents[1]
PROJECTOR = {"width": 1024, "height": 768}
CELLS = [
    f"""import sys
sys.path[:0] = [{str(REPO / "demos")!r}, {str(REPO / "tests")!r}]
from projector import enlarge
enlarge()""",
    """from mlc_lab import tir
from mlc_lab.viz.stepper import side_by_side
from test_viz_stepper import MyModule, chapter_schedule

tiled = tir.Schedule(MyModule, seed=0)   # a tuner-like trace: sampled tiles, long calls
block = tiled.get_block("Y", func_name="mm_relu")
i, j, k = tiled.get_loops(block)
i_tiles = tiled.sample_perfect_tile(i, n=4, max_innermost_factor=16)
j_tiles = tiled.sample_perfect_tile(j, n=4, max_innermost_factor=16)
i0, i1, i2, i3 = tiled.split(i, factors=i_tiles)
j0, j1, j2, j3 = tiled.split(j, factors=j_tiles)
tiled.reorder(i0, j0, i1, j1, k, i2, j2, i3, j3)
side_by_side(chapter_schedule(), tiled, titles=["by hand: split, reorder, reverse_compute_at",
                                                "sampled tiles, as the tuner writes them"])""",
]
# Inside the outputs: elements that reach past the right edge of their output area, and elements
# whose content is wider than their box (cut off, or a sideways scroll bar), with what they hold.
OUT_OF_BOUNDS = """() => {
    const found = [];
    for (const output of jupyterapp.shell.currentWidget.node.querySelectorAll(".jp-OutputArea-output")) {
        const right = output.getBoundingClientRect().right + 1;
        for (const element of output.querySelectorAll("*")) {
            const box = element.getBoundingClientRect();
            if (box.width === 0 || element.closest(".widget-slider, details:not([open]) > :not(summary)"))
                continue;   // (a slider's handle reaches past its track by design)
            const what = element.className.baseVal ?? element.className;
            if (box.right > right)
                found.push(`${element.tagName}.${what} ends at ${Math.round(box.right)} > ${Math.round(right)}`);
            if (element.scrollWidth > element.clientWidth + 1 && element.clientWidth > 0
                    && getComputedStyle(element).display !== "inline")
                found.push(`${element.tagName}.${what} holds ${element.scrollWidth}px in ${element.clientWidth}px:`
                           + ` ${element.textContent.slice(0, 60)}`);
        }
    }
    return found;
}"""


@pytest.fixture
def projector_page(chromium):
    """A page of projector size that loads nothing from the network except the lab's server."""
    context = chromium.new_context(viewport=PROJECTOR)
    page = context.new_page()
    page.route(re.compile(r"^https?://"), lambda route: route.abort())
    yield page
    context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_steppers_side_by_side_fit_a_projector(lab, projector_page, theme, tmp_path):  # noqa: F811
    page, name = projector_page, f"steppers-{theme}"
    folder = lab.root / name
    folder.mkdir()
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                           "execution_count": None} for source in CELLS],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (folder / "steppers.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    lab.set_theme(theme)
    print(f"\nscreenshots of the side-by-side steppers ({theme}): {tmp_path}")
    try:
        open_notebook(page, lab, name, f"{name}/steppers.ipynb")
        assert page.locator("body").get_attribute("data-jp-theme-light") == str(theme == "light").lower()
        page.evaluate("() => jupyterapp.shell.collapseLeft()")   # as demos/README.md tells the lecturer
        run_all_cells(page)
        columns = page.locator(".jp-OutputArea-output .mlc-lab-steppers > .widget-vbox")
        assert columns.count() == 2, "want two live steppers next to each other"
        first, second = (columns.nth(i).bounding_box() for i in range(2))
        assert first["x"] + first["width"] <= second["x"] and abs(first["y"] - second["y"]) < 2, (first, second)
        columns.first.scroll_into_view_if_needed()
        calls = [columns.nth(i).locator(".mlc-lab-step-call") for i in range(2)]
        # chapter 2's third step splits j (a diff and a picture); the sampled schedule's 6th splits i in four
        for column, last in [(0, 3), (1, 6)]:
            for step in range(2, last + 1):
                columns.nth(column).get_by_role("button", name=re.compile("next")).click()
                expect(calls[column]).to_have_text(re.compile(rf"^step {step}/"), timeout=30_000)
        assert calls[0].inner_text().startswith("step 3/7: l4, l5 = sch.split(")
        page.evaluate("() => document.querySelectorAll('.jp-OutputArea-output details').forEach(d => d.open = true)")
        page.wait_for_timeout(300)
        page.screenshot(path=tmp_path / f"{name}.png", full_page=True)
        problems = page.evaluate(OUT_OF_BOUNDS)
        assert not problems, f"{theme}: at 1024 x 768 " + "\n".join(problems[:15])
        for call in calls:
            box = call.bounding_box()
            assert box["height"] > 0 and call.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), call.inner_text()
    except BaseException:
        page.screenshot(path=tmp_path / f"{name}-failure.png", full_page=True)
        raise
    finally:
        lab.shut_down_kernels()
