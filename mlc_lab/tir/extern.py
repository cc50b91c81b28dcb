"""Calls of external functions by name (``T.call_extern``): the IR form, and the C math library
functions every backend can run."""
from __future__ import annotations

from . import dtype as dt
from .expr import Call, StringImm, const, convert

# The C math library functions ``T.call_extern`` reaches, by name: argument count. As in C, the
# "f"-suffixed variant (``expf``) takes and returns float32, the plain one (``exp``) float64.
EXTERN_MATH = {
    **dict.fromkeys(("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin",
                     "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
                     "atanh", "erf", "fabs", "floor", "ceil", "trunc", "round", "rint",
                     "nearbyint"), 1),
    **dict.fromkeys(("pow", "atan2", "fmod", "fmin", "fmax", "hypot", "copysign"), 2),
}


def extern_math(name: str) -> tuple[str, str, int] | None:
    """(base name, parameter dtype, argument count) of the C math function ``name`` ("expf" ->
    ("exp", "float32", 1)), or None when ``name`` is not one."""
    if name in EXTERN_MATH:
        return name, "float64", EXTERN_MATH[name]
    if name.endswith("f") and name[:-1] in EXTERN_MATH:
        return name[:-1], "float32", EXTERN_MATH[name[:-1]]
    return None


def require_extern_math(name: str, runner: str, note: str = "") -> tuple[str, str, int]:
    """``extern_math(name)``, or the NotImplementedError that ``runner`` (the backend) gives for a
    function it cannot run; ``note`` adds what that backend leaves out."""
    math = extern_math(name)
    if math is None:
        raise NotImplementedError(
            f"T.call_extern({name!r}): {runner} runs only C math library functions "
            f"({', '.join(sorted(EXTERN_MATH))}, and their float32 'f' variants{note}); write "
            f"{name} as loops in a T.prim_func instead (for a tensor intrinsic, as its impl)")
    return math


def call_extern(dtype: str, func_name: str, *args) -> Call:
    """A call of the external function ``func_name`` returning ``dtype``:
    ``Call(dtype, "call_extern", (StringImm(func_name), *args))``. The arguments of a C math
    function are converted to its parameter type; other names are kept as given and resolved (or
    refused) when the program is compiled or run."""
    if not isinstance(func_name, str) or not func_name:
        raise TypeError(f"call_extern: the function name must be a non-empty str, got {func_name!r}")
    dtype = dt.check_dtype(dtype)
    math = extern_math(func_name)
    if math is None:
        return Call(dtype, "call_extern", (StringImm(func_name), *(convert(a) for a in args)))
    _, param, count = math
    if len(args) != count:
        raise TypeError(f"call_extern: {func_name} takes {count} argument(s), got {len(args)}")
    converted = [const(a, param) if isinstance(a, (int, float)) else convert(a).astype(param)
                 for a in args]
    return Call(dtype, "call_extern", (StringImm(func_name), *converted))
