"""Graph-level passes: LegalizeOps, AnnotateTIROpPattern, FuseOps, FuseTIR, FoldConstant,
DeadCodeElimination, BindParams, CanonicalizeBindings, StaticPlanBlockMemory.

Numerics are checked by running each function binding by binding on the reference interpreter
(``run`` below) and comparing with numpy.
"""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, te, tir
from mlc_lab.ir import GlobalVar, structural_equal
from mlc_lab.relax import op as R
from mlc_lab.relax import transform as T
from mlc_lab.tir import PrimFunc

RNG = np.random.default_rng(0)


def tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _planned_output(storages, plan_entry, sinfo):
    _, sid, _ = plan_entry
    dtype = np.dtype(sinfo.dtype)
    count = int(np.prod(sinfo.static_shape, dtype=np.int64))
    return storages[sid][:count * dtype.itemsize].view(dtype).reshape(sinfo.static_shape)


def run(mod, name, *args, use_plan=False):
    func = mod[name]
    env = dict(zip(func.params, args))
    plan = {entry[0]: entry for entry in (func.attrs.get("relax.memory_plan") or ())} if use_plan else {}
    sizes = {}
    for _, sid, nbytes in plan.values():
        sizes[sid] = max(sizes.get(sid, 0), nbytes)
    storages = {sid: np.zeros(n, dtype=np.uint8) for sid, n in sizes.items()}

    def ev(e, var=None):
        if isinstance(e, relax.Var):
            return env[e]
        if isinstance(e, relax.Constant):
            return e.data
        if isinstance(e, relax.Tuple):
            return tuple(ev(f) for f in e.elements)
        if isinstance(e, relax.TupleGetItem):
            return ev(e.tuple_value)[e.index]
        if isinstance(e, relax.Call) and isinstance(e.op, GlobalVar):
            return run(mod, e.op.name_hint, *[ev(a) for a in e.args], use_plan=use_plan)
        if isinstance(e, relax.Call) and e.op.name == "relax.call_tir":
            inputs = [ev(a) for a in e.args[1].elements]
            if var is not None and var.name_hint in plan:
                outs = [_planned_output(storages, plan[var.name_hint], e.sinfo_args[0])]
            else:
                outs = [np.zeros(s.static_shape, dtype=s.dtype) for s in e.sinfo_args]
            mlc_lab.build(mod[e.args[0]], target="python")(*inputs, *outs)
            return outs[0] if len(outs) == 1 else tuple(outs)
        raise NotImplementedError(f"relax_run cannot evaluate {e.script()}")

    for block in func.body.blocks:
        for binding in block.bindings:
            env[binding.var] = ev(binding.value, binding.var)
    result = ev(func.body.body)
    return np.array(result) if isinstance(result, np.ndarray) else result


def call_tir_kernels(func) -> list:
    """The PrimFunc names a relax function calls with R.call_tir, in binding order."""
    return [b.value.args[0].name_hint for block in func.body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.Op)
            and b.value.op.name == "relax.call_tir"]


def high_level_ops(mod, name="main") -> list:
    return [b.value.op.name for block in mod[name].body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.Op)
            and b.value.op.name not in ("relax.call_tir", "relax.call_dps_packed")]


def single_op_module(make, *params):
    bb = relax.BlockBuilder()
    with bb.function("main", list(params)):
        with bb.dataflow():
            gv = bb.emit_output(make(*params))
        bb.emit_func_output(gv)
    return bb.get()


