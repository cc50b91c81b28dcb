"""Calls into lower-level code in destination-passing style: ``call_tir`` runs a PrimFunc of
the module, ``call_dps_packed`` a function found by name at run time. Both allocate the outputs
described by ``out_sinfo`` and pass them after the inputs."""
from __future__ import annotations

from ...ir.module import GlobalVar
from ...tir.expr import PrimExpr
from ..expr import Call, ExternFunc, ShapeExpr, Tuple, as_expr
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo, shape_text, to_shape
from .infer import user_name
from .registry import make_call, register_op


def _out_sinfo(name: str, out_sinfo) -> tuple:
    items = tuple(out_sinfo) if isinstance(out_sinfo, (list, tuple)) else (out_sinfo,)
    if not items:
        raise ValueError(f"{user_name(name)}: out_sinfo must describe at least one output")
    for s in items:
        if not isinstance(s, TensorStructInfo):
            raise TypeError(f"{user_name(name)}: out_sinfo must be a relax.TensorStructInfo (or a "
                            f"list of them), got {s!r}")
        if s.shape is None:
            raise ValueError(f"{user_name(name)}: the output shape must be known to allocate it, "
                             f"got {s.script()}")
    return items


def _infer_dps(call: Call) -> StructInfo:
    name = user_name(call)
    if len(call.args) < 2 or not isinstance(call.args[1], Tuple):
        raise TypeError(f"{name}: arguments must be (callee, Tuple of inputs), got {call.args!r}")
    for i, arg in enumerate(call.args[1].elements):
        if arg.struct_info is None:
            raise TypeError(f"{name}: input {i} has no struct info")
    if not call.sinfo_args:
        raise TypeError(f"{name}: the call has no out_sinfo")
    outs = call.sinfo_args
    return outs[0] if len(outs) == 1 else TupleStructInfo(outs)


def _infer_call_tir(call: Call) -> StructInfo:
    if not call.args or not isinstance(call.args[0], GlobalVar):
        raise TypeError(f"{user_name(call)}: the callee must be a GlobalVar of a PrimFunc, got "
                        f"{call.args[0] if call.args else 'nothing'!r}")
    return _infer_dps(call)


def _infer_call_dps_packed(call: Call) -> StructInfo:
    if not call.args or not isinstance(call.args[0], ExternFunc):
        raise TypeError(f"{user_name(call)}: the callee must be an ExternFunc")
    return _infer_dps(call)


register_op("relax.call_tir", _infer_call_tir)
register_op("relax.call_dps_packed", _infer_call_dps_packed)


def _inputs(args) -> Tuple:
    if isinstance(args, Tuple):
        return args
    if isinstance(args, (list, tuple)):
        return Tuple(args)
    return Tuple((as_expr(args),))


def call_tir(gvar: GlobalVar, args, out_sinfo=None, tir_vars=None, dtype=None) -> Call:
    """Call the PrimFunc ``gvar`` on ``args`` (a Tuple, a list, or one expression), allocating
    outputs described by ``out_sinfo`` (a TensorStructInfo, or a list for several outputs, whose
    result is then a tuple). ``tir_vars`` passes extra symbolic values (a ShapeExpr).

    The 2022 form gives the output shape and dtype apart, ``call_tir(f, args, (1, 128),
    dtype="float32")`` (a list of shapes and of dtypes for several outputs), and names a run-time
    function by a str, which today is ``call_dps_packed``."""
    name = "relax.call_tir"
    if isinstance(tir_vars, str) or _all_str(tir_vars):
        if dtype is not None:
            raise TypeError(f"{user_name(name)}: dtype is given twice (positionally and as dtype=)")
        tir_vars, dtype = None, tir_vars
    out_sinfo = _legacy_out_sinfo(out_sinfo, dtype)
    if isinstance(gvar, (str, ExternFunc)):
        if tir_vars is not None:
            raise TypeError(f"{user_name(name)}: tir_vars only go with a PrimFunc of the module, not "
                            f"the run-time function {gvar!r}")
        return call_dps_packed(gvar, args, out_sinfo)
    if not isinstance(gvar, GlobalVar):
        raise TypeError(f"{user_name(name)}: the callee must be a GlobalVar (from bb.add_func or "
                        f"bb.get().get_global_var), got {gvar!r}")
    call_args = (gvar, _inputs(args))
    if tir_vars is not None:
        call_args += (tir_vars if isinstance(tir_vars, ShapeExpr) else ShapeExpr(tuple(tir_vars)),)
    return make_call(name, call_args, sinfo_args=_out_sinfo(name, out_sinfo))


