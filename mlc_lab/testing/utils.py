"""pytest helpers for tests written against the reference compiler's ``tvm.testing``: parametrized
fixtures as module-level names (``parameter``, ``parameters``, ``fixture``), ``main`` for running
a test file as a script, marks that skip tests needing hardware (``requires_cuda``, ...), and
``CompareBeforeAfter``, a base class that turns ``before``/``expected``/``transform`` into a test.

This module imports pytest, a test-only dependency; ``mlc_lab.testing`` loads it on first use of
one of its names, so ``import mlc_lab`` works where pytest is not installed."""
from __future__ import annotations

import copy
import functools
import inspect
import itertools
import pickle
import sys
import textwrap
from typing import Any, Callable

import pytest

from .. import ir, tir
from ..runtime.device import cuda
from ..script import tir as T

# -- parametrized fixtures -------------------------------------------------------------------------


def parameter(*values, ids=None, by_dict: dict | None = None):
    """A fixture that takes each of ``values`` in turn; assign it to a module (or class) name and
    each test naming that argument runs once per value (and once per combination when it names
    several). ``ids`` labels the values in test ids; ``by_dict={"label": value, ...}`` gives both.

    >>> size = parameter(1, 10, 100)                       # doctest: +SKIP
    >>> def test_size(size): assert size in (1, 10, 100)   # doctest: +SKIP
    """
    if by_dict is not None:
        if values or ids is not None:
            raise TypeError("parameter: give the values either positionally (with ids=) or as "
                            "by_dict=, not both")
        ids, values = list(by_dict), tuple(by_dict.values())
    if not values:
        raise TypeError("parameter: give at least one value")

    # *_self: the same function serves at module level and in a class body (bound as a method).
    def value_of(*_self, request):
        return request.param
    return pytest.fixture(params=list(values), ids=ids)(value_of)


_GROUPS = itertools.count()


def parameters(*value_sets, ids=None) -> list:
    """Fixtures that take their values together: ``size, dtype = parameters((16, "float32"),
    (512, "float16"))`` runs a test naming ``size`` and ``dtype`` twice (the two pairs), not four
    times as two ``parameter`` calls would.

    The fixtures share a hidden fixture parametrized over the sets; it is added to the namespace
    (module or class body) that calls ``parameters``, where pytest looks for fixtures."""
    if not value_sets:
        raise TypeError("parameters: give at least one set of values")
    width = len(value_sets[0])
    if any(len(s) != width for s in value_sets):
        raise ValueError(f"parameters: every set needs the same number of values, got "
                         f"{[len(s) for s in value_sets]}")
    group = f"_mlc_lab_parameters_{next(_GROUPS)}"
    if ids is None and all(isinstance(v, (str, int, float, bool, type(None)))
                           for values in value_sets for v in values):
        ids = ["-".join(map(str, values)) for values in value_sets]   # e.g. "16-float32"

    def the_set(*_self, request):
        return request.param
    sys._getframe(1).f_locals[group] = pytest.fixture(params=list(value_sets), ids=ids)(the_set)

    def member(position: int):
        def value_of(*_self, **kwargs):
            return kwargs[group][position]
        # pytest reads a fixture's arguments from its signature: name the hidden set fixture.
        value_of.__signature__ = inspect.Signature([
            inspect.Parameter("_self", inspect.Parameter.VAR_POSITIONAL),
            inspect.Parameter(group, inspect.Parameter.KEYWORD_ONLY)])
        return pytest.fixture(value_of)
    return [member(position) for position in range(width)]


def fixture(func: Callable | None = None, *, cache_return_value: bool = False):
    """``pytest.fixture``, as a decorator with or without arguments. With
    ``cache_return_value=True`` the function runs once per distinct set of arguments (the
    parameters it depends on) and each test gets a deep copy of that first result."""
    def make(func):
        return pytest.fixture(_cached(func) if cache_return_value else func)
    return make if func is None else make(func)


def _cached(func: Callable) -> Callable:
    results: dict = {}

    @functools.wraps(func)   # keeps the signature, so pytest still passes the same arguments
    def cached(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:   # unhashable arguments (numpy arrays, lists): compare their pickles
            key = pickle.dumps(key)
        if key not in results:
            results[key] = func(*args, **kwargs)
        return copy.deepcopy(results[key])
    return cached


def main() -> None:
    """Run pytest on the file that calls this (``if __name__ == "__main__": main()``), passing on
    the command line's arguments, and exit with pytest's status."""
    caller = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([caller, *sys.argv[1:]]))


