"""How long does ``mlc-lab grade`` take for a class? A class of N submissions of one homework
(default: 200 of hw05): a quarter complete (the instructor's solutions), a quarter blank (the
student version), half with one task's answer replaced by a wrong one. Graded with the local
pool; prints the wall time, submissions per minute and the score distribution, and the time one
submission takes alone (the baseline the pool should divide by about ``--jobs``).

``--against COMMIT`` grades the same kind of class with the grader of another commit first (a
git worktree of it, in a subprocess) and prints the throughput ratio of this one to that one.

Run: python bench/grading.py [--homework hw05] [--count 200] [--jobs 2] [--against COMMIT]
"""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import notebook  # noqa: E402
from autograder.batch import grade_many  # noqa: E402


def make_class(source: Path, count: int, folder: Path) -> list:
    import nbformat
    solved = notebook.read(source)
    blank = notebook.read(ROOT / "exercises" / source.name)
    answer_cells = [i for i, c in enumerate(blank.cells) if notebook.meta(c).get("solution")]
    paths = []
    for n in range(count):
        kind = ("solved", "blank", "one-wrong", "one-wrong")[n % 4]
        if kind == "solved":
            nb = solved
        elif kind == "blank":
            nb = blank
        else:     # the solutions, with one answer cell (a different one each time) left as the stub
            nb = notebook.read(source)
            stubbed = answer_cells[(n // 4) % len(answer_cells)]
            nb.cells[stubbed] = blank.cells[stubbed]
        paths.append(folder / f"s{n:03d}_{kind}.ipynb")
        nbformat.write(nb, str(paths[-1]))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--homework", default="hw05")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--against", metavar="COMMIT", default=None,
                        help="also grade with this commit's grader, first, and print the ratio")
    args = parser.parse_args()
    baseline = _other_commit(args) if args.against else None
    source = next((ROOT / "exercises" / "instructor").glob(f"{args.homework}_*.ipynb"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "class").mkdir()
        paths = make_class(source, args.count, tmp / "class")
        start = time.perf_counter()
        grade_many(source, paths[:1], tmp / "alone", jobs=1, progress_bar=False)
        alone = time.perf_counter() - start
        start = time.perf_counter()
        results = grade_many(source, paths, tmp / "grades", jobs=args.jobs, progress_bar=True)
        wall = time.perf_counter() - start
    scores = collections.Counter(r["score"] for r in results)
    per = [r["execution_time"] for r in results]
    print(f"{source.name}: {len(results)} submissions, {args.jobs} jobs, {wall:.0f} s wall "
          f"({len(results) / wall * 60:.1f} submissions/minute)")
    print(f"one submission alone: {alone:.1f} s; per submission in the pool: median "
          f"{statistics.median(per):.1f} s, max {max(per):.1f} s; pool speed-up over one at a time "
          f"{alone * len(results) / wall:.2f}x")
    print("scores:", ", ".join(f"{score:g}: {n}" for score, n in sorted(scores.items())))
    if baseline:
        mine = len(results) / wall * 60
        print(f"throughput: {mine:.1f} submissions/minute here, {baseline:.1f} with {args.against}'s grader "
              f"in the same run: {mine / baseline:.2f}x")


def _other_commit(args) -> float:
    """Submissions per minute of ``args.against``'s grader on the same class, from its own
    bench/grading.py run in a worktree of that commit."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.against],
                       check=True, capture_output=True)
        try:
            run = subprocess.run([sys.executable, str(tree / "bench" / "grading.py"), "--homework", args.homework,
                                  "--count", str(args.count), "--jobs", str(args.jobs)], cwd=tree,
                                 env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    print(f"== {args.against}'s grader\n{run.stdout.strip()}")
    found = re.search(r"\(([\d.]+) submissions/minute\)", run.stdout)
    if not found:
        raise SystemExit(f"{args.against}'s bench/grading.py printed no throughput: {run.stderr[-2000:]}")
    return float(found.group(1))


if __name__ == "__main__":
    main()
