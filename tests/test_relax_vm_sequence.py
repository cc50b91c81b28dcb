"""The VirtualMachine's native sequence: from the third call on, a function whose kernels all run
on data addresses is one compiled call. Same results, fresh outputs, the same memory statistics,
the same errors, and concurrent callers never share its workspace."""
import threading

import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax
from mlc_lab.frontend import nn
from mlc_lab.script import ir as I, relax as R, tir as T


def mlp_vm(batch=1):
    model = nn.Sequential(nn.Linear(64, 32, seed=0), nn.ReLU(), nn.Linear(32, 10, seed=1))
    return model, relax.VirtualMachine(relax.build(model.to_relax((batch, 64)), "llvm"), mlc_lab.cpu())


def test_third_call_runs_as_one_sequence_with_fresh_outputs():
    model, vm = mlp_vm()
    program = vm._programs["main"]
    rng = np.random.default_rng(0)
    xs = [rng.random((1, 64), dtype="float32") for _ in range(5)]
    outs = []
    for k, x in enumerate(xs):
        outs.append(vm["main"](mlc_lab.nd.array(x)))
        assert (program.sequence is not None) == (k >= 1)   # made by the second call
        assert program.calls == min(k + 1, 2)                 # later calls never step
    for x, out in zip(xs, outs):   # each call's output is its own: later calls change nothing
        np.testing.assert_allclose(out.numpy(), model.forward_numpy(x), rtol=1e-5, atol=1e-5)
    assert len({out.address for out in outs}) == len(outs)
    assert "call i32 inttoptr" in program.sequence.text
    assert program.sequence.direct == 0   # the result is the one fresh output: no registers


def test_memory_statistics_are_those_of_a_step_by_step_call():
    _, vm = mlp_vm(batch=4)
    x = np.ones((4, 64), "float32")
    vm["main"](x)
    vm["main"](x)
    stepped = vm.memory_stats()
    vm["main"](x)
    assert vm._programs["main"].sequence is not None
    sequenced = vm.memory_stats()
    assert {k: v for k, v in sequenced.items() if k != "calls"} == \
        {k: v for k, v in stepped.items() if k != "calls"}
    assert sequenced["calls"] == 3 and sequenced["bytes_allocated"] == 4 * 10 * 4


@I.ir_module
class Gather:
    @T.prim_func
    def take(A: T.Buffer((8,), "float32"), idx: T.Buffer((4,), "int32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[idx[vi]]

    @T.prim_func
    def double(B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                C[vi] = B[vi] * T.float32(2)

    @R.function
    def main(a: R.Tensor((8,), "float32"), idx: R.Tensor((4,), "int32")):
        with R.dataflow():
            b = R.call_tir(Gather.take, (a, idx), R.Tensor((4,), "float32"))
            c = R.call_tir(Gather.double, (b,), R.Tensor((4,), "float32"))
            R.output(c)
        return c


def test_a_failing_kernel_in_the_sequence_reports_as_a_step_would():
    vm = relax.VirtualMachine(relax.build(Gather, "llvm -bounds-check"), mlc_lab.cpu())
    a = np.arange(8, dtype="float32")
    good = np.array([7, 0, 3, 3], "int32")
    for _ in range(3):
        np.testing.assert_array_equal(vm["main"](a, good).numpy(), 2 * a[good])
    assert vm._programs["main"].sequence is not None
    bad = np.array([1, 9, 2, 0], "int32")
    with pytest.raises(IndexError, match="buffer a: index 9 is out of bounds for shape") as caught:
        vm["main"](a, bad)
    stepping = relax.VirtualMachine(vm.executable, mlc_lab.cpu())   # its first call steps
    with pytest.raises(IndexError) as stepped:
        stepping["main"](a, bad)
    assert str(caught.value) == str(stepped.value)
    assert caught.value.__notes__ == stepped.value.__notes__ == \
        ["while computing c in relax function main"]
    np.testing.assert_array_equal(vm["main"](a, good).numpy(), 2 * a[good])   # still usable


def test_concurrent_callers_get_their_own_results():
    model, vm = mlp_vm(batch=2)
    rng = np.random.default_rng(1)
    xs = [rng.random((2, 64), dtype="float32") for _ in range(4)]
    for x in xs[:2]:
        vm["main"](x)
    wrong = []

    def work(x):
        want = model.forward_numpy(x)
        for _ in range(300):
            if not np.allclose(vm["main"](x).numpy(), want, rtol=1e-5, atol=1e-5):
                wrong.append(x)
                return
    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_a_sequence_that_cannot_be_made_gives_its_workspace_back(monkeypatch):
    from mlc_lab.relax.vm import native_sequence

    def refuse(*args, **kwargs):
        raise RuntimeError("no JIT here")
    model, vm = mlp_vm(batch=4)
    monkeypatch.setattr(native_sequence.llvm_runtime, "JITModule", refuse)
    x = np.ones((4, 64), "float32")
    for _ in range(3):
        np.testing.assert_allclose(vm["main"](x).numpy(), model.forward_numpy(x), rtol=1e-5, atol=1e-5)
    program = vm._programs["main"]
    assert program.sequence is None and len(program.idle) == 1
    assert vm.memory_stats()["bytes_allocated"] == 4 * 10 * 4   # the output only: no new workspace
