"""Traces: every primitive and sampling decision a schedule made, printable as Python that
replays it, and savable as JSON (the reference compiler's form; the older list-of-dicts form
mlc_lab wrote before is still read)."""
from __future__ import annotations

import json

from ...ir import hooks
from .kinds import InstructionKind
from . import trace_format as fmt
from .trace_format import is_rv

# Kinds whose method returns one value (the reference form lists it as a one-element output list).
_ONE_OUTPUT = {"GetBlock", "Fuse", "Merge", "AddUnitLoop", "CacheRead", "CacheWrite", "ReadAt",
               "WriteAt", "DecomposeReduction", "DecomposePadding", "RFactor", "Blockize", "ReIndex",
               "ReindexCacheRead", "ReindexCacheWrite", "SampleCategorical", "SampleComputeLocation"}


class TraceError(ValueError):
    """Trace JSON that is not what ``Trace.as_json`` writes; the message says which part."""


class Instruction:
    """One step of a trace: ``kind`` (the Schedule method, an InstructionKind), its positional
    ``args`` and keyword ``kwargs`` (RVs, lists, literals), its ``outputs`` (an RV, a list of
    them, a sampled value, or None) and the ``decision`` a sampling instruction made.

    The reference compiler's form ``Instruction(kind=InstructionKind.get("GetLoops"),
    inputs=[block], attrs=[], outputs=[loop0, loop1])`` is accepted too: its inputs and attrs
    become the arguments of the method. ``inst.inputs`` / ``inst.attrs`` give an instruction in
    that form whichever way it was made (a parameter not given shows its default)."""
    __slots__ = ("kind", "args", "kwargs", "outputs", "decision", "_tvm_form")

    def __init__(self, kind, args=None, kwargs=None, outputs=None, decision=None, *,
                 inputs=None, attrs=None):
        self._tvm_form = None
        if isinstance(kind, str) and not isinstance(kind, InstructionKind):
            try:
                kind = InstructionKind.get(kind)
            except ValueError:
                pass   # not a kind of this Schedule: replaying it says so
        if inputs is not None or attrs is not None:
            if args is not None or kwargs is not None:
                raise TypeError("Instruction: give either args/kwargs or inputs/attrs, not both")
            inputs, attrs = list(inputs or []), [_plain(a) for a in attrs or []]
            args, kwargs = fmt.call_of(kind, inputs, attrs)
            self._tvm_form = (inputs, attrs)
            if getattr(kind, "name", kind) in _ONE_OUTPUT and isinstance(outputs, list) and len(outputs) == 1:
                outputs = outputs[0]
        self.kind = kind
        self.args = [] if args is None else args
        self.kwargs = {} if kwargs is None else kwargs
        self.outputs, self.decision = outputs, decision

    @property
    def inputs(self) -> list:
        """The random variables (and constants in their place) the instruction takes."""
        if self._tvm_form is not None:
            return self._tvm_form[0]
        return fmt.split_call(self)[0]

    @property
    def attrs(self) -> list:
        """The instruction's other arguments (names, indices, flags)."""
        if self._tvm_form is not None:
            return self._tvm_form[1]
        return fmt.split_call(self)[1]

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return (f"Instruction(kind={str(self.kind)!r}, args={self.args!r}, kwargs={self.kwargs!r}, "
                f"outputs={self.outputs!r}, decision={self.decision!r})")

    def __str__(self) -> str:
        """The call as Python, every random variable shown as ``_``:
        ``_, _ = sch.get_loops(block=_)``."""
        return fmt.python_line(self, None)


class _Where:
    """Where in a trace an instruction saved to JSON sits, for error messages: formatted only
    when one is raised."""
    __slots__ = ("index", "inst")

    def __init__(self, index: int, inst):
        self.index, self.inst = index, inst

    def __str__(self) -> str:
        return f"Trace.as_json: instruction {self.index} ({self.inst.kind})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _plain(value):
    """An attribute as Python: IntImm/FloatImm constants become numbers, lists element-wise."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return getattr(value, "value", value) if type(value).__name__ in ("IntImm", "FloatImm") else value


def _outputs(inst) -> list:
    return inst.outputs if isinstance(inst.outputs, list) else \
        [] if inst.outputs is None else [inst.outputs]


def _flat(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flat(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _flat(item)
    else:
        yield value


class IntDecision(int):
    """A decision as ``Trace.decisions`` gives it: an int that also answers ``.value``, as the
    reference compiler's IntImm decisions do."""

    @property
    def value(self) -> int:
        return int(self)


def _decision_value(decision):
    if isinstance(decision, bool) or not isinstance(decision, (int, list, tuple)):
        return decision
    if isinstance(decision, int):
        return IntDecision(decision)
    return [_decision_value(d) for d in decision]


