"""How a trace instruction is laid out as the reference compiler writes it: its ``inputs`` (random
variables and expressions) and ``attrs`` (names, indices, flags), the line of Python that
replays it, and the values of its JSON form."""
from __future__ import annotations

import inspect
import json

from ..expr import FloatImm, IntImm, Var
from .rv import BlockRV, LoopRV, SampledInt

HANDLES = (BlockRV, LoopRV, SampledInt)

# The reference compiler's layout of each kind: kind name -> (inputs, attrs), each a list of the
# Schedule method's parameter names. An input written "*name" spreads the list (or the variadic
# arguments) ``name`` into the inputs one element each: split's factors, fuse's loops.
LAYOUTS = {
    "GetBlock": ([], ["name", "func_name"]),
    "GetLoops": (["block"], []),
    "GetChildBlocks": (["block_or_loop"], []),
    "GetProducers": (["block"], []),
    "GetConsumers": (["block"], []),
    "GetOutputBlocks": (["scope_block"], []),
    "Split": (["loop", "*factors"], ["preserve_unit_iters"]),
    "Fuse": (["*loops"], ["preserve_unit_iters"]),
    "Merge": (["*loops"], []),
    "Reorder": (["*ordered_loops"], []),
    "AddUnitLoop": (["block_or_loop"], []),
    "Parallel": (["loop"], []),
    "Vectorize": (["loop"], []),
    "Unroll": (["loop"], []),
    "Bind": (["loop"], ["thread_axis"]),
    "CacheRead": (["block", "consumer_blocks"], ["read_buffer_index", "storage_scope"]),
    "CacheWrite": (["block", "consumer_blocks"], ["write_buffer_index", "storage_scope"]),
    "CacheInplace": (["block"], ["read_buffer_index", "storage_scope"]),
    "CacheIndex": (["block"], ["storage_scope", "cse_thresh"]),
    "ReadAt": (["loop", "block"], ["read_buffer_index", "storage_scope"]),
    "WriteAt": (["loop", "block"], ["write_buffer_index", "storage_scope"]),
    "ComputeAt": (["block", "loop"], ["preserve_unit_loops", "index"]),
    "ReverseComputeAt": (["block", "loop"], ["preserve_unit_loops", "index"]),
    "ComputeInline": (["block"], []),
    "ReverseComputeInline": (["block"], []),
    "DecomposeReduction": (["block", "loop"], []),
    "DecomposePadding": (["block", "loop"], []),
    "RFactor": (["loop"], ["factor_axis"]),
    "SetScope": (["block"], ["buffer_index", "storage_scope"]),
    "StorageAlign": (["block"], ["buffer_index", "axis", "factor", "offset"]),
    "UnsafeSetDType": (["block"], ["buffer_index", "dtype"]),
    "RollingBuffer": (["block"], ["write_buffer_index"]),
    "PadEinsum": (["block"], ["padding"]),
    "ReorderBlockIterVar": (["block", "new_order"], []),
    "Blockize": (["target"], ["preserve_unit_iters"]),
    "Tensorize": (["block_or_loop"], ["tensor_intrin", "preserve_unit_iters"]),
    "Annotate": (["block_or_loop", "ann_val"], ["ann_key"]),
    "Unannotate": (["block_or_loop"], ["ann_key"]),
    "SampleCategorical": ([], ["candidates", "probs"]),
    "SamplePerfectTile": (["loop"], ["n", "max_innermost_factor"]),
    "SampleComputeLocation": (["block"], []),
    "EnterPostproc": ([], []),
}
# Printed without the parameter name, as the reference compiler prints them.
_UNNAMED = {"get_child_blocks": "block_or_loop"}
# Printed only when not empty.
_ONLY_IF_GIVEN = {"consumer_blocks"}

_PARAMS: dict = {}


def params_of(kind) -> list | None:
    """The parameters of the Schedule method ``kind`` calls (without self and decision), or None
    when the schedule has no such method."""
    method = getattr(kind, "method", str(kind))
    if method not in _PARAMS:
        from . import Schedule   # the package: every primitive is part of Schedule by then
        func = getattr(Schedule, method, None)
        _PARAMS[method] = None if not callable(func) else [
            p for p in list(inspect.signature(func).parameters.values())[1:] if p.name != "decision"]
    return _PARAMS[method]


