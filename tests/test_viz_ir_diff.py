"""IR diffs and pass-pipeline views (mlc_lab.viz.ir_diff): the HTML they render (both layouts,
folded context, escaping, theme variables, no fixed widths), their text fallback, and PrintDiff
recording one section per pass. tests/test_browser_ir_diff.py checks the same HTML in Chromium."""
import re

import pytest

import mlc_lab
from corpus import mm_relu
from mlc_lab import tir
from mlc_lab.ir import diff, show_diff
from mlc_lab.ir.diff import side_by_side_html
from mlc_lab.ir.transform import PassContext, PrintDiff, Sequential, module_pass
from mlc_lab.relax import transform as RT
from mlc_lab.viz import IRDiff, PipelineView, pipeline
from mlc_lab.viz.ir_diff import FIT_WIDTHS
from test_pass_infra import LOWERING_NAMES, small_module, small_prim_func


def reordered():
    """Chapter 2's step: mm_relu before and after ``sch.reorder(k, i)`` (one line changes)."""
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.reorder(k, i)
    return sch.history[0].mod, sch.mod


def rows(html: str, layout: str) -> str:
    """The HTML of one layout (``mlc-unified`` or ``mlc-split``) of a diff rendered with "auto"."""
    start = html.index(f'<div class="{layout}"')
    end = html.index('<div class="mlc-split"', start) if layout == "mlc-unified" else len(html)
    return html[start:end]


def test_auto_layout_holds_unified_and_a_split_shown_by_a_container_query():
    html = IRDiff(*reordered(), "sch.reorder(l3, l1)")._repr_html_()
    assert '<div class="mlc-split" hidden>' in html            # without CSS only the unified one shows
    unified, split = rows(html, "mlc-unified"), rows(html, "mlc-split")
    assert unified.count('class="mlc-uline mlc-del"') == 1 and unified.count('class="mlc-uline mlc-add"') == 1
    assert split.count('class="mlc-side mlc-del"') == 1 and split.count('class="mlc-side mlc-add"') == 1
    assert '<span class="mlc-mark">-</span>' in unified and '<span class="mlc-mark">+</span>' in split
    [width] = re.findall(r'class="mlc-fit mlc-fit-(\d+)"', html)
    assert int(width) in FIT_WIDTHS
    assert f"@container (min-width: {width}ch)" in html and "container-type: inline-size" in html
    assert "sch.reorder(l3, l1)" in html and "+1</span>" in html and "-1</span>" in html


def test_fixed_layouts_render_one_layout():
    before, after = reordered()
    split = IRDiff(before, after, layout="split")._repr_html_()
    assert 'class="mlc-split"' in split and 'class="mlc-unified"' not in split and " hidden" not in split
    assert split == side_by_side_html(before, after)
    unified = IRDiff(before, after, layout="unified")._repr_html_()
    assert 'class="mlc-unified"' in unified and 'class="mlc-split"' not in unified
    with pytest.raises(ValueError, match="layout must be one of"):
        IRDiff(before, after, layout="wide")


def test_unchanged_runs_fold_into_closed_details_with_context_kept():
    before, after = reordered()
    lines = before.script().splitlines()
    changed = next(n for n, line in enumerate(lines) if "for i, j, k in T.grid" in line)
    unified = rows(IRDiff(before, after, context=2)._repr_html_(), "mlc-unified")
    folds = re.findall(r'<details class="mlc-fold"><summary>(\d+) unchanged lines \((\d+)-(\d+)\)', unified)
    assert folds == [(str(changed - 2), "1", str(changed - 2)),
                     (str(len(lines) - changed - 3), str(changed + 4), str(len(lines)))]
    assert "<details open" not in unified and "mlc-fold\" open" not in unified
    shown = unified.split("</details>")[1].split("<details")[0]   # between the folds
    assert shown.count('<div class="mlc-uline">') == 4            # two context lines each side


def test_short_unchanged_runs_are_not_folded():
    html = IRDiff("a\nb\nc\nd", "a\nb\nC\nd", context=1)._repr_html_()
    assert "mlc-fold" not in html.split("</style>")[1]


