"""Traces: every primitive and sampling decision a schedule made, printable as Python that
replays it, and savable as JSON."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...ir import hooks
from .rv import BlockRV, LoopRV, SampledInt

HANDLES = (BlockRV, LoopRV, SampledInt)


class TraceError(ValueError):
    """Trace JSON that is not what ``Trace.as_json`` writes; the message says which part."""


def _prefix(rv) -> str:
    return "b" if isinstance(rv, BlockRV) else "l" if isinstance(rv, LoopRV) else "v"


@dataclass
class Instruction:
    kind: str                      # the Schedule method name, e.g. "split"
    args: list                     # positional arguments (RVs, lists, literals)
    kwargs: dict                   # keyword arguments
    outputs: Any                   # an RV, a list of RVs, a sampled value, or None
    decision: Any = None           # what a sampling instruction chose


@dataclass
class Trace:
    insts: list = field(default_factory=list)

    # -- printing --------------------------------------------------------------------------
    def as_python(self) -> list[str]:
        names: dict[int, str] = {}
        lines = []
        for inst in self.insts:
            def text(v):
                if isinstance(v, (BlockRV, LoopRV)) or id(v) in names:
                    return names.get(id(v), repr(v))
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
            for o in outs:
                names[id(o)] = f"{_prefix(o)}{len(names)}"
            if isinstance(inst.outputs, list):
                lhs = ", ".join(names[id(o)] for o in outs) + ("," if len(outs) == 1 else "")
                lines.append(f"{lhs} = {call}" if outs else call)
            elif inst.outputs is not None:
                lines.append(f"{names[id(inst.outputs)]} = {call}")
            else:
                lines.append(call)
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
    def apply_to_schedule(self, sch, remove_postproc: bool = False, decisions: dict | None = None):
        """Replay every instruction on ``sch``; ``decisions`` maps instruction index -> a new
        decision for sampling instructions.

        ``remove_postproc`` is accepted for compatibility with TVM, where it drops the
        postprocessing instructions a tuner appends; mlc_lab traces hold only primitives and
        sampling decisions, so there is nothing to drop and either value replays the same."""
        rv_map: dict = {}

        def dec(v):
            if isinstance(v, dict) and "rv" in v:
                return rv_map[v["rv"]]
            if isinstance(v, HANDLES) and id(v) in rv_map:
                return rv_map[id(v)]
            if isinstance(v, list):
                return [dec(x) for x in v]
            return v
        for index, inst in enumerate(self.insts):
            kwargs = {k: dec(v) for k, v in inst.kwargs.items()}
            decision = (decisions or {}).get(index, inst.decision)
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
    if isinstance(old, list):
        for o, n in zip(old, new):
            _bind_outputs(o, n, rv_map)
    elif isinstance(old, dict) and "rv" in old:
        rv_map[old["rv"]] = new
    elif isinstance(old, HANDLES):
        rv_map[id(old)] = new