class Trace:
    """The instructions a schedule ran, in order (``insts``), with the decisions of its sampling
    instructions (``decisions``: instruction -> decision). ``Trace(insts, decisions)`` builds one
    by hand; a decision given there replaces the instruction's own.

    ``str(trace)`` (and ``trace.show()``) is a Python function that replays it; ``as_python()``
    its lines; ``as_json()`` the JSON form ``[[[kind, inputs, attrs, outputs], ...],
    [[instruction index, decision], ...]]`` that ``Trace.from_json`` and
    ``Trace.apply_json_to_schedule`` read back.

    >>> @T.prim_func
    ... def f(A: T.Buffer((64,), "float32")):
    ...     for i in range(64):
    ...         with T.block("A"):
    ...             vi = T.axis.spatial(64, i)
    ...             A[vi] = T.float32(0)
    >>> sch = tir.Schedule(f, seed=0)
    >>> (i,) = sch.get_loops(sch.get_block("A"))
    >>> sch.split(i, factors=sch.sample_perfect_tile(i, n=2, max_innermost_factor=8)) and None
    >>> print(sch.trace)
    # from mlc_lab import tir
    def apply_trace(sch: tir.Schedule) -> None:
      b0 = sch.get_block(name="A", func_name="main")
      l1, = sch.get_loops(block=b0)
      v2, v3 = sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=8, decision=[8, 8])
      l4, l5 = sch.split(loop=l1, factors=[v2, v3])
    >>> sch.trace.as_json()[0][2:]
    [['SamplePerfectTile', ['l1'], [2, 8], ['v2', 'v3']], ['Split', ['l1', 'v2', 'v3'], [True], ['l4', 'l5']]]
    >>> sch.trace.as_json()[1]
    [[2, [8, 8]]]
    """

    #: The import the printed function's first line names (a comment: the function itself
    #: takes the schedule as its argument).
    python_import = "from mlc_lab import tir"

    def __init__(self, insts=None, decisions=None):
        self.insts = [] if insts is None else insts
        for inst, decision in (decisions or {}).items():
            inst.decision = decision

    @property
    def decisions(self) -> dict:
        """Each sampling instruction -> its decision (an index, a list of tile sizes, ...)."""
        return {inst: _decision_value(inst.decision) for inst in self.insts
                if inst.decision is not None}

    def get_decision(self, inst):
        """The decision of ``inst`` (None for an instruction that samples nothing)."""
        return None if inst.decision is None else _decision_value(inst.decision)

    def append(self, inst, decision=None) -> None:
        """Add ``inst`` at the end (with ``decision``, for a sampling instruction)."""
        if decision is not None:
            inst.decision = decision
        self.insts.append(inst)

    def pop(self):
        """Remove and return the last instruction; None when the trace is empty."""
        return self.insts.pop() if self.insts else None

    def with_decision(self, inst, decision, remove_postproc: bool = False) -> "Trace":
        """A copy with ``inst``'s decision changed to ``decision``."""
        insts = self._kept(remove_postproc)
        copies = [Instruction(i.kind, i.args, i.kwargs, i.outputs, decision if i is inst else i.decision)
                  for i in insts]
        return Trace(copies)

    def simplified(self, remove_postproc: bool) -> "Trace":
        """A copy without the instructions that change nothing anything later uses: pure ones
        (queries, sampling) whose outputs no kept instruction takes; with ``remove_postproc``,
        also everything from ``enter_postproc`` on."""
        kept, used = [], set()
        for inst in reversed(self._kept(remove_postproc)):
            if getattr(inst.kind, "is_pure", False) and not any(id(o) in used for o in _outputs(inst)):
                continue
            kept.append(inst)
            used.update(id(v) for v in _flat([inst.args, list(inst.kwargs.values())]))
        return Trace(kept[::-1])

    def _kept(self, remove_postproc: bool) -> list:
        if not remove_postproc:
            return list(self.insts)
        stop = next((k for k, inst in enumerate(self.insts) if inst.kind == "enter_postproc"),
                    len(self.insts))
        return list(self.insts[:stop])

    def __eq__(self, other):
        return isinstance(other, Trace) and self.insts == other.insts

    __hash__ = None

    # -- printing --------------------------------------------------------------------------
    def as_python(self, remove_postproc: bool = False) -> list[str]:
        """One line of Python per instruction (``sch.split(loop=l1, factors=[v2, v3])``); the
        random variables are named by kind and order of appearance: b0, l1, v2, ..."""
        names: dict[int, str] = {}
        return [fmt.python_line(inst, names) for inst in self._kept(remove_postproc)]

    def __str__(self) -> str:
        body = self.as_python() or ["pass"]
        return "\n".join([f"# {self.python_import}", "def apply_trace(sch: tir.Schedule) -> None:"]
                         + ["  " + line for line in body])

    __repr__ = __str__   # a trace shown as a notebook cell's value reads as the script

    def show(self) -> None:
        hooks.need("script.display_code")(str(self))

    # -- JSON ------------------------------------------------------------------------------
    def as_json(self, remove_postproc: bool = False) -> list:
        """``[instructions, decisions]``: each instruction ``[kind, inputs, attrs, outputs]``
        (random variables by name, string inputs in double quotes, None as "None"), each
        decision ``[index of its instruction, decision]``."""
        names: dict[int, str] = {}
        insts, decisions = [], []
        for index, inst in enumerate(self._kept(remove_postproc)):
            where = _Where(index, inst)
            inputs, attrs = inst._tvm_form if inst._tvm_form is not None else fmt.split_call(inst)
            outs = []
            for out in _outputs(inst):
                names.setdefault(id(out), f"{fmt.rv_prefix(out)}{len(names)}")
                outs.append(names[id(out)])
            insts.append([getattr(inst.kind, "name", str(inst.kind)),
                          [fmt.json_input(v, names, where) for v in inputs],
                          [fmt.json_attr(v, where) for v in attrs], outs])
            if inst.decision is not None:
                decisions.append([index, fmt.json_attr(inst.decision, where)])
        return [insts, decisions]

    @staticmethod
    def from_json(obj) -> "Trace":
        """Rebuild a trace from ``as_json`` output (or its text). The trace's random variables
        are fresh placeholders, bound when it is applied to a schedule."""
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise TraceError(f"Trace.from_json: the text is not JSON ({exc})") from None
        if _is_reference_form(obj):
            return _from_reference_json(obj)
        if not isinstance(obj, list):
            raise TraceError(f"Trace.from_json expects [instructions, decisions] (as written by "
                             f"as_json), got {type(obj).__name__}")
        defined: dict = {}
        return Trace([_instruction_from_json(d, index, defined) for index, d in enumerate(obj)])

    @staticmethod
    def json_kinds(obj) -> list:
        """The kind of each instruction of a trace saved as JSON (either form), in order: an
        InstructionKind (which compares equal to its method's name, "split") or, for a kind no
        Schedule method has, the name as saved."""
        def kind(name):
            try:
                return InstructionKind.get(name)
            except ValueError:
                return name
        if _is_reference_form(obj):
            return [kind(entry[0]) for entry in obj[0]]
        return [kind(entry["kind"]) for entry in obj]

    @staticmethod
    def json_prefix(obj, n: int):
        """The JSON (either form) of the first ``n`` instructions of the trace saved as ``obj``,
        with their decisions."""
        if _is_reference_form(obj):
            return [obj[0][:n], [d for d in obj[1] if d[0] < n]]
        return obj[:n]

    @staticmethod
    def apply_json_to_schedule(obj, sch):
        """Replay the trace saved as ``obj`` (``as_json`` output or its text) on ``sch``."""
        return Trace.from_json(obj).apply_to_schedule(sch)

    # -- replay ----------------------------------------------------------------------------
    def apply_to_schedule(self, sch, remove_postproc: bool = False, decisions: dict | None = None,
                          decision_provider=None, *, start: int = 0, rv_map: dict | None = None,
                          before_step=None):
        """Replay every instruction on ``sch``; ``decisions`` maps instruction index -> a new
        decision for sampling instructions.

        ``remove_postproc`` stops the replay at ``sch.enter_postproc()``, the mark after which a
        tuner's postprocessing steps follow. ``decision_provider(inst, inputs, attrs, decision)``,
        when given, returns the decision to use for each sampling instruction (its inputs and
        attrs as ``inst.inputs`` / ``inst.attrs`` give them, before replay).

        A replay can be resumed: ``start`` skips the first instructions, ``sch`` being the schedule
        as replaying them left it and ``rv_map`` the values they bound (id of a random variable of
        this trace -> its value in ``sch``). ``before_step(index, sch, rv_map)``, when given, is
        called before each instruction is replayed (a tuner keeps schedules to resume from)."""
        rv_map = {} if rv_map is None else rv_map

        def dec(v):
            if isinstance(v, dict) and "rv" in v:
                return rv_map[v["rv"]]
            if is_rv(v) and id(v) in rv_map:
                return rv_map[id(v)]
            if isinstance(v, list):
                return [dec(x) for x in v]
            return v
        for index in range(start, len(self.insts)):
            inst = self.insts[index]
            if remove_postproc and inst.kind == "enter_postproc":
                break
            if before_step is not None:
                before_step(index, sch, rv_map)
            kwargs = {k: dec(v) for k, v in inst.kwargs.items()}
            decision = (decisions or {}).get(index, inst.decision)
            if decision_provider is not None and decision is not None:
                decision = decision_provider(inst, inst.inputs, inst.attrs, decision)
            if decision is not None:
                kwargs["decision"] = decision
            if inst.kind.startswith("_") or not callable(getattr(sch, inst.kind, None)):
                raise TraceError(f"trace instruction {index}: {inst.kind!r} is not a schedule primitive")
            result = getattr(sch, inst.kind)(*[dec(a) for a in inst.args], **kwargs)
            _bind_outputs(inst.outputs, result, rv_map)
        return sch


