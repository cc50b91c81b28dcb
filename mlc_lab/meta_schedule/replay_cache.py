"""Resuming replays: search replays one design again and again, each time with one sampling
decision drawn afresh, so the instructions before that decision replay exactly as they did
before. ``ReplayCache`` keeps the schedule as it stood before each sampling instruction of the
designs it replayed (a copy: IR is shared, not copied) and resumes a later replay from the
deepest one whose instructions and decisions so far are the same, skipping that prefix.

The result is the schedule a replay from the start gives: the prefix's instructions and
decisions are equal by their JSON text, the module is the same object, and the resumed
schedule's random generator starts from the replay's seed, as a fresh one would (instructions
replayed with a given decision draw nothing from it).

A replay that draws one decision afresh and draws the very one the design holds replays the
design itself: asked to (``stop_if_unchanged``), the cache stops it there with ReplayUnchanged,
so that the caller can reuse what it made of the design before.
"""
from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np

from ..tir.schedule.trace import Trace
from ..tir.schedule.trace_format import json_attr

SAMPLING_KINDS = ("sample_perfect_tile", "sample_categorical", "sample_compute_location")


class _Design:
    """What resuming needs of one design: its parsed trace, one key per instruction (its JSON
    with its decision), the names and placeholders of each instruction's outputs, and where
    its sampling instructions are."""

    def __init__(self, design: list):
        self.trace = Trace.from_json(design)
        insts, decisions = design[0], dict((d[0], d[1]) for d in design[1])
        self.decisions = decisions
        self.step_keys = [json.dumps([inst, decisions.get(k)]) for k, inst in enumerate(insts)]
        self.outputs = [list(zip(inst[3], _flat(parsed.outputs)))
                        for inst, parsed in zip(insts, self.trace.insts)]
        self.sites = [k for k, inst in enumerate(self.trace.insts) if inst.kind in SAMPLING_KINDS]

    def prefix_key(self, mod, n: int) -> tuple:
        return (id(mod), tuple(self.step_keys[:n]))


class ReplayUnchanged(Exception):
    """The decision drawn afresh is the one the design holds: the replay is the design's own."""


def _flat(outputs) -> list:
    if outputs is None:
        return []
    return list(outputs) if isinstance(outputs, list) else [outputs]


class ReplayCache:
    """Schedules part-way through replays (at most ``capacity``, the least recently used are
    dropped), and the parsed designs they came from. ``hits`` / ``misses`` count replays that
    did / did not resume from one."""

    def __init__(self, capacity: int = 256, designs: int = 512):
        self.capacity = capacity
        self.max_designs = designs
        self._snapshots: OrderedDict = OrderedDict()   # prefix key -> (mod, schedule, values)
        self._designs: dict = {}                       # id(design) -> (design, _Design)
        self.hits = self.misses = 0

    def design(self, design: list) -> _Design | None:
        """The parsed design (None for a design in the older list-of-dicts form)."""
        hit = self._designs.get(id(design))
        if hit is not None and hit[0] is design:
            return hit[1]
        if not (isinstance(design, list) and len(design) == 2 and isinstance(design[1], list)):
            return None
        if len(self._designs) >= self.max_designs:
            self._designs.clear()
        info = _Design(design)
        self._designs[id(design)] = (design, info)
        return info

    def replay(self, make_schedule, mod, design: list, seed: int, decisions: dict | None,
               stop_if_unchanged: bool = False):
        """Replay ``design`` on ``mod`` (``decisions``: index -> new decision, None to sample
        afresh) and return the schedule, resuming from a kept one where possible;
        ``make_schedule(mod, seed)`` makes a fresh schedule. With ``stop_if_unchanged``, a
        replay drawing one decision afresh that comes out as the design's raises ReplayUnchanged
        as soon as that is known."""
        info = self.design(design)
        if info is None:
            sch = make_schedule(mod, seed)
            Trace.from_json(design).apply_to_schedule(sch, decisions=decisions)
            return sch
        # instructions before the first changed decision replay as the design says
        first = min(decisions) if decisions else len(info.step_keys)
        start, sch, rv_map = 0, None, {}
        for site in reversed(info.sites):
            if site > first:
                continue
            kept = self._snapshots.get(info.prefix_key(mod, site))
            if kept is not None and kept[0] is mod:
                self._snapshots.move_to_end(info.prefix_key(mod, site))
                start, sch, rv_map = site, _resume(kept[1], seed), self._bind(info, site, kept[2])
                break
        self.hits += sch is not None
        self.misses += sch is None
        if sch is None:
            sch = make_schedule(mod, seed)

        watch = stop_if_unchanged and len(decisions or ()) == 1 and decisions[first] is None \
            and first in info.decisions

        def keep(index, live, bound):
            if index > start and index <= first and index in info.sites:
                self._keep(info, mod, index, live, bound)
            if watch and index == first + 1:
                _stop_if_unchanged(info, first, live)
        info.trace.apply_to_schedule(sch, decisions=decisions, start=start, rv_map=rv_map,
                                     before_step=keep)
        if watch and first == len(info.step_keys) - 1:
            _stop_if_unchanged(info, first, sch)
        return sch

    @staticmethod
    def _bind(info: _Design, n: int, values: dict) -> dict:
        """The rv_map of ``info``'s trace for its first ``n`` instructions, from their values by
        output name."""
        return {id(placeholder): values[name] for outputs in info.outputs[:n]
                for name, placeholder in outputs if name in values}

    def _keep(self, info: _Design, mod, n: int, sch, rv_map: dict) -> None:
        key = info.prefix_key(mod, n)
        if key in self._snapshots:
            return
        values = {name: rv_map[id(placeholder)] for outputs in info.outputs[:n]
                  for name, placeholder in outputs if id(placeholder) in rv_map}
        state = sch._rng.bit_generator.state    # copying draws from the generator: put it back
        snapshot = sch.copy()
        sch._rng.bit_generator.state = state
        self._snapshots[key] = (mod, snapshot, values)
        if len(self._snapshots) > self.capacity:
            self._snapshots.popitem(last=False)


def _stop_if_unchanged(info: _Design, site: int, sch) -> None:
    """Raise ReplayUnchanged when the decision ``sch`` just drew at instruction ``site`` is the
    design's."""
    last = sch.trace.insts[-1] if sch.trace.insts else None
    if last is None or last.kind != info.trace.insts[site].kind or last.decision is None:
        return
    try:
        drawn = json_attr(last.decision, "replay")
    except TypeError:
        return
    if json.dumps(drawn) == json.dumps(info.decisions[site]):
        raise ReplayUnchanged()


def _resume(snapshot, seed: int):
    """A schedule to go on from ``snapshot`` (left as it is) with a generator seeded as a fresh
    schedule's would be."""
    sch = snapshot.copy()
    sch.seed = seed
    sch._rng = np.random.default_rng(seed)
    return sch
