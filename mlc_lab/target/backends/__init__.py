"""The backends that ship with mlc_lab, one module each; importing a module registers it.

A new backend: a module here with a Backend subclass (see ``mlc_lab.target.backend``) and a
``register_backend(...)`` call, imported below.
"""
from . import cuda, llvm, python

__all__ = ["cuda", "llvm", "python"]
