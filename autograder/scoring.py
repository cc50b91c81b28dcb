"""A test cell's score, decided the way nbgrader decides it, so that a notebook graded by
``mlc-lab grade`` and by ``nbgrader autograde`` earns the same points.

nbgrader gives a graded code cell 0 when it raises (or writes to stderr); when the cell ends with
an expression whose displayed value (text/plain) reads as a number, that number is the points
earned; otherwise all of the cell's points. Here the cell runs in the grader's process, so
``run_cell`` returns that last value and ``earned`` turns it into points.
"""
from __future__ import annotations

import ast
import io
import linecache
import math
import tokenize


class BadScore(Exception):
    """A test cell's value is a number no score can be (the test's fault, not the student's)."""


def _register(code: str, filename: str) -> None:
    """The text of ``filename`` registered with linecache, so that ``inspect.getsource`` (which
    ``@T.prim_func`` and ``@I.ir_module`` use) finds it as it would in a notebook."""
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)


def compile_cell(code: str, filename: str):
    _register(code, filename)
    return compile(code, filename, "exec")


def run_cell(code: str, filename: str, namespace: dict):
    """Run ``code`` as IPython runs a cell: every statement, and the value of the last one when
    it is an expression not silenced by a trailing ``;`` (else None)."""
    _register(code, filename)
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if last is None:
        return None
    value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
    return None if _ends_with_semicolon(code) else value


def _ends_with_semicolon(code: str) -> bool:
    skip = {tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT}
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]
    return bool(tokens) and tokens[-1].type == tokenize.OP and tokens[-1].string == ";"


def earned(value, max_points: float) -> tuple[float, str]:
    """(points, message for the student) for a cell that ran to its end with last value ``value``.
    A number counts as nbgrader reads it: its repr must parse as a float (True or a numpy 2
    scalar does not, and earns all points there as here). BadScore for a number below 0, above
    ``max_points`` or NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return float(max_points), "passed"
    try:
        points = float(repr(value))
    except ValueError:
        return float(max_points), "passed"
    if math.isnan(points) or not 0 <= points <= max_points:
        raise BadScore(f"the test cell's value {points!r} is not a score between 0 and {max_points:g}")
    message = getattr(value, "message", "") or (
        "passed" if points >= max_points else f"earned {points:g} of {max_points:g} points")
    return points, message
