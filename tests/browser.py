"""Checks of pictures and widgets in a real browser: Debian's headless Chromium driven by Playwright.

conftest.py registers the ``chromium`` and ``page`` fixtures once for the session; a test opens HTML with ``show``,
screenshots an element with ``snapshot`` and checks its pixels with ``assert_readable``.
Without Chromium or Playwright the tests skip on a developer machine and fail in CI (``CI`` set),
so a CI machine that lost its browser cannot pass by skipping them.
"""
import io
import os
import re
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")   # Debian's; Playwright's own browser downloads are not used
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LUMINANCE = np.array([0.2126, 0.7152, 0.0722])   # Rec. 709 weights of R, G, B


def require_chromium() -> None:
    """Skip the test when Chromium or Playwright is missing; in CI, fail instead."""
    try:
        import playwright.sync_api  # noqa: F401
        missing = None if CHROMIUM.exists() else f"{CHROMIUM} (apt-get install chromium)"
    except ImportError:
        missing = "the playwright package (pip install -e '.[test]')"
    if missing is None:
        return
    reason = f"browser tests need {missing}"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so they fail rather than skip", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the whole session."""
    require_chromium()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    """A fresh page (own cookies and storage) that loads nothing from the network: pages exported
    from notebooks link require.js and MathJax on CDNs, which are unreachable here."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.route(re.compile(r"^https?://"), lambda route: route.abort())
    yield page
    context.close()


def show(page, html: str, path: Path) -> None:
    """Write ``html`` to ``path`` and open it as a file, as a reader opens a saved export."""
    path.write_text(html, encoding="utf-8")
    page.goto(path.as_uri())


def show_notebook(page, nb, theme: str, path: Path) -> None:
    """Export executed notebook ``nb`` as JupyterLab's HTML in ``theme`` ("light" or "dark"),
    open it (``show``), and check that the page took that theme."""
    from nbconvert import HTMLExporter
    html, _ = HTMLExporter(template_name="lab", theme=theme).from_notebook_node(nb)
    show(page, html, path)
    assert page.locator("body").get_attribute("data-jp-theme-light") == str(theme == "light").lower()


def snapshot(locator, path: Path) -> np.ndarray:
    """Screenshot one element, keep it at ``path`` for a person to look at, and return its
    pixels as an RGB array (height, width, 3) of 0..255."""
    from PIL import Image
    png = locator.screenshot(path=path)
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def assert_readable(pixels: np.ndarray, what: str, border: int = 3) -> None:
    """A picture readable on a light and on a dark page: it brings its own near-white
    background (its outer ``border`` pixels) and enough dark ink (text, axes, lines) inside.
    An element's screenshot may take in a row of the page at a fractional edge, hence the
    median at the border and the ink counted only inside it."""
    luminance = pixels @ LUMINANCE
    edge = np.concatenate([luminance[:border].ravel(), luminance[-border:].ravel(),
                           luminance[:, :border].ravel(), luminance[:, -border:].ravel()])
    assert np.median(edge) > 235, f"{what}: background is not white (median edge luminance {np.median(edge):.0f})"
    dark = (luminance[border:-border, border:-border] < 100).mean()
    assert dark > 0.005, f"{what}: too little dark ink for contrast ({dark:.2%} of pixels)"


# The text colour of an element and the first opaque background behind it, as [r, g, b] lists.
COLOURS = """element => {
    const rgb = colour => colour.match(/[\\d.]+/g).map(Number);
    let node = element, background = [255, 255, 255];
    for (; node; node = node.parentElement) {
        const found = rgb(getComputedStyle(node).backgroundColor);
        if (found.length < 4 || found[3] > 0) { background = found.slice(0, 3); break; }
    }
    return {text: rgb(getComputedStyle(element).color).slice(0, 3), background};
}"""


def contrast_ratio(first, second) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (0..255): 1 (none) to 21 (black on white)."""
    def luminance(rgb):
        c = np.asarray(rgb, dtype=float) / 255
        c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])
    high, low = sorted([luminance(first), luminance(second)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def run_cells(cells, kernel_config, workdir: Path, name: str):
    """A notebook of ``cells`` run in a fresh kernel in ``workdir``, where it is also kept as
    ``<name>.ipynb`` for a person to open; returns the executed notebook."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3", config=kernel_config,
                   resources={"metadata": {"path": str(workdir)}}).execute()
    nbformat.write(nb, workdir / f"{name}.ipynb")
    return nb
