"""IR diffs and a pass pipeline as a learner sees them. A notebook shows chapter 2's schedule step
(``sch.show_diff()``, short lines), a graph-level diff whose changed lines run past 150
characters, and chapter 7's fusion pipeline watched by ``PrintDiff``; its HTML export, opened in
headless Chromium in JupyterLab's light and dark themes, must keep every view inside its output
(no horizontal overflow, the "after" column whole) at 1280 and at 640 pixels, choose side by side
where it fits and unified where it does not, keep indentation, draw changed lines (and all other
text of the views) at 4.5:1 contrast or more, and keep the +/- markers and an outline on changed
lines under forced colours (Windows high contrast). Screenshots land in pytest's tmp_path."""
from pathlib import Path

import pytest

from browser import run_cells, show_notebook, snapshot
from browser import contrast_ratio
from test_notebooks import kernel_config  # noqa: F401  (a fixture)

TESTS = Path(__file__).resolve().parent
CELLS = [
    f"""import sys
sys.path.insert(0, {str(TESTS)!r})
import mlc_lab
from mlc_lab import relax, tir
from mlc_lab.ir import show_diff
from mlc_lab.relax import op as R
from mlc_lab.relax import transform as RT
from mlc_lab.transform import PassContext, PrintDiff, Sequential
from corpus import mm_relu


def build_mlp(sizes=(784, 128, 10)):
    tensor = lambda name, shape: relax.Var(name, relax.TensorStructInfo(shape, "float32"))
    x = tensor("x", (1, sizes[0]))
    weights = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        weights += [tensor(f"w{{i}}", (fan_in, fan_out)), tensor(f"b{{i}}", (fan_out,))]
    bb = relax.BlockBuilder()
    with bb.function("main", [x] + weights):
        with bb.dataflow():
            h = x
            for i in range(len(sizes) - 1):
                h = bb.emit(R.add(bb.emit(R.matmul(h, weights[2 * i])), weights[2 * i + 1]))
                h = bb.emit(R.nn.relu(h)) if i < len(sizes) - 2 else h
            gv = bb.emit_output(h)
        bb.emit_func_output(gv)
    return bb.get()


mlp = build_mlp()""",
    """sch = tir.Schedule(mm_relu)
i, j, k = sch.get_loops(sch.get_block("Y"))
j0, j1 = sch.split(j, factors=[None, 4])
sch.reorder(j0, k, j1)
sch.show_diff()""",
    """show_diff(mlp, RT.LegalizeOps()(mlp), "LegalizeOps")""",
    """fusion = Sequential([RT.LegalizeOps(), RT.AnnotateTIROpPattern(), RT.FuseOps(), RT.FuseTIR(),
                     RT.DeadCodeElimination()])
with PassContext(instruments=[PrintDiff()]):
    fused = fusion(mlp)""",
]
STEP_CELL, LONG_CELL, PIPELINE_CELL = 1, 2, 3
# Text and background of each visible element as drawn: translucent backgrounds of the element and its
# ancestors are composited over the nearest opaque one, then the text colour over the result.
# Computed colours come as rgb()/rgba() (0..255) or, from color-mix(), color(srgb r g b / a) (0..1).
DRAWN_COLOURS = """elements => elements.filter(e => e.getClientRects().length > 0).map(element => {
    const parse = text => {
        const values = text.match(/[\\d.]+/g).map(Number);
        const rgba = values.length === 3 ? [...values, 1] : values;
        return text.startsWith("color(") ? [...rgba.slice(0, 3).map(v => v * 255), rgba[3]] : rgba;
    };
    const over = (top, bottom) => bottom.map((b, i) => top[3] * top[i] + (1 - top[3]) * b);
    const layers = [];
    for (let node = element; node; node = node.parentElement) {
        const layer = parse(getComputedStyle(node).backgroundColor);
        if (layer[3] > 0) layers.push(layer);
        if (layer[3] >= 1) break;
    }
    let background = [255, 255, 255];
    for (const layer of layers.reverse()) background = over(layer, background);
    const text = over(parse(getComputedStyle(element).color), background);
    return {what: element.textContent, text: text.slice(0, 3), background: background.slice(0, 3)};
})"""
# Every element that paints text in a changed line: the code cell and its token spans; then
# every other text of the views (headings, line numbers, fold and pass summaries, timings).
CHANGED_TEXT = (":is(.mlc-del, .mlc-add) > :is(.mlc-code, .mlc-mark, .mlc-no), "
                ":is(.mlc-del, .mlc-add) .mlc-code span")
OTHER_TEXT = (".mlc-view :is(summary, .mlc-no, .mlc-code, .mlc-code span, .mlc-stat, .mlc-stat span, "
              ".mlc-pass-time, .mlc-colhead div, .mlc-note, .mlc-diff-title, .mlc-pipeline-head)")
OVERFLOW = """output => ({output: [output.scrollWidth, output.clientWidth],
    views: Array.from(output.querySelectorAll(".mlc-view, .mlc-diff"), v => [v.scrollWidth, v.clientWidth]),
    page: [document.documentElement.scrollWidth, document.documentElement.clientWidth]})"""
CUT_OFF_COLUMNS = """() => Array.from(document.querySelectorAll(".mlc-split .mlc-side + .mlc-side"))
    .filter(side => side.getClientRects().length > 0)
    .filter(side => side.getBoundingClientRect().right
                    > side.closest(".mlc-diff").getBoundingClientRect().right + 1)
    .map(side => side.textContent)"""


