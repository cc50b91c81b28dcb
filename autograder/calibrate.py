"""``mlc-lab calibrate SOURCE``: the speed ratios the source's own solutions reach on this
machine, next to the thresholds of its timed tests, so an instructor sets them for the machine
that grades.

A timed test ends with ``checks.by_ratio(ratio, full=..., partial=..., points=...)``; its
message (``by_ratio`` always gives one) carries the ratio measured. The source notebook, its
solutions in place, is graded ``runs`` times exactly as a submission is (sandbox, one core per
program, interleaved timing), and each timed test's ratios are summarised. A threshold is safe
when the solutions' slowest run still clears it with a margin: a student whose answer is as
good as the model answer must not lose points to a busy machine.
"""
from __future__ import annotations

import ast
import re
import shutil
import statistics
import tempfile
from pathlib import Path

from . import notebook
from .checks import RATIO_IN_MESSAGE

MARGIN = 1.15     # the slowest solution run should beat `full` by this factor


def thresholds(source: str) -> dict | None:
    """``{"full": x, "partial": y}`` of the by_ratio call in a test cell's source (None if none, or
    not given as numbers)."""
    tree = ast.parse("\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith("###")))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "by_ratio":
            found = {kw.arg: kw.value.value for kw in node.keywords
                     if kw.arg in ("full", "partial") and isinstance(kw.value, ast.Constant)}
            return found if "full" in found else None
    return None


def verdict(ratios: list, full: float) -> str:
    slowest = min(ratios)
    if slowest < full:
        return f"too strict: a solution run reached only {slowest:.2f}x; set full <= {slowest / MARGIN:.2f}"
    if slowest < full * MARGIN:
        return f"tight: the slowest run ({slowest:.2f}x) clears full by less than {MARGIN - 1:.0%}"
    return "ok"


def calibrate(source: Path, runs: int = 3, limits: dict | None = None) -> list[dict]:
    """One row per timed test: its grade_id, thresholds, the ratios of ``runs`` gradings of the
    solutions, and the verdict."""
    from .batch import grade_many
    nb = notebook.read(source)
    timed = {t.grade_id: thresholds(t.source) for t in notebook.tasks(nb)}
    timed = {gid: th for gid, th in timed.items() if th}
    if not timed:
        return []
    work = Path(tempfile.mkdtemp(prefix="mlc-lab-calibrate-"))
    try:
        copies = []
        for run in range(runs):
            copies.append(work / f"solution_run{run + 1}.ipynb")
            shutil.copyfile(source, copies[-1])
        results = grade_many(source, copies, work / "out", jobs=1, limits=limits, progress_bar=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for gid, th in timed.items():
        ratios, failures = [], []
        for result in results:
            test = next(t for t in result["tests"] if t["grade_id"] == gid)
            found = re.search(RATIO_IN_MESSAGE, test["output"])
            (ratios.append(float(found.group(1))) if found else failures.append(test["output"]))
        rows.append({"grade_id": gid, **th, "ratios": ratios, "failures": failures,
                     "verdict": verdict(ratios, th["full"]) if ratios and not failures
                     else f"the solution failed the test: {(failures or ['no ratio reported'])[0][:200]}"})
    return rows


def format_rows(rows: list) -> str:
    if not rows:
        return "no timed tests (checks.by_ratio) in this notebook"
    lines = [f"{'test':<16} {'full':>6} {'partial':>8} {'slowest':>8} {'median':>8}  verdict"]
    for r in rows:
        slowest = f"{min(r['ratios']):.2f}x" if r["ratios"] else "-"
        median = f"{statistics.median(r['ratios']):.2f}x" if r["ratios"] else "-"
        partial = f"{r['partial']:g}x" if r.get("partial") is not None else "-"
        lines.append(f"{r['grade_id']:<16} {r['full']:>5g}x {partial:>8} {slowest:>8} {median:>8}  {r['verdict']}")
    return "\n".join(lines)
