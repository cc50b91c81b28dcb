"""The VirtualMachine's segments: after a function's first call, runs of kernels (symbolic sizes
included) are called as one compiled function. Same numbers for every size, the same checks of
arguments and of what registered functions return, the same memory statistics and errors, and
kernels whose shapes the types do not fix keep their checked call."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, tir
from mlc_lab.frontend import nn
from mlc_lab.frontend.gpt import GPT, GPTConfig, NumpyDecoder, as_tokens
from mlc_lab.relax.vm import program as program_module
from mlc_lab.relax.vm.segment import Segment
from mlc_lab.script import ir as I, relax as R, tir as T

rng = np.random.default_rng(3)


def symbolic_mlp():
    model = nn.Sequential(nn.Linear(16, 8, seed=0), nn.ReLU(), nn.Linear(8, 4, seed=1))
    ex = relax.build(model.to_relax((tir.Var("n", "int64"), 16)), "llvm")
    return model, relax.VirtualMachine(ex, mlc_lab.cpu())


def test_kernels_with_a_symbolic_batch_run_as_one_segment_for_every_batch():
    model, vm = symbolic_mlp()
    program = vm._programs["main"]
    for n in (3, 1, 6, 3, 9):
        x = rng.standard_normal((n, 16)).astype("float32")
        np.testing.assert_allclose(vm["main"](x).numpy(), model.forward_numpy(x),
                                   rtol=1e-5, atol=1e-5)
    segment, = program.plan
    assert isinstance(segment, Segment) and len(segment.kernels) == 2
    assert all(kernel.ints for kernel in segment.kernels)   # each takes n
    assert program.sequence is None                        # sizes change: no native sequence


def test_arguments_are_still_checked_once_the_fast_path_is_warm():
    _, vm = symbolic_mlp()
    for n in (2, 5):
        vm["main"](np.ones((n, 16), "float32"))
    with pytest.raises(ValueError, match="parameter x expects .* dimension 1 should be 16"):
        vm["main"](np.ones((5, 15), "float32"))
    with pytest.raises(TypeError, match="parameter x expects a float32 tensor"):
        vm["main"](np.ones((5, 16), "float64"))
    with pytest.raises(TypeError, match="takes 1 argument"):
        vm["main"]()
    assert vm["main"](np.ones((4, 16), "float32")).shape == (4, 4)   # and it still runs


@I.ir_module
class Through:
    @T.prim_func
    def add_one(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            y = R.call_tir(Through.add_one, (x,), R.Tensor((n, 4), "float32"))
            z = R.call_packed("test.segment.pass_through", y, sinfo_args=R.Tensor((n, 4), "float32"))
            w = R.call_tir(Through.add_one, (z,), R.Tensor((n, 4), "float32"))
            R.output(w)
        return w


def test_what_a_registered_function_returns_is_still_checked_between_segments():
    wrong = {"rows": None}

    @mlc_lab.register_func("test.segment.pass_through", override=True)
    def pass_through(y):
        return y if wrong["rows"] is None else mlc_lab.nd.array(np.zeros((wrong["rows"], 4), "float32"))

    vm = relax.VirtualMachine(relax.build(Through, "llvm"), mlc_lab.cpu())
    for n in (2, 3):
        x = rng.standard_normal((n, 4)).astype("float32")
        np.testing.assert_allclose(vm["main"](x).numpy(), x + 2, rtol=1e-6)
    kinds = [type(step).__name__ for step in vm._programs["main"].plan]
    assert kinds == ["Segment", "_CallExtern", "Segment"]
    wrong["rows"] = 7
    with pytest.raises(ValueError, match="the value of z expects .* dimension 0 is n, which is 3"):
        vm["main"](np.ones((3, 4), "float32"))


def gpt_decode_stats(vm, model, steps=6):
    prompt = as_tokens(b"abcdefgh")
    caches = vm["create_kv_cache"]()
    logits, caches = vm["prefill"](prompt.reshape(1, -1), caches)
    decoder = NumpyDecoder(model)
    decoder.prefill(prompt)
    token, stats = int(np.argmax(logits.numpy()[0])), []
    for position in range(len(prompt), len(prompt) + steps):
        expected = decoder.decode(token)
        logits, caches = vm["decode"](np.array([[token]], "int32"),
                                      np.array([position], "int32"), (position + 1,), caches)
        np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-4, atol=1e-4)
        stats.append(vm.memory_stats())
        token = int(np.argmax(expected[0]))
    return stats


def test_decode_memory_statistics_are_those_of_the_step_by_step_path(monkeypatch):
    model = GPT(GPTConfig(d_model=32, d_ff=64, n_heads=2), seed=1)
    ex = relax.build(model.to_relax(), "llvm")
    fast = relax.VirtualMachine(ex, mlc_lab.cpu())
    fast_stats = gpt_decode_stats(fast, model)
    assert sum(isinstance(s, Segment) for s in fast._programs["decode"].plan) == 3
    monkeypatch.setattr(program_module, "segment_steps", lambda program, workspace: None)
    slow = relax.VirtualMachine(ex, mlc_lab.cpu())
    assert gpt_decode_stats(slow, model) == fast_stats
    assert not any(isinstance(s, Segment) for s in slow._programs["decode"].plan)


def test_a_call_on_another_workspace_runs_the_segment_steps_one_by_one():
    model = GPT(GPTConfig(d_model=32, d_ff=64, n_heads=2), seed=2)
    vm = relax.VirtualMachine(relax.build(model.to_relax(), "llvm"), mlc_lab.cpu())
    gpt_decode_stats(vm, model, steps=2)
    program = vm._programs["decode"]
    held = program.idle.pop()   # as if another thread were running decode
    try:
        gpt_decode_stats(vm, model, steps=3)   # each call makes and keeps its own workspace
    finally:
        program.idle.append(held)


@I.ir_module
class Gather:
    @T.prim_func
    def take(a: T.handle, i: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (8,), "float32")
        idx = T.match_buffer(i, (n,), "int32")
        B = T.match_buffer(b, (n,), "float32")
        for k in range(n):
            with T.block("B"):
                vk = T.axis.spatial(n, k)
                B[vk] = A[idx[vk]]

    @T.prim_func
    def twice(b: T.handle, c: T.handle):
        n = T.int64()
        B = T.match_buffer(b, (n,), "float32")
        C = T.match_buffer(c, (n * 2,), "float32")
        for k in range(n * 2):
            with T.block("C"):
                vk = T.axis.spatial(n * 2, k)
                C[vk] = B[vk // 2]

    @R.function
    def main(a: R.Tensor((8,), "float32"), idx: R.Tensor(("n",), "int32")):
        n = T.int64()
        with R.dataflow():
            b = R.call_tir(Gather.take, (a, idx), R.Tensor((n,), "float32"))
            c = R.call_tir(Gather.twice, (b,), R.Tensor((n * 2,), "float32"))
            R.output(c)
        return c


def test_a_failing_kernel_in_a_segment_reports_as_its_step_would():
    vm = relax.VirtualMachine(relax.build(Gather, "llvm -bounds-check"), mlc_lab.cpu())
    a = np.arange(8, dtype="float32")
    for good in ([7, 0, 3], [1, 2]):
        good = np.array(good, "int32")
        np.testing.assert_array_equal(vm["main"](a, good).numpy(), np.repeat(a[good], 2))
    program = vm._programs["main"]
    segment = program.plan[0]
    assert isinstance(segment, Segment) and [k.name for k in segment.kernels] == ["b"]
    assert program.plan[1] is program.steps[1] and program.steps[1].ints is None   # n * 2
    bad = np.array([1, 9, 2, 0], "int32")
    with pytest.raises(IndexError, match="buffer A: index 9 is out of bounds") as caught:
        vm["main"](a, bad)
    stepping = relax.VirtualMachine(vm.executable, mlc_lab.cpu())   # its first call steps
    with pytest.raises(IndexError) as stepped:
        stepping["main"](a, bad)
    assert str(caught.value) == str(stepped.value)
    assert caught.value.__notes__ == stepped.value.__notes__ == \
        ["while computing b in relax function main"]
    good = np.array([5, 6, 7, 0, 1], "int32")
    np.testing.assert_array_equal(vm["main"](a, good).numpy(), np.repeat(a[good], 2))
