"""Whole models through relax.build: how do compiled MLPs and a small CNN compare with the same
models in numpy, onnxruntime and torch, and what do fusion, memory planning and tuning change?
For each model and batch size: median latency of the baselines (bench/baselines.py: numpy's
``forward_numpy``; onnxruntime on CPU running an ONNX graph of the same weights; torch eager)
and of the VirtualMachine running the model built for "llvm" four ways: opt_level 0
(LegalizeOps only: one kernel per op, and the transposes of the Linear weights recomputed on
every call), "fold" (LegalizeOps then FoldConstant: the same unfused kernels, weights
transposed once at build time), opt_level 1 (the default pipeline: constant folding, fusion,
default schedules, static memory planning) and "tuned" (tune_relax with a small budget, then
MetaScheduleApplyDatabase on legalize_and_fuse(mod) and relax.build). Then ratios, kernels per
call, memory per call, and the performance targets, each printed with its measured value and
PASS or MISS. "fold -> O1" isolates what fusion and planning gain.

x numpy = numpy time / ours (above 1: ours is faster), and so for the other baselines; each
baseline is timed before and after the compiled runs and its faster median kept, as the host
may be shared. onnx, onnxruntime and torch are optional (pip install -e '.[bench]'); a missing
one leaves its column empty. Nothing is asserted: a wrong result is printed as a note.

--busy then starts as many processes spinning on the CPU as there are cores and times every model
again beside them: a shared JupyterHub server or a laptop compiling in the background. Each
column's slowdown (busy / quiet) is printed, and ours against onnxruntime's in the same run. torch,
where installed, is imported in this process (its baseline), so every figure is measured with
its own OpenMP runtime loaded beside ours.

Run: python bench/e2e.py [--quick] [--busy]   (quick: batch 1 only, fewer repeats, 8 trials of
tuning)
"""
import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlc_lab  # noqa: E402
from mlc_lab import meta_schedule as ms, nd, relax  # noqa: E402
from mlc_lab.frontend import nn  # noqa: E402
from mlc_lab.runtime import llvm_runtime  # noqa: E402
from mlc_lab.target import Target  # noqa: E402
from mlc_lab.tir.transform.func_memo import clear_memos  # noqa: E402
from baselines import (INSTALL_HINT, numpy_baseline, onnxruntime_baseline,  # noqa: E402
                       torch_baseline, traced_peak)

TARGET = "llvm"
BUILDS = 3   # builds of each module: with nothing remembered (every kernel compiled, as in a new
             # process) and again (a cell run twice: its kernels are found compiled); medians
# The llvm runtime runs parallel loops on num-cores threads, every core when it is unset; every
# baseline gets the same number.
THREADS = Target(TARGET).num_cores or os.cpu_count() or 1


def mlp(sizes, seed=0):
    """Linear-ReLU-...-Linear through the given layer widths."""
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        if i:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(n_in, n_out, seed=seed + i))
    return nn.Sequential(*layers)


def small_cnn(seed=0, filters=16):
    """conv 3x3 (1 -> 16 channels, with bias) - relu - maxpool 2x2 - flatten - linear to 10
    classes, 28x28 input."""
    return nn.Sequential(nn.Conv2d(1, filters, 3, seed=seed), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(filters * 13 * 13, 10, seed=seed + 1))


def cases(quick):
    """(name, model, input shape) for every configuration measured."""
    mlp_digits, mlp_mnist, cnn = mlp((64, 64, 10)), mlp((784, 256, 10)), small_cnn()
    rows = [(name, model, (batch,) + features)
            for name, model, features, batches in (("mlp 64-64-10", mlp_digits, (64,), (1, 64)),
                                                   ("mlp 784-256-10", mlp_mnist, (784,), (1, 64)),
                                                   ("cnn conv-pool-linear", cnn, (1, 28, 28), (1, 8, 64)))
            for batch in batches]
    return [row for row in rows if row[2][0] == 1] if quick else rows


def numpy_seconds(fn, repeat, min_repeat_ms):
    """Median over ``repeat`` runs of the mean time of one ``fn()``, each run >= min_repeat_ms."""
    fn()
    calls, times = 1, []
    for _ in range(repeat):
        while True:
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= min_repeat_ms:
                break
            calls *= 2
        times.append(elapsed / calls)
    return statistics.median(times)


