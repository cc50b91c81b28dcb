"""meta_schedule cost models: the features they see, that they learn a ranking, that they save
to JSON and load back, and that tune_tir runs with each of them."""
import json
import math

import numpy as np
import pytest

import mlc_lab
from mlc_lab import meta_schedule as ms
from mlc_lab import te, tir
from mlc_lab.meta_schedule.feature import FEATURE_NAMES, extract_features

from corpus import mm_relu
from test_meta_schedule import TARGET, Matmul, split_j


def _features(func) -> dict:
    return dict(zip(FEATURE_NAMES, extract_features(func)))


def _matmul(n: int):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def test_feature_names_are_documented_and_unique():
    assert len(FEATURE_NAMES) == len(set(FEATURE_NAMES)) == len(extract_features(Matmul["main"]))
    assert {"flops", "arith_intensity", "parallel_work", "vector_innermost", "read0_stride"} <= set(
        FEATURE_NAMES)


def test_features_count_operations_and_see_loop_kinds():
    plain = _features(Matmul["main"])
    assert plain["float_mul"] == pytest.approx(math.log2(1 + 64 ** 3))
    assert plain["float_add"] == pytest.approx(math.log2(1 + 64 ** 3))
    assert plain["flops"] == pytest.approx(math.log2(1 + 2 * 64 ** 3))
    assert plain["parallel_work"] == plain["vector_work"] == 0.0
    assert plain["loop_depth"] == 3 and plain["inner_extent"] == pytest.approx(math.log2(65))
    # the worst-strided read of C[i, j] += A[i, k] * B[k, j] under k is B, stride 64
    assert plain["read0_stride"] == pytest.approx(math.log2(65))

    sch = tir.Schedule(Matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.reorder(i, k, j)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.parallel(i)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k)
    scheduled = _features(sch.mod["main"])
    assert scheduled["parallel_work"] == pytest.approx(1.0)
    assert scheduled["parallel_outermost"] == 1.0
    assert scheduled["vector_innermost"] == 1.0 and scheduled["vector_extent"] == 3.0
    assert scheduled["read0_stride"] < plain["read0_stride"]          # no stride-64 read inside
    assert scheduled["flops"] == pytest.approx(plain["flops"])        # same work


def _samples(n: int, seed: int = 0) -> list:
    """n distinct schedules of the 64^3 matmul from the course's split_j space, as
    (func, innermost j factor)."""
    space = ms.ScheduleFn(split_j)
    found = {}
    for s in range(seed, seed + 200):
        candidate = space.sample(Matmul, s)
        factor = candidate.sch.trace.insts[2].decision[1]
        found.setdefault(factor, candidate.sch.mod["main"])
        if len(found) == n:
            break
    return sorted(found.items())


@pytest.mark.parametrize("kind", ["gbdt", "mlp"])
def test_learned_model_ranks_by_what_it_was_taught(kind):
    # a made-up machine on which a wider innermost j loop is faster: the model must learn that
    # ordering from the features, and rank the schedules it was trained on the same way
    pairs = _samples(5)
    funcs = [f for _, f in pairs]
    seconds = [1.0 / factor for factor, _ in pairs]
    model = ms.create_cost_model(kind, seed=0)
    model.update(funcs, seconds)
    scores = model.predict(funcs)
    assert list(np.argsort(scores)) == list(np.argsort(-np.asarray(seconds)))


def test_untrained_model_scores_at_random_from_its_seed():
    funcs = [f for _, f in _samples(3)]
    first, second = (ms.create_cost_model("gbdt", seed=3).predict(funcs) for _ in range(2))
    assert np.array_equal(first, second) and len(set(first)) == 3


def test_failed_candidates_rank_last():
    pairs = _samples(4)
    funcs = [f for _, f in pairs]
    model = ms.create_cost_model("gbdt", seed=0)
    model.update(funcs, [1e-3, 2e-3, math.inf, 4e-3])
    scores = model.predict(funcs)
    assert int(np.argmin(scores)) == 2 and int(np.argmax(scores)) == 0


