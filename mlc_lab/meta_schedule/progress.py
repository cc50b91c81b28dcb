"""What tuning shows while it runs: a tqdm progress bar with the best GFLOPS so far (in a
terminal and in a notebook), and inside Jupyter a live tuning curve redrawn after every batch.
``database.plot()`` draws the same curve afterwards.

The curve has one series per search (records carry the search that proposed them, e.g.
"evolutionary/gbdt" or "random"): each trial's GFLOPS as a dot (a failed trial at 0) and the
best so far as a line, against the trial number within that search. Tuning the same workload
twice, once with the cost model and once at random, puts both curves on one axes.
"""
from __future__ import annotations

import io

from .._env import in_notebook


def curves(records, label: str | None = None) -> dict:
    """{search label: [GFLOPS of each trial, in order]} of ``records``; ``label`` names the
    series instead (prefixing the search's name when the records come from several)."""
    series: dict = {}
    for record in records:
        series.setdefault(record.search or "search", []).append(record.gflops)
    if label is not None:
        series = {label if len(series) == 1 else f"{label} {name}": values
                  for name, values in series.items()}
    return series


def draw_curves(ax, series: dict, title: str | None = None):
    """Draw ``curves()`` on a matplotlib Axes: dots per trial, a best-so-far line per search.
    Colours continue after the curves the Axes holds, so several databases share one plot."""
    from matplotlib.ticker import MaxNLocator
    start = len(ax.get_lines())
    for number, (label, gflops) in enumerate(series.items(), start):
        trials = range(1, len(gflops) + 1)
        best, running = [], 0.0
        for g in gflops:
            running = max(running, g)
            best.append(running)
        color = f"C{number % 10}"
        ax.scatter(trials, gflops, s=10, alpha=0.35, color=color)
        ax.plot(trials, best, color=color, linewidth=2, label=f"{label}: best {running:.1f}")
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))   # trials are counted: no "2.5" tick
    ax.set_ylabel("GFLOPS")
    if title:
        ax.set_title(title)
    if series:
        ax.legend(loc="lower right", fontsize="small")
    ax.grid(alpha=0.3)
    return ax


class LiveCurve:
    """A tuning curve in a Jupyter output, replaced in place after every batch (an SVG drawn
    with matplotlib's Agg canvas, so no interactive backend is needed). Outside Jupyter it
    draws nothing."""

    def __init__(self, title: str):
        self.title = title
        self.handle = None

    def update(self, records) -> None:
        from IPython.display import SVG, display
        svg = SVG(self._render(curves(records)))
        if self.handle is None:
            self.handle = display(svg, display_id=True)
        else:
            self.handle.update(svg)

    def _render(self, series: dict) -> str:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        fig = Figure(figsize=(6, 3.2))
        FigureCanvasAgg(fig)
        draw_curves(fig.add_subplot(), series, self.title)
        fig.tight_layout()
        out = io.StringIO()
        fig.savefig(out, format="svg", facecolor="white")
        return out.getvalue()


class TuningProgress:
    """The progress bar, and the live curve when running in Jupyter (``live=None``: when
    there). ``quiet`` shows neither."""

    def __init__(self, total: int, task_name: str, quiet: bool = False, live: bool | None = None):
        from tqdm.auto import tqdm
        self.bar = tqdm(total=total, desc=task_name, unit="trial", disable=quiet)
        show_live = (in_notebook() if live is None else live) and not quiet
        self.curve = LiveCurve(f"tuning {task_name}") if show_live else None

    def update(self, n: int, best, records) -> None:
        if best is not None:
            self.bar.set_postfix_str(f"best {best.gflops:.2f} GFLOPS ({best.seconds * 1e3:.3f} ms)")
        self.bar.update(n)
        if self.curve is not None:
            self.curve.update(records)

    def close(self) -> None:
        self.bar.close()
