"""What makes search cheap per candidate must not change what it finds: replays resumed from a
kept schedule equal replays from the start, the cost model's remembered features equal fresh
ones, and the schedule plumbing's fast paths agree with the general walkers."""
import numpy as np

import mlc_lab
from mlc_lab import meta_schedule as ms
from mlc_lab import tir
from mlc_lab.ir import structural_equal
from mlc_lab.meta_schedule.feature import extract_features
from mlc_lab.meta_schedule.search_strategy import SAMPLING_KINDS, SearchTimings
from mlc_lab.meta_schedule.space_generator import PostOrderApply, SpaceRejectedError
from mlc_lab.testing import matmul_schedules as mm
from mlc_lab.tir import expr as E
from mlc_lab.tir.schedule.func_index import replace_stmts
from mlc_lab.tir.schedule.trace import Trace
from mlc_lab.tir.stmt_functor import StmtReplacer, free_vars, post_order_visit, uses_var
from mlc_lab.tir.schedule import numerics


def _population(space, mod, rng, size):
    found = []
    while len(found) < size:
        try:
            found.append(space.sample(mod, int(rng.integers(2**31))))
        except SpaceRejectedError:
            pass
    return found


def _replay_from_start(space, mod, design, seed, decisions):
    sch = tir.Schedule(mod, seed=seed)
    Trace.from_json(design).apply_to_schedule(sch, decisions=decisions)
    return space.finish(sch)


def test_resumed_replays_equal_replays_from_the_start():
    mod = mm.naive(128)
    space = PostOrderApply(num_cores=2)
    rng = np.random.default_rng(3)
    population = _population(space, mod, rng, 4)
    compared = 0
    for _ in range(60):
        parent = population[int(rng.integers(len(population)))]
        sites = [k for k, kind in enumerate(Trace.json_kinds(parent.design)) if kind in SAMPLING_KINDS]
        site, seed = sites[int(rng.integers(len(sites)))], int(rng.integers(2**31))
        try:
            resumed = space.replay(mod, parent.design, seed, decisions={site: None})
        except SpaceRejectedError:
            resumed = None
        try:
            fresh = _replay_from_start(space, mod, parent.design, seed, {site: None})
        except Exception:   # noqa: BLE001 - whatever the plain replay raises, the resumed one refused too
            fresh = None
        assert (resumed is None) == (fresh is None)
        if resumed is None:
            continue
        assert resumed.design == fresh.design
        assert resumed.sch.trace.as_json() == fresh.sch.trace.as_json()
        assert structural_equal(resumed.sch.mod, fresh.sch.mod)
        population.append(resumed)
        compared += 1
    assert compared > 30
    assert space.replay_cache.hits > 0


def test_resumed_replay_computes_the_same_numbers():
    mod = mm.naive(64)
    space = PostOrderApply(num_cores=1)
    rng = np.random.default_rng(5)
    parent = _population(space, mod, rng, 1)[0]
    sites = [k for k, kind in enumerate(Trace.json_kinds(parent.design)) if kind in SAMPLING_KINDS]
    for site in sites[::-1]:   # the late sites first: those resume from the deepest kept schedule
        try:
            child = space.replay(mod, parent.design, int(rng.integers(2**31)), decisions={site: None})
        except SpaceRejectedError:
            continue
        func = mod["main"] if isinstance(mod, mlc_lab.IRModule) else mod
        args = numerics.random_arguments(func, seed=0)
        want = numerics.run(func, args)
        got = numerics.run(child.sch.mod["main"], args)
        for a, b in zip(want, got):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_candidate_key_is_the_structural_hash():
    mod = mm.naive(64)
    space = PostOrderApply(num_cores=1)
    candidate = _population(space, mod, np.random.default_rng(0), 1)[0]
    assert candidate.key == mlc_lab.ir.structural_hash(candidate.sch.mod)
    assert candidate.key == candidate.key


def test_cost_model_remembers_features_of_the_very_function():
    mod = mm.naive(64)
    space = PostOrderApply(num_cores=1)
    candidates = _population(space, mod, np.random.default_rng(1), 3)
    model = ms.create_cost_model("gbdt", seed=0)
    funcs = [c.sch.mod["main"] for c in candidates]
    model.update(funcs, [1e-3, 2e-3, 3e-3])
    for func in funcs:
        assert model.has_features(func)
        np.testing.assert_array_equal(model.features_of(func), extract_features(func))
    np.testing.assert_array_equal(model.predict(funcs),
                                  model.predict_features(np.vstack([extract_features(f) for f in funcs])))


def test_search_records_time_per_design():
    strategy = ms.search_strategy.EvolutionarySearch(population_size=8)
    ms.tune_tir(mm.naive(64), "llvm --num-cores=1", max_trials_global=8, num_trials_per_iter=4,
                seed=0, strategy=strategy, quiet=True)
    assert strategy.timings.median("sample") > 0
    assert strategy.timings.median("replay") > 0
    timings = SearchTimings()
    timings.add("predict", 3.0, 3)
    assert timings.median("predict") == 1.0 and timings.median("features") is None


def test_uses_var_fast_path_agrees_with_free_vars():
    candidate = _population(PostOrderApply(num_cores=2), mm.naive(128), np.random.default_rng(2), 1)[0]
    body = candidate.sch.mod["main"].body
    exprs = []
    post_order_visit(body, lambda node: exprs.append(node) if isinstance(node, E.PrimExpr) else None)
    variables = {id(v): v for v in exprs if isinstance(v, E.Var)}.values()
    for e in exprs:
        free = {id(v) for v in free_vars(e)}
        for var in variables:
            assert uses_var(e, var) == (id(var) in free)


def test_replace_stmts_agrees_with_the_general_replacer():
    candidate = _population(PostOrderApply(num_cores=2), mm.naive(128), np.random.default_rng(4), 1)[0]
    func = candidate.sch.mod["main"]
    loops = []
    post_order_visit(func.body, lambda node: loops.append(node) if isinstance(node, tir.For) else None)
    for loop in loops:
        replacement = loop.replace(kind="unrolled")
        fast = replace_stmts(func, {id(loop): replacement})
        general = func.replace(body=StmtReplacer({id(loop): replacement}).visit(func.body))
        assert structural_equal(fast, general)
    # a key that is no statement of the function leaves it as it is
    assert structural_equal(replace_stmts(func, {id(object()): None}), func)