def test_model_round_trips_through_json_and_transfers(tmp_path):
    pairs = _samples(5)
    funcs = [f for _, f in pairs]
    model = ms.create_cost_model("gbdt", seed=1)
    model.update(funcs, [1.0 / factor for factor, _ in pairs])
    path = tmp_path / "model.json"
    model.save(str(path))
    saved = json.loads(path.read_text())       # plain JSON: records, never a pickle
    assert saved["kind"] == "gbdt" and saved["feature_names"] == FEATURE_NAMES
    assert len(saved["records"]["seconds"]) == 5
    loaded = ms.CostModel.load(str(path))
    assert isinstance(loaded, ms.GBDTModel) and loaded.num_records == 5
    assert np.allclose(loaded.predict(funcs), model.predict(funcs))
    # a model trained on one shape scores the schedules of another
    other = [_matmul(32), mm_relu]
    assert loaded.predict(other).shape == (2,)


def test_bad_models_are_refused(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"kind": "xgboost-pickle"}))
    with pytest.raises(ValueError, match="not a saved cost model of a known kind"):
        ms.CostModel.load(str(path))
    with pytest.raises(TypeError, match="unknown hyper-parameter"):
        ms.GBDTModel(depth=3)
    with pytest.raises(ValueError, match="unknown cost model"):
        ms.create_cost_model("lstm")
    with pytest.raises(ValueError, match="run time must be positive"):
        ms.create_cost_model("gbdt").update([Matmul["main"]], [0.0])


@pytest.mark.parametrize("kind", ["gbdt", "mlp"])
def test_tune_tir_with_a_learned_model(tmp_path, kind):
    runner = ms.LocalRunner(number=1, repeat=1, timeout_sec=60)
    try:
        database = ms.tune_tir(Matmul, TARGET, max_trials_global=6, num_trials_per_iter=3,
                               work_dir=str(tmp_path), seed=0, cost_model=kind, runner=runner,
                               strategy=ms.EvolutionarySearch(population_size=6,
                                                              genetic_num_iters=1),
                               quiet=True)
    finally:
        runner.close()
    records = database.records(Matmul, TARGET)
    assert len(records) == 6 and all(r.error is None for r in records)


def test_tuning_saves_its_model_and_a_new_workload_starts_from_it(tmp_path):
    runner = ms.LocalRunner(number=1, repeat=1, timeout_sec=60)
    strategy = ms.EvolutionarySearch(population_size=6, genetic_num_iters=1)
    try:
        ms.tune_tir(Matmul, TARGET, max_trials_global=4, num_trials_per_iter=4,
                    work_dir=str(tmp_path / "first"), seed=0, space=split_j, strategy=strategy,
                    runner=runner, quiet=True)
        saved = tmp_path / "first" / "cost_model.json"
        model = ms.create_cost_model(str(saved))          # transfer: a path loads a saved model
        assert isinstance(model, ms.GBDTModel) and model.num_records == 4
        other = mlc_lab.IRModule({"main": _matmul(32)})
        ms.tune_tir(other, TARGET, max_trials_global=3, num_trials_per_iter=3,
                    work_dir=str(tmp_path / "second"), seed=0, cost_model=model,
                    strategy=strategy, runner=runner, quiet=True)
    finally:
        runner.close()
    assert model.num_records == 7 and len(set(model.workloads)) == 2
    reloaded = ms.CostModel.load(str(tmp_path / "second" / "cost_model.json"))
    assert reloaded.workloads == model.workloads and reloaded.num_records == 7


def test_records_of_different_workloads_are_normalised_apart():
    """Two kernels with the same signature (every tune_relax task is "main") stay two
    workloads when the caller names them."""
    from mlc_lab.meta_schedule.cost_model import normalised_throughput
    model = ms.create_cost_model("gbdt", seed=0)
    model.update([Matmul["main"]] * 2, [1.0, 2.0], workload="fast kernel")
    model.update([Matmul["main"]] * 2, [10.0, 40.0], workload="slow kernel")
    assert list(normalised_throughput(model.seconds, model.workloads)) == [1.0, 0.5, 1.0, 0.25]
