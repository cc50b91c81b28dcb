"""The decorator that turns a Schedule method into a traced instruction."""
from __future__ import annotations

import functools
import inspect

from . import errors
from .rv import BlockRV, LoopRV
from .kinds import InstructionKind
from .trace import Instruction


def instruction(method):
    """Record each successful call of ``method`` in the schedule's trace and history.

    A primitive computes new IR first and installs it with ``Schedule._update`` only at the end,
    so a primitive that raises leaves the schedule exactly as it was.
    """
    signature = inspect.signature(method)
    params = list(signature.parameters.values())[1:]
    kind = []   # the InstructionKind, made on first use (the Schedule class must exist first)
    # Methods whose parameters are all plain (no *args, **kwargs, positional-only) have their
    # call recorded without binding the signature, unless it is not a simple, valid call.
    plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
    by_position = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    names = {p.name for p in params}
    names_in_order = [p.name for p in params if p.name != "decision"]
    required = [p.name for p in params if p.default is p.empty]

    def record(args, kwargs):
        """(positional, keywords) of the call as the trace records it."""
        if plain and len(args) <= len(by_position):
            given = dict(zip(by_position, args))
            if all(k in names and k not in given for k in kwargs):
                given.update(kwargs)
                if all(name in given for name in required):
                    return [], {name: given[name] for name in names_in_order if name in given}
        bound = signature.bind(None, *args, **kwargs)
        positional, keywords = [], {}
        for p in params:
            if p.name not in bound.arguments or p.name == "decision":
                continue
            value = bound.arguments[p.name]
            if p.kind is p.VAR_POSITIONAL:
                positional.extend(value)
            elif p.kind is p.VAR_KEYWORD:
                keywords.update(value)
            else:
                keywords[p.name] = value
        return positional, keywords

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        positional, keywords = record(args, kwargs)
        mod_before = self._mod
        self._last_decision = None
        level = self._error_render_level
        if level == "detail":
            result = method(self, *args, **kwargs)
        else:
            with errors.render_level(level):
                result = method(self, *args, **kwargs)
        outputs = list(result) if isinstance(result, (list, tuple)) else result
        if not kind:
            kind.append(InstructionKind.get(method.__name__))
        inst = Instruction(kind[0], positional, keywords, outputs, self._last_decision)
        self.trace.insts.append(inst)
        for out in outputs if isinstance(outputs, list) else [outputs]:
            if isinstance(out, (BlockRV, LoopRV)):
                self._made[id(out)] = out
        if self._mod is not mod_before:
            self._record_step()
        return result

    wrapper.is_instruction = True
    return wrapper
