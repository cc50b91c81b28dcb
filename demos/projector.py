"""What every classroom demo does first: large fonts for a projector, and the quick settings.

    from projector import DEMO_QUICK, enlarge
    enlarge()

``DEMO_QUICK`` is true when ``MLC_LAB_DEMO_QUICK`` is set (the test suite sets it): the demos
that tune then tune for a few trials only. ``enlarge`` sets matplotlib's font sizes and, through
a little CSS, those of JupyterLab's code and outputs; the CSS stays until the page is reloaded.
"""
import os

DEMO_QUICK = os.environ.get("MLC_LAB_DEMO_QUICK", "") not in ("", "0")
FIGURE_FONTS = {"font.size": 15, "axes.titlesize": 17, "axes.labelsize": 15, "xtick.labelsize": 13,
                "ytick.labelsize": 13, "legend.fontsize": 13, "figure.titlesize": 18,
                "lines.linewidth": 2.5, "figure.dpi": 100}
PAGE_FONTS = """<style>
html:root { --jp-code-font-size: 17px; --jp-content-font-size1: 17px; --jp-ui-font-size1: 15px; }
.jp-OutputArea-output pre { font-size: 17px; line-height: 1.35; }
.jp-OutputArea-output :is(.mlc-graph-output, .mlc-lab-loop-nest) svg { zoom: 1.2; }
</style>"""


def enlarge() -> None:
    """Large fonts in figures and in JupyterLab; says so when the quick settings are on."""
    import matplotlib as mpl
    from IPython.display import HTML, display
    mpl.rcParams.update(FIGURE_FONTS)
    display(HTML(PAGE_FONTS))
    if DEMO_QUICK:
        print("MLC_LAB_DEMO_QUICK is set: short settings")
