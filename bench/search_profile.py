"""Median CPU time per design of the tuner's search, without measuring anything: sampling fresh
designs of the automatic space of the 1024 matmul ("llvm -num-cores=2") and replaying them with
one sampling decision drawn afresh, as evolutionary search does (through the space's replay
cache), each postprocessed and verified.

Run: python bench/search_profile.py [--n 40] [--repeat 5] [--profile sample|replay|both] [--top 40]
"""
import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlc_lab.meta_schedule.search_strategy import SAMPLING_KINDS  # noqa: E402
from mlc_lab.meta_schedule.space_generator import SpaceRejectedError, create_space  # noqa: E402
from mlc_lab.testing import matmul_schedules as mm  # noqa: E402
from mlc_lab.tir.schedule.trace import Trace  # noqa: E402


def run(n: int, seed: int = 0, profile: str | None = None):
    mod = mm.naive(1024)
    space = create_space("auto", num_cores=2)
    rng = np.random.default_rng(seed)
    times = {"sample": [], "replay": [], "replay, new design": []}
    prof = cProfile.Profile(timer=time.process_time) if profile else None
    designs, rejected = [], 0

    def timed(kind, make):
        if prof and profile in (kind, "both"):
            prof.enable()
        start = time.process_time()
        try:
            return make()
        except SpaceRejectedError:
            return None
        finally:
            times[kind].append(time.process_time() - start)
            if prof and profile in (kind, "both"):
                prof.disable()

    for _ in range(n):
        c = timed("sample", lambda: space.sample(mod, int(rng.integers(2**31))))
        if c is not None:
            designs.append(c)
        else:
            rejected += 1
    for _ in range(2 * n):
        parent = designs[int(rng.integers(len(designs)))]
        sites = [k for k, kind in enumerate(Trace.json_kinds(parent.design)) if kind in SAMPLING_KINDS]
        site = sites[int(rng.integers(len(sites)))]
        c = timed("replay", lambda: space.replay(mod, parent.design, int(rng.integers(2**31)),
                                                 decisions={site: None}))
        if c is not parent:   # (the parent itself: the decision drawn was the design's own)
            times["replay, new design"].append(times["replay"][-1])
        if c is not None:
            designs.append(c)
        else:
            rejected += 1
    return times, prof, designs, rejected


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--profile", choices=["sample", "replay", "both"])
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of the same designs; on a shared machine the lowest median "
                             "of the rounds is the least disturbed")
    args = parser.parse_args(argv)
    run(4)   # warm up imports and caches of code, not of this run
    medians = {"sample": [], "replay": [], "replay, new design": []}
    for round_ in range(args.repeat):
        times, prof, designs, rejected = run(args.n, seed=args.seed, profile=args.profile)
        for kind, values in times.items():
            medians[kind].append(statistics.median(values) * 1e3)
        print(f"round {round_}: " + ", ".join(f"{kind} median {m[-1]:.2f} ms" for kind, m in medians.items())
              + f" ({len(designs)} designs, {rejected} rejected)")
    print(", ".join(f"{kind}: lowest median {min(m):.2f} ms" for kind, m in medians.items()))
    if prof:
        pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