def test_content_is_escaped_and_highlighted():
    before = 'x = T.call("<script>alert(1)</script>") # a & b'
    after = 'x = T.call("<b>bold</b>") # a & b'
    html = IRDiff(before, after, title="<i>title</i>")._repr_html_()
    body = html.split("</style>", 1)[1]
    assert "<script>" not in body and "<b>" not in body and "<i>" not in body
    assert "&lt;script&gt;" in body and "&amp;lt;" not in body and "&lt;i&gt;title&lt;/i&gt;" in body
    assert '<span class="mlc-tok-ns">T.call</span>' in body
    assert '<span class="mlc-tok-string">&quot;&lt;b&gt;bold&lt;/b&gt;&quot;</span>' in body
    assert '<span class="mlc-tok-comment"># a &amp; b</span>' in body


def test_css_uses_theme_variables_and_no_fixed_pixel_widths():
    html = pipeline(small_module(), [RT.LegalizeOps(), RT.DeadCodeElimination()])._repr_html_()
    for variable in ["--jp-content-font-color1", "--jp-layout-color1", "--jp-code-font-family",
                     "--jp-mirror-editor-keyword-color", "--jp-border-color2"]:
        assert f"var({variable}" in html, variable
    assert "prefers-color-scheme: dark" in html and "forced-colors: active" in html
    widths = re.findall(r"(?:width|grid-template-columns|margin-left|padding-left)\s*:[^;\"}]*?\d+px", html)
    assert not widths, widths
    assert "white-space: pre-wrap" in html and "overflow-wrap: anywhere" in html
    assert "white-space: pre;" not in html
    assert "nowrap" not in re.sub(r"\.mlc-(stat|pass-time) \{[^}]*\}", "", html)   # short labels only


def test_long_lines_wrap_in_split_rather_than_ask_for_ever_wider_containers():
    long_before = "    y = " + " + ".join(f"x{i}" for i in range(80))
    html = IRDiff(long_before, long_before.replace("x7 ", "z7 "))._repr_html_()
    [width] = re.findall(r'class="mlc-fit mlc-fit-(\d+)"', html)
    assert int(width) <= max(FIT_WIDTHS)
    # wrapped lines hang under their own indentation, set by a class (JupyterLab's sanitizer drops
    # custom properties in style attributes)
    assert '<pre class="mlc-code mlc-ind-4">' in html and ".mlc-view .mlc-ind-4 { --mlc-indent: 4ch; }" in html
    assert 'style="--' not in html


def test_text_fallback_is_the_unified_diff(capsys, monkeypatch):
    before, after = reordered()
    view = IRDiff(before, after, "sch.reorder(l3, l1)")
    assert str(view) == repr(view) == "sch.reorder(l3, l1)\n" + diff(before, after)
    assert str(IRDiff(before, before)) == "(no change)"
    view.show()
    show_diff(before, after, "step")
    out = capsys.readouterr().out
    assert out == f"{view}\nstep\n{diff(before, after)}\n"
    assert (view.added, view.removed, view.changed) == (1, 1, True)


def test_no_change_renders_a_note_and_the_module_folded():
    before, _ = reordered()
    html = IRDiff(before, before, "noop")._repr_html_()
    assert "no change" in html and html.count('<details class="mlc-fold">') == 1
    assert "mlc-split" not in html.split("</style>")[1]


def test_pipeline_has_one_section_per_pass_and_unchanged_passes_closed():
    view = pipeline(small_module(), Sequential([RT.LegalizeOps(), RT.DeadCodeElimination(),
                                                RT.AnnotateTIROpPattern()]))
    assert [r.name for r in view.records] == ["LegalizeOps", "DeadCodeElimination", "AnnotateTIROpPattern"]
    assert isinstance(view.mod, mlc_lab.IRModule) and "def exp(" in view.mod.script()
    html = view._repr_html_()
    sections = re.findall(r'<details class="mlc-pass( mlc-unchanged)?"( open)?>(.*?)</summary>', html)
    assert [(unchanged != "", opened != "") for unchanged, opened, _ in sections] == \
        [(False, True), (True, False), (False, True)]
    names = [re.search(r'mlc-pass-name">(\w+)<', summary).group(1) for _, _, summary in sections]
    assert names == ["LegalizeOps", "DeadCodeElimination", "AnnotateTIROpPattern"]
    assert all(re.search(r'mlc-pass-time">[\d.]+ m?s<', summary) for _, _, summary in sections)
    assert "no change" in sections[1][2] and re.search(r"\+\d+</span>", sections[0][2])
    assert "3 passes, 2 changed the module" in html
    text = str(view)
    assert text.startswith("pass pipeline: 3 passes, 2 changed the module, ")
    assert re.search(r"# DeadCodeElimination  \([\d.]+ m?s, no change\)\n\(no change\)", text)
    assert re.search(r"# LegalizeOps  \([\d.]+ m?s, \+\d+ -\d+ lines\)\n--- before", text)


