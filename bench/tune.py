"""How good is the tuner, and how fast? meta_schedule against numpy and against the untuned
program, measured in this run:

* mm1024: 1024^3 float32 matmul, "llvm -num-cores=2", 64 trials of the automatic space with
  the gbdt cost model, on three seeds from scratch and three starting from the default schedule
  (as tune_relax does): GFLOPS, x numpy (which BLAS and kernel numpy used is printed), PASS or
  MISS for ">= 1.0x numpy in < 40 s on every seed", and the tuning wall time of each with where
  it went (search, and the runner's
  build / check / timing / waiting for expected outputs, LocalRunner.stats), the hand schedule of
  mlc_lab.testing.matmul_schedules for comparison, and the search's median CPU time per
  candidate design: sampling one, replaying a mutated one (each postprocessed and verified),
  its features, its share of a batch prediction.
* kernels: the course's 128 x 128 matmul with a ScheduleFn space and with the automatic space,
  linear + relu 1x784x128, conv2d 1x64x56x56 with a 3x3 kernel ("llvm --num-cores=1").
* quality: best-so-far of cost-model search and of random search on one workload over 3
  seeds; at which trial the cost model reaches random search's final best.
* transfer: a gbdt model saved after tuning two other shapes, loaded for a new one, against a
  cold model, at 16 trials.
* e2e: the MLP and CNN of bench/e2e.py after tune_relax, against numpy and the build with
  default schedules (relax.build without tuning), the starting point tuning has to beat.

Nothing is asserted; a wrong result would be recorded as a failed trial, never chosen.
Run: python bench/tune.py [--quick] [--only mm1024 kernels quality transfer e2e]
"""
import argparse
import ctypes
import glob
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import mlc_lab  # noqa: E402
from mlc_lab import meta_schedule as ms, nd, relax, te, topi  # noqa: E402
from mlc_lab.testing import matmul_schedules as mm  # noqa: E402
from e2e import mlp, numpy_seconds, small_cnn  # noqa: E402

TWO, ONE = "llvm -num-cores=2", "llvm --num-cores=1"


def blas_name() -> str:
    """numpy's BLAS and, for OpenBLAS, the kernel it picked for this CPU."""
    config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    core = ""
    for lib in glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*openblas*")):
        for symbol in ("scipy_openblas_get_corename64_", "openblas_get_corename"):
            try:
                fn = getattr(ctypes.CDLL(lib), symbol)
            except (AttributeError, OSError):
                continue
            fn.restype = ctypes.c_char_p
            core = f", kernel {fn().decode()}"
    return f"{config['name']} {config.get('version', '')}{core}"


def tune(mod, target, trials, **options):
    start = time.perf_counter()
    database = ms.tune_tir(mod, target, max_trials_global=trials, num_trials_per_iter=min(trials, 32),
                           work_dir=tempfile.mkdtemp(prefix="bench_tune_"), quiet=True, **options)
    return database, time.perf_counter() - start


def kernel_seconds(mod, target, args, repeat=5):
    lib = mlc_lab.build(mod, target)
    timer = lib.time_evaluator("main", mlc_lab.cpu(), number=1, repeat=repeat, min_repeat_ms=50)
    return timer(*args).median


def tuned_seconds(database, mod, target, args):
    sch = ms.tir_integration.compile_tir(database, mod, target)
    return kernel_seconds(sch.mod, target, args)


def row(name, seconds, base, flops, note=""):
    print(f"{name:<34} {seconds * 1e3:>10.3f} {flops / seconds / 1e9:>8.2f} {base / seconds:>8.3f}  {note}",
          flush=True)


def header(title):
    print(f"\n== {title}")
    print(f"{'program':<34} {'ms':>10} {'GFLOPS':>8} {'x numpy':>8}  note")


SEEDS = (0, 1, 2)


