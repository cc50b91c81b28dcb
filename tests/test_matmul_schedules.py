"""The shared matmul programs and schedules (mlc_lab.testing.matmul_schedules): each schedule is
legal, computes A @ B (or relu(A @ B)) at small sizes under the interpreter, replays from its
saved trace, and the best one lowers to a small register accumulator and vector code."""
import importlib.util

import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd, tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.testing import matmul_schedules as mm

SCHEDULES = {
    "course": lambda n, relu: mm.course_schedule(n, relu=relu),
    "best": lambda n, relu: mm.best_schedule(n, relu=relu),
    "best_1_core": lambda n, relu: mm.best_schedule(n, num_cores=1, relu=relu),
    "best_packing_a": lambda n, relu: mm.best_schedule(n, relu=relu, tiles=mm.Tiles(pack_a=True)),
}


def _expected(a, b, relu):
    out = a.astype("float64") @ b.astype("float64")
    return np.maximum(out, 0) if relu else out


def _run(mod, n, relu, seed=0):
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    c = nd.empty((n, n), "float32")
    mlc_lab.build(mod, target="python")["main"](nd.array(a), nd.array(b), c)
    return c.numpy(), _expected(a, b, relu)


@pytest.mark.parametrize("relu", [False, True], ids=["matmul", "mm_relu"])
def test_naive_program_computes_matmul(relu):
    got, want = _run(mm.naive(64, relu=relu), 64, relu)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    func = mm.naive(64, relu=relu)["main"]
    assert tir.verify(func)
    assert "with T.init():" in func.script()


@pytest.mark.parametrize("relu", [False, True], ids=["matmul", "mm_relu"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_keeps_numerics_at_every_step(name, relu):
    """check_numerics makes the schedule run the interpreter after every primitive."""
    sch = tir.Schedule(mm.naive(64, relu=relu), check_numerics=True)
    replayed = tir.Trace.from_json(SCHEDULES[name](64, relu).trace.as_json())
    replayed.apply_to_schedule(sch)
    assert tir.verify(sch.mod["main"])


@pytest.mark.parametrize("relu", [False, True], ids=["matmul", "mm_relu"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_matches_numpy_and_replays(name, relu):
    n = 128
    sch = SCHEDULES[name](n, relu)
    got, want = _run(sch.mod, n, relu)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    replayed = tir.Trace.from_json(sch.trace.as_json()).apply_to_schedule(
        tir.Schedule(mm.naive(n, relu=relu)))
    assert_structural_equal(replayed.mod, sch.mod)


def test_course_schedule_is_the_course_loop_nest():
    text = mm.course_schedule(128, relu=True).mod.script()
    assert "for i, j_0 in T.grid(128, 32):" in text
    assert 'with T.block("Y_init"):' in text and 'with T.block("Y_update"):' in text
    assert "for k, j_1 in T.grid(128, 4):" in text
    assert "for ax0 in range(4):" in text   # the ReLU moved under j_0


def test_best_schedule_shape():
    text = mm.best_schedule(512).mod.script()
    assert "T.parallel(1024)" in text and "T.vectorized(16)" in text and "T.unroll(8)" in text
    assert 'C_local = T.alloc_buffer((512, 512), scope="local")' in text
    assert "B_global = T.alloc_buffer((16, 512, 32))" in text
    assert "T.parallel(" not in mm.best_schedule(512, num_cores=1).mod.script()
    # Too little work to pay for forking threads (8 KFLOP): stays on one core.
    assert "T.parallel(" not in mm.best_schedule(16, num_cores=2).mod.script()


def test_best_schedule_fits_tiles_to_small_sizes():
    got, want = _run(mm.best_schedule(24).mod, 24, False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_best_schedule_lowers_to_a_register_tile_and_vector_code():
    if importlib.util.find_spec("mlc_lab.tir.transform") is None or \
            importlib.util.find_spec("mlc_lab.tir.transform.pipeline") is None:
        pytest.skip("mlc_lab.tir.transform.pipeline (the lowering pipeline) does not exist yet")
    from mlc_lab.tir.transform.pipeline import lower

    lowered = lower(mm.best_schedule(1024).mod)["main"]
    allocations, ramps = [], []

    class Collect(tir.StmtExprVisitor):
        def visit_Allocate(self, node):
            allocations.append(node.buffer)
            self.generic_visit(node)

        def visit_Ramp(self, node):
            ramps.append(node)
            self.generic_visit(node)

    Collect().visit(lowered.body)
    local = [buf for buf in allocations if buf.scope == "local"]
    assert local, f"no local allocation in the lowered function:\n{lowered.script()}"
    sizes = [int(np.prod([int(d.value) for d in buf.shape])) for buf in local]
    assert max(sizes) <= 1024, f"the accumulator was not compacted: local sizes {sizes}"
    assert any(int(r.lanes) == mm.VECTOR_LANES for r in ramps), "no 16-lane vector code"