def _is_reference_form(obj) -> bool:
    """Whether ``obj`` is ``[instructions, decisions]`` rather than the older list of dicts."""
    return isinstance(obj, list) and len(obj) == 2 and all(isinstance(part, list) for part in obj)


def _from_reference_json(obj) -> Trace:
    """A trace from ``[[[kind, inputs, attrs, outputs], ...], [[index, decision], ...]]``."""
    json_insts, json_decisions = obj
    decisions = {}
    for entry in json_decisions:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
                and 0 <= entry[0] < len(json_insts)):
            raise TraceError("Trace.from_json: each decision should be [instruction index, "
                             f"decision], got {entry!r}")
        decisions[entry[0]] = entry[1]
    named: dict = {}
    insts = []
    for index, entry in enumerate(json_insts):
        where = f"Trace.from_json: instruction {index}"
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)
                and all(isinstance(part, list) for part in entry[1:])
                and all(isinstance(name, str) for name in entry[3])):
            raise TraceError(f"{where} should be [kind, inputs, attrs, outputs] (a string and three "
                             f"lists, the outputs names), got {entry!r}")
        kind_name, inputs, attrs, outputs = entry
        try:
            kind = InstructionKind.get(kind_name)
        except ValueError as exc:
            raise TraceError(f"{where}: {exc}") from None
        where += f" ({kind_name})"
        try:
            inputs = fmt.from_json_input(inputs, named, where)
            outs = [fmt.placeholder(name) for name in outputs]
            inst = Instruction(kind, inputs=inputs, attrs=attrs, outputs=outs,
                               decision=decisions.get(index))
        except ValueError as exc:
            raise TraceError(str(exc)) from None
        named.update(zip(outputs, outs))
        insts.append(inst)
    return Trace(insts)


