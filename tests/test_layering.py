"""Layering of mlc_lab: every package imports only packages of its own layer or below (imports
inside functions counted: a late import is still a dependency), in the order LAYERS declares and
ARCHITECTURE.md draws; a lower layer reaches a higher one only through ``mlc_lab.ir.hooks``. Also:
the module-level imports among mlc_lab/ir, tir, arith and script form no cycle, and the base IR
(mlc_lab/ir) never imports the script package.

Imports inside functions are late bindings and are not counted; module-level ones are read from
each file's syntax tree, relative imports resolved, and ``from package import name`` taken as an
import of the submodule ``package.name`` when there is one, else of the package itself."""
from __future__ import annotations

import ast
from pathlib import Path

import mlc_lab

ROOT = Path(mlc_lab.__file__).parent
CORE = ("ir", "tir", "arith", "script")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_modules() -> dict[str, Path]:
    return {module_name(p): p for package in CORE for p in sorted((ROOT / package).rglob("*.py"))}


def imported_modules(name: str, path: Path, known: dict, everywhere: bool = False) -> set[str]:
    """The modules of ``known`` that ``name`` imports at module level (any depth of if/try), or
    anywhere in the file, function bodies included, with ``everywhere``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()

    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    def walk(statements) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.Import):
                found.update(filter(None, (resolve(alias.name) for alias in stmt.names)))
            elif isinstance(stmt, ast.ImportFrom):
                base = package.split(".")
                base = base[:len(base) - stmt.level + 1] if stmt.level else []
                origin = ".".join(base + ([stmt.module] if stmt.module else []))
                for alias in stmt.names:
                    submodule = f"{origin}.{alias.name}"
                    found.add(submodule if submodule in known else resolve(origin))
            elif isinstance(stmt, (ast.If, ast.Try)):
                walk(stmt.body)
                walk(getattr(stmt, "orelse", []))
                walk(getattr(stmt, "finalbody", []))
                for handler in getattr(stmt, "handlers", []):
                    walk(handler.body)
    tree = ast.parse(path.read_text(), str(path))
    if everywhere:
        walk(node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))
    else:
        walk(tree.body)
    found.discard(None)
    # Importing a module runs the __init__ of every package above it first (those above the
    # importer itself are already under way).
    for target in list(found):
        parts = target.split(".")
        for depth in range(2, len(parts)):
            ancestor = ".".join(parts[:depth])
            if ancestor in known and not (name + ".").startswith(ancestor + "."):
                found.add(ancestor)
    found.discard(name)
    return found


def import_graph(everywhere: bool = False) -> dict[str, set[str]]:
    known = core_modules()
    return {name: imported_modules(name, path, known, everywhere) for name, path in known.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(set(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [shortest_cycle(graph, component) for component in components]


def shortest_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    start = min(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]] & component):
            if w == start:
                return path + [start]
            if w not in seen:
                seen.add(w)
                paths.append(path + [w])
    raise AssertionError("a strongly connected component always holds a cycle")


# Bottom to top: (layer, the module prefixes in it). A module belongs to the layer of its longest
# matching prefix.
LAYERS = [
    ("support", ["mlc_lab._env", "mlc_lab._gc", "mlc_lab._html"]),
    ("ir", ["mlc_lab.ir"]),
    ("tir", ["mlc_lab.tir", "mlc_lab.arith"]),
    ("tir passes and schedules", ["mlc_lab.tir.transform", "mlc_lab.tir.schedule"]),
    ("target descriptions", ["mlc_lab.target"]),
    ("codegen", ["mlc_lab.codegen"]),
    ("runtime", ["mlc_lab.runtime"]),
    ("backends", ["mlc_lab.target.backends"]),
    ("build", ["mlc_lab.driver"]),
    ("tensor expressions", ["mlc_lab.te", "mlc_lab.topi"]),
    ("relax", ["mlc_lab.relax"]),
    ("script", ["mlc_lab.script"]),
    ("tensor intrinsics", ["mlc_lab.tir.tensor_intrin"]),   # written in the script dialect
    ("meta_schedule", ["mlc_lab.meta_schedule"]),
    ("frontends", ["mlc_lab.frontend"]),
    ("testing", ["mlc_lab.testing"]),
    ("views", ["mlc_lab.viz"]),
    ("contrib", ["mlc_lab.contrib"]),
    ("the package", ["mlc_lab"]),
]


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def layer_of(module: str) -> int:
    best, level = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    return level


def upward_imports() -> list[str]:
    known = all_modules()
    found = []
    for name, path in known.items():
        for target in imported_modules(name, path, known, everywhere=True):
            if layer_of(target) > layer_of(name):
                found.append(f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})")
    return sorted(found)


def test_every_module_belongs_to_a_layer():
    assert not [name for name in all_modules() if layer_of(name) is None]


def test_packages_import_only_downward():
    """Imports inside functions count too; a lower layer calls a higher one through hooks."""
    found = upward_imports()
    assert not found, f"{len(found)} imports point up:\n" + "\n".join(found)


def test_every_hook_is_provided_by_the_module_it_names():
    import importlib
    from mlc_lab.ir import hooks
    assert hooks.provided() == set(hooks.SERVICES)
    for name, module in hooks.SERVICES.items():
        assert layer_of(module) > layer_of("mlc_lab.ir"), name
        assert f'provide("{name}"' in Path(importlib.import_module(module).__file__).read_text(), \
            f"{module} should provide {name!r}"


def test_core_packages_have_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


def test_base_ir_does_not_import_the_script_package():
    uses = sorted(f"{name} imports {target}" for name, targets in import_graph(everywhere=True).items()
                  if name.startswith("mlc_lab.ir") for target in targets
                  if target.startswith("mlc_lab.script"))
    assert not uses, "\n".join(uses)


def test_the_cycle_finder_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]


def test_every_package_lists_its_public_names():
    """Each package's ``__all__`` is a list of names it defines, without repeats, and the only
    modules in it are its own subpackages and submodules (no leaked imports such as ``sys``)."""
    import importlib
    import types
    problems = []
    for init in sorted(ROOT.rglob("__init__.py")):
        name = module_name(init)
        package = importlib.import_module(name)
        public = getattr(package, "__all__", None)
        if not isinstance(public, list):
            problems.append(f"{name}: no __all__ list")
            continue
        if len(set(public)) != len(public):
            problems.append(f"{name}: repeated names in __all__")
        for entry in public:
            value = getattr(package, entry, None)
            if value is None:
                problems.append(f"{name}: __all__ names {entry!r}, which it does not define")
            elif isinstance(value, types.ModuleType) and not value.__name__.startswith(name + "."):
                problems.append(f"{name}: __all__ names the module {value.__name__}")
    assert not problems, "\n".join(problems)
