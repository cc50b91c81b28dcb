"""Whole models through relax.build: how do compiled MLPs and a small CNN compare with the same
models in numpy, and what do fusion and memory planning change? For each model and batch size:
median latency of numpy (``forward_numpy``) and of the VirtualMachine running the model built
for "llvm" three ways: opt_level 0 (LegalizeOps only: one kernel per op, and the transposes of
the Linear weights recomputed on every call), "fold" (LegalizeOps then FoldConstant: the same
unfused kernels, weights transposed once at build time) and opt_level 1 (the default pipeline:
constant folding, fusion and static memory planning), as ratios; the kernels called per
inference at each level; the bytes of intermediate tensors with and without the memory plan,
both as the plan predicts (relax.transform.memory_stats) and as the VM allocated them
(vm.memory_stats()). "fold -> O1" isolates what fusion and planning gain.

x numpy = numpy time / ours (above 1: ours is faster); numpy is timed before and after the
compiled runs and the faster median kept, as the host may be shared. numpy calls OpenBLAS for the matmuls, so
expect the unscheduled kernels here to lose by a wide margin; the ratios show how far scheduling
(chapters 4 and on) has to go. Nothing is asserted: a wrong result is printed as a note.

Run: python bench/e2e.py [--quick]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlc_lab  # noqa: E402
from mlc_lab import nd, relax  # noqa: E402
from mlc_lab.frontend import nn  # noqa: E402

TARGET = "llvm"


def mlp(sizes, seed=0):
    """Linear-ReLU-...-Linear through the given layer widths."""
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        if i:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(n_in, n_out, seed=seed + i))
    return nn.Sequential(*layers)


def small_cnn(seed=0):
    """conv 3x3 (1 -> 8 channels) - relu - maxpool 2x2 - flatten - linear to 10 classes, 28x28 input."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, seed=seed), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 13 * 13, 10, seed=seed + 1))


def cases(quick):
    """(name, model, input shape) for every configuration measured."""
    mlp_digits, mlp_mnist, cnn = mlp((64, 64, 10)), mlp((784, 256, 10)), small_cnn()
    rows = [("mlp 64-64-10", mlp_digits, (1, 64)),
            ("mlp 64-64-10", mlp_digits, (64, 64)),
            ("mlp 784-256-10", mlp_mnist, (1, 784)),
            ("mlp 784-256-10", mlp_mnist, (64, 784)),
            ("cnn conv-pool-linear", cnn, (1, 1, 28, 28)),
            ("cnn conv-pool-linear", cnn, (8, 1, 28, 28))]
    if quick:
        rows = [row for row in rows if row[2][0] == 1]
    return rows


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


def compiled(model, shape, build_options, x, want, repeat, min_repeat_ms):
    """Build with ``build_options``, check once against numpy, time. Returns what was seen."""
    start = time.perf_counter()
    ex = relax.build(model.to_relax(shape), TARGET, **build_options)
    build_s = time.perf_counter() - start
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    x_nd = nd.array(x)
    err = float(np.abs(vm["main"](x_nd).numpy() - want).max())
    stats = vm.memory_stats()
    timer = vm.time_evaluator("main", mlc_lab.cpu(), number=1, repeat=repeat,
                              min_repeat_ms=min_repeat_ms)
    return {"seconds": timer(x_nd).median, "build_s": build_s, "kernels": kernel_calls(ex.mod),
            "err": err, "vm": stats, "plan": relax.transform.memory_stats(ex.mod), "ex": ex}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batch 1 only, fewer repeats")
    args = parser.parse_args(argv)
    repeat, min_repeat_ms = (3, 20) if args.quick else (7, 100)

    print(f"whole models, float32, target {TARGET!r}; median of {repeat} repeats of >= "
          f"{min_repeat_ms} ms; x numpy = numpy time / ours; numpy threads: OpenBLAS default "
          f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}); "
          f"{os.cpu_count()} cores")
    header = (f"{'model':<21} {'input':<12} {'numpy ms':>9} {'O0 ms':>8} {'fold ms':>8} {'O1 ms':>8} "
              f"{'O0 x np':>8} {'fold x np':>9} {'O1 x np':>8} {'fold/O1':>7} {'kernels O0/fold/O1':>18}"
              f"  note")
    print(header)
    print("-" * len(header))
    memory_rows = []
    for name, model, shape in cases(args.quick):
        x = np.random.default_rng(sum(shape)).random(shape, dtype="float32")
        want = model.forward_numpy(x)
        before = numpy_seconds(lambda: model.forward_numpy(x), repeat, min_repeat_ms)
        runs = {level: compiled(model, shape, options, x, want, repeat, min_repeat_ms)
                for level, options in LEVELS.items()}
        numpy_s = min(before, numpy_seconds(lambda: model.forward_numpy(x), repeat, min_repeat_ms))
        o0, fold, o1 = runs["O0"], runs["fold"], runs["O1"]
        notes = [f"{level} WRONG RESULT (max err {run['err']:.2g})"
                 for level, run in runs.items() if run["err"] > 1e-3]
        kernels = "/".join(str(run["kernels"]) for run in runs.values())
        print(f"{name:<21} {'x'.join(map(str, shape)):<12} {numpy_s * 1e3:>9.3f}"
              + "".join(f" {run['seconds'] * 1e3:>8.3f}" for run in runs.values())
              + f" {numpy_s / o0['seconds']:>8.3f} {numpy_s / fold['seconds']:>9.3f} "
              f"{numpy_s / o1['seconds']:>8.3f} {fold['seconds'] / o1['seconds']:>7.2f} "
              f"{kernels:>18}  " + "; ".join(notes), flush=True)
        memory_rows.append((name, shape, runs))

    print("\nintermediate memory per inference (bytes): the plan's prediction, from "
          "relax.transform.memory_stats(ex.mod) at O1 (tensors one allocation each -> shared "
          "storages), and what the VM allocated (vm.memory_stats()['bytes_allocated'], output "
          "included) at each level; fold/O1 is what fusion and the plan save together")
    header = (f"{'model':<21} {'input':<12} {'plan: naive':>12} {'planned':>9} {'tensors':>8} "
              f"{'storages':>8} {'VM O0':>9} {'VM fold':>9} {'VM O1':>9} {'fold/O1':>7} {'fallbacks':>9}")
    print(header)
    print("-" * len(header))
    for name, shape, runs in memory_rows:
        plan, vm1 = runs["O1"]["plan"], runs["O1"]["vm"]
        allocated = [run["vm"]["bytes_allocated"] for run in runs.values()]
        print(f"{name:<21} {'x'.join(map(str, shape)):<12} {plan['naive_bytes']:>12} "
              f"{plan['planned_bytes']:>9} {plan['tensors']:>8} {plan['storages']:>8}"
              + "".join(f" {nbytes:>9}" for nbytes in allocated)
              + f" {allocated[1] / allocated[2]:>7.2f} {vm1['plan_fallbacks']:>9}")

    build_times = [run["build_s"] for _, _, runs in memory_rows for run in runs.values()]
    print(f"\nrelax.build latency (llvm, all models and levels above): median "
          f"{statistics.median(build_times) * 1e3:.0f} ms, max {max(build_times) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