def layout_of(kind) -> tuple[list, list]:
    """(inputs, attrs) parameter names of ``kind``: the reference layout, with any further
    parameter of mlc_lab's method appended to the attrs; a kind the reference compiler does
    not have takes every parameter as an input, in order."""
    key = (getattr(kind, "name", None), getattr(kind, "method", str(kind)))
    known = _LAYOUTS_OF.get(key)
    if known is None:
        known = _LAYOUTS_OF[key] = _layout_of(kind)
    return list(known[0]), list(known[1])


_LAYOUTS_OF: dict = {}   # (kind name, method) -> layout_of's answer (parameters never change)


def _layout_of(kind) -> tuple[list, list]:
    params = params_of(kind)
    names = [p.name for p in params or []]
    layout = LAYOUTS.get(getattr(kind, "name", str(kind)))
    if layout is None or (params is not None and any(
            n.lstrip("*") not in names for n in layout[0] + layout[1])):
        if params is None:
            raise ValueError(f"no layout of inputs and attrs is known for kind {kind!r}")
        return [("*" if p.kind is p.VAR_POSITIONAL else "") + p.name for p in params], []
    used = {n.lstrip("*") for n in layout[0] + layout[1]}
    return list(layout[0]), list(layout[1]) + [n for n in names if n not in used]


def resolved_kwargs(inst) -> dict:
    """``inst.kwargs``, with get_block's function named as the block handle it returned names
    it (the reference compiler always records the function)."""
    kwargs = inst.kwargs
    out = inst.outputs
    if getattr(inst.kind, "method", inst.kind) == "get_block" and kwargs.get("func_name") is None \
            and isinstance(out, BlockRV) and out.func_name is not None:
        kwargs = {**kwargs, "func_name": out.func_name}
    return kwargs


def split_call(inst) -> tuple[list, list]:
    """(inputs, attrs) of an instruction recorded as a call: the arguments laid out as
    ``layout_of`` says, each parameter not given taking its default."""
    values = dict(resolved_kwargs(inst))
    defaults = {}
    for p in params_of(inst.kind) or []:
        if p.kind is p.VAR_POSITIONAL:
            values[p.name] = list(inst.args)
        elif p.default is not p.empty:
            defaults[p.name] = p.default
    in_names, attr_names = layout_of(inst.kind)

    def value(name):
        return values[name] if name in values else defaults.get(name)
    inputs = []
    for name in in_names:
        if name.startswith("*"):
            inputs.extend(value(name[1:]) or [])
        elif name == "consumer_blocks":
            inputs.append(list(value(name) or []))
        else:
            inputs.append(value(name))
    return inputs, [value(name) for name in attr_names]


def call_of(kind, inputs: list, attrs: list) -> tuple[list, dict]:
    """(args, kwargs) of the Schedule method for an instruction given as inputs and attrs."""
    in_names, attr_names = layout_of(kind)
    if len(attrs) > len(attr_names):
        raise ValueError(f"Instruction {getattr(kind, 'name', kind)}: takes {len(attr_names)} attrs "
                         f"({', '.join(attr_names) or 'none'}), got {len(attrs)}")
    variadic = {p.name for p in params_of(kind) or [] if p.kind is p.VAR_POSITIONAL}
    args, kwargs, rest = [], {}, list(inputs)
    for position, name in enumerate(in_names):
        if name.startswith("*"):
            # a spread parameter takes what the parameters after it leave
            later = len(in_names) - position - 1
            values, rest = rest[:len(rest) - later], rest[len(rest) - later:]
            if name[1:] in variadic:
                args.extend(values)
            else:
                kwargs[name[1:]] = values
        elif rest:
            kwargs[name] = rest.pop(0)
    if rest:
        raise ValueError(f"Instruction {getattr(kind, 'name', kind)}: takes {len(in_names)} inputs "
                         f"({', '.join(in_names) or 'none'}), got {len(inputs)}")
    kwargs.update(zip(attr_names, attrs))
    return args, kwargs


# -- Python --------------------------------------------------------------------------------------
def rv_prefix(value) -> str:
    return "b" if isinstance(value, BlockRV) else "l" if isinstance(value, LoopRV) else "v"


def is_rv(value) -> bool:
    """Whether ``value`` is a random variable: named in a trace and matched by identity."""
    return isinstance(value, HANDLES + (Var,))