def _all_str(values) -> bool:
    return isinstance(values, (list, tuple)) and bool(values) and all(isinstance(v, str) for v in values)


def _is_shape(value) -> bool:
    """A 2022 output shape: a ShapeExpr, or a tuple/list of sizes (ints or PrimExprs)."""
    if isinstance(value, ShapeExpr):
        return True
    return isinstance(value, (tuple, list)) and all(
        isinstance(v, (int, PrimExpr)) and not isinstance(v, bool) for v in value)


def _legacy_out_sinfo(out_sinfo, dtype):
    """``out_sinfo`` from a 2022 ``(shape, dtype)`` pair; today's out_sinfo passes through."""
    name = "relax.call_tir"
    shapes = None
    if out_sinfo is None:
        raise TypeError(f"{user_name(name)}: missing out_sinfo, e.g. out_sinfo=R.Tensor((1, 128), "
                        "\"float32\")")
    if _is_shape(out_sinfo):
        shapes = [out_sinfo]
    elif isinstance(out_sinfo, (tuple, list)) and out_sinfo and all(_is_shape(s) for s in out_sinfo):
        shapes = list(out_sinfo)
    if shapes is None:
        if dtype is not None:
            raise TypeError(f"{user_name(name)}: dtype= goes with an output shape (the 2022 form); "
                            "out_sinfo=R.Tensor(shape, dtype) already holds the dtype")
        return out_sinfo
    texts = [shape_text(to_shape(s.values if isinstance(s, ShapeExpr) else s)) for s in shapes]
    if dtype is None:
        raise TypeError(f"{user_name(name)}: the output shape {', '.join(texts)} needs its dtype: "
                        f"write out_sinfo=R.Tensor({texts[0]}, \"float32\") (or the 2022 form "
                        f"with dtype=\"float32\")")
    dtypes = [dtype] * len(shapes) if isinstance(dtype, str) else list(dtype)
    if len(dtypes) != len(shapes) or not all(isinstance(d, str) for d in dtypes):
        raise TypeError(f"{user_name(name)}: {len(shapes)} output shape(s) need as many dtypes, got "
                        f"dtype={dtype!r}")
    sinfos = [TensorStructInfo(s.values if isinstance(s, ShapeExpr) else s, d)
              for s, d in zip(shapes, dtypes)]
    return sinfos[0] if _is_shape(out_sinfo) else sinfos


def call_dps_packed(func, args, out_sinfo) -> Call:
    """Call the run-time function named ``func`` (a str or ExternFunc) on ``args``, allocating
    outputs described by ``out_sinfo`` (as in call_tir)."""
    name = "relax.call_dps_packed"
    callee = ExternFunc(func) if isinstance(func, str) else func
    if not isinstance(callee, ExternFunc):
        raise TypeError(f"{user_name(name)}: func must be a function name (str), got {func!r}")
    return make_call(name, (callee, _inputs(args)), sinfo_args=_out_sinfo(name, out_sinfo))


def _infer_match_cast(call: Call) -> StructInfo:
    name = user_name(call)
    if len(call.args) != 1 or len(call.sinfo_args) != 1:
        raise TypeError(f"{name}: takes a value and the structure info to match it against")
    have, want = call.args[0].struct_info, call.sinfo_args[0]
    if isinstance(want, TensorStructInfo):
        if not isinstance(have, TensorStructInfo):
            got = have.script() if have is not None else "no struct info"
            raise TypeError(f"{name}: the value is not a tensor ({got}), so it cannot match "
                            f"{want.script()}")
        if have.dtype and want.dtype and have.dtype != want.dtype:
            raise TypeError(f"{name}: the value is {have.dtype} but {want.script()} is {want.dtype}")
        if have.ndim >= 0 and want.ndim >= 0 and have.ndim != want.ndim:
            raise ValueError(f"{name}: the value has {have.ndim} dimension(s) but {want.script()} "
                             f"has {want.ndim}")
    return want


register_op("relax.match_cast", _infer_match_cast)


def match_cast(value, struct_info: StructInfo) -> Call:
    """``value``, checked at run time to have ``struct_info``, whose new symbolic sizes it
    defines: ``lv = R.match_cast(x, R.Tensor((n, 4), "float32"))`` gives ``n`` the value's
    first size (an error if the value has another rank, dtype or a size that disagrees)."""
    if not isinstance(struct_info, StructInfo):
        raise TypeError(f"R.match_cast: the second argument must be structure info such as "
                        f"R.Tensor((n, 4), \"float32\"), got {struct_info!r}")
    return make_call("relax.match_cast", (as_expr(value),), sinfo_args=(struct_info,))
