"""What grading writes: ``results.json`` in Gradescope's documented format and ``feedback.html``
per submission, ``grades.csv`` for the class. Feedback shows each task's verdict and message and
the student's own IR, never a test's code or an expected value.

Text a student can influence (a task's message, the notebook's notes) is cleaned before it is
written: terminal escape sequences and control characters removed, length capped."""
from __future__ import annotations

import csv
import html
import io
import json
import math
import os
import re
import tempfile
import unicodedata
from pathlib import Path

RESULTS, FEEDBACK, GRADES = "results.json", "feedback.html", "grades.csv"
GRADER_LOG = "grader.log"   # the worker's output (tracebacks of tests that could not run): for instructors
MAX_OUTPUT = 8000           # characters of one test's output (and of the submission's) in results.json

# ESC [ ... final byte (CSI), ESC ] ... BEL or ESC \ (OSC), ESC P/X/^/_ ... ESC \ (strings), then
# any other ESC with what a terminal would take as its sequence; the 8-bit C1 forms are control
# characters, dropped below.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                      r"|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~]?")
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")   # can make text read backwards


def clean(text, limit: int = MAX_OUTPUT) -> str:
    """``text`` without escape sequences or control characters (newline and tab kept), at most
    ``limit`` characters, with a note where it was cut. Cleaning twice changes nothing."""
    text = _ESCAPES.sub("", str(text)).replace("\r\n", "\n")
    text = "".join(c for c in text if c in "\n\t" or (unicodedata.category(c) not in ("Cc", "Cs")
                                                      and c not in _BIDI))
    if len(text) <= limit:
        return text
    note = f"\n[cut here: the whole output was {len(text)} characters]"
    return text[:max(0, limit - len(note))] + note


