"""Pass infrastructure: passes are objects that map an IRModule to an IRModule.

    seq = mlc_lab.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.FuseOps()])
    with mlc_lab.transform.PassContext(opt_level=3,
                                       instruments=[mlc_lab.transform.PrintIRBeforeAfter()]):
        mod = seq(mod)

Every pass has ``.info`` (a PassInfo: ``name``, ``opt_level``, ``required``). Calling a pass runs
it under the current PassContext, whose instruments see the module before and after
(``run_before_pass(mod, info)`` / ``run_after_pass(mod, info)``). A Sequential runs a member pass
only when the context enables it: its name is in ``required_pass``, or it is not in
``disabled_pass`` and its ``opt_level`` is at most the context's. With ``MLC_LAB_DEBUG=1`` (or
``config={"debug": True}``) the module is checked after every pass by the pass's ``info.verify``
(by default ``tir.verify`` on its PrimFuncs), and a failure names the pass that broke it.

Graph passes (``relax.transform``) and the loop-level lowering passes (``tir.transform``, made
with ``tir.transform.prim_func_pass``) are the same kind of object, so one PassContext and its
instruments see both: ``mlc_lab.lower`` and ``mlc_lab.build`` run the lowering as a Sequential.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional

from .._env import debug_enabled, in_notebook
from . import hooks
from .module import IRModule


@dataclass(frozen=True)
class PassInfo:
    """What the pass infrastructure knows about a pass."""
    opt_level: int
    name: str
    required: tuple = ()
    traceable: bool = False
    composite: bool = False  # a Sequential: instruments that print skip it and show its members
    # The debug-mode check run after the pass: ``verify(mod, info)`` raises when the pass broke
    # the IR. None means ``tir.verify`` on every PrimFunc; lowering passes check their stage.
    verify: Optional[Callable] = dataclasses.field(default=None, compare=False, repr=False)


class Pass:
    """Base of all passes: ``pass_(mod) -> mod``. Subclasses implement ``transform_module``."""

    info: PassInfo

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"pass {self.info.name} expects an IRModule, got {type(mod).__name__}")
        ctx = PassContext.current()
        if not ctx._should_run(mod, self.info):
            return mod
        ctx._before(mod, self.info)
        result = self.transform_module(mod, ctx)
        if not isinstance(result, IRModule):
            raise TypeError(f"pass {self.info.name} returned {type(result).__name__}, not an IRModule")
        ctx._check(result, self.info)
        ctx._after(result, self.info)
        return result

    def transform_module(self, mod: IRModule, ctx: "PassContext") -> IRModule:
        raise NotImplementedError(f"{type(self).__name__} must implement transform_module(mod, ctx)")

    def with_verify(self, verify: Callable) -> "Pass":
        """This pass, checked in debug mode by ``verify(mod, info)`` instead of its own check."""
        checked = copy.copy(self)
        checked.info = dataclasses.replace(self.info, verify=verify)
        return checked

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info.name} opt_level={self.info.opt_level}>"


class ModulePass(Pass):
    """A pass given by a function ``pass_func(mod, ctx) -> mod``."""

    def __init__(self, pass_func: Callable, info: PassInfo):
        self.pass_func, self.info = pass_func, info

    def transform_module(self, mod: IRModule, ctx: "PassContext") -> IRModule:
        return self.pass_func(mod, ctx)


class FunctionPass(Pass):
    """A pass given by ``pass_func(func, mod, ctx) -> func``, applied to every graph-level
    (relax) function of the module; PrimFuncs are left as they are."""

    def __init__(self, pass_func: Callable, info: PassInfo):
        self.pass_func, self.info = pass_func, info

    def transform_module(self, mod: IRModule, ctx: "PassContext") -> IRModule:
        out = IRModule(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if getattr(func, "_graph_level", False):   # a relax.Function (see ir.node.Node)
                out[gv] = self.pass_func(func, mod, ctx)
        return out


class Sequential(Pass):
    """Run ``passes`` in order; each member runs only when the PassContext enables it."""

    def __init__(self, passes=None, opt_level: int = 0, name: str = "sequential", required=()):
        self.passes = list(passes or [])
        for p in self.passes:
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential: {p!r} is not a pass; did you forget the () in e.g. "
                                "relax.transform.LegalizeOps()?")
        self.info = PassInfo(opt_level, name, tuple(required), composite=True)

    def transform_module(self, mod: IRModule, ctx: "PassContext") -> IRModule:
        for p in self.passes:
            if ctx.pass_enabled(p.info):
                mod = p(mod)
        return mod

    def __repr__(self) -> str:
        return f"Sequential([{', '.join(p.info.name for p in self.passes)}])"


def pass_decorator(cls: type, target, opt_level: int, name: Optional[str], required):
    """What ``module_pass``, ``function_pass`` and ``tir.transform.prim_func_pass`` share: wrap
    a function (or a class with ``transform_module``/``transform_function``) into a ``cls`` pass;
    used bare (``target`` given) or with arguments (``target`` None: returns the decorator)."""
    def create(obj):
        if inspect.isclass(obj):
            @functools.wraps(obj, updated=())
            def make(*args, **kwargs):
                instance = obj(*args, **kwargs)
                info = PassInfo(opt_level, name or obj.__name__, tuple(required))
                method = instance.transform_module if cls is ModulePass else instance.transform_function
                return cls(method, info)
            return make
        if not callable(obj):
            raise TypeError(f"pass decorators wrap a function or a class, got {obj!r}")
        return cls(obj, PassInfo(opt_level, name or obj.__name__, tuple(required)))
    return create(target) if target is not None else create


def module_pass(pass_func=None, opt_level: int = 0, name: Optional[str] = None, required=()):
    """Make a ModulePass from ``f(mod, ctx) -> mod``, or from a class with
    ``transform_module(self, mod, ctx)`` (then calling the class makes the pass)."""
    return pass_decorator(ModulePass, pass_func, opt_level, name, required)


def function_pass(pass_func=None, opt_level: int = 0, name: Optional[str] = None, required=()):
    """Make a FunctionPass from ``f(func, mod, ctx) -> func``, or from a class with
    ``transform_function(self, func, mod, ctx)``."""
    return pass_decorator(FunctionPass, pass_func, opt_level, name, required)


class PassContext:
    """The settings passes run under; use it as a context manager (contexts nest, the innermost
    one is current). Instruments are objects with any of ``enter_pass_ctx()``,
    ``exit_pass_ctx()``, ``should_run(mod, info)``, ``run_before_pass(mod, info)`` and
    ``run_after_pass(mod, info)``."""

    _stack: list = []

    def __init__(self, opt_level: int = 2, required_pass=(), disabled_pass=(), instruments=(),
                 config: Optional[dict] = None):
        self.opt_level = opt_level
        self.required_pass = tuple(required_pass)
        self.disabled_pass = tuple(disabled_pass)
        self.instruments = list(instruments or [])
        self.config = dict(config or {})

    @staticmethod
    def current() -> "PassContext":
        return PassContext._stack[-1] if PassContext._stack else _DEFAULT

    def __enter__(self) -> "PassContext":
        for inst in self.instruments:
            _hook(inst, "enter_pass_ctx")()
        PassContext._stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        PassContext._stack.pop()
        for inst in self.instruments:
            _hook(inst, "exit_pass_ctx")()

    @contextlib.contextmanager
    def with_config(self, **config):
        """Run the enclosed code under a copy of this context with ``config`` entries replaced
        (e.g. ``debug=True``); the instruments carry on as they are, without being entered again."""
        inner = copy.copy(self)
        inner.config = {**self.config, **config}
        PassContext._stack.append(inner)
        try:
            yield inner
        finally:
            PassContext._stack.pop()

    def pass_enabled(self, info: PassInfo) -> bool:
        if info.name in self.disabled_pass:
            return False
        return info.name in self.required_pass or self.opt_level >= info.opt_level

    @property
    def debug(self) -> bool:
        return bool(self.config.get("debug")) or debug_enabled()

    def _should_run(self, mod, info) -> bool:
        return all(_hook(inst, "should_run", True)(mod, info) for inst in self.instruments)

    def _before(self, mod, info) -> None:
        for inst in self.instruments:
            _hook(inst, "run_before_pass")(mod, info)

    def _after(self, mod, info) -> None:
        for inst in self.instruments:
            _hook(inst, "run_after_pass")(mod, info)

    def _check(self, mod: IRModule, info: PassInfo) -> None:
        if self.debug and not info.composite:
            (info.verify or _verify_well_formed)(mod, info)


_DEFAULT = PassContext()


def _verify_well_formed(mod: IRModule, info: PassInfo) -> None:
    # tir sits above this module, so its verifier (the module mlc_lab.tir.verify) is a hook.
    tir_verify = hooks.need("tir.verify")
    try:
        tir_verify.verify(mod)
    except tir_verify.VerifyError as err:
        raise tir_verify.VerifyError(f"pass {info.name} produced ill-formed IR: {err}", err.func_name,
                          err.node, err.rule) from None


def _hook(instrument, name: str, default=None):
    method = getattr(instrument, name, None)
    if method is not None:
        return method
    return (lambda *args: default)


# -- instruments ---------------------------------------------------------------------------------
class PassInstrument:
    """Base class of instruments (optional: any object with the hook methods works)."""

    def enter_pass_ctx(self) -> None: pass
    def exit_pass_ctx(self) -> None: pass
    def should_run(self, mod, info) -> bool: return True
    def run_before_pass(self, mod, info) -> None: pass
    def run_after_pass(self, mod, info) -> None: pass


def pass_instrument(cls):
    """Course-era decorator for instrument classes; any class with the hook methods works."""
    return cls


class PrintIRBeforeAfter(PassInstrument):
    """Print the module before and after every pass (Sequentials only show their members)."""

    def __init__(self, file=None):
        self.file = file

    def _print(self, header: str, mod) -> None:
        print(f"# {header}\n{mod.script()}", file=self.file or sys.stdout)

    def run_before_pass(self, mod, info) -> None:
        if not info.composite:
            self._print(f"Before pass: {info.name}", mod)

    def run_after_pass(self, mod, info) -> None:
        if not info.composite:
            self._print(f"After pass: {info.name}", mod)


class PrintBeforeAll(PrintIRBeforeAfter):
    """Print the module before every pass."""

    def run_after_pass(self, mod, info) -> None: pass


class PrintAfterAll(PrintIRBeforeAfter):
    """Print the module after every pass."""

    def run_before_pass(self, mod, info) -> None: pass


class PrintDiff(PassInstrument):
    """Show what every pass changed (Sequentials show their members). In a terminal, and always
    with ``file=``, each pass prints as it finishes: ``# <name>`` and the unified text diff
    (``mlc_lab.ir.diff``) or ``(no change)``. In Jupyter the passes of one PassContext show as one
    ``mlc_lab.viz.PipelineView``: a section per pass with its time and lines changed, the passes
    that changed nothing closed; it appears at the first pass and is updated in place (every
    ``REFRESH_S`` seconds at most, and when the context exits). ``show=False`` only records:
    ``view()`` gives that view of the last context's passes either way.

        diffs = PrintDiff(show=False)
        with PassContext(instruments=[diffs]):
            ex = relax.build(mod, "llvm")
        diffs.view()
    """

    REFRESH_S = 0.5   # each update resends the whole view, so a long pipeline is not sent per pass

    def __init__(self, file=None, show: bool = True):
        self.file, self.show = file, show
        self.records: list = []   # PassDiff in the order the passes started; None while one runs
        self._open: list = []     # per running pass: (slot, before, depth, start), None for a Sequential
        self._display, self._refreshed, self._stale = None, 0.0, False

    def enter_pass_ctx(self) -> None:
        self.records, self._open = [], []
        self._display, self._refreshed, self._stale = None, 0.0, False

    def exit_pass_ctx(self) -> None:
        if self._stale:
            self._refresh(final=True)

    def run_before_pass(self, mod, info) -> None:
        if info.composite:
            self._open.append(None)
            return
        depth = sum(entry is not None for entry in self._open)
        self.records.append(None)
        self._open.append((len(self.records) - 1, mod.script(), depth, time.perf_counter()))

    def run_after_pass(self, mod, info) -> None:
        entry = self._open.pop()
        if entry is None:
            return
        slot, before, depth, start = entry
        seconds = time.perf_counter() - start
        PassDiff = hooks.need("viz.ir_diff").PassDiff
        record = self.records[slot] = PassDiff(info.name, seconds, before, mod.script(), depth)
        if not self.show:
            return
        if self.file is None and in_notebook():
            self._stale = True
            self._refresh(final=False)
            return
        print(f"# {record.name}", file=self.file or sys.stdout)
        print(record.diff.text() or "(no change)", file=self.file or sys.stdout)

    def view(self, mod=None, title: str = "pass pipeline"):
        """The passes recorded so far as an ``mlc_lab.viz.PipelineView`` (``mod``: the result)."""
        return hooks.need("viz.ir_diff").PipelineView([r for r in self.records if r is not None], mod, title)

    def _refresh(self, final: bool) -> None:
        from IPython.display import display
        now = time.perf_counter()
        if self._display is None:
            self._display = display(self.view(), display_id=True)
        elif final or now - self._refreshed >= self.REFRESH_S:
            self._display.update(self.view())
        else:
            return
        self._refreshed, self._stale = now, False


class PassTimingInstrument(PassInstrument):
    """Time every pass; ``render()`` gives a table (nested passes are indented). Timings are
    cleared when a PassContext holding the instrument is entered."""

    def __init__(self):
        self.timings: list = []
        self._open: list = []

    def enter_pass_ctx(self) -> None:
        self.timings, self._open = [], []

    def run_before_pass(self, mod, info) -> None:
        self._open.append((info.name, len(self._open), time.perf_counter(), len(self.timings)))
        self.timings.append(None)

    def run_after_pass(self, mod, info) -> None:
        name, depth, start, slot = self._open.pop()
        self.timings[slot] = (name, depth, time.perf_counter() - start)

    def render(self) -> str:
        lines = ["pass timings (ms):"]
        for name, depth, seconds in (t for t in self.timings if t is not None):
            lines.append(f"{'  ' * (depth + 1)}{name}: {seconds * 1e3:.3f}")
        return "\n".join(lines)


__all__ = ["FunctionPass", "ModulePass", "Pass", "PassContext", "PassInfo", "PassInstrument",
           "PassTimingInstrument", "PrintAfterAll", "PrintBeforeAll", "PrintDiff",
           "PrintIRBeforeAfter", "Sequential", "function_pass", "module_pass", "pass_decorator",
           "pass_instrument"]
