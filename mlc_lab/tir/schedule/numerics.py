"""The numerics guard: run the original and the transformed function on the same random inputs
with the reference interpreter and compare every buffer argument afterwards."""
from __future__ import annotations

import numpy as np

from ...ir import hooks
from ..buffer import Buffer, UninitializedReadError
from ..expr import IntImm, Var


def random_arguments(func, seed: int = 0, symbolic_size: int = 8) -> list:
    """Random arrays (and scalars) for ``func``'s parameters; symbolic dims get ``symbolic_size``."""
    rng = np.random.default_rng(seed)
    sizes: dict = {}
    args = []
    for p in func.params:
        if isinstance(p, Var):
            args.append(sizes.setdefault(p, symbolic_size) if "int" in p.dtype else 0.5)
            continue
        shape = []
        for dim in p.shape:
            shape.append(dim.value if isinstance(dim, IntImm) else sizes.setdefault(dim, symbolic_size))
        if "float" in p.dtype:
            args.append(rng.standard_normal(shape).astype(p.dtype))
        elif p.dtype == "bool":
            args.append(rng.integers(0, 2, shape).astype(bool))
        else:
            args.append(rng.integers(-8, 8, shape).astype(p.dtype))
    return args


def run(func, args) -> list:
    interpret = hooks.need("runtime.interpreter")
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interpret(func, arrays)
    return arrays


def compare_with_reference(original, new_func, cache: dict, key: str) -> str | None:
    """None when ``new_func`` matches ``original``; otherwise a description of the difference."""
    if key not in cache:
        args = random_arguments(original)
        cache[key] = (args, run(original, args))
    args, expected = cache[key]
    try:
        got = run(new_func, args)
    except UninitializedReadError as err:  # the step made the program read garbage
        return str(err)
    for p, want, have in zip(original.params, expected, got):
        if isinstance(p, Buffer) and not np.allclose(want, have, rtol=1e-4, atol=1e-4, equal_nan=True):
            bad = np.argwhere(~np.isclose(want, have, rtol=1e-4, atol=1e-4))[0]
            where = ", ".join(str(i) for i in bad)
            return (f"buffer {p.name}[{where}] is {have[tuple(bad)]!r} but the original program "
                    f"gives {want[tuple(bad)]!r}")
    return None
