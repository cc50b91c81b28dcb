"""The executed HTML copies of the classroom demos (demos/html/, written by ``make demos-html``), the
lecturer's fallback when a live run fails: one per demo and none without a demo, each showing
exactly the demo's code cells, run without an error, with every widget in its static view (an
export that kept widget state would need JavaScript from the network to draw them)."""
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
DEMOS = sorted((REPO / "demos").glob("*.ipynb"))
HTML = REPO / "demos" / "html"
REMAKE = "run `make demos-html` and commit demos/html/"


class ExportedCells(HTMLParser):
    """The code of each code cell of a page exported with nbconvert's lab template, and how many
    outputs show an error (stderr with a traceback or an error's name, as JupyterLab shows them)."""

    def __init__(self):
        super().__init__()
        self.code, self.errors, self._depth, self._editor, self._stderr, self._text = [], 0, 0, None, None, ""
        self._in_pre = False

    def handle_starttag(self, tag, attrs):
        self._in_pre |= tag == "pre" and self._editor is not None
        if tag != "div":
            return
        self._depth += 1
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if "jp-InputArea-editor" in classes:
            self._editor = self._depth
            self.code.append("")
        elif "jp-OutputArea-output" in classes and attrs.get("data-mime-type") == "application/vnd.jupyter.stderr":
            self._stderr, self._text = self._depth, ""

    def handle_endtag(self, tag):
        self._in_pre &= tag != "pre"
        if tag != "div":
            return
        if self._editor == self._depth:
            self._editor = None
        if self._stderr == self._depth:
            self._stderr = None
            self.errors += bool(re.search(r"Traceback|Error", self._text))
        self._depth -= 1

    def handle_data(self, data):
        if self._in_pre:
            self.code[-1] += data
        if self._stderr is not None:
            self._text += data


def exported(path: Path) -> ExportedCells:
    parser = ExportedCells()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_demo_has_one_copy_and_every_copy_a_demo():
    assert DEMOS, "demos/ holds no notebooks"
    copies = {path.stem for path in HTML.glob("*.html")}
    demos = {path.stem for path in DEMOS}
    assert not demos - copies, f"demos without an HTML copy: {sorted(demos - copies)}; {REMAKE}"
    assert not copies - demos, f"HTML copies of no demo: {sorted(copies - demos)}; delete them"


@pytest.mark.parametrize("demo", DEMOS, ids=lambda path: path.stem)
def test_copy_shows_the_demos_code_run_without_errors(demo):
    copy = HTML / f"{demo.stem}.html"
    if not copy.exists():
        pytest.fail(f"{copy.relative_to(REPO)} is missing; {REMAKE}", pytrace=False)
    page = exported(copy)
    sources = [cell.source for cell in nbformat.read(demo, as_version=4).cells if cell.cell_type == "code"]
    shown = [code.rstrip("\n") for code in page.code]
    stale = [i for i, (old, new) in enumerate(zip(shown, sources)) if old != new.rstrip("\n")]
    assert len(shown) == len(sources) and not stale, (
        f"{copy.relative_to(REPO)} is stale: {len(shown)} code cells against {len(sources)} in the demo, "
        f"differing cells {stale}; {REMAKE}")
    assert page.errors == 0, f"{copy.relative_to(REPO)} shows {page.errors} tracebacks; fix the demo, then {REMAKE}"
    text = copy.read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in text, \
        f"{copy.relative_to(REPO)} keeps widget state, so its widgets need the network to show; {REMAKE}"


def test_the_parser_reads_code_and_errors_of_an_export(tmp_path):
    """The checks above read what they should from nbconvert's page: each code cell's text
    (escaped and highlighted in the page), and error outputs but not mere warnings."""
    from nbconvert import HTMLExporter
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# title"),
                                         nbformat.v4.new_code_cell("x = 1 < 2\nprint(x)\n"),
                                         nbformat.v4.new_code_cell("def f():\n    return '<b>'")])
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stderr", text="a warning\n")]
    exporter = HTMLExporter(template_name="lab")
    (tmp_path / "page.html").write_text(exporter.from_notebook_node(nb)[0], encoding="utf-8")
    page = exported(tmp_path / "page.html")
    assert [code.rstrip("\n") for code in page.code] == ["x = 1 < 2\nprint(x)", "def f():\n    return '<b>'"]
    assert page.errors == 0
    nb.cells[2].outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                                                  traceback=["\x1b[31mZeroDivisionError\x1b[39m  Traceback"])]
    (tmp_path / "page.html").write_text(exporter.from_notebook_node(nb)[0], encoding="utf-8")
    assert exported(tmp_path / "page.html").errors == 1


def test_copies_share_one_template_stylesheet_that_a_browser_applies(page):
    """``demos/share_css.py`` (run by ``make demos-html``) moved the template's stylesheet, the same
    in every page, to demos/html/lab.css: each page links it and keeps no copy in its head, and a
    page opened from disk gets JupyterLab's layout from it."""
    shared = HTML / "lab.css"
    assert shared.exists() and ".jp-Cell" in shared.read_text(encoding="utf-8"), f"{shared.name} is missing; {REMAKE}"
    for copy in sorted(HTML.glob("*.html")):
        head = copy.read_text(encoding="utf-8").split("<body", 1)[0]
        assert '<link rel="stylesheet" href="lab.css">' in head and "<style" not in head, \
            f"{copy.name} carries the template stylesheet itself; {REMAKE}"
    page.goto((HTML / f"{DEMOS[0].stem}.html").as_uri())
    assert page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--jp-layout-color1').trim()"), \
        "the page does not get JupyterLab's theme variables from lab.css"
