"""Search spaces: a space samples one schedule (a *design*) of a module per call; its sampling
instructions are the choices search explores.

``ScheduleFn(f)`` is a space written by hand: ``f(sch)`` applies primitives and sampling
instructions to a fresh ``tir.Schedule``. ``PostOrderApply()`` is the automatic space: schedule
rules (``schedule_rule.py``) applied to every block. Both end with the postprocessors
(``postproc.py``); a design they reject is dropped.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..ir import structural_hash
from ..tir.schedule import Schedule, ScheduleError
from ..tir.verify import VerifyError
from ..tir.schedule.policy.postproc import block_names, default_postprocs, prim_func_names
from .replay_cache import ReplayCache, ReplayUnchanged
from .schedule_rule import default_rules


class SpaceRejectedError(Exception):
    """A design that sampling or postprocessing could not turn into a valid schedule."""


@dataclass
class Candidate:
    """A schedule ready to measure: ``sch`` after postprocessing, and the design (the traced
    steps before postprocessing) as JSON, which mutation replays with new decisions."""
    sch: Schedule
    design: list
    _key: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> int:
        """The structural hash of the scheduled module (what tells candidates apart), computed
        once: the module of a finished candidate does not change."""
        if self._key is None or self._key[0] is not self.sch.mod:
            self._key = (self.sch.mod, structural_hash(self.sch.mod))
        return self._key[1]


class SpaceGenerator:
    """Base class. Subclasses implement ``design(sch)``, which schedules ``sch`` in place.

    The last ``finished_capacity`` candidates made are kept by their design: a replay that draws
    its one fresh decision as the design already holds it is that design again, and gives the
    candidate made of it before (postprocessing it anew would give the same schedule)."""

    finished_capacity = 256

    def __init__(self, postprocs=None):
        self.postprocs = default_postprocs() if postprocs is None else list(postprocs)

    @property
    def replay_cache(self) -> ReplayCache:
        """Where replays of this space resume from (made on first use)."""
        cache = self.__dict__.get("_replay_cache")
        if cache is None:
            cache = self._replay_cache = ReplayCache()
        return cache

    def design(self, sch: Schedule) -> Schedule:
        raise NotImplementedError

    def sample(self, mod, seed: int) -> Candidate:
        """One random design of ``mod``, postprocessed. Raises SpaceRejectedError."""
        sch = Schedule(mod, seed=seed)
        try:
            sch = self.design(sch)
        except (ScheduleError, VerifyError) as err:
            raise SpaceRejectedError(f"the space failed to schedule the module: {err}") from err
        return self.finish(sch, mod)

    def replay(self, mod, design: list, seed: int, decisions: dict | None = None) -> Candidate:
        """Replay a design's trace on ``mod``; ``decisions`` maps instruction index -> a new
        decision (None: sample that instruction afresh). Raises SpaceRejectedError."""
        made = self._finished().get(id(design))
        if made is not None and made[0] is design and made[1] is mod:
            self._finished().move_to_end(id(design))
            made = made[2]
        else:
            made = None
        try:
            sch = self.replay_cache.replay(_new_schedule, mod, design, seed, decisions,
                                           stop_if_unchanged=made is not None)
        except ReplayUnchanged:
            return made
        except (ScheduleError, VerifyError) as err:
            raise SpaceRejectedError(f"replaying the design failed: {err}") from err
        return self.finish(sch, mod)

    def finish(self, sch: Schedule, mod=None) -> Candidate:
        """Postprocess a designed schedule into a Candidate (kept by its design when ``mod``,
        the module it schedules, is given). Raises SpaceRejectedError."""
        try:
            design = sch.trace.as_json()
        except TypeError as err:
            raise SpaceRejectedError(str(err)) from err
        try:
            for postproc in self.postprocs:
                if not postproc.apply(sch):
                    raise SpaceRejectedError(f"postprocessor {postproc!r} rejected the schedule")
        except (ScheduleError, VerifyError) as err:
            raise SpaceRejectedError(f"postprocessing failed: {err}") from err
        candidate = Candidate(sch, design)
        if mod is not None:
            finished = self._finished()
            finished[id(design)] = (design, mod, candidate)
            if len(finished) > self.finished_capacity:
                finished.popitem(last=False)
        return candidate

    def _finished(self) -> OrderedDict:
        """id(design) -> (design, module, candidate) of the candidates made last."""
        found = self.__dict__.get("_finished_by_design")
        if found is None:
            found = self._finished_by_design = OrderedDict()
        return found


def _new_schedule(mod, seed: int) -> Schedule:
    return Schedule(mod, seed=seed)


class ScheduleFn(SpaceGenerator):
    """A space written as a function: ``f(sch)`` schedules a fresh ``tir.Schedule`` in place with
    primitives and sampling instructions (``sch.sample_perfect_tile`` ...); it may return the
    schedule or None."""

    def __init__(self, sch_fn, postprocs=None):
        if not callable(sch_fn):
            raise TypeError(f"ScheduleFn expects a function of a tir.Schedule, got {sch_fn!r}")
        super().__init__(postprocs)
        self.sch_fn = sch_fn

    def design(self, sch: Schedule) -> Schedule:
        result = self.sch_fn(sch)
        return result if isinstance(result, Schedule) else sch

    def __repr__(self) -> str:
        return f"ScheduleFn({getattr(self.sch_fn, '__name__', self.sch_fn)!r})"


class PostOrderApply(SpaceGenerator):
    """The automatic space: each schedule rule in turn is applied to every block still there
    (in program order), so inlining happens before tiling and tiling before compute locations.
    ``rules`` default to ``schedule_rule.default_rules(num_cores)``."""

    def __init__(self, rules=None, postprocs=None, num_cores: int = 1):
        super().__init__(postprocs)
        self.rules = default_rules(num_cores) if rules is None else list(rules)

    def design(self, sch: Schedule) -> Schedule:
        for func_name in prim_func_names(sch.mod):
            for rule in self.rules:
                for name in block_names(sch, func_name):
                    if name in block_names(sch, func_name):
                        rule.apply(sch, sch.get_block(name, func_name))
        return sch

    def __repr__(self) -> str:
        return f"PostOrderApply(rules={self.rules!r})"


def create_space(space, num_cores: int = 1, target=None) -> SpaceGenerator:
    """A space from what ``tune_tir`` accepts: None or "auto" (PostOrderApply, with the GPU rules
    for a GPU ``target``), a function of a schedule (ScheduleFn), or a SpaceGenerator."""
    from .schedule_rule_gpu import gpu_postprocs, gpu_rules, is_gpu_target
    gpu = is_gpu_target(target)
    if space is None or (isinstance(space, str) and space in ("auto", "post-order-apply")):
        if gpu:
            return PostOrderApply(rules=gpu_rules(), postprocs=gpu_postprocs(target))
        return PostOrderApply(num_cores=num_cores)
    if isinstance(space, SpaceGenerator):
        return space
    if callable(space):
        return ScheduleFn(space, postprocs=gpu_postprocs(target) if gpu else None)
    raise TypeError(f"space expects 'auto', a function of a tir.Schedule or a SpaceGenerator, "
                    f"got {space!r}")