# -- hardware requirements ---------------------------------------------------------------------------


@functools.cache
def _cuda_compute_version() -> tuple[int, int] | None:
    """(major, minor) of the first CUDA GPU, or None when there is none (or no pycuda)."""
    if not cuda(0).exist:
        return None
    try:
        import pycuda.driver as driver
        driver.init()
        return tuple(driver.Device(0).compute_capability())
    except Exception:  # a driver that reports a device but cannot describe it: treat as absent
        return None


class Requirement:
    """A test decorator (and pytest marks) for hardware a test needs: it skips, with ``reason``,
    where ``present()`` says the hardware is missing. Use it bare (``@requires_cuda``), called
    (``@requires_cuda()``), on a class, or as marks (``pytest.param(..., marks=requires_cuda.marks())``)."""

    def __init__(self, reason: str, present: Callable[[], bool], gpu: bool = True):
        self.reason, self.present, self.gpu = reason, present, gpu

    def marks(self, support_required: str = "compile-and-run") -> list:
        """The pytest marks: ``gpu`` (this suite's mark for GPU tests) and a skip where missing.
        ``support_required="compile-only"`` needs nothing: mlc_lab compiles for every target."""
        marks = [pytest.mark.gpu] if self.gpu else []
        if support_required != "compile-only" and not self.present():
            marks.append(pytest.mark.skip(reason=self.reason))
        return marks

    def __call__(self, func=None, *, support_required: str = "compile-and-run"):
        def apply(target):
            for mark in self.marks(support_required):
                target = mark(target)
            return target
        return apply if func is None else apply(func)

    def __repr__(self) -> str:
        return f"<Requirement: {self.reason}>"


def _has_cuda() -> bool:
    return _cuda_compute_version() is not None


def _never() -> bool:
    return False


requires_cuda = Requirement("needs a CUDA GPU (pycuda and a driver that reports one)", _has_cuda)
requires_gpu = Requirement("needs a GPU (mlc_lab runs GPU code on CUDA)", _has_cuda)
requires_tensorcore = Requirement(
    "needs a CUDA GPU with tensor cores (compute capability 7.0 or newer)",
    lambda: (_cuda_compute_version() or (0, 0)) >= (7, 0))
requires_rocm = Requirement("needs ROCm, which mlc_lab has no runtime for", _never)
requires_matrixcore = Requirement("needs AMD matrix cores (ROCm), which mlc_lab has no runtime for",
                                  _never)


def requires_cuda_compute_version(major_version: int, minor_version: int = 0) -> Requirement:
    """A requirement for a CUDA GPU of compute capability ``major_version.minor_version`` or newer."""
    wanted = (major_version, minor_version)
    return Requirement(f"needs a CUDA GPU of compute capability {major_version}.{minor_version} "
                       "or newer", lambda: (_cuda_compute_version() or (0, 0)) >= wanted)


# -- CompareBeforeAfter ------------------------------------------------------------------------------


def _is_fixture(value: Any) -> bool:
    from _pytest.fixtures import getfixturemarker   # no public spelling of "is this a fixture"
    return getfixturemarker(value) is not None


def _takes_self(func: Any) -> bool:
    try:
        return "self" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def _is_exception_type(value: Any) -> bool:
    return inspect.isclass(value) and issubclass(value, BaseException)


def _parse(func: Callable, name: str | None = None) -> tir.PrimFunc:
    """An undecorated script function, parsed as ``@T.prim_func`` would (``name`` set as its
    global symbol when it comes from a class, i.e. an IRModule)."""
    parsed = func if isinstance(func, tir.PrimFunc) else T.prim_func(func)
    return parsed if name is None else parsed.with_attr("global_symbol", name)


def _ir_fixture(value: Any, exceptions_allowed: bool):
    """A fixture (taking the test instance) that gives the IR ``value`` describes, parsed when the
    test runs so that a function the parser refuses fails its own test only."""
    def make(self):
        if isinstance(value, (tir.PrimFunc, ir.IRModule)):
            return value
        if exceptions_allowed and _is_exception_type(value):
            return value
        if inspect.isclass(value):   # a class of script functions: an IRModule of them
            return ir.IRModule({name: _parse(member, name) for name, member in vars(value).items()
                                if not name.startswith("_") and callable(member)})
        if _takes_self(value):
            return value(self)
        return _parse(value)
    return pytest.fixture(make)


