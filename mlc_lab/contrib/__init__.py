"""Helpers around the compiler, under the course's ``tvm.contrib`` names: ``utils.tempdir`` and
``clang.create_llvm``."""
from . import clang, utils

__all__ = ["clang", "utils"]