def build_mlp(batch=2):
    """x @ w0 + b0 -> relu -> @ w1 + b1, in high-level ops."""
    x, w0, b0 = tensor("x", (batch, 16)), tensor("w0", (16, 32)), tensor("b0", (32,))
    w1, b1 = tensor("w1", (32, 10)), tensor("b1", (10,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit(R.matmul(x, w0))
            lv1 = bb.emit(R.add(lv0, b0))
            lv2 = bb.emit(R.nn.relu(lv1))
            lv3 = bb.emit(R.matmul(lv2, w1))
            gv = bb.emit_output(R.add(lv3, b1))
        bb.emit_func_output(gv)
    return bb.get()


def mlp_inputs(batch=2):
    return [rand(batch, 16), rand(16, 32), rand(32), rand(32, 10), rand(10)]


def mlp_numpy(x, w0, b0, w1, b1):
    return np.maximum(x @ w0 + b0, 0) @ w1 + b1


def lower(mod):
    return T.AnnotateTIROpPattern()(T.LegalizeOps()(mod))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def conv2d_nchw(x, w, stride=1, pad=0):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), "float32")
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


def max_pool(x, k):
    n, c, h, w = x.shape
    return x[:, :, :h - h % k, :w - w % k].reshape(n, c, h // k, k, w // k, k).max(axis=(3, 5))


# (name, make(*vars), parameter shapes, numpy reference)
OPS = [
    ("add", lambda a, b: R.add(a, b), [(3, 4), (4,)], lambda a, b: a + b),
    ("subtract", lambda a, b: R.subtract(a, b), [(3, 4), (3, 4)], lambda a, b: a - b),
    ("multiply", lambda a, b: R.multiply(a, b), [(3, 1), (1, 4)], lambda a, b: a * b),
    ("divide", lambda a, b: R.divide(a, b), [(3, 4), (3, 4)], lambda a, b: a / b),
    ("ewise_fma", lambda a, b, c: R.ewise_fma(a, b, c), [(3, 4)] * 3, lambda a, b, c: a * b + c),
    ("exp", R.exp, [(3, 4)], np.exp),
    ("tanh", R.tanh, [(3, 4)], np.tanh),
    ("sigmoid", R.sigmoid, [(5,)], lambda a: 1 / (1 + np.exp(-a))),
    ("negative", R.negative, [(5,)], np.negative),
    ("relu", R.nn.relu, [(3, 4)], lambda a: np.maximum(a, 0)),
    ("matmul", R.matmul, [(3, 5), (5, 4)], np.matmul),
    ("batch_matmul", R.matmul, [(2, 3, 5), (5, 4)], np.matmul),
    ("dense", R.nn.dense, [(3, 5), (4, 5)], lambda a, b: a @ b.T),
    ("softmax", R.nn.softmax, [(3, 6)], softmax),
    ("log_softmax", lambda a: R.nn.log_softmax(a, axis=0), [(3, 6)],
     lambda a: np.log(softmax(a, axis=0))),
    ("sum", lambda a: R.sum(a, axis=1), [(3, 4)], lambda a: a.sum(axis=1)),
    ("mean", lambda a: R.mean(a, axis=[0, 1], keepdims=True), [(3, 4)],
     lambda a: a.mean(axis=(0, 1), keepdims=True)),
    ("max", lambda a: R.max(a), [(3, 4)], lambda a: a.max()),
    ("reshape", lambda a: R.reshape(a, (4, -1)), [(2, 6)], lambda a: a.reshape(4, 3)),
    ("flatten", R.flatten, [(2, 3, 4)], lambda a: a.reshape(2, 12)),
    ("permute_dims", lambda a: R.permute_dims(a, [1, 2, 0]), [(2, 3, 4)],
     lambda a: a.transpose(1, 2, 0)),
    ("conv2d", lambda x, w: R.nn.conv2d(x, w, strides=2, padding=1), [(1, 2, 6, 6), (3, 2, 3, 3)],
     lambda x, w: conv2d_nchw(x, w, stride=2, pad=1)),
    ("max_pool2d", lambda x: R.nn.max_pool2d(x, pool_size=2, strides=2), [(1, 2, 4, 6)],
     lambda x: max_pool(x, 2)),
]


@pytest.mark.parametrize("name, make, shapes, reference", OPS, ids=[o[0] for o in OPS])
def test_legalize_ops_computes_each_op_like_numpy(name, make, shapes, reference):
    params = [tensor(f"p{i}", s) for i, s in enumerate(shapes)]
    mod = T.LegalizeOps()(single_op_module(make, *params))
    assert high_level_ops(mod) == []
    assert all(isinstance(f, PrimFunc) for gv, f in mod.functions.items() if gv.name_hint != "main")
    inputs = [rand(*s) for s in shapes]
    if name in ("divide",):
        inputs[1] = np.abs(inputs[1]) + 1
    np.testing.assert_allclose(run(mod, "main", *inputs), reference(*inputs), rtol=1e-4, atol=1e-5)


def test_legalize_ops_names_prim_funcs_after_ops_and_keeps_lowered_calls():
    mod = T.LegalizeOps()(build_mlp())
    assert call_tir_kernels(mod["main"]) == ["matmul", "add", "relu", "matmul1", "add1"]
    assert structural_equal(T.LegalizeOps()(mod), mod)


def test_legalize_ops_mlp_matches_numpy():
    inputs = mlp_inputs()
    mod = T.LegalizeOps()(build_mlp())
    np.testing.assert_allclose(run(mod, "main", *inputs), mlp_numpy(*inputs), rtol=1e-4, atol=1e-5)


def test_legalize_ops_error_names_the_op_without_a_rule():
    R.register_op("relax.test_unlowerable", lambda call: call.args[0].struct_info)
    x = tensor("x", (4,))
    mod = single_op_module(lambda v: R.make_call("relax.test_unlowerable", (v,)), x)
    with pytest.raises(T.LegalizeError, match="relax.test_unlowerable"):
        T.LegalizeOps()(mod)
    lowered = T.LegalizeOps({"relax.test_unlowerable": lambda bb, call: bb.call_te(
        lambda a: te.compute(a.shape, lambda i: a[i] * 2.0, name="double"), call.args[0])})(mod)
    np.testing.assert_allclose(run(lowered, "main", np.ones(4, "float32")), 2 * np.ones(4))


def kind_of(make, *shapes):
    params = [tensor(f"p{i}", s) for i, s in enumerate(shapes)]
    mod = lower(single_op_module(make, *params))
    (kernel,) = call_tir_kernels(mod["main"])
    return mod[kernel].attr_dict["op_pattern"]


def test_annotate_tir_op_pattern_kinds():
    assert kind_of(R.nn.relu, (4, 4)) == 0
    assert kind_of(R.add, (4, 4), (4,)) == 0          # TVM: elemwise when one side reads elemwise
    assert kind_of(R.permute_dims, (4, 3)) == 2
    assert kind_of(lambda a: R.reshape(a, (3, 4)), (4, 3)) == 2
    assert kind_of(lambda a: R.sum(a, axis=1), (4, 3)) == 3
    assert kind_of(R.matmul, (4, 3), (3, 5)) == 4
    assert kind_of(lambda x, w: R.nn.conv2d(x, w), (1, 2, 5, 5), (3, 2, 3, 3)) == 4
    assert kind_of(lambda x: R.nn.max_pool2d(x, 2, 2), (1, 2, 4, 4)) == 4


def test_annotate_tir_op_pattern_broadcast_and_opaque():
    b = te.placeholder((4,), name="b")
    bcast = te.create_prim_func([b, te.compute((3, 4), lambda i, j: b[j], name="B")])
    assert T.analyze_op_pattern(bcast) == 1
    a = te.placeholder((4,), name="a")
    gather = te.create_prim_func([a, te.compute((4,), lambda i: a[3 - i], name="R")])
    assert T.analyze_op_pattern(gather) == 2
    mod = T.AnnotateTIROpPattern()(mlc_lab.IRModule({"bcast": bcast.with_attr("op_pattern", 8)}))
    assert mod["bcast"].attr_dict["op_pattern"] == 8  # an existing annotation is kept


def test_fuse_ops_groups_matmul_add_relu_into_primitive_functions():
    mod = T.FuseOps()(lower(build_mlp()))
    fused = {gv.name_hint: f for gv, f in mod.functions.items()
             if isinstance(f, relax.Function) and "Primitive" in f.attrs}
    assert sorted(fused) == ["fused_matmul1_add1", "fused_matmul_add_relu"]
    assert all(f.attrs["Primitive"] == 1 and "global_symbol" not in f.attrs for f in fused.values())
    assert call_tir_kernels(fused["fused_matmul_add_relu"]) == ["matmul", "add", "relu"]
    calls = [b.value.op.name_hint for b in mod["main"].body.blocks[0].bindings]
    assert calls == ["fused_matmul_add_relu", "fused_matmul1_add1"]
    inputs = mlp_inputs()
    np.testing.assert_allclose(run(mod, "main", *inputs), mlp_numpy(*inputs), rtol=1e-4, atol=1e-5)


def test_fuse_ops_then_fuse_tir_makes_fewer_kernels_with_the_same_results():
    legal = lower(build_mlp())
    mod = T.FuseTIR()(T.FuseOps()(legal))
    assert len(call_tir_kernels(mod["main"])) == 2 < len(call_tir_kernels(legal["main"])) == 5
    assert sorted(gv.name_hint for gv in mod.functions) == ["fused_matmul1_add1",
                                                            "fused_matmul_add_relu", "main"]
    kernel = mod["fused_matmul_add_relu"]
    assert [p.name for p in kernel.params] == ["x", "w0", "b0", "lv2"]
    # the add and relu are inlined into one block; only the matmul's result (a reduction) stays
    assert [b.name for b in kernel.body.block.alloc_buffers] == ["lv"]
    assert block_names(kernel) == ["root", "T_matmul", "T_relu"]
    assert tir.verify(mod)
    inputs = mlp_inputs()
    expected = run(legal, "main", *inputs)
    np.testing.assert_allclose(run(mod, "main", *inputs), expected, rtol=1e-6)
    np.testing.assert_allclose(expected, mlp_numpy(*inputs), rtol=1e-4, atol=1e-5)
    lib = mlc_lab.build(kernel, target="llvm")
    out = np.zeros((2, 32), "float32")
    lib(*inputs[:3], out)
    np.testing.assert_allclose(out, np.maximum(inputs[0] @ inputs[1] + inputs[2], 0), rtol=1e-4,
                               atol=1e-5)


def chain_module(ops, shape=(4, 8)):
    x = tensor("x", shape)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            value = x
            for op in ops[:-1]:
                value = bb.emit(op(value))
            gv = bb.emit_output(ops[-1](value))
        bb.emit_func_output(gv)
    return bb.get()


def fused_groups(mod):
    return sorted(call_tir_kernels(f) for f in mod.functions.values()
                  if isinstance(f, relax.Function) and "Primitive" in f.attrs)


def test_fuse_ops_reduction_absorbs_elementwise_producers_and_ends_the_group():
    mod = T.FuseOps()(lower(chain_module([R.nn.relu, R.exp, lambda v: R.sum(v, axis=1), R.exp])))
    assert fused_groups(mod) == [["relu", "exp", "sum"]]
    assert [b.value.op.name_hint if isinstance(b.value.op, GlobalVar) else b.value.args[0].name_hint
            for b in mod["main"].body.blocks[0].bindings] == ["fused_relu_exp_sum", "exp1"]


def test_fuse_ops_fuses_injective_chains_and_stops_at_values_used_after_the_block():
    mod = T.FuseOps()(lower(chain_module([R.permute_dims, lambda v: R.reshape(v, (2, 16)), R.exp])))
    assert fused_groups(mod) == [["transpose", "reshape", "exp"]]
    x = tensor("x", (4, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit_output(R.exp(x))          # visible after the block: ends the chain
            gv = bb.emit_output(R.nn.relu(a))
        bb.emit_func_output(relax.Tuple([a, gv]))
    assert fused_groups(T.FuseOps()(lower(bb.get()))) == []


def test_fuse_ops_shares_one_function_between_identical_groups():
    x, y = tensor("x", (4, 4)), tensor("y", (4, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit(R.exp(bb.emit(R.nn.relu(x))))
            b = bb.emit(R.exp(bb.emit(R.nn.relu(y))))
            gv = bb.emit_output(R.matmul(a, b))
        bb.emit_func_output(gv)
    mod = T.FuseTIR()(T.FuseOps()(lower(bb.get())))
    assert call_tir_kernels(mod["main"]) == ["fused_relu_exp", "fused_relu_exp", "matmul"]
    xs, ys = rand(4, 4), rand(4, 4)
    np.testing.assert_allclose(run(mod, "main", xs, ys),
                               np.exp(np.maximum(xs, 0)) @ np.exp(np.maximum(ys, 0)), rtol=1e-4)


def test_fuse_tir_conv_bias_relu_pool_network():
    x, w, b = tensor("x", (1, 2, 8, 8)), tensor("w", (4, 2, 3, 3)), tensor("b", (1, 4, 1, 1))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            lv = bb.emit(R.nn.conv2d(x, w, padding=1))
            lv = bb.emit(R.nn.relu(bb.emit(R.add(lv, b))))
            lv = bb.emit(R.nn.max_pool2d(lv, 2, 2))
            gv = bb.emit_output(R.flatten(lv))
        bb.emit_func_output(gv)
    legal = lower(bb.get())
    mod = T.FuseTIR()(T.FuseOps()(legal))
    assert call_tir_kernels(mod["main"])[0] == "fused_conv2d_add_relu"
    assert len(call_tir_kernels(mod["main"])) < len(call_tir_kernels(legal["main"]))
    assert tir.verify(mod)
    xs, ws, bs = rand(1, 2, 8, 8), rand(4, 2, 3, 3), rand(1, 4, 1, 1)
    expected = max_pool(np.maximum(conv2d_nchw(xs, ws, pad=1) + bs, 0), 2).reshape(1, -1)
    np.testing.assert_allclose(run(mod, "main", xs, ws, bs), expected, rtol=1e-4, atol=1e-5)


def test_fold_constant_folds_call_tir_and_op_chains():
    c0, c1 = rand(3, 4), rand(3, 4)
    x = tensor("x", (3, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(R.add(relax.const(c0), relax.const(c1)))
            lv1 = bb.emit(R.nn.relu(lv0))
            gv = bb.emit_output(R.multiply(lv1, x))
        bb.emit_func_output(gv)
    high = bb.get()
    folded = T.FoldConstant()(high)           # high-level ops fold through their legalization
    (lv1_binding,) = [b for b in folded["main"].body.blocks[0].bindings if b.var is lv1]
    assert isinstance(lv1_binding.value, relax.Constant)
    np.testing.assert_allclose(lv1_binding.value.data, np.maximum(c0 + c1, 0), rtol=1e-6)
    last = folded["main"].body.blocks[0].bindings[-1].value
    assert last.op.name == "relax.multiply" and isinstance(last.args[0], relax.Constant)

    legal = T.LegalizeOps()(high)
    mod = T.DeadCodeElimination()(T.FoldConstant()(legal))
    assert call_tir_kernels(mod["main"]) == ["multiply"]
    assert sorted(gv.name_hint for gv in mod.functions) == ["main", "multiply"]
    xs = rand(3, 4)
    np.testing.assert_allclose(run(mod, "main", xs), np.maximum(c0 + c1, 0) * xs, rtol=1e-5)


def test_dead_code_elimination_removes_unused_bindings_and_functions():
    x = tensor("x", (4,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            dead0 = bb.emit(R.exp(x))
            bb.emit(R.nn.relu(dead0))
            gv = bb.emit_output(R.negative(x))
        bb.emit_func_output(gv)
    with bb.function("helper", [tensor("y", (4,))], private=True):
        bb.emit_func_output(relax.const(np.zeros(4, "float32")))
    mod = T.LegalizeOps()(bb.get())
    assert len(mod["main"].body.blocks[0].bindings) == 3
    clean = T.DeadCodeElimination()(mod)
    assert [b.var.name_hint for b in clean["main"].body.blocks[0].bindings] == ["gv"]
    assert sorted(gv.name_hint for gv in clean.functions) == ["main", "negative"]
    kept = T.DeadCodeElimination(entry_functions=["helper"])(mod)
    assert "helper" in kept
    tir_only = mlc_lab.IRModule({"negative": mod["negative"]})
    assert T.DeadCodeElimination()(tir_only)["negative"] is mod["negative"]


def test_bind_params_makes_constants_and_fold_constant_precomputes_weight_ops():
    x, w = tensor("x", (2, 3)), tensor("w", (4, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(R.matmul(x, bb.emit(R.permute_dims(w))))
        bb.emit_func_output(gv)
    mod = bb.get()
    ws = rand(4, 3)
    bound = T.BindParams("main", {"w": ws})(mod)
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    perm = bound["main"].body.blocks[0].bindings[0].value
    assert isinstance(perm.args[0], relax.Constant) and perm.args[0].data is not None
    by_var = T.BindParams("main", {w: mlc_lab.nd.array(ws)})(mod)
    assert structural_equal(by_var, bound)
    folded = T.DeadCodeElimination()(T.FoldConstant()(T.LegalizeOps()(bound)))
    assert call_tir_kernels(folded["main"]) == ["matmul"]
    xs = rand(2, 3)
    np.testing.assert_allclose(run(folded, "main", xs), xs @ ws.T, rtol=1e-5)


def test_bind_params_rejects_wrong_names_shapes_and_dtypes():
    mod = build_mlp()
    with pytest.raises(KeyError, match="not a parameter.*x, w0"):
        T.BindParams("main", {"w9": rand(16, 32)})(mod)
    with pytest.raises(ValueError, match="shape"):
        T.BindParams("main", {"w0": rand(16, 31)})(mod)
    with pytest.raises(TypeError, match="float64"):
        T.BindParams("main", {"w0": np.zeros((16, 32))})(mod)


def test_canonicalize_bindings_removes_trivial_bindings():
    x = tensor("x", (4,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(R.exp(x))
            lv1 = bb.emit(lv0)
            lv2 = bb.emit(R.nn.relu(lv1))
            lv3 = bb.emit(lv2)
            gv = bb.emit_output(lv3)
        bb.emit_func_output(gv)
    mod = T.LegalizeOps()(bb.get())
    canon = T.CanonicalizeBindings()(mod)
    bindings = canon["main"].body.blocks[0].bindings
    assert [b.var.name_hint for b in bindings] == ["lv", "gv"]
    assert bindings[1].value.args[1].elements[0] is bindings[0].var
    assert type(bindings[1].var) is relax.Var and canon["main"].body.body is bindings[1].var
    xs = rand(4)
    np.testing.assert_allclose(run(canon, "main", xs), np.maximum(np.exp(xs), 0), rtol=1e-6)
    assert structural_equal(T.CanonicalizeBindings()(canon), canon)


def chain_of(n):
    ops = [R.exp, R.nn.relu, R.negative, R.tanh, R.sigmoid, R.exp][:n]
    return T.LegalizeOps()(chain_module(ops, shape=(16, 16)))


def test_static_plan_block_memory_reuses_storage_along_a_chain():
    mod = chain_of(6)
    planned = T.StaticPlanBlockMemory()(mod)
    plan = planned["main"].attrs["relax.memory_plan"]
    assert [entry[0] for entry in plan] == ["lv", "lv1", "lv2", "lv3", "lv4"]   # gv is returned
    assert {entry[1] for entry in plan} == {0, 1}       # two storages take turns
    stats = T.memory_stats(planned)
    assert stats["naive_bytes"] == 5 * 16 * 16 * 4
    assert stats["planned_bytes"] == 2 * 16 * 16 * 4 < stats["naive_bytes"]
    assert T.memory_stats(mod) == stats                  # plans on the fly without the attr
    xs = rand(16, 16)
    np.testing.assert_allclose(run(planned, "main", xs, use_plan=True), run(mod, "main", xs), rtol=1e-6)


def test_static_plan_block_memory_keeps_values_alive_until_their_last_use():
    x = tensor("x", (8,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.exp(x), "a")
            b = bb.emit(R.nn.relu(a), "b")
            c = bb.emit(R.negative(b), "c")
            d = bb.emit(R.add(a, c), "d")      # a is still needed here
            e = bb.emit(R.multiply(d, d), "e")
            gv = bb.emit_output(R.add(e, b))  # and b here
        bb.emit_func_output(gv)
    mod = T.StaticPlanBlockMemory()(T.LegalizeOps()(bb.get()))
    # d may not take a's or c's storage (it reads them); e may (their last use has passed)
    assert mod["main"].attrs["relax.memory_plan"] == (("a", 0, 32), ("b", 1, 32), ("c", 2, 32),
                                                      ("d", 3, 32), ("e", 0, 32))
    xs = rand(8)
    ea = np.exp(xs)
    expected = (ea - np.maximum(ea, 0)) ** 2 + np.maximum(ea, 0)
    np.testing.assert_allclose(run(mod, "main", xs, use_plan=True), expected, rtol=1e-5)


def test_default_pipeline_on_the_mlp_with_bound_weights():
    inputs = mlp_inputs()
    params = dict(zip(["w0", "b0", "w1", "b1"], inputs[1:]))
    mod = T.BindParams("main", params)(build_mlp())
    with mlc_lab.transform.PassContext(opt_level=3):
        out = T.default_pipeline()(mod)
    assert call_tir_kernels(out["main"]) == ["fused_matmul_add_relu", "fused_matmul1_add1"]
    assert all(isinstance(f, PrimFunc) for gv, f in out.functions.items() if gv.name_hint != "main")
    assert "relax.memory_plan" in out["main"].attrs
    np.testing.assert_allclose(run(out, "main", inputs[0], use_plan=True), mlp_numpy(*inputs),
                               rtol=1e-4, atol=1e-5)
    assert [p.__name__ for p in T.PASSES][:2] == ["LegalizeOps", "AnnotateTIROpPattern"]


def test_fusion_with_a_symbolic_batch():
    n = tir.Var("n", "int64")
    x, w, b = tensor("x", (n, 16)), tensor("w", (16, 8)), tensor("b", (8,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            lv = bb.emit(R.add(bb.emit(R.matmul(x, w)), b))
            gv = bb.emit_output(R.nn.relu(lv))
        bb.emit_func_output(gv)
    mod = T.FuseTIR()(T.FuseOps()(lower(bb.get())))
    assert call_tir_kernels(mod["main"]) == ["fused_matmul_add_relu"]
    assert tir.verify(mod)
    xs, ws, bs = rand(3, 16), rand(16, 8), rand(8)
    out = np.zeros((3, 8), "float32")
    mlc_lab.build(mod["fused_matmul_add_relu"], target="python")(xs, ws, bs, out)
    np.testing.assert_allclose(out, np.maximum(xs @ ws + bs, 0), rtol=1e-4, atol=1e-5)
    assert T.memory_stats(mod)["tensors"] == 0         # symbolic shapes are not planned


def block_names(func):
    names = []

    class Collect(tir.functor.StmtExprVisitor):
        def visit_Block(self, block):
            names.append(block.name_hint)
            self.generic_visit(block)
    Collect().visit(func.body)
    return names


def test_fuse_tir_copies_a_prim_func_called_twice_with_unique_block_names():
    mod = T.FuseTIR()(T.FuseOps()(lower(chain_module([R.exp, R.exp, R.exp]))))
    (kernel,) = call_tir_kernels(mod["main"])
    assert kernel == "fused_exp_exp_exp"
    assert block_names(mod[kernel]) == ["root", "T_exp_2"]     # inlined into the last copy
    assert tir.verify(mod)
    xs = rand(4, 8) * 0.1
    np.testing.assert_allclose(run(mod, "main", xs), np.exp(np.exp(np.exp(xs))), rtol=1e-5)


def test_fuse_ops_fuses_a_diamond_through_its_post_dominator():
    x, w = tensor("x", (4, 4)), tensor("w", (4, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(R.matmul(x, w))
            b = bb.emit(R.nn.relu(a))
            c = bb.emit(R.negative(a))
            gv = bb.emit_output(R.add(b, c))
        bb.emit_func_output(gv)
    mod = T.FuseTIR()(T.FuseOps()(lower(bb.get())))
    assert call_tir_kernels(mod["main"]) == ["fused_matmul_relu_negative_add"]
    xs, ws = rand(4, 4), rand(4, 4)
    a = xs @ ws
    np.testing.assert_allclose(run(mod, "main", xs, ws), np.maximum(a, 0) - a, rtol=1e-5, atol=1e-6)


# -- sizes known only through the weights, and functions named by text ---------------------------
from mlc_lab.script import ir as I  # noqa: E402
from mlc_lab.script import relax as RS  # noqa: E402
from mlc_lab.script import tir as TS  # noqa: E402


@I.ir_module
class _SizedByWeights:
    @RS.function
    def main(x: RS.Tensor((1, "k"), "float32"), w: RS.Tensor(("n", "k"), "float32"),
             b: RS.Tensor(("n",), "float32")):
        n = TS.int64()
        with RS.dataflow():
            y = RS.add(RS.matmul(x, RS.permute_dims(w)), b)
            RS.output(y)
        return y


def test_bind_params_gives_symbolic_sizes_the_bound_arrays_sizes():
    rng = np.random.default_rng(5)
    w, b = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(3).astype("float32")
    bound = T.BindParams("main", {"w": w, "b": b})(_SizedByWeights)
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    assert bound["main"].params[0].struct_info.shape[1].value == 4   # k, from w
    assert bound["main"].ret_struct_info.shape[1].value == 3         # n, from w and b
    vm = relax.VirtualMachine(relax.build(bound, "llvm"), mlc_lab.cpu())
    x = rng.standard_normal((1, 4)).astype("float32")
    np.testing.assert_allclose(vm["main"](x).numpy(), x @ w.T + b, rtol=1e-5)
    with pytest.raises(ValueError, match="size n is 3 in one bound array but 2"):
        T.BindParams("main", {"w": w, "b": b[:2]})(_SizedByWeights)


@I.ir_module
class _NamedKernel:
    @TS.prim_func
    def double(A: TS.Buffer((4,), "float32"), B: TS.Buffer((4,), "float32")):
        for i in range(4):
            with TS.block("B"):
                vi = TS.axis.remap("S", [i])
                B[vi] = A[vi] * TS.float32(2)

    @RS.function
    def main(x: RS.Tensor((4,), "float32")):
        with RS.dataflow():
            y = RS.call_dps_packed("double", (x,), out_sinfo=RS.Tensor((4,), "float32"))
            RS.output(y)
        return y


def test_a_prim_func_named_by_text_in_call_dps_packed_is_kept_and_run():
    kept = T.DeadCodeElimination()(_NamedKernel)
    assert "double" in [gv.name_hint for gv in kept.functions]
    vm = relax.VirtualMachine(relax.build(_NamedKernel, "llvm"), mlc_lab.cpu())
    np.testing.assert_allclose(vm["main"](np.arange(4, dtype="float32")).numpy(), [0, 2, 4, 6])