def _on_module(module_transform: Callable) -> Callable:
    """``module_transform`` (IRModule -> IRModule) applied to an IRModule, or to a PrimFunc as the
    ``main`` of a module of its own."""
    def run(obj):
        if isinstance(obj, ir.IRModule):
            return module_transform(obj)
        if isinstance(obj, tir.PrimFunc):
            return module_transform(ir.IRModule({"main": obj}))["main"]
        raise TypeError(f"CompareBeforeAfter: `before` must give an IRModule or a PrimFunc, got "
                        f"{type(obj).__name__}")
    return run


class CompareBeforeAfter:
    """Base class of a test of one transformation. A subclass defines

    - ``transform``: a pass (or any IRModule -> IRModule callable), a method returning one, or a
      pytest fixture returning one;
    - ``before`` (or ``Before``): a PrimFunc or IRModule, an undecorated script function (parsed
      when the test runs), a class of them (an IRModule), a method returning IR, or a fixture;
    - ``expected`` (or ``Expected``): the same kinds of IR, or an exception class the
      transformation must raise.

    and gets ``test_compare``, which applies ``transform`` to ``before`` and checks the result is
    structurally equal to ``expected`` (PrimFuncs compared whatever their global symbols), or
    that ``expected`` was raised. Parameters (``parameter``) defined on the class reach fixtures
    and methods as usual, and subclasses inherit all three members.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, exceptions_allowed in (("before", False), ("expected", True)):
            own = [alias for alias in (name, name.capitalize()) if alias in vars(cls)]
            if len(own) > 1:
                raise TypeError(f"{cls.__name__} defines both {own[0]} and {own[1]}; keep one")
            if own:
                value = vars(cls)[own[0]]
                setattr(cls, name, value if _is_fixture(value) else _ir_fixture(value, exceptions_allowed))
        if "transform" in vars(cls):
            cls.transform = cls._transform_fixture(vars(cls)["transform"])

    @classmethod
    def _transform_fixture(cls, transform: Any):
        """A fixture named ``transform`` giving ``_on_module(the module transform)``."""
        if _is_fixture(transform):
            # The subclass's own fixture stays registered under a hidden name, and the
            # `transform` fixture asks for it by that name.
            hidden = f"_{cls.__name__}_transform_given"
            setattr(cls, hidden, transform)

            def wrap(self, **kwargs):
                return _on_module(kwargs[hidden])
            wrap.__signature__ = inspect.Signature([
                inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                inspect.Parameter(hidden, inspect.Parameter.KEYWORD_ONLY)])
            return pytest.fixture(wrap)
        if not callable(transform):
            raise TypeError(f"{cls.__name__}.transform must be a pass, a method or fixture returning "
                            f"one, or a function of an IRModule; got {type(transform).__name__}")
        if _takes_self(transform):
            return pytest.fixture(lambda self: _on_module(transform(self)))
        return pytest.fixture(lambda self: _on_module(transform))

    def test_compare(self, before, expected, transform):
        """``transform(before)`` equals ``expected``, or raises it when it is an exception class."""
        if _is_exception_type(expected):
            with pytest.raises(expected):
                after = transform(before)
                pytest.fail(f"the transformation should have raised {expected.__name__}, but it "
                            f"returned\n{_script(after)}\nfrom\n{_script(before)}")
            return
        if not isinstance(expected, (tir.PrimFunc, ir.IRModule)):
            raise TypeError(f"CompareBeforeAfter: `expected` must give a PrimFunc, an IRModule or "
                            f"an exception class, got {type(expected).__name__}")
        after = transform(before)
        if isinstance(after, tir.PrimFunc) and isinstance(expected, tir.PrimFunc):
            after, expected = (f.with_attr("global_symbol", "main") for f in (after, expected))
        try:
            ir.assert_structural_equal(after, expected)
        except ValueError as err:   # say where, then show all three programs
            programs = (f"before:\n{_script(before)}\nafter:\n{_script(after)}\n"
                        f"expected:\n{_script(expected)}")
            if not hasattr(err, "add_note"):   # Python 3.10
                raise ValueError(f"{err}\n{programs}") from err
            err.add_note(programs)
            raise


def _script(value: Any) -> str:
    try:
        return textwrap.indent(value.script(), "    ")
    except Exception:  # a half-built result may not print: name its type instead
        return f"    <{type(value).__name__}>"


__all__ = ["CompareBeforeAfter", "Requirement", "fixture", "main", "parameter", "parameters",
           "requires_cuda", "requires_cuda_compute_version", "requires_gpu", "requires_matrixcore",
           "requires_rocm", "requires_tensorcore"]
