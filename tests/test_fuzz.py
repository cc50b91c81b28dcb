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


@pytest.mark.parametrize("trial", [6, 22, 341])
def test_gpu_trials_the_fuzzer_once_failed_now_pass(trial):
    # 6, 22: shared or local memory carrying values across kernels (now refused at build);
    # 341: every thread storing one global address from its local memory (the simulator broke).
    program, rng = fuzz.trial_program(0, trial)
    assert runner.check(0, trial, runner.generate_steps(program, rng), targets=("cuda-sim",)) is None
