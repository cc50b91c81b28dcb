# MetaScheduleApplyDatabase: replace each PrimFunc that a tuning database has a good record of (for
# the target) by its best schedule. Expects kernels as ms.relax_integration.extract_tasks saw them.
"""``relax.transform.MetaScheduleApplyDatabase(database, target)``: use what tuning found. The
pass lives with the tuner, whose database it reads, and is published in ``relax.transform`` (as
in the course) when this module is imported (``import mlc_lab`` does).

    mod = ms.relax_integration.legalize_and_fuse(mod, params)   # the kernels extract_tasks tuned
    mod = relax.transform.MetaScheduleApplyDatabase(db, "llvm --num-cores=1")(mod)
    ex = relax.build(mod, "llvm --num-cores=1")

Each PrimFunc is looked up as the workload ``tuning_workload`` makes of it (the function alone,
named "main"), so kernels that differ only in name share the records of one task. Its best
error-free record for ``target`` is replayed and the scheduled function put back under the
original name, with the original attributes ("global_symbol" included) and "op_pattern"
set to opaque: a later FuseOps (``relax.build(..., opt_level=1)`` runs the default pipeline
again) then leaves the tuned kernel whole instead of fusing it into a new, untuned one.
PrimFuncs without a successful record for ``target`` are left as they are; records measured
for another target are never used.

Before (``fused_matmul_add_relu`` as fusion made it)::

    for ax0, ax1, k in T.grid(T.int64(4), T.int64(32), T.int64(64)):
        with T.block("T_matmul"):

After (the best schedule tuning found: tiled, unrolled, the bias add inlined into the relu;
the relax functions calling it are unchanged)::

    T.func_attr({"global_symbol": "fused_matmul_add_relu", "op_pattern": 8, "tir.noalias": True})
    for ax0_0 in T.unroll(T.int64(2)):
        ...
            for k_0, ax0_2, ax1_2 in T.grid(T.int64(8), T.int64(1), T.int64(32)):
                for k_1 in T.unroll(T.int64(8)):
                    ...
                            with T.block("T_matmul_update"):
"""
from __future__ import annotations

import warnings

from ..ir.module import IRModule
from ..ir.transform import Pass, PassInfo
from ..relax import transform as relax_transform
from ..relax.transform.annotate_tir_op_pattern import OPAQUE
from ..target import Target
from .database import JSONDatabase
from ..tir.function import PrimFunc


def tuning_workload(func: PrimFunc) -> IRModule:
    """The module a kernel is tuned as and looked up by: ``IRModule({"main": func})`` with the
    function's "global_symbol" set to "main" and its "op_pattern" dropped (a fusion annotation
    computed from the body, present or not depending on which passes ran), so that structurally
    equal kernels are one workload whatever they are called."""
    attrs = {key: value for key, value in func.attrs if key != "op_pattern"}
    attrs["global_symbol"] = "main"
    return IRModule({"main": func.replace(attrs=tuple(sorted(attrs.items())))})


class MetaScheduleApplyDatabase(Pass):
    """``database``: a ``ms.JSONDatabase`` (or its work_dir); ``target``: the target the records
    were measured for (required: mlc_lab has no current-target context)."""

    def __init__(self, database, target=None):
        if target is None:
            raise TypeError("MetaScheduleApplyDatabase(database, target) needs the target the "
                            "database was tuned for, e.g. MetaScheduleApplyDatabase(db, "
                            "\"llvm --num-cores=1\"); mlc_lab has no `with target:` context")
        if isinstance(database, str):
            database = JSONDatabase(database)
        self.database, self.target = database, Target(target)
        self.info = PassInfo(0, "MetaScheduleApplyDatabase")

    def transform_module(self, mod, ctx):
        kernels = {gv: f for gv, f in mod.functions.items() if isinstance(f, PrimFunc)}
        if not kernels:
            warnings.warn("MetaScheduleApplyDatabase: the module has no PrimFunc to replace; apply "
                          "it after legalization and fusion, e.g. to "
                          "ms.relax_integration.legalize_and_fuse(mod, params)", stacklevel=3)
        out = IRModule(mod.functions, mod.attrs)
        for gv, func in kernels.items():
            tuned = self.tuned(func)
            if tuned is not None:
                out[gv] = tuned
        return out

    def tuned(self, func: PrimFunc) -> PrimFunc | None:
        """``func`` scheduled by its best record, or None when the database has none."""
        workload = tuning_workload(func)
        best = self.database.best(workload, self.target)
        if best is None:
            return None
        scheduled = best.as_schedule(workload).mod["main"]
        attrs = {**func.attr_dict,
                 **{key: value for key, value in scheduled.attrs if key != "global_symbol"},
                 "op_pattern": OPAQUE, "tir.is_scheduled": True}
        return scheduled.replace(attrs=tuple(sorted(attrs.items())))


relax_transform.MetaScheduleApplyDatabase = MetaScheduleApplyDatabase   # published one layer down