def bench_mm1024(quick):
    n, trials = (512, 16) if quick else (1024, 64)
    header(f"matmul {n}^3 float32, {TWO!r}, {trials} trials, automatic space, gbdt, seeds "
           f"{list(SEEDS)} (numpy: {blas_name()})")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    c = np.empty((n, n), "float32")
    args = [nd.array(a), nd.array(b), nd.empty((n, n), "float32")]
    mod, flops = mm.naive(n), 2.0 * n ** 3
    base = numpy_seconds(lambda: np.matmul(a, b, out=c), 7, 100)
    row("numpy np.matmul", base, base, flops)
    timings = ms.search_strategy.SearchTimings()
    breakdowns, outcomes = [], {}
    # From scratch (the automatic space alone), then from the default schedule, measured first
    # as tune_relax does: the second is what a model's kernels get, the first what search finds.
    for start, options in (("from scratch", {}), ("from default", BASELINE)):
        for seed in SEEDS:
            strategy = ms.search_strategy.EvolutionarySearch()
            runner = ms.LocalRunner()
            try:
                database, wall = tune(mod, TWO, trials, seed=seed, strategy=strategy, runner=runner,
                                      **options)
            finally:
                runner.close()
            for kind, values in strategy.timings.seconds.items():
                timings.seconds[kind].extend(values)
            seconds = tuned_seconds(database, mod, TWO, args)
            row(f"tuned {start}, seed {seed}", seconds, base, flops,
                f"tuning wall time {wall:.1f} s, {len(database.records())} trials, "
                f"{sum(r.error is not None for r in database.records())} failed")
            breakdowns.append((f"{start}, seed {seed}", wall, runner.stats))
            outcomes.setdefault(start, []).append((base / seconds, wall))
    for label, wall, stats in breakdowns:
        print_breakdown(label, wall, stats)
    row("hand schedule (matmul_schedules.best)", kernel_seconds(mm.best_schedule(n).mod, TWO, args),
        base, flops)
    print_design_times(timings)
    for start, results in outcomes.items():
        worst, slowest = min(x for x, _ in results), max(w for _, w in results)
        verdict = "PASS" if worst >= 1.0 and slowest < 40 else "MISS"
        start = "from the default schedule" if start == "from default" else start
        print(f"  {verdict}  {n} matmul tuned {start}, {trials} trials, every seed >= 1.0x numpy "
              f"in < 40 s: worst {worst:.2f}x, slowest {slowest:.1f} s", flush=True)


def print_breakdown(label, wall, stats):
    """Where one tuning run's wall time went: search (everything outside the runner), and the
    runner's phases: build, check (first call + output comparison), timing, waiting for the
    expected outputs, and transfer (pickling, pipes, worker restarts)."""
    phases = ("build", "cached build", "check", "timing", "reference", "transfer")
    measured = sum(stats.wall(p) for p in phases)
    parts = [f"search {wall - measured:.1f}"]
    for phase in phases:
        parts.append(f"{phase} {stats.wall(phase):.1f}")
    extra = ", ".join(f"{name} {n}" for name, n in sorted(stats.counters.items()))
    median = stats.median_wall("build")
    print(f"{label}: wall {wall:.1f} s = " + " + ".join(parts) + " s"
          + (f"; median build {median * 1e3:.0f} ms" if median is not None else "")
          + f"; builds reused {stats.count('cached build')}"
          + f"; worker CPU build {stats.cpu('build'):.1f}, check {stats.cpu('check'):.1f}, "
            f"timing {stats.cpu('timing'):.1f} s"
          + (f"; {extra}" if extra else ""), flush=True)


def print_design_times(timings):
    """Median CPU time per candidate design of the search's work, over the runs above."""
    parts = []
    for kind in ("sample", "replay", "features", "predict"):
        median = timings.median(kind)
        count = len(timings.seconds.get(kind, ()))
        parts.append(f"{kind} {median * 1e3:.2f} ms (n={count})" if median is not None else f"{kind} -")
    print("search, median CPU time per design: " + ", ".join(parts), flush=True)


def linear_relu(m, k, n):
    x = te.placeholder((m, k), "float32", name="x")
    w = te.placeholder((n, k), "float32", name="w")
    return te.create_prim_func([x, w, topi.relu(topi.dense(x, w))])


