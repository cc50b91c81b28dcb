"""Packed functions: Python functions registered under a global name, so compiled graphs can call
them at run time (``R.call_dps_packed("env.linear", ...)``).

    @mlc_lab.register_func("env.linear")
    def linear(x, w, b, out):                       # NDArrays; the output is passed last
        out.copyfrom(x.numpy() @ w.numpy().T + b.numpy())

    mlc_lab.get_global_func("env.linear")

``register_global_func`` is the same function under the reference compiler's current name.

A torch function can work on the same memory without copying:
``torch.from_dlpack(x.numpy_view())`` views an NDArray as a tensor.
"""
from __future__ import annotations

from typing import Callable, Optional

_REGISTRY: dict[str, Callable] = {}


def register_func(func_name, f: Optional[Callable] = None, override: bool = False):
    """Register ``f`` under ``func_name``. Usable as a decorator, ``@register_func("env.f")``,
    or bare, ``@register_func`` (the function's own name is used). Registering a name twice
    raises a ValueError unless ``override=True``."""
    if callable(func_name) and f is None:
        return _register(func_name.__name__, func_name, override)
    if not isinstance(func_name, str) or not func_name:
        raise TypeError(f"register_func: the name must be a non-empty str, got {func_name!r}")
    if f is not None:
        return _register(func_name, f, override)
    return lambda func: _register(func_name, func, override)


# The reference compiler's current name: the same registry, decorator and override forms.
register_global_func = register_func


def _register(name: str, func: Callable, override: bool) -> Callable:
    if not callable(func):
        raise TypeError(f"register_func({name!r}): expected a function, got {func!r}")
    if name in _REGISTRY and not override and _REGISTRY[name] is not func:
        raise ValueError(f"register_func: a function is already registered as {name!r}; pass "
                         "override=True to replace it")
    _REGISTRY[name] = func
    return func


def get_global_func(name: str, allow_missing: bool = False) -> Optional[Callable]:
    """The function registered as ``name``; None when missing and ``allow_missing`` is set,
    else a KeyError listing similar names."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if allow_missing:
        return None
    prefix = name.split(".")[0] + "."
    near = sorted(n for n in _REGISTRY if n.startswith(prefix))
    hint = f"; registered under {prefix}*: {', '.join(near)}" if near else ""
    raise KeyError(f"no packed function is registered as {name!r}{hint}; register one with "
                   f"@mlc_lab.register_func({name!r})")


def list_global_func_names() -> list[str]:
    return sorted(_REGISTRY)


def remove_global_func(name: str) -> None:
    """Unregister ``name`` (a KeyError when it is not registered)."""
    if name not in _REGISTRY:
        raise KeyError(f"no packed function is registered as {name!r}")
    del _REGISTRY[name]


__all__ = ["get_global_func", "list_global_func_names", "register_func", "register_global_func",
           "remove_global_func"]

# The run-time builtins that compiled functions call by name (``vm.builtin.*``) register here.
from . import kv_cache  # noqa: E402,F401