def kernel_calls(mod):
    """The call_tir bindings of ``main``: the kernels launched per inference."""
    return sum(1 for block in mod["main"].body.blocks for binding in block.bindings
               if isinstance(binding.value, relax.Call) and getattr(binding.value.op, "name", "")
               == "relax.call_tir")


LEVELS = {"O0": {"opt_level": 0},
          "fold": {"pipeline": [relax.transform.LegalizeOps(), relax.transform.FoldConstant()]},
          "O1": {"opt_level": 1}}


def compiled(mod, build_options, x, want, repeat, min_repeat_ms):
    """Build with ``build_options``: BUILDS times after forgetting every compiled kernel
    (``clear_memos``: the first build of a new process or notebook, median) and BUILDS times
    again, finding them compiled (a cell run again, median); check once against numpy, time.
    Returns what was seen."""
    def median_build(forget: bool) -> tuple:
        times = []
        for _ in range(BUILDS):
            if forget:
                clear_memos()
            start = time.perf_counter()
            ex = relax.build(mod, TARGET, **build_options)
            times.append(time.perf_counter() - start)
        return statistics.median(times), ex

    first_build_s, _ = median_build(forget=True)
    build_s, ex = median_build(forget=False)
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    x_nd = nd.array(x)
    err = float(np.abs(vm["main"](x_nd).numpy() - want).max())
    first_call = vm.memory_stats()
    traced = traced_peak(lambda: vm["main"](x_nd))
    timer = vm.time_evaluator("main", mlc_lab.cpu(), number=1, repeat=repeat,
                              min_repeat_ms=min_repeat_ms)
    return {"seconds": timer(x_nd).median, "first_build_s": first_build_s, "build_s": build_s,
            "kernels": kernel_calls(ex.mod),
            "call": lambda: vm["main"](x_nd),
            "err": err, "vm": first_call, "again": vm.memory_stats()["bytes_allocated"],
            "traced": traced, "plan": relax.transform.memory_stats(ex.mod)}


def tuned_module(mod, trials):
    """``mod``'s fused kernels with the best schedules of ``trials`` trials of tune_relax. With
    num-cores unset, tune_relax's space samples one-core schedules (besides each kernel's default
    schedule, which it measures first)."""
    database = ms.relax_integration.tune_relax(mod, None, TARGET, max_trials_global=trials,
                                               num_trials_per_iter=16, seed=0, quiet=True,
                                               work_dir=tempfile.mkdtemp(prefix="bench_e2e_"))
    fused = ms.relax_integration.legalize_and_fuse(mod)
    return relax.transform.MetaScheduleApplyDatabase(database, TARGET)(fused)


def baselines(model, shape, missing):
    """numpy, and onnxruntime and torch where installed ({name: Baseline}); what is missing is
    added to ``missing``."""
    found = {"numpy": numpy_baseline(model)}
    for name, make in (("ort", lambda: onnxruntime_baseline(model, shape, THREADS)),
                       ("torch", lambda: torch_baseline(model, shape, THREADS))):
        try:
            found[name] = make()
        except ImportError as error:
            missing.add(f"{error.name} not installed" + (f" ({INSTALL_HINT})" if name == "ort" else ""))
    return found