def python_value(value, name_of) -> str:
    """``value`` as Python: random variables by ``name_of``, strings quoted, numbers as the
    reference compiler prints them (a whole float without ".0"), lists and dicts element-wise."""
    if is_rv(value):
        name = name_of(value)
        if name is not None:
            return name
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, (IntImm, FloatImm)):
        value = value.value
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_value(v, name_of) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted((python_value(k, name_of).strip('"'), python_value(v, name_of))
                       for k, v in value.items())
        return "{" + ", ".join(f'"{k}": {v}' for k, v in items) + "}"
    if callable(value) and hasattr(value, "__name__"):
        return getattr(value, "_source", value.__name__)
    if isinstance(value, (BlockRV, LoopRV)):
        return repr(value)      # a handle no instruction of the trace made
    return str(value)


def python_line(inst, names: dict | None) -> str:
    """The instruction as a line of Python. ``names`` (id -> name) names the random variables
    seen so far and gets names for this instruction's outputs; None shows every one as ``_``."""
    def name_of(v):
        if names is None:
            return "_" if isinstance(v, HANDLES) else None
        return names.get(id(v))
    params = params_of(inst.kind)
    order = {p.name: k for k, p in enumerate(params or [])}
    method = getattr(inst.kind, "method", str(inst.kind))
    texts = [python_value(a, name_of) for a in inst.args]
    for key, value in sorted(resolved_kwargs(inst).items(), key=lambda kv: order.get(kv[0], len(order))):
        if key in _ONLY_IF_GIVEN and not value:
            continue
        text = python_value(value, name_of)
        texts.append(text if _UNNAMED.get(method) == key else f"{key}={text}")
    if inst.decision is not None:
        texts.append(f"decision={python_value(inst.decision, name_of)}")
    call = f"sch.{method}({', '.join(texts)})"
    outs = inst.outputs if isinstance(inst.outputs, list) else \
        [] if inst.outputs is None else [inst.outputs]
    if names is not None:
        for out in outs:
            names.setdefault(id(out), f"{rv_prefix(out)}{len(names)}")
    out_names = [names[id(o)] if names is not None else "_" for o in outs]
    if isinstance(inst.outputs, list):
        lhs = ", ".join(out_names) + ("," if len(outs) == 1 else "")
        return f"{lhs} = {call}" if outs else call
    return f"{out_names[0]} = {call}" if outs else call


# -- JSON ----------------------------------------------------------------------------------------
def json_input(value, names: dict, where: str):
    """An input as the reference JSON writes it: a random variable by its name, None as "None",
    a string in double quotes, numbers as they are, lists element-wise."""
    if is_rv(value) and id(value) in names:
        return names[id(value)]
    if isinstance(value, BlockRV) and value.name is not None:
        return f'"{value.name}"'     # a handle from outside the trace: the block's name finds it
    if isinstance(value, (BlockRV, LoopRV)):
        raise TypeError(f"{where}: uses {value!r}, which no earlier instruction of the trace outputs")
    if value is None:
        return "None"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return [json_input(v, names, where) for v in value]
    return json_attr(value, where)


def json_attr(value, where: str):
    """An attr as JSON: numbers, strings, None, lists and dicts of them."""
    if isinstance(value, (IntImm, FloatImm)):
        return value.value
    if isinstance(value, (list, tuple)):
        return [json_attr(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): json_attr(v, where) for k, v in value.items()}
    if callable(value):
        source = getattr(value, "_source", None)
        if source is not None:
            return source
        raise TypeError(f"{where}: cannot save {value!r} to JSON: give index maps as strings of "
                        "Python lambdas, e.g. \"lambda i, j: (j, i)\"")
    if value is None or isinstance(value, (bool, int, float, str)):
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
    raise TypeError(f"{where}: cannot save {type(value).__name__} {value!r} to JSON")


def from_json_input(value, named: dict, where: str):
    """The inverse of ``json_input``: names become the random variables in ``named``."""
    if isinstance(value, list):
        return [from_json_input(v, named, where) for v in value]
    if not isinstance(value, str):
        return value
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if value == "None":
        return None
    if value not in named:
        raise ValueError(f"{where} uses {value!r}, which no earlier instruction outputs")
    return named[value]


def placeholder(name: str):
    """A fresh random variable standing for the trace output called ``name`` ("b0", "l3", "v5")."""
    if name.startswith("b"):
        return BlockRV()
    if name.startswith("l"):
        return LoopRV()
    return Var(name, "int32")
