"""How long does ``mlc-lab grade`` take for a class? A class of N submissions of one homework
(default: 200 of hw05): a quarter complete (the instructor's solutions), a quarter blank (the
student version), half with one task's answer replaced by a wrong one. Graded with the local
pool; prints the wall time, submissions per minute and the score distribution, and the time one
submission takes alone (the baseline the pool should divide by about ``--jobs``).

Run: python bench/grading.py [--homework hw05] [--count 200] [--jobs 2]
"""
import argparse
import collections
import statistics
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
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
