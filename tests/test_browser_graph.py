"""The graph view as a learner sees it. A notebook draws a small MLP before and after fusion
(``graph_diff``) and after FuseOps with the fused functions opened (``expand_fused=True``); its
HTML export, opened in headless Chromium in JupyterLab's light and dark themes, must show one
``g.node.call`` per call, fit its output area (side by side when wide, under each other when
narrow) and keep its text big, inside its boxes and in contrast with them. Screenshots land in
pytest's tmp_path. The built-in layout is drawn (engine="python"): Graphviz's output is checked
in test_viz_graph."""
import numpy as np
import pytest

from browser import assert_readable, run_cells, show_notebook, snapshot
from test_notebooks import kernel_config  # noqa: F401  (a fixture)

from mlc_lab import relax
from mlc_lab.frontend import nn
from mlc_lab.relax import transform as RT

SETUP = """from mlc_lab.frontend import nn
from mlc_lab.relax import transform as RT
from mlc_lab.viz.graph import graph, graph_diff

mlp = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to_relax((1, 64))
legal = RT.LegalizeOps()(mlp)
grouped = RT.FuseOps()(RT.AnnotateTIROpPattern()(legal))
fused = RT.FuseTIR()(grouped)"""
CELLS = [SETUP, 'graph_diff(legal, fused, engine="python")',
         'graph(grouped, expand_fused=True, engine="python")']
DIFF_CELL, EXPANDED_CELL = 1, 2
MIN_FONT_PX = 9
# Per SVG of the page: its drawn size against its own, and per node its classes, its box and
# texts (in the SVG's units) and the colours of its text and fill.
MEASURE = """svg => {
    const shown = svg.getBoundingClientRect();
    const nodes = Array.from(svg.querySelectorAll("g.node"), g => {
        const rect = g.querySelector("rect");
        const box = rect.getBBox();
        return {classes: g.getAttribute("class"), fill: rect.getAttribute("fill"),
                box: [box.x, box.y, box.width, box.height],
                texts: Array.from(g.querySelectorAll("text"), t => {
                    const b = t.getBBox();
                    return {text: t.textContent, fill: t.getAttribute("fill"),
                            size: Number(t.getAttribute("font-size")), box: [b.x, b.y, b.width, b.height]};
                })};
    });
    return {scale: shown.width / svg.viewBox.baseVal.width, left: shown.left, right: shown.right,
            top: shown.top, bottom: shown.bottom, nodes};
}"""


def calls(func) -> list:
    return [b.value for block in func.body.blocks for b in block.bindings if isinstance(b.value, relax.Call)]


@pytest.fixture(scope="module")
def expected():
    """Calls drawn per picture, counted on the IR: before and after fusion, and with the fused
    functions opened (the calls in them plus main's other calls)."""
    mlp = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to_relax((1, 64))
    legal = RT.LegalizeOps()(mlp)
    grouped = RT.FuseOps()(RT.AnnotateTIROpPattern()(legal))
    fused = [call.op for call in calls(grouped["main"]) if isinstance(call.op, relax.GlobalVar)]
    return {"before": len(calls(legal["main"])), "after": len(calls(RT.FuseTIR()(grouped)["main"])),
            "expanded": len(calls(grouped["main"])) - len(fused) + sum(len(calls(grouped[f])) for f in fused),
            "clusters": len(fused)}


@pytest.fixture(scope="module")
def executed(kernel_config, tmp_path_factory):  # noqa: F811  (the imported fixture)
    """The notebook run in a fresh kernel (kept as graph.ipynb for a person to open)."""
    return run_cells(CELLS, kernel_config, tmp_path_factory.mktemp("graph-notebook"), "graph")