def conv2d(c, hw, f, kernel):
    x = te.placeholder((1, c, hw, hw), "float32", name="x")
    w = te.placeholder((f, c, kernel, kernel), "float32", name="w")
    return te.create_prim_func([x, w, topi.conv2d_nchw(x, w, padding=1)])


def course_space(sch):
    """The course's stochastic schedule of a matmul: j split by a sampled tile, k outside j1."""
    block = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i, j0, k, j1)
    sch.decompose_reduction(block, k)


# The automatic space starts from the kernel's default schedule (measured first), as tune_relax does.
BASELINE = {"baseline": True}


def bench_kernels(quick):
    trials = 8 if quick else 32
    header(f"kernels, {ONE!r}, {trials} trials each, gbdt (numpy on one BLAS thread); the "
           "automatic space starts from the default schedule")
    rng = np.random.default_rng(1)
    a128, b128 = (rng.standard_normal((128, 128)).astype("float32") for _ in range(2))
    x, w = rng.standard_normal((1, 784)).astype("float32"), rng.standard_normal((128, 784)).astype("float32")
    img = rng.standard_normal((1, 64, 56, 56)).astype("float32")
    kern = rng.standard_normal((64, 64, 3, 3)).astype("float32")

    def conv_numpy():
        padded = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
        return np.tensordot(windows, kern, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)

    cases = [("mm 128 ScheduleFn (course)", mm.naive(128), {"space": course_space}, [a128, b128, (128, 128)],
              lambda: a128 @ b128, 2.0 * 128 ** 3),
             ("mm 128 automatic space", mm.naive(128), BASELINE, [a128, b128, (128, 128)],
              lambda: a128 @ b128, 2.0 * 128 ** 3),
             ("linear+relu 1x784x128", linear_relu(1, 784, 128), BASELINE, [x, w, (1, 128)],
              lambda: np.maximum(x @ w.T, 0), 2.0 * 784 * 128),
             ("conv2d 1x64x56x56 3x3", conv2d(64, 56, 64, 3), BASELINE, [img, kern, (1, 64, 56, 56)],
              conv_numpy, 2.0 * 64 * 64 * 56 * 56 * 9)]
    for name, func, options, inputs, numpy_fn, flops in cases:
        mod = mlc_lab.IRModule({"main": func}) if not isinstance(func, mlc_lab.IRModule) else func
        args = [nd.array(v) if isinstance(v, np.ndarray) else nd.empty(v, "float32") for v in inputs]
        database, wall = tune(mod, ONE, trials, seed=0, **options)
        with threadpool_limits(limits=1, user_api="blas"):   # one core each
            base = numpy_seconds(numpy_fn, 5, 50)
        untuned = kernel_seconds(mod, ONE, args, repeat=1)
        tuned = tuned_seconds(database, mod, ONE, args)
        row(name, tuned, base, flops,
            f"untuned {untuned * 1e3:.2f} ms ({untuned / tuned:.0f}x slower); tuning {wall:.0f} s")


def best_so_far(database, mod, target):
    best, curve = 0.0, []
    for record in database.records(mod, target):
        best = max(best, record.gflops)
        curve.append(best)
    return curve


def bench_quality(quick):
    n, trials, seeds = (128, 16, 2) if quick else (256, 64, 3)
    mod = mm.naive(n)
    print(f"\n== search quality: matmul {n}^3, {ONE!r}, automatic space, {trials} trials, "
          f"seeds {list(range(seeds))}")
    print(f"{'seed':>4} {'random best':>12} {'gbdt best':>10} {'gbdt reaches random best at trial':>34}")
    reach = []
    for seed in range(seeds):
        random_db, _ = tune(mod, ONE, trials, seed=seed, strategy="random")
        model_db, _ = tune(mod, ONE, trials, seed=seed, cost_model="gbdt")
        target_gflops = best_so_far(random_db, mod, ONE)[-1]
        curve = best_so_far(model_db, mod, ONE)
        at = next((k + 1 for k, g in enumerate(curve) if g >= target_gflops), None)
        reach.append(at if at is not None else float("inf"))
        print(f"{seed:>4} {target_gflops:>12.2f} {curve[-1]:>10.2f} {at if at else 'not reached':>34}")
    finite = [r for r in reach if r != float("inf")]
    print(f"mean trial at which gbdt reaches random's {trials}-trial best: "
          f"{statistics.mean(finite):.1f} over {len(finite)} of {seeds} seeds" if finite else
          "gbdt did not reach random search's best in any seed")


