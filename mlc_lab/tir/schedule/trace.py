"""Traces: every primitive and sampling decision a schedule made, printable as Python that
replays it, and savable as JSON."""
from __future__ import annotations

import json

from ...ir import hooks
from ..expr import Var
from .kinds import InstructionKind
from .rv import BlockRV, LoopRV, SampledInt

HANDLES = (BlockRV, LoopRV, SampledInt)


class TraceError(ValueError):
    """Trace JSON that is not what ``Trace.as_json`` writes; the message says which part."""


def _prefix(rv) -> str:
    return "b" if isinstance(rv, BlockRV) else "l" if isinstance(rv, LoopRV) else "v"


# How the reference compiler lays out an instruction of each kind: kind name -> (Schedule method,
# the parameters its ``inputs`` fill, the parameters its ``attrs`` fill). A name starting with "*"
# takes the rest of the inputs as a list; a variadic parameter (fuse, reorder) takes them as
# positional arguments.
_TVM_KINDS = {
    "GetBlock": ("get_block", [], ["name", "func_name"]),
    "GetLoops": ("get_loops", ["block"], []),
    "GetChildBlocks": ("get_child_blocks", ["block_or_loop"], []),
    "GetProducers": ("get_producers", ["block"], []),
    "GetConsumers": ("get_consumers", ["block"], []),
    "GetOutputBlocks": ("get_output_blocks", ["scope_block"], []),
    "Split": ("split", ["loop", "*factors"], ["preserve_unit_iters"]),
    "Fuse": ("fuse", ["*loops"], ["preserve_unit_iters"]),
    "Reorder": ("reorder", ["*ordered_loops"], []),
    "Parallel": ("parallel", ["loop"], []),
    "Vectorize": ("vectorize", ["loop"], []),
    "Unroll": ("unroll", ["loop"], []),
    "Bind": ("bind", ["loop"], ["thread_axis"]),
    "CacheRead": ("cache_read", ["block", "*consumer_blocks"], ["read_buffer_index", "storage_scope"]),
    "CacheWrite": ("cache_write", ["block", "*consumer_blocks"], ["write_buffer_index", "storage_scope"]),
    "ComputeAt": ("compute_at", ["block", "loop"], ["preserve_unit_loops", "index"]),
    "ReverseComputeAt": ("reverse_compute_at", ["block", "loop"], ["preserve_unit_loops", "index"]),
    "ComputeInline": ("compute_inline", ["block"], []),
    "ReverseComputeInline": ("reverse_compute_inline", ["block"], []),
    "DecomposeReduction": ("decompose_reduction", ["block", "loop"], []),
    "RFactor": ("rfactor", ["loop"], ["factor_axis"]),
    "SetScope": ("set_scope", ["block"], ["buffer_index", "storage_scope"]),
    "Blockize": ("blockize", ["target"], ["preserve_unit_iters"]),
    "Tensorize": ("tensorize", ["block_or_loop"], ["tensor_intrin", "preserve_unit_iters"]),
    "Annotate": ("annotate", ["block_or_loop", "ann_val"], ["ann_key"]),
    "Unannotate": ("unannotate", ["block_or_loop"], ["ann_key"]),
    "SampleCategorical": ("sample_categorical", [], ["candidates", "probs"]),
    "SamplePerfectTile": ("sample_perfect_tile", ["loop"], ["n", "max_innermost_factor"]),
    "SampleComputeLocation": ("sample_compute_location", ["block"], []),
    "EnterPostproc": ("enter_postproc", [], []),
}
# Kinds whose method returns one value (the reference form lists it as a one-element output list).
_ONE_OUTPUT = {"GetBlock", "Fuse", "CacheRead", "CacheWrite", "DecomposeReduction", "RFactor",
               "Blockize", "SampleCategorical", "SampleComputeLocation"}
