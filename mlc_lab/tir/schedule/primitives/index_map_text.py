"""Index maps as text: the trace records an index map (or a pad value) as the source of a Python
lambda, which replays in a scope holding ``T`` and the function's parameters by name."""
from __future__ import annotations

import ast
import inspect

from ....arith import simplify
from ....ir import hooks, structural_equal
from ... import expr as E
from ...index_map import AXIS_SEPARATOR, IndexMap
from ...stmt_functor import free_vars


def name_scope(func) -> dict:
    """The names an index map's text may use besides its arguments: the function's scalar
    parameters, its parameter buffers and the variables of their shapes."""
    env = {}
    for p in func.params:
        buf = func.buffer_map.get(p) if hasattr(func, "buffer_map") else None
        if buf is not None:
            env[buf.name] = buf
            for v in free_vars(tuple(buf.shape)):
                env.setdefault(v.name, v)
        elif isinstance(p, E.Var):
            env.setdefault(p.name, p)
        else:
            env.setdefault(p.name, p)
    return env


def index_map_source(index_map, ndim=None, dtype="int32", env=None) -> str:
    """The source text of an index map given as a function, an IndexMap or a string."""
    if isinstance(index_map, str):
        text = index_map.strip()
        _compile_index_map(text, env)
        return text
    if isinstance(index_map, IndexMap):
        return index_map.to_python()
    if not callable(index_map):
        raise TypeError("sch.transform_layout: parameter 'index_map' expects a lambda such as "
                        f"`lambda i, j: (j, i)`, an IndexMap or its source string, got "
                        f"{type(index_map).__name__}")
    text = _lambda_text(index_map, env) if _arity(index_map) is not None else None
    if text is not None:
        return text
    return _printed_lambda(index_map, ndim, dtype)


def pad_value_source(pad_value, ndim, dtype, env, buffer_dtype="float32"):
    """What the trace records for a pad value: a Python int as is, anything else as the source
    of a lambda of the new indices (a float as the constant of the buffer's dtype it stands for,
    since a trace saved as text may print 0.0 as 0)."""
    if isinstance(pad_value, int) and not isinstance(pad_value, bool):
        return pad_value
    if isinstance(pad_value, float) and "float" in buffer_dtype:
        pad_value = E.const(pad_value, buffer_dtype)
    if isinstance(pad_value, (str, IndexMap)) or callable(pad_value):
        return index_map_source(pad_value, ndim, dtype, env)
    value = E.convert(pad_value)
    return IndexMap.from_func(lambda *indices: value, ndim, index_dtype=dtype).to_python()


def _compile_index_map(text: str, env=None):
    T = hooks.need("script.tir")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        tree = None
    if tree is None or not isinstance(tree.body, ast.Lambda):
        raise TypeError("sch.transform_layout: parameter 'index_map' expects a lambda such as "
                        f"`lambda i, j: (j, i)` or its source string, got {text!r}")
    scope = dict(env or {})
    scope.update({"T": T, "__builtins__": {}})
    return eval(compile(tree, "<index_map>", "eval"), scope)


def build_index_map(text: str, ndim, dtype, env, fail, what="index map"):
    """``(IndexMap, axis_separators)`` of the recorded text; a name the text uses that the
    function does not define is refused through ``fail(message)``."""
    try:
        return IndexMap.from_func_with_separators(_compile_index_map(text, env), ndim,
                                                  index_dtype=dtype)
    except NameError as exc:
        fail(f"the {what} {text} uses {exc.args[0].split(chr(39))[1] if chr(39) in exc.args[0] else exc}, "
             "which is neither one of its arguments nor a parameter of the function (or a "
             "variable of a parameter's shape)")


def _arity(fn) -> int | None:
    """The number of indices a function takes, None when it takes ``*args``."""
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return len(params)


def _lambda_text(fn, env=None) -> str | None:
    """The lambda's own source, cut out of the line(s) it was written on; None when unavailable
    or when the text found does not compute the same map."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    names = list(inspect.signature(fn).parameters)
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in inspect.signature(fn).parameters.values()):
        return None
    start = source.find("lambda")
    while start >= 0:
        for end in range(len(source), start, -1):
            piece = source[start:end].strip()
            try:
                tree = ast.parse(piece, mode="eval")
            except SyntaxError:
                continue
            if isinstance(tree.body, ast.Lambda) and [a.arg for a in tree.body.args.args] == names:
                try:
                    same = _same_map(fn, _compile_index_map(piece, env), names)
                except TypeError:
                    same = False
                if same:
                    return piece
            break
        start = source.find("lambda", start + 1)
    return None


def _same_map(f, g, names) -> bool:
    variables = [E.Var(n) for n in names]
    try:
        return structural_equal(_apply(f, variables, "int32"), _apply(g, variables, "int32"))
    except Exception:  # a map that fails on symbolic input cannot be recorded from its text
        return False


def _printed_lambda(fn, ndim, dtype) -> str:
    imap, separators = IndexMap.from_func_with_separators(fn, ndim, index_dtype=dtype)
    outs = [_script(e) for e in imap.final_indices]
    for pos in reversed(separators):
        outs.insert(pos, repr(AXIS_SEPARATOR))
    names = ", ".join(v.name for v in imap.initial_indices)
    return f"lambda {names}: ({', '.join(outs)}{',' if len(outs) == 1 else ''})"


def _script(e) -> str:
    return e.script()


def _apply(fn, variables, dtype) -> tuple:
    out = fn(*variables)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return tuple(o if isinstance(o, str) else simplify(E.const(o, dtype) if isinstance(o, int)
                                                       else E.convert(o)) for o in out)
