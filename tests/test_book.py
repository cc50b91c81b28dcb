"""The course's site (`make book`): book/build.py renders executed chapters with Sphinx and myst-nb,
and headless Chromium reads the pages: each chapter with its outputs (printed IR, IR diffs, graphs,
the schedule stepper, tuning curves), the links between pages, and text readable in the light and
the dark theme.

No chapter is executed twice: tests/test_notebooks.py keeps the chapters it ran (conftest.py puts
this file after it) and the site is built from those. Of chapters 01 and 02, which show every kind
of view, this file executes those that it did not run (all when run alone: about 10 s).
"""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from browser import COLOURS, assert_readable, contrast_ratio, snapshot
from test_notebooks import executed_chapters

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "book" / "build.py"
ALWAYS_BUILT = ("01_introduction.ipynb", "02_tensor_program_abstraction.ipynb")
# What each chapter's outputs must show, as (what, CSS selector inside an output, text it holds).
SHOWN = {
    "00": [("a figure", "img", "")],
    "01": [("an IR diff", ".mlc-irdiff", "sch.split"), ("a relax graph", "svg.mlc-graph", "matmul"),
           ("printed loop IR", ".mlc-code", "T.grid")],
    "02": [("a printed loop nest", ".mlc-code", "for i, j, k in T.grid(128, 128, 128)"),
           ("an IR diff", ".mlc-irdiff", "reorder"),
           ("the schedule stepper", ".mlc-lab-stepper", "sch.get_block")],
    "03": [("a relax graph", "svg.mlc-graph", "matmul"), ("a figure", "img", ""),
           ("a graph before and after fusion", ".mlc-graph-diff svg.mlc-graph", "")],
    "04": [("tuning progress", ".mlc-book-widget progress", ""), ("a tuning curve", "img", "")],
    "05": [("printed loop IR", ".mlc-code", "T.prim_func")],
    "06": [("a printed GPU kernel", ".mlc-code", "threadIdx"), ("a figure", "img", "")],
    "07": [("a relax graph", "svg.mlc-graph", ""), ("an IR diff", ".mlc-irdiff", ""),
           ("the IR after each pass", ".mlc-pipeline", "FuseTIR")],
    "08": [("an IR diff", ".mlc-irdiff", "tensorize"), ("the schedule stepper", ".mlc-lab-stepper", "sch.get_block"),
           ("a figure", "img", "")],
    "09": [("printed relax with a symbolic length", ".mlc-code", "R.Tensor((1, n, 4, 32)"),
           ("a graph before and after fusion", ".mlc-graph-diff svg.mlc-graph", ""),
           ("an IR diff", ".mlc-irdiff", "compute_inline"), ("a figure", "img", "")],
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> list:
    """The chapters this session executed, with chapters 01 and 02 executed here if it did not."""
    folder = executed_chapters(tmp_path_factory)
    missing = [REPO / "chapters" / name for name in ALWAYS_BUILT if not (folder / name).exists()]
    if missing:
        spec = importlib.util.spec_from_file_location("book_build", BUILD)
        build = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(build)
        build.execute_chapters(missing, folder)
    return sorted(folder.glob("*.ipynb"))


@pytest.fixture(scope="module")
def site(executed, tmp_path_factory) -> Path:
    """The site, built by `make book`'s own script from the executed chapters."""
    out = tmp_path_factory.mktemp("book") / "book"
    done = subprocess.run([sys.executable, str(BUILD), "--executed", str(executed[0].parent), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the book did not build:\n{done.stdout}\n{done.stderr}"
    return out


def chapter_page(site: Path, notebook: Path) -> Path:
    return site / "chapters" / f"{notebook.stem}.html"


def test_every_chapter_has_a_page_with_its_outputs(site, executed, page):
    for notebook in executed:
        nb = nbformat.read(notebook, as_version=4)
        page.goto(chapter_page(site, notebook).as_uri())
        title = nb.cells[0].source.splitlines()[0].lstrip("# ")
        assert page.locator("article h1").first.inner_text().strip("#¶ \n") == title
        with_outputs = sum(1 for cell in nb.cells if cell.cell_type == "code" and cell.outputs)
        assert page.locator(".cell_output").count() == with_outputs, f"{notebook.name}: outputs missing"
        bare = page.locator(".cell_output", has_text=re.compile(r"^\s*[VH]Box\(children="))
        assert bare.count() == 0, f"{notebook.name}: a widget shows only its repr"
        assert page.locator("script[type*=widget]").count() == 0, "pages must not need widget scripts"


def test_outputs_show_what_the_chapters_draw(site, executed, page):
    checked = 0
    for notebook in executed:
        page.goto(chapter_page(site, notebook).as_uri())
        for what, selector, text in SHOWN.get(notebook.name[:2], []):
            found = page.locator(f".cell_output {selector}", has_text=text or None)
            assert found.count() > 0, f"{notebook.name}: no {what} ({selector} with {text!r}) in its outputs"
            found.first.scroll_into_view_if_needed()
            assert found.first.is_visible(), f"{notebook.name}: {what} is hidden"
            if selector.endswith("img"):
                assert found.first.evaluate("img => img.complete && img.naturalWidth > 0"), f"{what} did not load"
            checked += 1
    assert checked >= 5, f"only {checked} outputs checked: the site lacks the chapters that draw"


def test_navigation_links_the_pages_in_order(site, executed, page):
    page.goto((site / "index.html").as_uri())
    links = page.locator(".sidebar-tree a.reference")
    assert links.count() == len(executed)
    links.first.click()
    assert page.url.endswith(f"chapters/{executed[0].stem}.html")
    for notebook in executed[1:]:
        page.locator("a.next-page").click()
        assert page.url.endswith(f"chapters/{notebook.stem}.html")
    if len(executed) > 1:
        page.locator("a.prev-page").click()
        assert page.url.endswith(f"chapters/{executed[-2].stem}.html")
    page.locator("a.sidebar-brand").click()
    assert page.url.endswith("index.html")


@pytest.mark.parametrize("system, chosen", [("light", None), ("dark", None), ("light", "dark")],
                         ids=["light", "dark", "dark-chosen-on-a-light-system"])
def test_text_is_readable_in_both_themes(site, executed, page, system, chosen, tmp_path):
    notebook = next((nb for nb in executed if nb.name.startswith("02")), executed[0])
    page.emulate_media(color_scheme=system)
    page.goto(chapter_page(site, notebook).as_uri())
    if chosen:      # the theme's toggle: from following the system to the other theme
        page.locator(".theme-toggle:visible").first.click()
        assert page.locator("body").get_attribute("data-theme") == chosen
    dark = (chosen or system) == "dark"
    background = page.evaluate(f"({COLOURS})(document.querySelector('article'))")["background"]
    assert (sum(background) / 3 < 80) == dark, f"page background {background} in the {chosen or system} theme"
    for what, selector in [("body text", "article p"), ("code cell", ".cell_input pre"),
                           ("printed output", ".cell_output pre"), ("IR view", ".cell_output .mlc-code pre")]:
        found = page.locator(selector)
        assert found.count() > 0, f"{notebook.name} has no {what}"
        colours = found.first.evaluate(COLOURS)
        ratio = contrast_ratio(colours["text"], colours["background"])
        assert ratio >= 4.5, f"{what}: contrast {ratio:.1f} ({colours}) in the {chosen or system} theme"
    pictures = page.locator(".cell_output svg")
    assert pictures.count() > 0, f"{notebook.name} shows no pictures"
    pictures.first.scroll_into_view_if_needed()
    assert_readable(snapshot(pictures.first, tmp_path / "picture.png"), f"a picture in the {chosen or system} theme")
