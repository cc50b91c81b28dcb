"""ScriptError: a mistake in a script, reported with its file, line and the offending code underlined."""
from __future__ import annotations


class ScriptError(Exception):
    """An ill-formed ``T.prim_func`` / ``I.ir_module``.

    ``str(err)`` is the message followed by the location and the source line with carets under
    the culprit::

        T.axis.remap got kinds "SS" for 3 loop variables: give one kind letter (S or R) per variable
          --> /path/file.py:12:26
           |
        12 |                 vi, vj = T.axis.remap("SS", [i, j, k])
           |                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
    """

    def __init__(self, message: str, filename: str | None = None, line: int | None = None,
                 column: int | None = None, end_column: int | None = None,
                 source_line: str | None = None):
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column          # 0-based, in the real source line
        self.end_column = end_column  # 0-based, exclusive
        self.source_line = source_line

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        column = (self.column or 0) + 1
        out = [self.message, f"  --> {self.filename or '<unknown>'}:{self.line}:{column}"]
        if self.source_line is not None:
            gutter = " " * len(str(self.line))
            src = self.source_line.rstrip("\n")
            start = self.column or 0
            end = self.end_column if self.end_column and self.end_column > start else len(src.rstrip())
            carets = "^" * max(1, end - start)
            out += [f"{gutter} |", f"{self.line} | {src}", f"{gutter} | {' ' * start}{carets}"]
        return "\n".join(out)


def short_traceback(err: ScriptError) -> ScriptError:
    """Drop the parser's own frames: the traceback should end at the user's code, not in here."""
    return err.with_traceback(None)
