"""``python -m mlc_lab.testing.fuzz --trials N --seed S``: see the package docstring."""
import argparse
import sys

from . import KINDS, TARGETS, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlc_lab.testing.fuzz", description=__doc__)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per trial")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated targets")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--out", help="folder for summary.json and one reproducer per finding")
    args = parser.parse_args(argv)
    result = run(args.trials, args.seed, args.jobs, args.timeout, args.targets.split(","),
                 shrink=not args.no_shrink, out=args.out)
    counts = result["counts"]
    print(f"\n{args.trials} trials, seed {args.seed}:")
    for kind in ("ok",) + KINDS:
        print(f"  {kind:20s} {counts.get(kind, 0)}")
    return 1 if result["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
