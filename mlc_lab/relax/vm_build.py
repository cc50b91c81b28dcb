"""``relax.vm_build.build``: the course-era module path of ``relax.build``."""
from .build import build

__all__ = ["build"]