def fmt(value, spec, width):
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def measure(quick, trials, repeat, min_repeat_ms, missing):
    """One row of measurements per case."""
    rows = []
    for name, model, shape in cases(quick):
        x = np.random.default_rng(sum(shape)).random(shape, dtype="float32")
        want = model.forward_numpy(x)
        base = baselines(model, shape, missing)
        notes = [f"{label} WRONG RESULT (max err {err:.2g})" for label, err in
                 ((label, float(np.abs(b.output(x) - want).max())) for label, b in base.items())
                 if err > 1e-3]
        before = {label: numpy_seconds(lambda: b.run(x), repeat, min_repeat_ms) for label, b in base.items()}
        mod = model.to_relax(shape)
        runs = {level: compiled(mod, options, x, want, repeat, min_repeat_ms)
                for level, options in LEVELS.items()}
        if trials:
            start = time.perf_counter()
            tuned = tuned_module(mod, trials)
            notes.append(f"tuning {time.perf_counter() - start:.0f} s")
            runs["tuned"] = compiled(tuned, {}, x, want, repeat, min_repeat_ms)
        seconds = {label: min(before[label], numpy_seconds(lambda: b.run(x), repeat, min_repeat_ms))
                   for label, b in base.items()}
        notes += [f"{level} WRONG RESULT (max err {run['err']:.2g})"
                  for level, run in runs.items() if run["err"] > 1e-3]
        seconds.update({level: run["seconds"] for level, run in runs.items()})
        rows.append({"name": name, "shape": shape, "x": x, "base": base, "runs": runs, "seconds": seconds,
                     "notes": notes, "bytes": {label: b.bytes_allocated(x) for label, b in base.items()
                                               if b.bytes_allocated is not None}})
        print(f"  measured {name} {'x'.join(map(str, shape))}", file=sys.stderr, flush=True)
    return rows


def print_tables(rows):
    columns = ["numpy", "ort", "torch", "O0", "fold", "O1", "tuned"]
    header = (f"{'model':<21} {'input':<12}" + "".join(f" {c + ' ms':>9}" for c in columns)
              + f" {'kernels ort/torch/O0/fold/O1/tuned':>34}  note")
    print(header + "\n" + "-" * len(header))
    for row in rows:
        base, runs, sec = row["base"], row["runs"], row["seconds"]
        kernels = [("-" if "ort" not in base else str(base["ort"].kernels)),
                   ("-" if "torch" not in base else str(base["torch"].kernels))]
        kernels += [str(run["kernels"]) for run in runs.values()]
        print(f"{row['name']:<21} {'x'.join(map(str, row['shape'])):<12}"
              + "".join(" " + fmt(None if c not in sec else sec[c] * 1e3, ".3f", 9) for c in columns)
              + f" {'/'.join(kernels):>34}  " + "; ".join(row["notes"]))

    print("\nratios: baseline time / ours (above 1: ours is faster); fold/O1 = what fusion, "
          "default schedules and planning gain; O1/tuned = what tuning adds")
    pairs = [(b, o) for o in ("O1", "tuned") for b in ("numpy", "ort", "torch")]
    header = (f"{'model':<21} {'input':<12}" + "".join(f" {b[:5] + ' / ' + o:>13}" for b, o in pairs)
              + f" {'fold/O1':>8} {'O1/tuned':>8}")
    print(header + "\n" + "-" * len(header))
    for row in rows:
        sec = row["seconds"]

        def ratio(a, b):
            return sec[a] / sec[b] if a in sec and b in sec else None
        print(f"{row['name']:<21} {'x'.join(map(str, row['shape'])):<12}"
              + "".join(" " + fmt(ratio(b, o), ".3f", 13) for b, o in pairs)
              + f" {fmt(ratio('fold', 'O1'), '.2f', 8)} {fmt(ratio('O1', 'tuned'), '.2f', 8)}")

    print("\nmemory per inference (bytes). plan: relax.transform.memory_stats at O1 (tensors one "
          "allocation each -> shared storages; peak in use without/with the plan). VM first call: "
          "vm.memory_stats()['bytes_allocated'] (output and planned storages included); VM O1 "
          "again: a later call, storages reused. traced peak: most bytes held at once in a call, "
          "by tracemalloc. torch: bytes its ops allocate in a call (profiler, profile_memory)")
    header = (f"{'model':<21} {'input':<12} {'plan: naive':>11} {'planned':>8} {'tens->stor':>10} "
              f"{'peak unpl':>9} {'peak plan':>9} {'VM O0':>8} {'VM fold':>8} {'VM O1':>8} "
              f"{'fold/O1':>7} {'fallback':>8} {'O1 again':>8} {'peak np':>8} {'peak O1':>8} "
              f"{'torch':>8}")
    print(header + "\n" + "-" * len(header))
    for row in rows:
        runs, nbytes = row["runs"], row["bytes"]
        plan, o1 = runs["O1"]["plan"], runs["O1"]
        allocated = [runs[level]["vm"]["bytes_allocated"] for level in LEVELS]
        print(f"{row['name']:<21} {'x'.join(map(str, row['shape'])):<12} {plan['naive_bytes']:>11} "
              f"{plan['planned_bytes']:>8} {str(plan['tensors']) + '->' + str(plan['storages']):>10} "
              f"{plan['unplanned_peak_bytes']:>9} {plan['planned_peak_bytes']:>9}"
              + "".join(f" {vm_bytes:>8}" for vm_bytes in allocated)
              + f" {allocated[1] / allocated[2]:>7.2f} {o1['vm']['plan_fallbacks']:>8} {o1['again']:>8}"
              f" {nbytes['numpy']:>8} {o1['traced']:>8} {fmt(nbytes.get('torch'), '', 8)}")


