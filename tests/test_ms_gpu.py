"""Tuning for GPU targets: the GPU rules give launchable, correct kernels, and tune_tir measures
them (on the simulator's time estimate without a GPU)."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import meta_schedule as ms
from mlc_lab.meta_schedule.space_generator import ScheduleFn, SpaceRejectedError, create_space
from mlc_lab.target import Target
from mlc_lab.testing import gpu_schedules as gs
from mlc_lab.testing import matmul_schedules as mm
from mlc_lab.tir.stmt_functor import post_order_visit

GPU = "nvidia/a100"


def _has_shared(mod) -> bool:
    found = []
    post_order_visit(mlc_lab.lower(mod)["main"].body,
                     lambda n: found.append(n) if getattr(getattr(n, "buffer", None), "scope", "") == "shared" else None)
    return bool(found)


def test_gpu_space_gives_correct_bound_kernels_some_with_shared_memory():
    space = create_space("auto", target=Target(GPU))
    arrays, expected = gs.arrays("matmul", 64)
    shared = 0
    for seed in range(8):
        candidate = space.sample(mm.naive(64), seed)
        lib = mlc_lab.build(candidate.sch.mod, target="cuda-sim")
        out = [a.copy() for a in arrays]
        lib[lib.entry_name](*out)
        np.testing.assert_allclose(out[-1], expected, rtol=1e-4, atol=1e-4)
        kernel, = lib[lib.entry_name].program.kernels
        assert kernel.threads_per_block <= 1024 and kernel.num_blocks >= 1
        shared += _has_shared(candidate.sch.mod)
    assert 0 < shared < 8          # fetching into shared memory is a sampled choice


def test_elementwise_kernels_are_bound_by_auto_bind():
    space = create_space("auto", target=Target(GPU))
    candidate = space.sample(mlc_lab.IRModule({"main": gs.vector_add_func(1000)}), 0)
    arrays, expected = gs.arrays("vector_add", 1000)
    lib = mlc_lab.build(candidate.sch.mod, target="cuda-sim")
    lib["main"](*arrays)
    np.testing.assert_allclose(arrays[-1], expected)
    assert "threadIdx.x" in candidate.sch.mod.script()


def test_a_schedule_the_gpu_cannot_launch_is_rejected():
    def too_many_threads(sch):
        i, = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [None, 2048])
        sch.bind(i0, "blockIdx.x")
        sch.bind(i1, "threadIdx.x")
    space = create_space(too_many_threads, target=Target(GPU))
    assert isinstance(space, ScheduleFn)
    with pytest.raises(SpaceRejectedError, match="VerifyGPUCode"):
        space.sample(mlc_lab.IRModule({"main": gs.vector_add_func(4096)}), 0)


def test_tune_tir_for_a_gpu_finds_a_correct_schedule(tmp_path):
    database = ms.tune_tir(mm.naive(64), GPU, max_trials_global=8, num_trials_per_iter=8,
                           work_dir=str(tmp_path), seed=0)
    records = [r for r in database.records() if r.run_secs]
    assert records and all(0 < min(r.run_secs) < 1e-2 for r in records)   # model estimates
    sch = ms.tir_integration.compile_tir(database, mm.naive(64), GPU)
    arrays, expected = gs.arrays("matmul", 64)
    lib = mlc_lab.build(sch.mod, target=GPU)
    on_gpu = [mlc_lab.nd.array(a, mlc_lab.cuda(0)) for a in arrays]
    lib[lib.entry_name](*on_gpu)
    np.testing.assert_allclose(on_gpu[-1].numpy(), expected, rtol=1e-4, atol=1e-4)
