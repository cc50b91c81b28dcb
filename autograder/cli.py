"""``mlc-lab``: make student versions of homework, grade submissions, package for Gradescope.

    mlc-lab assign SOURCE.ipynb --out DIR
    mlc-lab grade SOURCE.ipynb SUBMISSION.ipynb... --out DIR [--jobs N] [--timeout S]
                  [--dask ADDRESS] [--force] [--no-sandbox]
    mlc-lab gradescope SOURCE.ipynb --out autograder.zip
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import notebook


def assign(source: Path, out: Path) -> Path:
    """Write the student version of ``source`` into folder ``out`` under the same name."""
    import nbformat
    out.mkdir(parents=True, exist_ok=True)
    target = out / source.name
    if target.resolve() == source.resolve():
        raise SystemExit(f"mlc-lab assign: the student version would overwrite the source {source}")
    nbformat.write(notebook.release(notebook.read(source)), str(target))
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="mlc-lab", description="Homework for mlc_lab: assign, grade, calibrate, Gradescope.")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("assign", help="write the student version of a source notebook")
    p.add_argument("source", type=Path)
    p.add_argument("--out", type=Path, required=True, help="folder for the student version")
    p = commands.add_parser("grade", help="grade submissions against a source notebook")
    p.add_argument("source", type=Path)
    p.add_argument("submissions", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    p.add_argument("--timeout", type=float, default=None, help="seconds for one notebook (default 900)")
    p.add_argument("--cell-timeout", type=float, default=None, help="seconds for one cell (default 120)")
    p.add_argument("--memory", type=float, default=None, help="GiB of address space per notebook (default 6)")
    p.add_argument("--dask", metavar="ADDRESS", default=None, help="run on this Dask scheduler")
    p.add_argument("--force", action="store_true", help="grade again submissions already graded")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run the notebooks without the sandbox (no bubblewrap here): only for notebooks you trust")
    p = commands.add_parser("gradescope", help="package a source notebook as a Gradescope autograder")
    p.add_argument("source", type=Path)
    p.add_argument("--out", type=Path, required=True, help="the .zip to write")
    p.add_argument("--no-sandbox", action="store_true",
                   help="grade without the sandbox (for a container that forbids user namespaces)")
    p = commands.add_parser("calibrate", help="the speed ratios the source's solutions reach here, "
                                              "next to its timed tests' thresholds")
    p.add_argument("source", type=Path)
    p.add_argument("--runs", type=int, default=3, help="gradings of the solutions (default 3)")
    p.add_argument("--no-sandbox", action="store_true", help="time outside the sandbox (no bubblewrap here)")
    args = parser.parse_args(argv)

    try:
        if args.command == "assign":
            print(f"wrote {assign(args.source, args.out)}")
        elif args.command == "grade":
            from .batch import SandboxMissing, grade_many
            limits = {"cell_timeout": args.cell_timeout} if args.cell_timeout else {}
            if args.no_sandbox:
                limits["sandbox"] = False
            if args.memory:
                limits["memory_bytes"] = int(args.memory * (1 << 30))
            try:
                results = grade_many(args.source, args.submissions, args.out, jobs=args.jobs, timeout=args.timeout,
                                     force=args.force, dask_address=args.dask, limits=limits,
                                     progress_bar=not args.quiet)
            except SandboxMissing as exc:
                print(f"mlc-lab grade: {exc}", file=sys.stderr)
                return 2
            skipped = len(args.submissions) - len(results)
            print(f"graded {len(results)} submission(s)" + (f", {skipped} already graded (--force grades "
                                                              "them again)" if skipped else "")
                  + f"; grades in {args.out / 'grades.csv'}")
        elif args.command == "calibrate":
            from .calibrate import calibrate, format_rows
            print(format_rows(calibrate(args.source, args.runs, {"sandbox": False} if args.no_sandbox else None)))
        elif args.command == "gradescope":
            from .gradescope import package
            print(f"wrote {package(args.source, args.out, sandbox=not args.no_sandbox)}")
    except notebook.FormatError as exc:
        print(f"mlc-lab {args.command}: {args.source}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
