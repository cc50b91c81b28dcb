"""The tuning pictures as a learner sees them. A notebook tunes a tiny matmul (progress bar and
live curve) and plots the database; the executed notebook holds one live curve, updated in
place; its HTML export, opened in headless Chromium, shows both pictures big and readable in
JupyterLab's light and dark themes. Screenshots land in pytest's tmp_path."""
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from browser import assert_readable, show_notebook, snapshot
from test_notebooks import kernel_config  # noqa: F401  (a fixture)

TESTS = Path(__file__).resolve().parent
# The kernel inherits MPLBACKEND=Agg from conftest; a learner's Jupyter shows figures inline.
CELLS = [
    f"""%matplotlib inline
import sys
sys.path.insert(0, {str(TESTS)!r})
import matplotlib.pyplot as plt
from mlc_lab import meta_schedule as ms
from test_meta_schedule import TARGET, Matmul, split_j""",
    """database = ms.tune_tir(Matmul, TARGET, max_trials_global=6, num_trials_per_iter=2,
                       space=ms.space_generator.ScheduleFn(split_j), work_dir="tuning", seed=0,
                       quiet=False)""",
    "database.plot()\nplt.show()",
]
TUNE_CELL, PLOT_CELL = 1, 2
SVG = "image/svg+xml"
# The texts inside the groups matching a selector of a matplotlib SVG shown by an <img>:
# matplotlib draws each text as paths and keeps the string in a comment beside them.
SVG_TEXTS = """(img, selector) => {
    const svg = new DOMParser().parseFromString(atob(img.src.split(",")[1]), "image/svg+xml");
    return Array.from(svg.querySelectorAll(selector), group => {
        const found = svg.evaluate(".//comment()", group, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null);
        return Array.from({length: found.snapshotLength}, (_, i) => found.snapshotItem(i).data.trim());
    }).flat();
}"""


class RecordingClient(NotebookClient):
    """A notebook client that also keeps every SVG output message, with its type and display id:
    the saved notebook shows only the outcome of in-place updates, not that they happened."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.svg_messages = []

    def process_message(self, msg, cell, cell_index):
        content = msg["content"]
        if SVG in content.get("data", {}):
            display_id = (content.get("transient") or {}).get("display_id")
            self.svg_messages.append((msg["msg_type"], display_id, content["data"][SVG]))
        return super().process_message(msg, cell, cell_index)


@pytest.fixture(scope="module")
def executed(kernel_config, tmp_path_factory):  # noqa: F811  (the imported fixture)
    """The tuning notebook run in a fresh kernel (kept as tuning.ipynb for a person to open):
    (notebook with outputs, SVG messages)."""
    workdir = tmp_path_factory.mktemp("tuning-notebook")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = RecordingClient(nb, timeout=120, kernel_name="python3", config=kernel_config,
                             resources={"metadata": {"path": str(workdir)}})
    client.execute()
    nbformat.write(nb, workdir / "tuning.ipynb")
    return nb, client.svg_messages


def test_live_curve_is_one_display_updated_in_place(executed):
    nb, svg_messages = executed
    kinds = [kind for kind, _, _ in svg_messages]   # one per batch; a batch may come up short
    assert len(kinds) >= 2 and kinds == ["display_data"] + ["update_display_data"] * (len(kinds) - 1), kinds
    display_ids = {display_id for _, display_id, _ in svg_messages}
    assert len(display_ids) == 1 and None not in display_ids, display_ids
    first, last = svg_messages[0][2], svg_messages[-1][2]
    assert first != last, "the curve was not redrawn after the later batches"

    outputs = nb.cells[TUNE_CELL].outputs
    curves = [out for out in outputs if SVG in out.get("data", {})]
    assert len(curves) == 1 and curves[0].data[SVG] == last, "want one curve, holding the last update"
    assert "<!-- trial -->" in last and "<!-- GFLOPS -->" in last
    bars = [out for out in outputs if "application/vnd.jupyter.widget-view+json" in out.get("data", {})]
    assert len(bars) == 1, "want one tqdm progress bar widget"
    plot_outputs = nb.cells[PLOT_CELL].outputs
    assert [out for out in plot_outputs if "image/png" in out.get("data", {})], "database.plot showed no figure"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_tuning_pictures_are_big_and_readable_in_chromium(executed, page, theme, tmp_path):  # noqa: F811
    nb, _ = executed
    show_notebook(page, nb, theme, tmp_path / f"tuning-{theme}.html")

    curve = page.locator(".jp-RenderedSVG img")   # JupyterLab, too, shows an SVG output as an <img>
    plot = page.locator(".jp-RenderedImage img")
    for name, picture in {"live-curve": curve, "database-plot": plot}.items():
        assert picture.count() == 1, f"{name}: {picture.count()} pictures"
        assert picture.is_visible(), name
        assert picture.evaluate("img => img.complete && img.naturalWidth > 0"), f"{name}: did not decode"
        box = picture.bounding_box()
        assert box["width"] > 200 and box["height"] > 200, f"{name}: {box}"
        assert_readable(snapshot(picture, tmp_path / f"{name}-{theme}.png"), f"{name} ({theme} theme)")

    texts = curve.evaluate(SVG_TEXTS, ":root")
    assert {"trial", "GFLOPS", "tuning main"} <= set(texts), texts
    assert any(": best " in text for text in texts), f"no legend in {texts}"
    x_ticks = curve.evaluate(SVG_TEXTS, "g[id^=xtick_]")
    assert x_ticks and all(tick.isdigit() for tick in x_ticks), f"trial ticks {x_ticks}"
