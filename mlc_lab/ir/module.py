"""IRModule: a set of named functions (loop-level PrimFuncs now, graph-level functions later)."""
from __future__ import annotations

from dataclasses import dataclass

from . import hooks
from .node import Printable


@dataclass(frozen=True)
class GlobalVar:
    """The name of a function in an IRModule; two GlobalVars with the same name are equal."""
    name_hint: str

    def __repr__(self) -> str:
        return f"I.GlobalVar({self.name_hint!r})"


class IRModule(Printable):
    """Functions by name. ``mod["f"]``, ``mod[gv]``, ``mod.functions`` ({GlobalVar: func}),
    ``mod.update_func(gv, f)``, ``mod.script()``, ``mod.show()``."""

    def __init__(self, functions=None, attrs=None):
        self._functions: dict[GlobalVar, object] = {}
        for key, func in (functions or {}).items():
            self._functions[_global_var(key)] = func
        self.attrs = dict(attrs or {})

    @staticmethod
    def from_expr(func, name: str = "main") -> "IRModule":
        return IRModule({name: func})

    @property
    def functions(self) -> dict:
        return dict(self._functions)

    def get_global_var(self, name: str) -> GlobalVar:
        gv = GlobalVar(name)
        if gv not in self._functions:
            raise KeyError(self._missing(name))
        return gv

    def get_global_vars(self) -> list[GlobalVar]:
        return list(self._functions)

    def _missing(self, name: str) -> str:
        known = ", ".join(gv.name_hint for gv in self._functions) or "none"
        return f"IRModule has no function named {name!r}; it has: {known}"

    def __getitem__(self, key):
        gv = _global_var(key)
        if gv not in self._functions:
            raise KeyError(self._missing(gv.name_hint))
        return self._functions[gv]

    def __contains__(self, key) -> bool:
        return _global_var(key) in self._functions

    def __setitem__(self, key, func) -> None:
        self._functions[_global_var(key)] = func

    def update_func(self, key, func) -> None:
        self[key] = func

    def with_function(self, key, func) -> "IRModule":
        """A new module with ``func`` under ``key`` (modules are otherwise treated as values)."""
        mod = IRModule(self._functions, self.attrs)
        mod[key] = func
        return mod

    def remove(self, key) -> None:
        del self._functions[_global_var(key)]

    def items(self):
        return self._functions.items()

    def __iter__(self):
        return iter(self._functions.items())

    def __len__(self) -> int:
        return len(self._functions)

    def show_graph(self, func_name: str = "main", **options) -> None:
        """Draw the relax function ``func_name`` as a graph (``mlc_lab.viz.graph.graph``, which
        takes ``options``): a picture inside Jupyter, one line per node elsewhere."""
        hooks.need("viz.graph")(self, func_name, **options).show()

    __repr__ = Printable.__str__


def _global_var(key) -> GlobalVar:
    if isinstance(key, GlobalVar):
        return key
    if isinstance(key, str):
        return GlobalVar(key)
    raise TypeError(f"functions of an IRModule are named by str or GlobalVar, got {type(key).__name__}")