@pytest.fixture(scope="module")
def executed(kernel_config, tmp_path_factory):  # noqa: F811  (the imported fixture)
    """The notebook run in a fresh kernel (kept as ir_diff.ipynb for a person to open)."""
    return run_cells(CELLS, kernel_config, tmp_path_factory.mktemp("ir-diff-notebook"), "ir_diff")


def test_each_view_is_one_html_output_with_a_text_fallback(executed):
    for index in (STEP_CELL, LONG_CELL, PIPELINE_CELL):
        outputs = executed.cells[index].outputs
        assert [out.output_type for out in outputs] == ["display_data"], (index, outputs)
        data = outputs[0].data
        assert 'class="mlc-view' in data["text/html"] and "\n+" in data["text/plain"], index
    pipeline = executed.cells[PIPELINE_CELL].outputs[0].data
    assert pipeline["text/html"].count('<details class="mlc-pass') == 5
    assert pipeline["text/html"].count('<details class="mlc-pass mlc-unchanged">') == 1
    assert pipeline["text/plain"].startswith("pass pipeline: 5 passes, 4 changed the module")


def visible_layout(diff) -> str:
    """Which layout of an IRDiff the browser shows: "split" or "unified"."""
    shown = [name for name in ("split", "unified") if diff.locator(f".mlc-{name}").first.is_visible()]
    assert len(shown) == 1, shown
    return shown[0]


def assert_fits(page, what: str) -> None:
    """No view makes its output, or the page, scroll sideways; every right column ends inside
    its diff box."""
    outputs = page.locator(".jp-OutputArea-output:has(.mlc-view)")
    assert outputs.count() == 3
    for index in range(outputs.count()):
        widths = outputs.nth(index).evaluate(OVERFLOW)
        for scroll, client in [widths["output"], widths["page"], *widths["views"]]:
            assert scroll <= client, f"{what}, output {index}: overflows sideways {widths}"
    cut = page.evaluate(CUT_OFF_COLUMNS)
    assert not cut, f"{what}: the after column ends past its diff box in {cut}"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_diffs_fit_and_changed_lines_are_readable_in_chromium(executed, page, theme, tmp_path):  # noqa: F811
    show_notebook(page, executed, theme, tmp_path / f"ir-diff-{theme}.html")
    outputs = page.locator(".jp-OutputArea-output:has(.mlc-view)")
    step, long_lines, pipeline = (outputs.nth(i) for i in range(3))

    assert visible_layout(step.locator(".mlc-diff")) == "split", "short lines at 1280 px: side by side"
    assert visible_layout(long_lines.locator(".mlc-diff")) == "unified", "150-character lines: unified"
    closed = pipeline.locator("details.mlc-pass:not([open]):not(.mlc-unchanged)")
    assert closed.count() >= 1, "chapter 7's pipeline is long: its last sections start closed"
    while closed.count():
        closed.first.locator(":scope > summary").click()
    codes = step.locator(".mlc-split .mlc-code").evaluate_all("cells => cells.map(c => c.textContent)")
    indented = '        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})'
    assert indented in codes, "indentation lost (nbconvert collapses whitespace outside <pre>)"
    assert_fits(page, f"{theme}, 1280 px")
    folds = page.locator("details.mlc-fold")
    assert folds.count() > 4 and not any(fold.get_attribute("open") is not None for fold in folds.all())
    passes = pipeline.locator("details.mlc-pass")
    assert passes.count() == 5
    unchanged = pipeline.locator("details.mlc-unchanged")
    assert unchanged.count() == 1 and unchanged.get_attribute("open") is None
    assert "DeadCodeElimination" in unchanged.inner_text() and "no change" in unchanged.inner_text()
    for name, output in {"step": step, "long-lines": long_lines, "pipeline": pipeline}.items():
        snapshot(output, tmp_path / f"{name}-{theme}.png")

    drawn = page.locator(CHANGED_TEXT).evaluate_all(DRAWN_COLOURS)
    assert len(drawn) > 100, f"only {len(drawn)} changed-line elements shown"
    for colours in drawn + page.locator(OTHER_TEXT).evaluate_all(DRAWN_COLOURS):
        ratio = contrast_ratio(colours["text"], colours["background"])
        assert ratio >= 4.5, f"{theme}: {colours['what']!r} at contrast {ratio:.2f} ({colours})"

    fold = page.locator("details.mlc-fold:visible").first
    fold.locator("summary").click()      # the control opens a fold; the views still fit
    assert fold.get_attribute("open") is not None
    page.set_viewport_size({"width": 640, "height": 900})
    assert visible_layout(step.locator(".mlc-diff")) == "unified", "short lines at 640 px: unified"
    assert_fits(page, f"{theme}, 640 px")
    snapshot(pipeline, tmp_path / f"pipeline-narrow-{theme}.png")

    page.emulate_media(forced_colors="active")   # Windows high contrast: fills are dropped
    rows = step.locator(".mlc-del, .mlc-add").evaluate_all(
        "rows => rows.filter(r => r.getClientRects().length).map(r => "
        "[getComputedStyle(r).outlineStyle, r.querySelector('.mlc-mark').textContent])")
    assert rows and all(style == "solid" and mark in "+-" for style, mark in rows), rows