def bench_transfer(quick):
    trials = 8 if quick else 16
    target_n, others = (192, (128, 256))
    print(f"\n== transfer: gbdt trained on matmul {others}, used for matmul {target_n} "
          f"({trials} trials, {ONE!r})")
    warm_path = os.path.join(tempfile.mkdtemp(prefix="bench_model_"), "gbdt.json")
    model = ms.create_cost_model("gbdt", seed=0)
    for n in others:
        tune(mm.naive(n), ONE, 2 * trials, seed=n, cost_model=model)
    model.save(warm_path)
    mod = mm.naive(target_n)
    for label, cost_model in (("cold", ms.create_cost_model("gbdt", seed=0)),
                              ("transferred", ms.CostModel.load(warm_path))):
        database, wall = tune(mod, ONE, trials, seed=1, cost_model=cost_model)
        curve = best_so_far(database, mod, ONE)
        print(f"{label:<12} best {curve[-1]:8.2f} GFLOPS; after {trials // 2} trials "
              f"{curve[trials // 2 - 1]:8.2f}; tuning {wall:.0f} s")


def bench_e2e(quick):
    trials = 16 if quick else 64
    print(f"\n== end to end: tune_relax, {trials} trials, {ONE!r} (numpy on one BLAS thread)")
    print(f"{'model':<24} {'input':<14} {'numpy ms':>9} {'default':>9} {'tuned':>9} {'tuned x np':>10}")
    for name, model, shape in (("mlp 784-256-10", mlp((784, 256, 10)), (64, 784)),
                               ("cnn conv-pool-linear", small_cnn(), (8, 1, 28, 28))):
        x = np.random.default_rng(0).random(shape, dtype="float32")
        want = model.forward_numpy(x)
        mod = model.to_relax(shape)
        with threadpool_limits(limits=1, user_api="blas"):   # one core each
            base = numpy_seconds(lambda: model.forward_numpy(x), 5, 50)
        start = time.perf_counter()
        database = ms.relax_integration.tune_relax(mod, None, ONE, max_trials_global=trials,
                                                   num_trials_per_iter=16, seed=0, quiet=True,
                                                   work_dir=tempfile.mkdtemp(prefix="bench_e2e_"))
        wall = time.perf_counter() - start
        fused = ms.relax_integration.legalize_and_fuse(mod)
        tuned = relax.transform.MetaScheduleApplyDatabase(database, ONE)(fused)
        times = []
        for built in (relax.build(mod, ONE), relax.build(tuned, ONE)):
            vm = relax.VirtualMachine(built, mlc_lab.cpu())
            err = float(np.abs(vm["main"](nd.array(x)).numpy() - want).max())
            assert err < 1e-3, f"{name}: wrong result (max error {err})"
            times.append(vm.time_evaluator("main", mlc_lab.cpu(), number=1, repeat=5,
                                           min_repeat_ms=50)(nd.array(x)).median)
        print(f"{name:<24} {str(shape):<14} {base * 1e3:>9.3f} {times[0] * 1e3:>9.3f} "
              f"{times[1] * 1e3:>9.3f} {base / times[1]:>10.3f}  (tuning {wall:.0f} s)", flush=True)


SECTIONS = {"mm1024": bench_mm1024, "kernels": bench_kernels, "quality": bench_quality,
            "transfer": bench_transfer, "e2e": bench_e2e}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller shapes and budgets")
    parser.add_argument("--only", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} cores; x numpy = numpy time / ours (above 1: ours is faster)")
    for name in args.only:
        SECTIONS[name](args.quick)


if __name__ == "__main__":
    main()
