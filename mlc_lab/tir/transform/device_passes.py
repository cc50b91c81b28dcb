# The GPU passes at the end of the lowering pipeline (pipeline.gpu_passes): they take flat lowered
# PrimFuncs, leave them as they are, and keep the kernels made of them in the module's attrs.
"""The two lowering passes a GPU backend runs after ``pipeline.PASSES``, under the PassContext
like every other pass, so instruments see them by name:

* ``SplitHostDevice(target)`` ("split_host_device"): each PrimFunc's kernels, checked against the
  target (``split_host_device.split_host_device``), without barriers;
* ``InjectSync()`` ("inject_sync"): the shared-memory barriers of every kernel (``inject_sync``).
  ``PassContext(config={"cuda.inject_sync": False})`` or ``disabled_pass=["inject_sync"]`` leaves
  them out, to watch the cuda-sim simulator catch the races they prevent.

The kernels, a ``DeviceProgram`` per function name, are in ``device_programs(mod)``.
"""
from __future__ import annotations

from ...ir.module import IRModule
from ...ir.transform import module_pass
from ..function import PrimFunc
from .split_host_device import split_host_device, with_barriers

PROGRAMS_ATTR = "device_programs"


def device_programs(mod: IRModule) -> dict:
    """``{function name: DeviceProgram}`` left in ``mod`` by ``SplitHostDevice``."""
    if PROGRAMS_ATTR not in mod.attrs:
        raise ValueError("the module has no kernels: lower it with the GPU passes "
                         "(tir.transform.gpu_passes) first")
    return mod.attrs[PROGRAMS_ATTR]


@module_pass(name="split_host_device")
class SplitHostDevice:
    """Each PrimFunc of the module as the kernels a GPU launches, checked against ``target``."""

    def __init__(self, target=None):
        self.target = target

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        programs = {gv.name_hint: split_host_device(func, self.target, gv.name_hint, sync=False)
                    for gv, func in mod.functions.items() if isinstance(func, PrimFunc)}
        return IRModule(mod.functions, {**mod.attrs, PROGRAMS_ATTR: programs})


@module_pass(name="inject_sync")
class InjectSync:
    """Barriers wherever the threads of a block could see each other's shared-memory accesses
    out of order, in every kernel ``SplitHostDevice`` made."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        if not ctx.config.get("cuda.inject_sync", True):
            return mod
        programs = {name: with_barriers(p) for name, p in device_programs(mod).items()}
        return IRModule(mod.functions, {**mod.attrs, PROGRAMS_ATTR: programs})
