"""Search strategies: which candidates to measure next.

``RandomSearch`` samples the space. ``EvolutionarySearch`` starts a population from the best
records measured so far plus fresh samples, evolves it for a few generations (a child replays
its parent's design with one sampling decision drawn afresh: a tile size, an unroll depth, a
compute location), and picks the batch by cost-model score, epsilon-greedy (most by score, a
few at random so the model sees what it does not yet rate). The cost model learns from every
measured batch. Every random choice comes from one generator seeded by ``seed``, so a run is
reproducible apart from the timings it measures.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..tir.schedule.trace import Trace
from .space_generator import Candidate, SpaceRejectedError

SAMPLING_KINDS = ("sample_perfect_tile", "sample_categorical", "sample_compute_location")


@dataclass
class TuneContext:
    """What a strategy works on: the module and its function, the space, the target, the
    database, the cost model, the random generator, the schedules measured already (by
    structural hash of the scheduled module), and the key naming the workload to the model."""
    mod: object
    func_name: str
    space: object
    target: object
    database: object
    cost_model: object
    rng: np.random.Generator
    measured: set = field(default_factory=set)
    workload_key: str | None = None   # names the workload to the cost model

    def new_seed(self) -> int:
        return int(self.rng.integers(2**31))

    def func_of(self, candidate: Candidate):
        return candidate.sch.mod[self.func_name]


class SearchTimings:
    """CPU seconds per candidate design of what search does, kept per kind of work: "sample" (a
    fresh design of the space, postprocessed), "replay" (a mutated design), "features" (one
    candidate's feature vector, computed once) and "predict" (its share of a batch
    prediction)."""

    def __init__(self):
        self.seconds: dict = defaultdict(list)

    def add(self, kind: str, seconds: float, count: int = 1) -> None:
        if count > 0:
            self.seconds[kind].extend([seconds / count] * count)

    def median(self, kind: str) -> float | None:
        values = sorted(self.seconds.get(kind, ()))
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _timed(timings: SearchTimings, kind: str, make):
    start = time.process_time()
    try:
        return make()
    finally:
        timings.add(kind, time.process_time() - start)


class SearchStrategy:
    """Base class: ``generate(ctx, n)`` proposes up to ``n`` unmeasured candidates (fewer when the
    space seems exhausted); ``notify(ctx, candidates, results)`` learns from their measurement.
    ``timings`` (SearchTimings) records what producing and scoring each candidate cost."""

    max_misses = 16   # samples in a row that bring nothing new before the space counts as exhausted

    @property
    def timings(self) -> SearchTimings:
        found = self.__dict__.get("_timings")
        if found is None:
            found = self._timings = SearchTimings()
        return found

    def generate(self, ctx: TuneContext, n: int) -> list:
        raise NotImplementedError

    def notify(self, ctx: TuneContext, candidates: list, results: list) -> None:
        if ctx.cost_model is not None:
            seconds = [min(r.run_secs) if r.run_secs else math.inf for r in results]
            ctx.cost_model.update([ctx.func_of(c) for c in candidates], seconds,
                                  workload=ctx.workload_key)

    def sample_new(self, ctx: TuneContext, n: int, taken: dict) -> list:
        """Up to ``n`` fresh samples of the space that are neither measured nor in ``taken``
        (fewer when ``max(n, max_misses)`` samples in a row bring nothing new)."""
        found, misses = [], 0
        while len(found) < n and misses < max(n, self.max_misses):
            seed = ctx.new_seed()
            candidate = _try(lambda: _timed(self.timings, "sample", lambda: ctx.space.sample(ctx.mod, seed)))
            if candidate is not None and _claim(ctx, candidate, taken):
                found.append(candidate)
                misses = 0
            else:
                misses += 1
        return found


class RandomSearch(SearchStrategy):
    """Measure random samples of the space."""

    def generate(self, ctx: TuneContext, n: int) -> list:
        return self.sample_new(ctx, n, {})


class EvolutionarySearch(SearchStrategy):
    """Parameters: population_size (None: twice the batch, between 16 and 64, since producing a
    candidate costs tens of milliseconds of Python and a small batch should not wait on a big
    population); init_measured_ratio (the share of the first population taken from the best
    records); genetic_num_iters (generations per batch); genetic_mutate_prob (the chance a child
    differs from its parent); eps_greedy (the share of each batch chosen at random instead of by
    score)."""

    def __init__(self, population_size: int | None = None, init_measured_ratio: float = 0.2,
                 genetic_num_iters: int = 2, genetic_mutate_prob: float = 0.85,
                 eps_greedy: float = 0.05):
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.genetic_num_iters = genetic_num_iters
        self.genetic_mutate_prob = genetic_mutate_prob
        self.eps_greedy = eps_greedy

    def generate(self, ctx: TuneContext, n: int) -> list:
        size = self.population_size or min(64, max(16, 2 * n))
        population = self._initial_population(ctx, size)
        if not population:
            return []
        pool: dict = {}
        for candidate in population:
            _claim(ctx, candidate, pool)
        for _ in range(self.genetic_num_iters):
            population = self._next_generation(ctx, population, size)
            for candidate in population:
                _claim(ctx, candidate, pool)
        return self._pick(ctx, list(pool.values()), n)

    def _initial_population(self, ctx: TuneContext, size: int) -> list:
        best = ctx.database.get_top_k(ctx.mod, ctx.target, int(size * self.init_measured_ratio))
        population = [c for c in (_try(lambda r=r, seed=ctx.new_seed(): _timed(
                          self.timings, "replay", lambda: ctx.space.replay(ctx.mod, r.design, seed)))
                          for r in best) if c is not None]
        population += self.sample_new(ctx, size - len(population), {})
        return population

    def _next_generation(self, ctx: TuneContext, population: list, size: int) -> list:
        scores = _scores(ctx, population, self.timings)
        weights = scores - scores.min() + 1e-6
        children = []
        for _ in range(size):
            parent = population[int(ctx.rng.choice(len(population), p=weights / weights.sum()))]
            child = self._mutate(ctx, parent) if ctx.rng.random() < self.genetic_mutate_prob else None
            children.append(child or parent)
        return children

    def _mutate(self, ctx: TuneContext, parent: Candidate) -> Candidate | None:
        """The parent's design with one sampling decision drawn afresh (None if none can be)."""
        sites = [k for k, kind in enumerate(Trace.json_kinds(parent.design)) if kind in SAMPLING_KINDS]
        if not sites:
            return None
        site = sites[int(ctx.rng.integers(len(sites)))]
        seed = ctx.new_seed()
        return _try(lambda: _timed(self.timings, "replay", lambda: ctx.space.replay(
            ctx.mod, parent.design, seed, decisions={site: None})))

    def _pick(self, ctx: TuneContext, pool: list, n: int) -> list:
        """The top-scored ``n`` of the pool, a share eps_greedy of them swapped for random ones;
        fresh samples fill up a pool too small."""
        chosen: list = []
        if pool:
            order = list(np.argsort(-_scores(ctx, pool, self.timings), kind="stable"))
            n_greedy = min(len(pool), n - int(round(n * self.eps_greedy)))
            chosen = [pool[k] for k in order[:n_greedy]]
            rest = [pool[k] for k in order[n_greedy:]]
            for k in ctx.rng.permutation(len(rest))[:n - len(chosen)]:
                chosen.append(rest[int(k)])
        if len(chosen) < n:
            chosen += self.sample_new(ctx, n - len(chosen), {_key(c): c for c in pool})
        return chosen