def _points(value, most: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return min(max(value, 0.0), float(most)) if math.isfinite(value) else 0.0


def results(name: str, tasks: list, records: list, crash: str, seconds: float, worker_log: str = "",
            questions: list = ()) -> dict:
    """The result of one submission from the worker's progress records (tasks it never reached
    score 0, with the reason). Written ``questions`` are listed with the student's answer for the
    TA and count for nothing here: their points are given by hand."""
    by_id = {r["grade_id"]: r for r in records if isinstance(r, dict) and "grade_id" in r}
    done = next((r for r in records if isinstance(r, dict) and "done" in r), None)
    why_missing = crash or (done["done"] if done and done["done"] != "ok" else "") or \
        "the grader stopped before this task"
    tests = []
    for task in tasks:
        r = by_id.get(task.grade_id) or {"score": 0.0, "output": f"not graded: {why_missing}"}
        tests.append({"name": clean(task.title, 500), "grade_id": task.grade_id,
                      "score": _points(r.get("score"), task.points), "max_score": float(task.points),
                      "output": clean(r.get("output", "")), "visibility": "visible",
                      "student_ir": [clean(text, 20000) for text in r.get("student_ir", [])]})
    notes = [n for n in (done["done"] if done else "", crash) if n and n != "ok"]
    answers = {r["answer"]: r.get("text", "") for r in records if isinstance(r, dict) and "answer" in r}
    written = [{"name": clean(q.title, 500), "grade_id": q.grade_id, "max_score": float(q.points),
                "answer": clean(answers.get(q.grade_id, "(no answer was collected)"))} for q in questions]
    return {"name": name, "questions": written, "score": round(sum(t["score"] for t in tests), 4),
            "max_score": sum(task.points for task in tasks), "execution_time": round(seconds, 2),
            "output": clean("; ".join(notes) or "the notebook ran to the end"),
            "tests": tests, "worker_log": worker_log}


def failure(name: str, tasks: list, reason: str, seconds: float, worker_log: str = "") -> dict:
    """The result of a submission whose grading failed outright: every task 0, the reason as
    its output and the submission's."""
    return results(name, tasks, [], reason, seconds, worker_log)


def gradescope(result: dict) -> dict:
    """``result`` as Gradescope reads it: only keys of its documented format; tests numbered in
    task order, the nbgrader grade_id in each test's extra_data."""
    tests = [{"name": clean(t["name"], 500), "number": str(n), "score": t["score"],
              "max_score": t["max_score"], "status": "passed" if t["score"] >= t["max_score"] else "failed",
              "visibility": "visible", "output": clean(t["output"]), "output_format": "text",
              "extra_data": {"grade_id": t["grade_id"]}}
             for n, t in enumerate(result["tests"], 1)]
    tests += [{"name": clean(f"{q['name']} (graded by hand, {q['max_score']:g} points)", 600),
               "number": str(n), "visibility": "visible", "output": clean(q["answer"]), "output_format": "text",
               "extra_data": {"grade_id": q["grade_id"], "graded_by_hand": True, "points": q["max_score"]}}
              for n, q in enumerate(result.get("questions", []), len(tests) + 1)]
    return {"score": result["score"], "execution_time": result["execution_time"],
            "output": clean(result["output"]), "output_format": "text", "test_output_format": "text",
            "visibility": "visible", "extra_data": {"submission": result["name"]}, "tests": tests}


def _write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` by way of a temporary file in the same folder, flushed to disk and
    renamed over it: a reader sees the old file or the whole new one, never a part."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_submission(folder: Path, result: dict, tasks) -> None:
    """feedback.html and grader.log first, results.json last: a results.json on disk (which
    ``grade_many`` takes as "graded") always comes with the files of the same grading."""
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomically(folder / FEEDBACK, feedback_html(result))
    if result.get("worker_log"):
        _write_atomically(folder / GRADER_LOG, result["worker_log"])
    else:
        (folder / GRADER_LOG).unlink(missing_ok=True)      # an earlier grading's, not this one's
    _write_atomically(folder / RESULTS, json.dumps(gradescope(result), indent=1))
    try:    # the renames themselves survive a crash once the folder is flushed
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def feedback_html(result: dict) -> str:
    esc = html.escape
    rows = []
    for t in result["tests"]:
        verdict = "passed" if t["score"] >= t["max_score"] else "partial" if t["score"] > 0 else "failed"
        ir = "".join(f"<details><summary>your IR</summary><pre>{esc(text)}</pre></details>"
                     for text in t.get("student_ir", [])[:3])
        rows.append(f'<section class="task {verdict}"><h2>{esc(t["name"])} <span>{t["score"]:g} / '
                    f'{t["max_score"]:g}</span></h2><p class="verdict">{verdict}</p>'
                    f"<p>{esc(t['output'])}</p>{ir}</section>")
    rows += [f'<section class="task manual"><h2>{esc(q["name"])} <span>graded by hand, {q["max_score"]:g} '
             f'points</span></h2><pre>{esc(q["answer"])}</pre></section>' for q in result.get("questions", [])]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Feedback: {esc(result['name'])}</title>"
            "<style>body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
            ".task{border-left:6px solid #999;padding:0 1em;margin:1em 0}.passed{border-color:#1a7f37}"
            ".partial{border-color:#bf8700}.failed{border-color:#cf222e}h2 span{float:right;font-weight:normal}"
            "pre{overflow-x:auto;background:#f6f8fa;padding:.5em}</style></head><body>"
            f"<h1>{esc(result['name'])}: {result['score']:g} / {result['max_score']:g}</h1>"
            f"<p>{esc(result['output'])}</p>{''.join(rows)}</body></html>")


def write_grades_csv(out: Path, tasks, names: list, questions=()) -> None:
    """One row per submission with results in ``out``, one column per task (found by the
    grade_id in each test's extra_data), the total, then an empty column per written question
    for the TA who grades it by hand."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["submission", *(t.grade_id for t in tasks), "total", *(f"{q.grade_id} (by hand)" for q in questions)])
    for name in names:
        path = out / name / RESULTS
        if not path.exists():
            continue
        result = json.loads(path.read_text(encoding="utf-8"))
        scores = {(t.get("extra_data") or {}).get("grade_id"): t["score"] for t in result["tests"] if "score" in t}
        writer.writerow([name, *(f"{scores.get(t.grade_id, 0):g}" for t in tasks), f"{result['score']:g}",
                         *("" for _ in questions)])
    _write_atomically(out / GRADES, buffer.getvalue())


def write_results(path: Path, result: dict) -> None:
    """Only results.json (Gradescope's format), atomically, where a caller names it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, json.dumps(gradescope(result), indent=1))
