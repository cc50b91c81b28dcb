"""Code generators: lowered PrimFuncs -> source text for a backend (``render``), kept apart from
compiling and launching it (``mlc_lab.runtime``)."""
from .llvm import CAPABILITIES as LLVM_CAPABILITIES
from .llvm import CodegenError, render, render_module

__all__ = ["CodegenError", "LLVM_CAPABILITIES", "render", "render_module"]