class Instruction:
    """One step of a trace: ``kind`` (the Schedule method, an InstructionKind), its positional
    ``args`` and keyword ``kwargs`` (RVs, lists, literals), its ``outputs`` (an RV, a list of
    them, a sampled value, or None) and the ``decision`` a sampling instruction made.

    The reference compiler's form ``Instruction(kind=InstructionKind.get("GetLoops"),
    inputs=[block], attrs=[], outputs=[loop0, loop1])`` is accepted too: its inputs and attrs
    become the arguments of the method, and ``inst.inputs`` / ``inst.attrs`` give them back."""
    __slots__ = ("kind", "args", "kwargs", "outputs", "decision", "_tvm_form")

    def __init__(self, kind, args=None, kwargs=None, outputs=None, decision=None, *,
                 inputs=None, attrs=None):
        self._tvm_form = None
        if inputs is not None or attrs is not None:
            if args is not None or kwargs is not None:
                raise TypeError("Instruction: give either args/kwargs or inputs/attrs, not both")
            inputs, attrs = list(inputs or []), [_plain(a) for a in attrs or []]
            args, kwargs = _call_of(kind, inputs, attrs)
            self._tvm_form = (inputs, attrs)
            if getattr(kind, "name", kind) in _ONE_OUTPUT and isinstance(outputs, list) and len(outputs) == 1:
                outputs = outputs[0]
        if isinstance(kind, str) and not isinstance(kind, InstructionKind):
            try:
                kind = InstructionKind.get(kind)
            except ValueError:
                pass   # not a kind of this Schedule: replaying it says so
        self.kind = kind
        self.args = [] if args is None else args
        self.kwargs = {} if kwargs is None else kwargs
        self.outputs, self.decision = outputs, decision

    @property
    def inputs(self) -> list:
        """The random variables (and expressions) the instruction takes."""
        if self._tvm_form is not None:
            return self._tvm_form[0]
        return [v for v in self.args + list(self.kwargs.values()) if _is_input(v)]

    @property
    def attrs(self) -> list:
        """The instruction's other arguments (names, indices, flags)."""
        if self._tvm_form is not None:
            return self._tvm_form[1]
        return [v for v in self.args + list(self.kwargs.values()) if not _is_input(v)]

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return (f"Instruction(kind={str(self.kind)!r}, args={self.args!r}, kwargs={self.kwargs!r}, "
                f"outputs={self.outputs!r}, decision={self.decision!r})")

    def __str__(self) -> str:
        """The call as Python, every random variable shown as ``_``:
        ``_, _ = sch.get_loops(block=_)``."""
        return _python_line(self, None)[0]