# -- the list-of-dicts form mlc_lab wrote before: read so that older tuning logs still load --------
_JSON_FIELDS = {"kind": str, "args": list, "kwargs": dict}


def _instruction_from_json(d, index: int, defined: dict) -> Instruction:
    """One instruction of the older form, checked: its fields have the right types and it uses
    only random variables an earlier instruction output (``defined`` collects them: name ->
    placeholder)."""
    where = f"Trace.from_json: instruction {index}"
    if not isinstance(d, dict):
        raise TraceError(f"{where} should be a dict with kind, args, kwargs and outputs, got "
                         f"{type(d).__name__} {d!r}")
    missing = [key for key in (*_JSON_FIELDS, "outputs") if key not in d]
    if missing:
        raise TraceError(f"{where} ({d.get('kind', '?')}) lacks {', '.join(map(repr, missing))}")
    for key, typ in _JSON_FIELDS.items():
        if not isinstance(d[key], typ):
            raise TraceError(f"{where} ({d['kind']}): {key!r} should be a {typ.__name__}, got "
                             f"{type(d[key]).__name__} {d[key]!r}")

    def bind(value, define: bool):
        if isinstance(value, dict) and set(value) == {"rv"}:
            name = value["rv"]
            if define:
                defined.setdefault(name, fmt.placeholder(name))
            elif name not in defined:
                raise TraceError(f"{where} ({d['kind']}) uses {name!r}, which no earlier "
                                 "instruction outputs")
            return defined[name]
        if isinstance(value, list):
            return [bind(v, define) for v in value]
        if isinstance(value, dict):
            return {k: bind(v, define) for k, v in value.items()}
        return value
    args = bind(d["args"], False)
    kwargs = bind(d["kwargs"], False)
    return Instruction(d["kind"], args, kwargs, bind(d["outputs"], True), d.get("decision"))


def _bind_outputs(old, new, rv_map):
    if new is None or (isinstance(old, list) and not old):
        return   # nothing was recorded to bind (sample_compute_location drew the root then)
    if isinstance(old, list) and not isinstance(new, (list, tuple)) and len(old) == 1:
        old = old[0]
    if isinstance(old, list):
        for o, n in zip(old, new):
            _bind_outputs(o, n, rv_map)
    elif isinstance(old, dict) and "rv" in old:
        rv_map[old["rv"]] = new
    elif is_rv(old):
        rv_map[id(old)] = new
