"""The decorator that turns a Schedule method into a traced instruction."""
from __future__ import annotations

import functools
import inspect

from .trace import Instruction


def instruction(method):
    """Record each successful call of ``method`` in the schedule's trace and history.

    A primitive computes new IR first and installs it with ``Schedule._update`` only at the end,
    so a primitive that raises leaves the schedule exactly as it was.
    """
    signature = inspect.signature(method)
    params = list(signature.parameters.values())[1:]

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
        result = method(self, *args, **kwargs)
        outputs = list(result) if isinstance(result, (list, tuple)) else result
        inst = Instruction(method.__name__, positional, keywords, outputs, self._last_decision)
        self.trace.insts.append(inst)
        if self._mod is not mod_before:
            self._record_step()
        return result

    wrapper.is_instruction = True
    return wrapper