def _plain(value):
    """An attribute as Python: IntImm/FloatImm constants become numbers, lists element-wise."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return getattr(value, "value", value) if type(value).__name__ in ("IntImm", "FloatImm") else value


def _is_input(value) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_is_input(v) for v in value)
    return isinstance(value, HANDLES)


def _call_of(kind, inputs: list, attrs: list):
    """(args, kwargs) of the Schedule method for an instruction given in the reference form."""
    name = kind.name if isinstance(kind, InstructionKind) else str(kind)
    if name not in _TVM_KINDS:
        raise ValueError(f"Instruction: no known layout of inputs and attrs for kind {name!r}; "
                         f"known: {', '.join(sorted(_TVM_KINDS))}")
    _, input_names, attr_names = _TVM_KINDS[name]
    if len(attrs) > len(attr_names):
        raise ValueError(f"Instruction {name}: takes {len(attr_names)} attrs "
                         f"({', '.join(attr_names) or 'none'}), got {len(attrs)}")
    args, kwargs, rest = [], {}, list(inputs)
    for param in input_names:
        if param.startswith("*"):
            values, rest = rest, []
            if param[1:] in ("loops", "ordered_loops"):
                args.extend(values)
            elif values or param[1:] != "consumer_blocks":
                kwargs[param[1:]] = values
        elif rest:
            kwargs[param] = rest.pop(0)
    if rest:
        raise ValueError(f"Instruction {name}: takes {len(input_names)} inputs "
                         f"({', '.join(input_names) or 'none'}), got {len(inputs)}")
    kwargs.update(zip(attr_names, attrs))
    return args, kwargs


def _python_line(inst, names: dict | None) -> list:
    """[the instruction as a line of Python]. ``names`` (id -> name) names the random variables
    seen so far and gets names for this instruction's outputs; None shows every one as ``_``."""
    def name_of(v):
        return "_" if names is None else names.get(id(v), repr(v))

    def text(v):
        if isinstance(v, (BlockRV, LoopRV)) or (names is not None and id(v) in names) or (
                names is None and isinstance(v, SampledInt)):
            return name_of(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(text(x) for x in v) + "]"
        if callable(v) and hasattr(v, "__name__"):
            return getattr(v, "_source", v.__name__)
        return json.dumps(v) if isinstance(v, str) else repr(v)
    call_args = [text(a) for a in inst.args]
    call_args += [f"{k}={text(v)}" for k, v in inst.kwargs.items()]
    if inst.decision is not None:
        call_args.append(f"decision={text(inst.decision)}")
    call = f"sch.{inst.kind}({', '.join(call_args)})"
    outs = inst.outputs if isinstance(inst.outputs, list) else \
        [] if inst.outputs is None else [inst.outputs]
    if names is not None:
        for o in outs:
            names[id(o)] = f"{_prefix(o)}{len(names)}"
    out_names = [name_of(o) for o in outs]
    if isinstance(inst.outputs, list):
        lhs = ", ".join(out_names) + ("," if len(outs) == 1 else "")
        return [f"{lhs} = {call}" if outs else call]
    if inst.outputs is not None:
        return [f"{out_names[0]} = {call}"]
    return [call]


def _flat(value):
    if isinstance(value, (list, tuple)):
        for item in value:
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
    by hand; a decision given there replaces the instruction's own."""

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
            outs = inst.outputs if isinstance(inst.outputs, list) else \
                [] if inst.outputs is None else [inst.outputs]
            if getattr(inst.kind, "is_pure", False) and not any(id(o) in used for o in outs):
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
    def as_python(self) -> list[str]:
        names: dict[int, str] = {}
        lines = []
        for inst in self.insts:
            lines += _python_line(inst, names)
        return lines

    def __str__(self) -> str:
        return "\n".join(["# from mlc_lab import tir", "# sch = tir.Schedule(mod)"] + self.as_python())

    __repr__ = __str__   # a trace shown as a notebook cell's value reads as the script

    def show(self) -> None:
        hooks.need("script.display_code")(str(self))

    # -- JSON ------------------------------------------------------------------------------
    def as_json(self) -> list:
        ids: dict[int, str] = {}

        def enc(v):
            if isinstance(v, HANDLES) and id(v) in ids:
                return {"rv": ids[id(v)]}
            if isinstance(v, (list, tuple)):
                return [enc(x) for x in v]
            if callable(v):
                raise TypeError(f"cannot save {v!r} to JSON: give index maps as strings of Python "
                                "lambdas, e.g. \"lambda i, j: (j, i)\"")
            return v
        out = []
        for inst in self.insts:
            args, kwargs = enc(inst.args), {k: enc(v) for k, v in inst.kwargs.items()}
            outs = inst.outputs if isinstance(inst.outputs, list) else [inst.outputs]
            for o in outs:
                if isinstance(o, HANDLES):
                    ids[id(o)] = f"{_prefix(o)}{len(ids)}"
            out.append({"kind": inst.kind, "args": args, "kwargs": kwargs,
                        "outputs": _enc_outputs(inst.outputs, ids), "decision": inst.decision})
        return out

    @staticmethod
    def from_json(obj) -> "Trace":
        """Rebuild a trace from ``as_json`` output; RV placeholders are re-bound when applied."""
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise TraceError(f"Trace.from_json: the text is not JSON ({exc})") from None
        if not isinstance(obj, list):
            raise TraceError(f"Trace.from_json expects a list of instructions (as written by "
                             f"as_json), got {type(obj).__name__}")
        defined: set = set()
        return Trace([_instruction_from_json(d, index, defined) for index, d in enumerate(obj)])

    @staticmethod
    def apply_json_to_schedule(obj, sch):
        """Replay the trace saved as ``obj`` (``as_json`` output or its text) on ``sch``."""
        return Trace.from_json(obj).apply_to_schedule(sch)

    # -- replay ----------------------------------------------------------------------------
    def apply_to_schedule(self, sch, remove_postproc: bool = False, decisions: dict | None = None,
                          decision_provider=None):
        """Replay every instruction on ``sch``; ``decisions`` maps instruction index -> a new
        decision for sampling instructions.

        ``remove_postproc`` stops the replay at ``sch.enter_postproc()``, the mark after which a
        tuner's postprocessing steps follow. ``decision_provider(inst, inputs, attrs, decision)``,
        when given, returns the decision to use for each sampling instruction (its inputs and
        attrs as ``inst.inputs`` / ``inst.attrs`` give them, before replay)."""
        rv_map: dict = {}

        def dec(v):
            if isinstance(v, dict) and "rv" in v:
                return rv_map[v["rv"]]
            if isinstance(v, HANDLES + (Var,)) and id(v) in rv_map:
                return rv_map[id(v)]
            if isinstance(v, list):
                return [dec(x) for x in v]
            return v
        for index, inst in enumerate(self.insts):
            if remove_postproc and inst.kind == "enter_postproc":
                break
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


_JSON_FIELDS = {"kind": str, "args": list, "kwargs": dict}


def _instruction_from_json(d, index: int, defined: set) -> Instruction:
    """One instruction, checked: its fields have the right types and it uses only RVs that an
    earlier instruction output (``defined`` collects them)."""
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
    for ref in _rv_refs([d["args"], list(d["kwargs"].values())]):
        if ref not in defined:
            raise TraceError(f"{where} ({d['kind']}) uses {ref!r}, which no earlier instruction outputs")
    defined.update(_rv_refs([d["outputs"]]))
    return Instruction(d["kind"], d["args"], d["kwargs"], d["outputs"], d.get("decision"))


def _rv_refs(value) -> list:
    if isinstance(value, dict) and "rv" in value:
        return [value["rv"]]
    if isinstance(value, list):
        return [ref for item in value for ref in _rv_refs(item)]
    return []


def _enc_outputs(outputs, ids):
    if isinstance(outputs, list):
        return [_enc_outputs(o, ids) for o in outputs]
    if isinstance(outputs, HANDLES):
        return {"rv": ids[id(outputs)]}
    return None


def _bind_outputs(old, new, rv_map):
    if new is None:
        return
    if isinstance(old, list) and not isinstance(new, (list, tuple)) and len(old) == 1:
        old = old[0]
    if isinstance(old, list):
        for o, n in zip(old, new):
            _bind_outputs(o, n, rv_map)
    elif isinstance(old, dict) and "rv" in old:
        rv_map[old["rv"]] = new
    elif isinstance(old, HANDLES + (Var,)):
        rv_map[id(old)] = new
