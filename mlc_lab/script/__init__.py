"""The script language: TVMScript-style Python for IR
(``from mlc_lab.script import ir as I, tir as T, relax as R``)."""
from . import ir, printer, relax, tir
from .errors import ScriptError
from .ir import ir_module   # `@tvm.script.ir_module`, the course's spelling of `@I.ir_module`
from .parser import from_source

__all__ = ["ScriptError", "from_source", "ir", "ir_module", "printer", "relax", "tir"]
