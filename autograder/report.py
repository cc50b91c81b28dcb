"""What grading writes: ``results.json`` in Gradescope's format and ``feedback.html`` per
submission, ``grades.csv`` for the class. Feedback shows each task's verdict and message and the
student's own IR, never a test's code or an expected value."""
from __future__ import annotations

import csv
import html
import json
from pathlib import Path

RESULTS, FEEDBACK, GRADES = "results.json", "feedback.html", "grades.csv"
GRADER_LOG = "grader.log"   # the worker's output (tracebacks of tests that could not run): for instructors


def results(name: str, tasks: list, records: list, crash: str, seconds: float, worker_log: str = "") -> dict:
    """The result of one submission from the worker's progress records (tasks it never reached
    score 0, with the reason)."""
    by_id = {r["grade_id"]: r for r in records if "grade_id" in r}
    done = next((r for r in records if "done" in r), None)
    why_missing = crash or (done["done"] if done and done["done"] != "ok" else "") or \
        "the grader stopped before this task"
    tests = []
    for task in tasks:
        r = by_id.get(task.grade_id)
        if r is None:
            r = {"grade_id": task.grade_id, "name": task.title, "score": 0.0, "max_score": task.points,
                 "output": f"not graded: {why_missing}", "student_ir": []}
        tests.append({"name": r["name"], "grade_id": r["grade_id"], "score": float(r["score"]),
                      "max_score": float(task.points), "output": r["output"], "visibility": "visible",
                      "student_ir": r.get("student_ir", [])})
    notes = [n for n in (done["done"] if done else "", crash) if n and n != "ok"]
    return {"name": name, "score": round(sum(t["score"] for t in tests), 4),
            "max_score": sum(task.points for task in tasks), "execution_time": round(seconds, 2),
            "output": "; ".join(notes) or "the notebook ran to the end",
            "tests": tests, "worker_log": worker_log}


def gradescope(result: dict) -> dict:
    """``result`` as Gradescope reads it (extra keys dropped)."""
    return {"score": result["score"], "execution_time": result["execution_time"], "output": result["output"],
            "tests": [{"number": t["grade_id"], **{k: t[k] for k in ("name", "score", "max_score", "output",
                                                                      "visibility")}}
                      for t in result["tests"]]}


def write_submission(folder: Path, result: dict, tasks) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULTS).write_text(json.dumps({**gradescope(result), "name": result["name"]}, indent=1),
                                  encoding="utf-8")
    (folder / FEEDBACK).write_text(feedback_html(result), encoding="utf-8")
    if result.get("worker_log"):
        (folder / GRADER_LOG).write_text(result["worker_log"], encoding="utf-8")


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
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Feedback: {esc(result['name'])}</title>"
            "<style>body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
            ".task{border-left:6px solid #999;padding:0 1em;margin:1em 0}.passed{border-color:#1a7f37}"
            ".partial{border-color:#bf8700}.failed{border-color:#cf222e}h2 span{float:right;font-weight:normal}"
            "pre{overflow-x:auto;background:#f6f8fa;padding:.5em}</style></head><body>"
            f"<h1>{esc(result['name'])}: {result['score']:g} / {result['max_score']:g}</h1>"
            f"<p>{esc(result['output'])}</p>{''.join(rows)}</body></html>")


def write_grades_csv(out: Path, tasks, names: list) -> None:
    """One row per submission with results in ``out``, one column per task, and the total."""
    with (out / GRADES).open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", *(t.grade_id for t in tasks), "total"])
        for name in names:
            path = out / name / RESULTS
            if not path.exists():
                continue
            result = json.loads(path.read_text(encoding="utf-8"))
            scores = {t.get("number"): t["score"] for t in result["tests"]}
            writer.writerow([name, *(f"{scores.get(t.grade_id, 0):g}" for t in tasks), f"{result['score']:g}"])
