"""``relax.vm_build``: the course-era module path of ``relax.build`` and its Executable."""
from .build import build
from .vm import Executable

__all__ = ["Executable", "build"]
