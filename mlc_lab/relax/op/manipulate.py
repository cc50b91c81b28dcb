"""Shape manipulation: reshape, flatten (batch-flatten semantics), permute_dims."""
from __future__ import annotations

from ..expr import Call, ShapeExpr
from ..struct_info import (ShapeStructInfo, TensorStructInfo, dim_value, dims_equal, shape_text,
                           to_dim, to_shape)
from .infer import (check_arity, normalize_axes, product, tensor_arg, unknown_tensor, user_name)
from .registry import make_call, register_op


def _infer_reshape(call: Call) -> TensorStructInfo:
    check_arity(call, ("x", "shape"))
    x = tensor_arg(call, 0, "x")
    target = call.args[1].struct_info
    if not isinstance(target, ShapeStructInfo):
        raise TypeError(f"{user_name(call)}: shape must be a shape (R.shape([...])), got "
                        f"{target.script() if target is not None else call.args[1]!r}")
    if target.values is None:
        return unknown_tensor(x.dtype, target.ndim)
    for d in target.values:
        if (v := dim_value(d)) is not None and v < 0:
            raise ValueError(f"{user_name(call)}: the new shape {shape_text(target.values)} has a "
                             "negative size; -1 is only allowed when calling relax.op.reshape")
    if x.shape is not None and dims_equal(product(x.shape), product(target.values)) is False:
        raise ValueError(f"{user_name(call)}: cannot reshape x {shape_text(x.shape)} "
                         f"({dim_value(product(x.shape))} elements) to {shape_text(target.values)} "
                         f"({dim_value(product(target.values))} elements)")
    return TensorStructInfo(target.values, x.dtype)


register_op("relax.reshape", _infer_reshape)


def reshape(x, shape) -> Call:
    """``x`` with a new ``shape`` of the same number of elements; one entry may be -1 (inferred)."""
    name = "relax.reshape"
    values = list(to_shape(shape, user_name(name)))
    unknown = [i for i, d in enumerate(values) if dim_value(d) == -1]
    if len(unknown) > 1:
        raise ValueError(f"{user_name(name)}: only one dimension of the new shape may be -1, got "
                         f"{shape_text(tuple(values))}")
    if unknown:
        sinfo = getattr(x, "struct_info", None)
        known = [d for i, d in enumerate(values) if i not in unknown]
        total = product(sinfo.shape) if isinstance(sinfo, TensorStructInfo) and sinfo.shape else None
        rest = dim_value(product(known))
        if total is None or dim_value(total) is None or rest is None:
            raise ValueError(f"{user_name(name)}: cannot infer the -1 in {shape_text(tuple(values))} "
                             "without a static input shape; give every dimension")
        if rest == 0 or dim_value(total) % rest:
            raise ValueError(f"{user_name(name)}: cannot reshape x {shape_text(sinfo.shape)} to "
                             f"{shape_text(tuple(values))}: {dim_value(total)} elements do not "
                             f"divide by {rest}")
        values[unknown[0]] = to_dim(dim_value(total) // rest)
    return make_call(name, (x, ShapeExpr(tuple(values))))


def _infer_flatten(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    if x.ndim == 0:
        raise ValueError(f"{user_name(call)}: x is a scalar; flatten keeps axis 0, so x needs at "
                         "least one dimension")
    if x.shape is None:
        return unknown_tensor(x.dtype, 2 if x.ndim >= 0 else -1)
    return TensorStructInfo((x.shape[0], product(x.shape[1:])), x.dtype)


register_op("relax.flatten", _infer_flatten)


def flatten(x) -> Call:
    """Keep axis 0 and flatten the rest: (N, C, H, W) -> (N, C*H*W). This is ``nn.batch_flatten``
    (what a model's ``Flatten`` layer does), not a flattening to one dimension."""
    return make_call("relax.flatten", (x,))


def _infer_permute_dims(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    axes = call.attrs.axes
    if x.ndim < 0:
        return unknown_tensor(x.dtype, len(axes) if axes is not None else -1)
    if axes is not None and len(axes) != x.ndim:
        raise ValueError(f"{user_name(call)}: axes {tuple(axes)} must list each of the {x.ndim} "
                         f"axes of x {shape_text(x.shape)} once")
    order = normalize_axes(call, axes, x.ndim) if axes is not None else tuple(reversed(range(x.ndim)))
    if x.shape is None:
        return unknown_tensor(x.dtype, x.ndim)
    return TensorStructInfo(tuple(x.shape[a] for a in order), x.dtype)


register_op("relax.permute_dims", _infer_permute_dims)


def permute_dims(x, axes=None) -> Call:
    """``x`` with its axes reordered: output axis i is input axis ``axes[i]``; None reverses them
    (a matrix transpose for 2-D ``x``)."""
    return make_call("relax.permute_dims", (x,),
                     {"axes": tuple(axes) if axes is not None else None})
