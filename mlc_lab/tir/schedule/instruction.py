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

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
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