def _scores(ctx: TuneContext, candidates: list, timings: SearchTimings | None = None) -> np.ndarray:
    if ctx.cost_model is None:
        return ctx.rng.random(len(candidates))
    funcs = [ctx.func_of(c) for c in candidates]
    model = ctx.cost_model
    if timings is None or not hasattr(model, "features_of") or getattr(model, "fitted", None) is None:
        return np.asarray(model.predict(funcs), dtype=float)
    # a learned model: its features (each computed once) and the batch prediction, timed apart
    start, fresh = time.process_time(), sum(not model.has_features(f) for f in funcs)
    features = np.vstack([model.features_of(f) for f in funcs])
    timings.add("features", time.process_time() - start, fresh)
    start = time.process_time()
    scores = np.asarray(model.predict_features(features), dtype=float)
    timings.add("predict", time.process_time() - start, len(funcs))
    return scores


def _key(candidate: Candidate) -> int:
    return candidate.key


def _claim(ctx: TuneContext, candidate: Candidate, taken: dict) -> bool:
    """Add the candidate to ``taken`` unless it (structurally) was measured or taken already."""
    key = _key(candidate)
    if key in ctx.measured or key in taken:
        return False
    taken[key] = candidate
    return True


def _try(make):
    try:
        return make()
    except SpaceRejectedError:
        return None


def create_strategy(strategy) -> SearchStrategy:
    if isinstance(strategy, SearchStrategy):
        return strategy
    kinds = {"evolutionary": EvolutionarySearch, "random": RandomSearch}
    if strategy not in kinds:
        raise ValueError(f"unknown search strategy {strategy!r}; known: evolutionary, random "
                         "(or pass a SearchStrategy object)")
    return kinds[strategy]()
