"""The schedule fuzzer: a fixed slice of trials finds nothing, and the fuzzer does report the
failures it exists to find (wrong numbers, crashes inside primitives, hangs)."""
import numpy as np
import pytest

from mlc_lab.testing import fuzz
from mlc_lab.testing.fuzz import runner
from mlc_lab.testing.fuzz.programs import GENERATORS
from mlc_lab.testing.fuzz.steps import Step

SLICE_TARGETS = ("python", "llvm", "cuda-sim")


def test_a_fixed_slice_of_trials_finds_nothing():
    result = fuzz.run(24, seed=7, jobs=2, timeout=120, targets=SLICE_TARGETS, shrink=False, log=lambda *_: None)
    assert result["counts"]["ok"] == 24, result["findings"]


@pytest.mark.parametrize("generator", GENERATORS, ids=lambda g: g.__name__)
@pytest.mark.parametrize("target", SLICE_TARGETS[:2])
def test_every_program_matches_its_numpy_reference_unscheduled(generator, target):
    import mlc_lab
    rng = np.random.default_rng(0)
    program = generator(rng)
    args = program.inputs(rng)
    want = program.reference(*[a.copy() for a in args])
    mlc_lab.build(program.module(), target=target)["main"](*args)
    for position, expected in want.items():
        np.testing.assert_allclose(args[position], expected, rtol=1e-4, atol=1e-4)


def test_trials_are_deterministic():
    program_a, rng_a = fuzz.trial_program(3, 5)
    program_b, rng_b = fuzz.trial_program(3, 5)
    assert program_a.source == program_b.source
    assert fuzz.generate_steps(program_a, rng_a) == fuzz.generate_steps(program_b, rng_b)


def test_wrong_numbers_are_reported_as_a_miscompile(monkeypatch):
    real_build = runner.build

    def off_by_one(mod, target):
        lib = real_build(mod, target=target)

        class Wrong:
            def __getitem__(self, name):
                def run(*args):
                    lib[name](*args)
                    for a in args:
                        a += 1
                return run
        return Wrong()
    monkeypatch.setattr(runner, "build", off_by_one)
    finding = fuzz.check(0, 0, [], ("python",))
    assert finding.kind == "miscompile" and finding.where == "python"


def test_an_internal_error_in_a_primitive_is_reported_as_a_crash(monkeypatch):
    def broken(self, *args, **kwargs):
        raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'NoneType'")
    monkeypatch.setattr(Step, "apply", broken)
    program, _ = fuzz.trial_program(0, 0)
    block = next(line.split('"')[1] for line in program.source.splitlines() if "T.block(" in line)
    finding = fuzz.check(0, 0, [Step("compute_inline", block)], ("python",))
    assert finding.kind == "crash" and "TypeError" in finding.message


def test_a_trial_past_its_time_limit_twice_is_reported_as_a_hang_with_its_steps():
    # A busy machine can stall one trial, so an overrun is retried once before it counts; the
    # steps, generated in the worker that was killed, are generated again for the reproducer.
    workers = runner.Workers(1, timeout=0.05)
    try:
        [(_, steps, finding)] = list(workers.map([(0, 0, None, SLICE_TARGETS)]))
    finally:
        workers.close()
    assert finding.kind == "hang" and "twice" in finding.message
    program, rng = fuzz.trial_program(0, 0)
    assert steps == fuzz.generate_steps(program, rng)


class _Draws:
    """Stands for a generator's random source: hands out the given sizes in order."""

    def __init__(self, sizes):
        self.sizes = list(sizes)

    def integers(self, low, high=None):
        return self.sizes.pop(0)


# Schedules the fuzzer once found broken on cuda-sim (as program sizes and steps, so that new
# draws do not change them): 1, 2: shared or local memory carrying values across kernels (now
# refused at build); 3: every thread storing one global address from its local memory (the
# simulator broke).
GPU_REGRESSIONS = [
    ("softmax", (4, 16), [Step("cache_write", "out", (), {"index": 0, "scope": "shared"}),
                          Step("sampled_compute_at", "sm", (), {"decision": 1})]),
    ("where_reduction", (3, 11, 1), [
        Step("vectorize", "S", (0,)), Step("sampled_compute_at", "S", (), {"decision": 2}),
        Step("fuse", "S", (0, 1)), Step("tile", "S", (0,), {"n": 2, "max": 16, "decision": (3, 11)}),
        Step("unroll", "S", (0,)), Step("cache_read", "S", (), {"index": 0, "scope": "shared"}),
        Step("cache_read", "A_shared", (), {"index": 0, "scope": "shared"}),
        Step("sampled_compute_at", "A_shared_1", (), {"decision": 0})]),
    ("transpose_add", (14, 5), [
        Step("cache_read", "C", (), {"index": 1, "scope": "global"}), Step("parallel", "b_global", (0,)),
        Step("sampled_compute_at", "b_global", (), {"decision": 2}),
        Step("split", "At", (0,), {"factors": (None, 8)}),
        Step("compute_at", "At", (1,), {"keep": True, "index": 0}, "C"),
        Step("cache_write", "b_global", (), {"index": 0, "scope": "local"}),
        Step("unroll", "b_global_local", (1,))]),
]