def test_outputs_carry_html_svg_and_a_text_fallback(executed):
    for index, caption in [(DIFF_CELL, "before: main, 7 calls"), (EXPANDED_CELL, "main: 4 calls")]:
        [result] = [out for out in executed.cells[index].outputs if out.output_type == "execute_result"]
        assert "<svg" in result.data["text/html"] and result.data["image/svg+xml"].startswith("<svg")
        assert result.data["text/plain"].startswith(caption)    # what nbconvert --to script/markdown keeps
    errors = [out for cell in executed.cells for out in cell.outputs
              if out.output_type == "error" or out.get("name") == "stderr"]
    assert not errors, errors


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2 contrast ratio of two colours written #rrggbb: 1 (none) to 21 (black on white)."""
    def luminance(colour):
        c = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
        c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])
    high, low = sorted([luminance(first), luminance(second)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def check_readable(measured: dict, what: str) -> None:
    """Text at least MIN_FONT_PX on screen, inside its box, and 4.5:1 against the box's fill."""
    for node in measured["nodes"]:
        x, y, w, h = node["box"]
        for text in node["texts"]:
            assert text["size"] * measured["scale"] >= MIN_FONT_PX, f"{what}: {text['text']} too small"
            tx, ty, tw, th = text["box"]
            assert x <= tx and tx + tw <= x + w and y <= ty and ty + th <= y + h + 1, \
                f"{what}: text {text['text']!r} {text['box']} spills out of its box {node['box']}"
            assert contrast_ratio(text["fill"], node["fill"]) >= 4.5, f"{what}: {text['text']} lacks contrast"


def open_export(page, executed, theme: str, tmp_path, width: int):
    page.set_viewport_size({"width": width, "height": 900})
    show_notebook(page, executed, theme, tmp_path / f"graph-{theme}-{width}.html")
    return page.locator(".jp-OutputArea-output:has(svg.mlc-graph)")


def assert_fits(area, what: str) -> None:
    overflow = area.evaluate("el => [el.scrollWidth, el.clientWidth]")
    assert overflow[0] <= overflow[1] + 1, f"{what}: overflows its output area {overflow}"
    inner = area.bounding_box()
    for svg in area.locator("svg.mlc-graph").all():
        box = svg.bounding_box()
        assert inner["x"] - 1 <= box["x"] and box["x"] + box["width"] <= inner["x"] + inner["width"] + 1, what


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_graphs_fit_and_read_in_chromium(executed, expected, page, theme, tmp_path):  # noqa: F811
    areas = open_export(page, executed, theme, tmp_path, 1280)
    assert areas.count() == 2
    diff, opened = areas.nth(0), areas.nth(1)

    before, after = diff.locator("svg.mlc-graph").all()
    assert before.locator("g.node.call").count() == expected["before"]
    assert after.locator("g.node.call").count() == expected["after"]
    assert before.locator("g.node.call.changed").count() == 5
    assert after.locator("g.node.call.changed").count() == 2
    assert before.bounding_box()["y"] == after.bounding_box()["y"], "wide output: side by side"
    assert opened.locator("g.node.call").count() == expected["expanded"]
    assert opened.locator("g.cluster").count() == expected["clusters"]
    for svg in (before, after, opened.locator("svg.mlc-graph")):
        assert svg.locator("g.node.param").count() == 1 and svg.locator("g.node.output").count() == 1

    for name, area in {"diff": diff, "expanded": opened}.items():
        assert_fits(area, name)
    for name, svg in {"before": before, "after": after, "expanded": opened.locator("svg.mlc-graph")}.items():
        check_readable(svg.evaluate(MEASURE), f"{name} ({theme})")
        assert_readable(snapshot(svg, tmp_path / f"{name}-{theme}.png"), f"{name} ({theme} theme)")


def test_narrow_output_puts_the_graphs_under_each_other(executed, page, tmp_path):  # noqa: F811
    areas = open_export(page, executed, "light", tmp_path, 640)
    diff = areas.nth(0)
    before, after = diff.locator("svg.mlc-graph").all()
    first, second = before.bounding_box(), after.bounding_box()
    assert second["y"] >= first["y"] + first["height"], "narrow output: the after graph goes below"
    for index, name in [(0, "diff"), (1, "expanded")]:
        assert_fits(areas.nth(index), f"{name} at 640 px")
    for svg in (before, after):
        check_readable(svg.evaluate(MEASURE), "narrow")
    snapshot(diff, tmp_path / "diff-narrow.png")
