"""Code generators: lowered PrimFuncs -> source text for a backend (``render``), kept apart from
compiling and launching it (``mlc_lab.runtime``)."""
from .llvm import CodegenError, llvm_target, render, render_module

__all__ = ["CodegenError", "llvm_target", "render", "render_module"]
