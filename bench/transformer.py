"""A transformer block with a symbolic sequence length: what fusion gains, and what a symbolic
length costs against the same block built for one length.

The block (pre-norm attention with a causal mask, then a GELU MLP; d_model 256, 4 heads) is
written once with a symbolic length n. Three builds are timed in the same run, each median of
repeats, on the same inputs:

- "symbolic": ``relax.build`` of the block with n symbolic (one executable for every length);
- "static":   the block built for this one length (the best a symbolic build can hope for);
- "O0":       the static block legalized only (one unscheduled kernel per op, nothing fused),
  the baseline that the default build's fusion and schedules improve on.

Then the memory-bound chains alone, each as its own small module (static length, O0 vs the
default build): layer_norm (mean, variance, normalise, scale: four passes over the rows become
one kernel) and scale + causal mask + softmax over the attention scores. numpy runs each
chain as the baseline row.

Run: python bench/transformer.py [--quick]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlc_lab  # noqa: E402
from mlc_lab import nd, relax, tir  # noqa: E402
from e2e import numpy_seconds  # noqa: E402

D, HEADS = 256, 4


def block(n):
    """The block as an IRModule; ``n`` an int or a tir.Var."""
    op, hd = relax.op, D // HEADS
    bb = relax.BlockBuilder()
    shapes = {"x": (1, n, D), "g": (D,), "b": (D,), "w_qkv": (D, 3 * D), "w_out": (D, D),
              "w1": (D, 4 * D), "w2": (4 * D, D)}
    x, g, b, wq, wo, w1, w2 = (relax.Var(k, relax.TensorStructInfo(s, "float32"))
                               for k, s in shapes.items())
    with bb.function("main", [x, g, b, wq, wo, w1, w2]):
        with bb.dataflow():
            qkv = bb.emit(op.split(op.matmul(op.nn.layer_norm(x, g, b, axes=[-1]), wq), 3, axis=-1))

            def heads(i, order):
                return bb.emit(op.permute_dims(op.reshape(relax.TupleGetItem(qkv, i), (1, n, HEADS, hd)),
                                               order))
            q, k, v = heads(0, [0, 2, 1, 3]), heads(1, [0, 2, 3, 1]), heads(2, [0, 2, 1, 3])
            scores = bb.emit(op.multiply(op.matmul(q, k), relax.const(hd ** -0.5, "float32")))
            mask = bb.emit(op.triu(op.full_like(scores, relax.const(-1e9, "float32")), 1))
            probs = bb.emit(op.nn.softmax(op.add(scores, mask), axis=-1))
            mixed = bb.emit(op.reshape(op.permute_dims(op.matmul(probs, v), [0, 2, 1, 3]), (1, n, D)))
            y = bb.emit(op.add(x, op.matmul(mixed, wo)))
            mlp = op.matmul(op.nn.gelu(op.matmul(op.nn.layer_norm(y, g, b, axes=[-1]), w1)), w2)
            out = bb.emit_output(op.add(y, mlp))
        bb.emit_func_output(out)
    return bb.get()


def chain(name, n):
    """One memory-bound chain as a module of its own, and its numpy form."""
    op = relax.op
    bb = relax.BlockBuilder()
    if name == "layer_norm":
        x = relax.Var("x", relax.TensorStructInfo((n, D), "float32"))
        g = relax.Var("g", relax.TensorStructInfo((D,), "float32"))
        b = relax.Var("b", relax.TensorStructInfo((D,), "float32"))
        params, body = [x, g, b], lambda: op.nn.layer_norm(x, g, b, axes=[-1])

        def reference(x, g, b):
            mean = x.mean(-1, keepdims=True)
            return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    else:
        s = relax.Var("s", relax.TensorStructInfo((HEADS, n, n), "float32"))
        params = [s]

        def body():
            scaled = op.multiply(s, relax.const(0.125, "float32"))
            return op.nn.softmax(op.add(scaled, op.triu(op.full_like(s, relax.const(-1e9, "float32")), 1)))

        def reference(s):
            z = s * np.float32(0.125) + np.triu(np.full((n, n), -1e9, "float32"), 1)
            e = np.exp(z - z.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body())
        bb.emit_func_output(out)
    return bb.get(), reference


def seconds(ex, args, repeat):
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    return vm.time_evaluator("main", mlc_lab.cpu(), number=1, repeat=repeat, min_repeat_ms=30)(*args).median, vm


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args(argv).quick
    lengths, repeat = ((32,) if quick else (16, 128)), (5 if quick else 9)
    rng = np.random.default_rng(0)
    weights = [np.ones(D, "float32"), np.zeros(D, "float32")] + [
        (rng.standard_normal(s) / np.sqrt(s[0])).astype("float32")
        for s in ((D, 3 * D), (D, D), (D, 4 * D), (4 * D, D))]
    n = tir.Var("n", "int64")
    symbolic = relax.build(block(n), "llvm")
    print(f"transformer block, d_model {D}, {HEADS} heads, llvm, medians of {repeat}")
    print(f"{'length':>6} {'symbolic ms':>12} {'static ms':>10} {'O0 ms':>9} {'static/symbolic':>16} "
          f"{'O0/symbolic':>12}")
    for length in lengths:
        args = [nd.array(a) for a in [rng.standard_normal((1, length, D)).astype("float32")] + weights]
        t_sym, vm_sym = seconds(symbolic, args, repeat)
        t_static, vm_static = seconds(relax.build(block(length), "llvm"), args, repeat)
        t_o0, _ = seconds(relax.build(block(length), "llvm", opt_level=0), args, repeat)
        np.testing.assert_allclose(vm_sym["main"](*args).numpy(), vm_static["main"](*args).numpy(),
                                   rtol=1e-4, atol=1e-4)
        print(f"{length:>6} {t_sym * 1e3:>12.3f} {t_static * 1e3:>10.3f} {t_o0 * 1e3:>9.3f} "
              f"{t_static / t_sym:>15.2f}x {t_o0 / t_sym:>11.2f}x", flush=True)
    length = 32 if quick else 128
    print(f"\nmemory-bound chains at length {length}: the default build (fused) against O0 and numpy")
    print(f"{'chain':<22} {'fused ms':>9} {'O0 ms':>9} {'numpy ms':>9} {'O0/fused':>9} {'numpy/fused':>12}")
    for name in ("layer_norm", "mask+softmax"):
        mod, reference = chain(name, length)
        shapes = [p.struct_info.shape for p in mod["main"].params]
        arrays = [rng.standard_normal([int(d) for d in s]).astype("float32") for s in shapes]
        args = [nd.array(a) for a in arrays]
        t_fused, vm = seconds(relax.build(mod, "llvm"), args, repeat)
        t_o0, _ = seconds(relax.build(mod, "llvm", opt_level=0), args, repeat)
        np.testing.assert_allclose(vm["main"](*args).numpy(), reference(*arrays), rtol=1e-4, atol=1e-5)
        t_np = numpy_seconds(lambda: reference(*arrays), repeat, 30)
        print(f"{name:<22} {t_fused * 1e3:>9.3f} {t_o0 * 1e3:>9.3f} {t_np * 1e3:>9.3f} "
              f"{t_o0 / t_fused:>8.2f}x {t_np / t_fused:>11.2f}x", flush=True)
    print("\n(one symbolic build runs every length; 'static/symbolic' near 1 means it loses little)")


if __name__ == "__main__":
    main()