@pytest.mark.parametrize("name, sizes, steps", GPU_REGRESSIONS, ids=[g[0] for g in GPU_REGRESSIONS])
def test_gpu_schedules_the_fuzzer_once_failed_now_pass(monkeypatch, name, sizes, steps):
    generator = next(g for g in GENERATORS if g.__name__ == name)
    monkeypatch.setattr(runner, "trial_program", lambda seed, trial: (generator(_Draws(sizes)), None))
    assert runner.check(0, 0, steps, targets=("cuda-sim",)) is None


# -- the layout and buffer primitives --------------------------------------------------------------
from mlc_lab.testing.fuzz import layout_steps, steps as fuzz_steps  # noqa: E402
from mlc_lab import tir  # noqa: E402


def _trial_of(program_name, seed=0, has=""):
    """The first trial of ``seed`` whose program is ``program_name`` (with ``has`` in its source)."""
    return next(t for t in range(5000) if fuzz.trial_program(seed, t)[0].name == program_name
                and has in fuzz.trial_program(seed, t)[0].source)


def test_the_layout_and_buffer_primitives_are_all_drawn_and_accepted_somewhere():
    assert set(layout_steps.OPS) <= set(fuzz_steps.OPS)
    accepted = set()
    for trial in range(60):
        program, rng = fuzz.trial_program(0, trial)
        accepted |= {s.op + ("+pad" if "pad" in s.args else "") for s in fuzz.generate_steps(program, rng)}
    assert {"reindex", "reindex_cache_read", "reindex_cache_write", "cache_index", "transform_layout",
            "transform_layout+pad", "transform_block_layout", "storage_align", "unsafe_set_dtype",
            "add_unit_loop", "set_axis_separator"} <= accepted


RESHAPE_STEPS = [
    Step("compute_inline", "C"),          # D then reads B at ((i + s) // w, (i + s) % w)
    Step("compute_inline", "B"),          # C then reads A at (i // w) * w + i % w
    Step("reverse_compute_inline", "D"),  # D's store moves into C, at i - s, under a guard
    Step("reverse_compute_inline", "C"),  # C's store moves into B's grid
    Step("reindex", "C", (), {"buffer": ("read", 0)}),
    Step("reindex_cache_read", "D", (), {"index": 0, "scope": "shared", "map": "lambda v0: (v0,)"}),
    Step("reindex_cache_write", "B", (), {"index": 0, "scope": "local", "map": "lambda v0, v1: (v1, v0)"}),
    Step("cache_index", "C", (), {"scope": "global", "cse": 0}),
    Step("transform_layout", "C", (), {"map": "lambda x0: (x0 // 5, x0 % 5)", "buffer": ("write", 0), "pad": 0.0}),
    Step("transform_layout", "C", (), {"map": "lambda x0, x1: (x0 // 4, x0 % 4, x1)", "buffer": ("read", 0),
                                       "pad": 'lambda y0, y1, y2: T.Cast("float32", y0 + y1 + y2)'}),
    Step("transform_block_layout", "B", (), {"map": "lambda v0, v1: (v0 * 4 + v1,)"}),
    Step("transform_block_layout", "B", (), {"map": "lambda v0, v1: (v1, v0)"}),
    Step("merge", "C", (0,), {}, "E"),
    Step("storage_align", "B", (), {"index": 0, "axis": 0, "factor": 8, "offset": 1}),
    Step("set_axis_separator", "C", (), {"buffer": ("read", 0), "separators": (1,)}),
    Step("unsafe_set_dtype", "C", (), {"index": 0, "dtype": "float64"}),
    Step("add_unit_loop", "D", (0,)),
    Step("pad_einsum", "E", (), {"padding": (5,)}),
    Step("read_at", "D", (0,), {"index": 0, "scope": "global"}),
    Step("write_at", "D", (0,), {"index": 0, "scope": "local"}),
]


@pytest.mark.parametrize("step", RESHAPE_STEPS, ids=lambda s: s.code().split("(")[0][4:] + "/" + s.block)
def test_layout_steps_on_the_reshape_program_are_accepted_and_keep_the_numbers(step):
    # A (3, 4) grid: 12 elements, which 5 does not divide, and 3 rows, which 4 does not.
    trial = _trial_of("reshape_shift", has="B = T.alloc_buffer((3, 4)")
    program, _ = fuzz.trial_program(0, trial)
    sch = tir.Schedule(program.module())
    step.apply(sch)   # raises if the schedule refuses the step: each is valid on this program
    assert runner.check(0, trial, [step], targets=("python", "llvm")) is None


def test_a_padded_split_leaves_padding_and_the_map_is_recorded_as_text():
    program, _ = fuzz.trial_program(0, _trial_of("reshape_shift", has="B = T.alloc_buffer((3, 4)"))
    func = tir.Schedule(program.module()).mod["main"]
    from mlc_lab.tir.schedule.func_index import FuncIndex
    index = FuncIndex(func)
    names = [n for n in index.blocks if n != "root"]
    rng = np.random.default_rng(1)
    drawn = [layout_steps.draw("padded_layout", func, index, names, "C", rng) for _ in range(40)]
    assert sum(1 for fields in drawn if fields) > 20
    for fields in filter(None, drawn):
        assert fields["op"] == "transform_layout" and "pad" in fields["args"]
        kind, k = fields["args"]["buffer"]
        buffer = getattr(index.blocks["C"].block, kind + "s")[k].buffer
        assert buffer.name in ("B", "C")   # never a parameter
        factor = int(fields["args"]["map"].split("% ")[1].split(",")[0].rstrip(")"))
        dims = [int(d) for d in buffer.shape]
        assert any(d % factor for d in dims)   # some dimension does not divide: padding