def busy_slowdowns(rows, repeat, min_repeat_ms) -> dict:
    """Time every model again beside one process spinning per core; prints the table and returns
    {id(row): {column: busy seconds / quiet seconds}}."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 1)]
    slowdowns = {}
    try:
        for row in rows:
            calls = {label: (lambda b=b: b.run(row["x"])) for label, b in row["base"].items()}
            calls.update({level: run["call"] for level, run in row["runs"].items()
                          if level in ("O1", "tuned")})
            slowdowns[id(row)] = {label: numpy_seconds(call, repeat, min_repeat_ms) / row["seconds"][label]
                                  for label, call in calls.items()}
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    columns = ["numpy", "ort", "torch", "O1", "tuned"]
    print(f"\nbusy machine: {len(spinners)} processes spinning (one per core); slowdown = busy time "
          "/ quiet time per column; ours/ort = our worst slowdown / onnxruntime's")
    header = f"{'model':<21} {'input':<12}" + "".join(f" {c:>8}" for c in columns) + f" {'ours/ort':>9}"
    print(header + "\n" + "-" * len(header))
    for row in rows:
        seen = slowdowns[id(row)]
        ours = max((seen[k] for k in ("O1", "tuned") if k in seen), default=None)
        print(f"{row['name']:<21} {'x'.join(map(str, row['shape'])):<12}"
              + "".join(" " + fmt(seen.get(c), ".2f", 8) for c in columns)
              + " " + fmt(ours / seen["ort"] if ours and "ort" in seen else None, ".2f", 9))
    return slowdowns


def print_targets(rows, quick, busy=None):
    """The targets, each with its measured value and PASS or MISS; never asserted."""
    def seconds(name, batch, key):
        row = next((r for r in rows if r["name"] == name and r["shape"][0] == batch), None)
        if row is None:
            raise LookupError("not measured" + (" (--quick)" if quick else ""))
        if key not in row["seconds"]:
            raise LookupError(f"no {key} time (not installed)")
        return row["seconds"][key]

    def extreme(pick, value_of, what, selected=rows):
        """The lowest or highest value_of(row) over ``selected``, and which row it is."""
        if not selected:
            raise LookupError("not measured")
        at = pick(selected, key=value_of)
        return value_of(at), f" ({what}: {at['name']} batch {at['shape'][0]})"

    def time_ratio(name, batch, baseline, ours):
        return seconds(name, batch, baseline) / seconds(name, batch, ours), ""
    cnn = "cnn conv-pool-linear"
    targets = [(f"cnn batch {b}, default build (O1) >= onnxruntime", lambda v: v >= 1.0, "x",
                lambda b=b: time_ratio(cnn, b, "ort", "O1")) for b in (1, 8, 64)]
    targets += [(f"cnn batch {b}, tuned >= 1.5x onnxruntime", lambda v: v >= 1.5, "x",
                 lambda b=b: time_ratio(cnn, b, "ort", "tuned")) for b in (1, 8, 64)]
    targets += [
        ("mlp 64-64-10 batch 1, O1 latency <= onnxruntime's", lambda v: v >= 1.0, "x",
         lambda: time_ratio("mlp 64-64-10", 1, "ort", "O1")),
        ("mlp 784-256-10 batch 64, default schedules (O1) >= 1.0x numpy", lambda v: v >= 1.0, "x",
         lambda: time_ratio("mlp 784-256-10", 64, "numpy", "O1")),
        ("mlp 784-256-10 batch 64, tuned >= onnxruntime", lambda v: v >= 1.0, "x",
         lambda: time_ratio("mlp 784-256-10", 64, "ort", "tuned")),
        ("cnn batch 8, default schedules (O1) >= 3x numpy", lambda v: v >= 3.0, "x",
         lambda: time_ratio(cnn, 8, "numpy", "O1")),
        ("no model slower after fusion (fold / O1 >= 1 on every row)", lambda v: v >= 1.0, "x",
         lambda: extreme(min, lambda r: r["seconds"]["fold"] / r["seconds"]["O1"], "lowest")),
        ("planned peak memory <= unplanned (memory_stats, every row)", lambda v: v <= 1.0, "",
         lambda: extreme(max, lambda r: r["runs"]["O1"]["plan"]["planned_peak_bytes"]
                         / max(r["runs"]["O1"]["plan"]["unplanned_peak_bytes"], 1),
                         "highest planned/unplanned")),
        ("relax.build of the CNN (default options), first build < 0.3 s", lambda v: v < 0.3, " s",
         lambda: extreme(max, lambda r: r["runs"]["O1"]["first_build_s"], "slowest",
                         [r for r in rows if r["name"].startswith("cnn")])),
        ("relax.build of the CNN (default options), built again < 0.3 s", lambda v: v < 0.3, " s",
         lambda: extreme(max, lambda r: r["runs"]["O1"]["build_s"], "slowest",
                         [r for r in rows if r["name"].startswith("cnn")]))]
    if busy is not None:
        targets.append(("busy machine: no model slows down more than 1.5x what onnxruntime does",
                        lambda v: v <= 1.5, "x", lambda: extreme(
                            max, lambda r: max(busy[id(r)][k] for k in ("O1", "tuned") if k in busy[id(r)])
                            / busy[id(r)]["ort"], "worst", [r for r in rows if "ort" in busy[id(r)]])))
    print("\ntargets (measured in this run; PASS/MISS is printed, never asserted)")
    for label, passes, unit, value_of in targets:
        try:
            value, where = value_of()
        except LookupError as why:
            print(f"  SKIP  {label}: {why.args[0]}")
            continue
        print(f"  {'PASS' if passes(value) else 'MISS':<5} {label}: {value:.3g}{unit}{where}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batch 1 only, fewer repeats")
    parser.add_argument("--busy", action="store_true",
                        help="then time every model again beside one spinning process per core")
    args = parser.parse_args(argv)
    repeat, min_repeat_ms, trials = (3, 20, 8) if args.quick else (7, 100, 32)
    try:
        from threadpoolctl import threadpool_limits
        limits, blas = threadpool_limits(limits=THREADS), "numpy's BLAS (threadpoolctl)"
    except ImportError:
        limits = contextlib.nullcontext()
        blas = "numpy's BLAS left at its default (threadpoolctl not installed)"
    print(f"whole models, float32, target {TARGET!r}; median of {repeat} repeats of >= "
          f"{min_repeat_ms} ms; tuned: {trials} trials of tune_relax per model and batch; "
          f"{os.cpu_count()} cores\nthreads: {THREADS} everywhere: {TARGET!r} (num-cores unset: "
          f"all cores), {blas}, onnxruntime intra_op_num_threads, torch.set_num_threads")
    missing = set()
    with limits:
        rows = measure(args.quick, trials, repeat, min_repeat_ms, missing)
        busy = busy_slowdowns(rows, repeat, min_repeat_ms) if args.busy else None
    for line in sorted(missing):
        print(line)
    print(f"torch imported in this process: {'yes' if 'torch' in sys.modules else 'no'}; parallel "
          f"loops: {llvm_runtime.parallel_backend()}")
    print_tables(rows)
    print_targets(rows, args.quick, busy)
    print()
    for what, key in (("first build", "first_build_s"), ("built again", "build_s")):
        build_times = [run[key] for row in rows for level, run in row["runs"].items() if level in LEVELS]
        print(f"relax.build latency ({TARGET}, all models, levels O0/fold/O1), {what}: median "
              f"{statistics.median(build_times) * 1e3:.0f} ms, max {max(build_times) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
