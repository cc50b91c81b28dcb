"""Target tags: a GPU's name standing for a cuda target with its numbers filled in.

    Target("nvidia/a100")   ==   Target("cuda -model=a100 -arch=sm_80 ...")

Numbers are from NVIDIA's specification sheets (shared memory: the default per-block limit,
before a kernel opts into more).
"""
from __future__ import annotations

_KB = 1024
_MB = 1024 * 1024


def _nvidia(model: str, arch: str, l2_bytes: int) -> dict:
    return {"kind": "cuda", "model": model, "arch": arch, "max-threads-per-block": 1024,
            "max-shared-memory-per-block": 48 * _KB, "warp-size": 32,
            "registers-per-block": 64 * _KB, "l2-cache-size-bytes": l2_bytes}


TAGS: dict[str, dict] = {
    "nvidia/geforce-rtx-2080-ti": _nvidia("geforce-rtx-2080-ti", "sm_75", 5632 * _KB),
    "nvidia/tesla-t4": _nvidia("tesla-t4", "sm_75", 4 * _MB),
    "nvidia/a100": _nvidia("a100", "sm_80", 40 * _MB),
    "nvidia/h100": _nvidia("h100", "sm_90", 50 * _MB),
}