def test_pipeline_keeps_the_current_context_settings():
    with PassContext(disabled_pass=["DeadCodeElimination"]):
        view = pipeline(small_module(), Sequential([RT.LegalizeOps(), RT.DeadCodeElimination()]))
    assert [r.name for r in view.records] == ["LegalizeOps"]


@pytest.fixture
def jupyter(monkeypatch):
    """PrintDiff as in a Jupyter kernel; returns the list of (display or update, view) it sent."""
    shown = []

    class Handle:
        def update(self, view):
            shown.append(("update", view))

    def display(view, display_id=False):
        assert display_id is True
        shown.append(("display", view))
        return Handle()

    import IPython.display
    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(mlc_lab.ir.transform, "in_notebook", lambda: True)
    return shown


def test_print_diff_in_jupyter_shows_one_view_updated_in_place(jupyter, monkeypatch, capsys):
    monkeypatch.setattr(PrintDiff, "REFRESH_S", 60.0)
    with PassContext(instruments=[PrintDiff()]):
        mlc_lab.lower(small_prim_func())
    assert capsys.readouterr().out == ""
    assert [kind for kind, _ in jupyter] == ["display", "update"]   # the first pass, then the exit
    final = jupyter[-1][1]
    assert isinstance(final, PipelineView) and [r.name for r in final.records] == LOWERING_NAMES
    assert final._repr_html_().count('<details class="mlc-pass') == len(LOWERING_NAMES)


def test_print_diff_in_jupyter_updates_as_passes_finish(jupyter, monkeypatch):
    monkeypatch.setattr(PrintDiff, "REFRESH_S", 0.0)
    with PassContext(instruments=[PrintDiff()]):
        mlc_lab.lower(small_prim_func())
    assert [kind for kind, _ in jupyter] == ["display"] + ["update"] * (len(LOWERING_NAMES) - 1)
    assert [len(view.records) for _, view in jupyter] == list(range(1, len(LOWERING_NAMES) + 1))


def test_print_diff_without_show_only_records(capsys):
    diffs = PrintDiff(show=False)
    with PassContext(instruments=[diffs]):
        mlc_lab.lower(small_prim_func())
    assert capsys.readouterr().out == ""
    assert [r.name for r in diffs.view().records] == LOWERING_NAMES
    assert all(r.seconds >= 0 and r.depth == 0 for r in diffs.records)
    with PassContext(instruments=[diffs]):   # a new context starts a new record
        RT.LegalizeOps()(small_module())
    assert [r.name for r in diffs.records] == ["LegalizeOps"]


def test_nested_passes_are_indented_in_start_order():
    @module_pass(name="outer")
    def outer(mod, ctx):
        return RT.LegalizeOps()(mod)

    diffs = PrintDiff(show=False)
    with PassContext(instruments=[diffs]):
        outer(small_module())
    assert [(r.name, r.depth) for r in diffs.records] == [("outer", 0), ("LegalizeOps", 1)]
    view = diffs.view()
    assert view.seconds == diffs.records[0].seconds
    assert 'style="margin-left: 2ch"' in view._repr_html_()


def test_big_pipelines_open_sections_only_within_a_line_budget():
    view = pipeline(small_module(), [RT.LegalizeOps(), RT.AnnotateTIROpPattern()])
    first, second = (record.diff.shown_lines for record in view.records)
    assert first > second > 0

    def opened(open_lines):
        html = PipelineView(view.records, open_lines=open_lines)._repr_html_()
        return [bool(flag) for flag in re.findall(r'<details class="mlc-pass"( open)?>', html)]

    assert opened(first + second) == [True, True]
    assert opened(first) == [True, False]
    assert opened(second) == [False, True]     # a later, smaller diff may still open
    assert opened(0) == [False, False]
