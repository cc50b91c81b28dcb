"""Weight-only quantization: the packed int4/int8 format and its numpy reference, the kernel that
decodes as it multiplies (static and symbolic rows), its batch-1 default schedule, and the
QuantizeWeights pass on a small MLP and an attention projection."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, te, tir
from mlc_lab.relax import op as R
from mlc_lab.relax.analysis import leaves
from mlc_lab.relax.transform import QuantizeError, QuantizeWeights, default_schedule_report
from mlc_lab.relax.transform.default_schedule import default_schedule, schedule_kernel
from mlc_lab.relax.transform.default_schedule_dequant import is_dequant_gemv
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip
from mlc_lab.relax.transform.quantize import output_error_bound
from mlc_lab.topi.quantize import dequantize, error_bound, quantize, quantized_matmul, unpack

rng = np.random.default_rng(7)


# -- the format -----------------------------------------------------------------------------------
@pytest.mark.parametrize("bits, group_size", [(4, 32), (4, 8), (4, 64), (8, 32), (8, 1), (8, 16)])
def test_round_trip_is_within_half_a_step(bits, group_size):
    w = (rng.standard_normal((128, 24)) * rng.uniform(0.01, 3, (1, 24))).astype("float32")
    packed, scale = quantize(w, bits, group_size)
    assert scale.shape == (128 // group_size, 24)
    back = dequantize(packed, scale, bits)
    assert np.all(np.abs(back - w) <= error_bound(scale, group_size) * (1 + 1e-6) + 1e-7)
    qmax = 7 if bits == 4 else 127
    # the largest weight of each group is represented exactly, at +-qmax steps
    q = unpack(packed, bits).reshape(128 // group_size, group_size, 24)
    assert np.all(np.abs(q).max(axis=1) == qmax)


def test_int4_int8_error_sizes_and_float16_scales():
    w = rng.standard_normal((256, 64)).astype("float32")
    errors = {}
    for bits in (4, 8):
        for scale_dtype in ("float32", "float16"):
            packed, scale = quantize(w, bits, 32, scale_dtype)
            assert scale.dtype == scale_dtype
            diff = dequantize(packed, scale, bits) - w
            assert np.all(np.abs(diff) <= error_bound(scale, 32) * (1 + 1e-6) + 1e-7)
            errors[bits, scale_dtype] = np.sqrt((diff ** 2).mean()) / np.sqrt((w ** 2).mean())
    assert 0.05 < errors[4, "float32"] < 0.15   # about s / sqrt(12) with s = max / 7
    assert errors[8, "float32"] < errors[4, "float32"] / 10


def test_a_zero_group_quantizes_to_zero():
    w = np.zeros((32, 3), "float32")
    w[:, 1] = 1
    packed, scale = quantize(w, 4, 32)
    assert scale[0].tolist() == [0, 1 / 7, 0] or np.allclose(scale[0], [0, 1 / 7, 0])
    np.testing.assert_array_equal(dequantize(packed, scale, 4), w)


def test_int4_packing_by_hand():
    # one column, k = 16: two words; row r of a word sits in bits 4r .. 4r+3 as q + 7
    w = np.zeros((16, 1), "float32")
    w[0, 0], w[1, 0], w[7, 0], w[8, 0], w[15, 0] = 7, -7, 1, -2, 3   # scale 1: q = w
    packed, scale = quantize(w, 4, 16)
    assert packed.dtype == np.uint32 and packed.shape == (2, 1) and scale[0, 0] == 1
    fields = [7] * 16
    fields[0], fields[1], fields[7], fields[8], fields[15] = 14, 0, 8, 5, 10
    assert int(packed[0, 0]) == sum(f << (4 * r) for r, f in enumerate(fields[:8]))
    assert int(packed[0, 0]) == 0x8777_770E
    assert int(packed[1, 0]) == 0xA777_7775


def test_int8_layout_is_one_signed_byte_per_weight():
    w = np.array([[127.0, -3.0], [-127.0, 1.5], [0.4, 0.5]], "float32")[:2]
    packed, scale = quantize(w, 8, 2)
    assert packed.dtype == np.int8 and packed.tolist() == [[127, -127], [-127, 64]]
    np.testing.assert_allclose(scale, [[1.0, 3.0 / 127]])


@pytest.mark.parametrize("shape, bits, group_size, text", [
    ((100, 8), 4, 32, r"group_size 32 does not divide the reduction dimension k=100"),
    ((96, 8), 4, 12, r"int4 packs 8 values a word along k, so group_size must be a multiple of 8"),
    ((96, 8), 3, 32, r"bits must be 4 or 8"),
    ((4, 8, 8), 8, 4, r"must be 2-D"),
])
def test_quantize_refuses_shapes_that_do_not_fit(shape, bits, group_size, text):
    with pytest.raises(QuantizeError, match=text):
        quantize(np.ones(shape, "float32"), bits, group_size, name="w_up")
    with pytest.raises(QuantizeError, match="quantize w_up"):
        quantize(np.ones(shape, "float32"), bits, group_size, name="w_up")


# -- the fused kernel -----------------------------------------------------------------------------
def _kernel(rows, k, n, bits, group_size=32, scale_dtype="float32"):
    x = te.placeholder(rows + (k,), "float32", "x")
    shapes = {4: ((k // 8, n), "uint32"), 8: ((k, n), "int8")}[bits]
    packed = te.placeholder(*shapes, name="packed")
    scale = te.placeholder((k // group_size, n), scale_dtype, "scale")
    return te.create_prim_func([x, packed, scale, quantized_matmul(x, packed, scale, bits)])


def _run(func, x, packed, scale, out_shape):
    out = mlc_lab.nd.empty(out_shape, "float32")
    mlc_lab.build(func, "llvm")(*(mlc_lab.nd.array(a) for a in (x, packed, scale)), out)
    return out.numpy()


@pytest.mark.parametrize("bits, scale_dtype", [(4, "float32"), (8, "float32"), (4, "float16")])
def test_kernel_matches_numpy_static_and_scheduled(bits, scale_dtype):
    k, n = 256, 96
    w = rng.standard_normal((k, n)).astype("float32")
    packed, scale = quantize(w, bits, 32, scale_dtype)
    x = rng.standard_normal((1, k)).astype("float32")
    want = x @ dequantize(packed, scale, bits)
    func = _kernel((1,), k, n, bits, 32, scale_dtype)
    scheduled = schedule_kernel(func, 16, 2)
    assert scheduled.attr_dict["default_schedule"] == "dequant_gemv"
    for f in (func, scheduled):
        np.testing.assert_allclose(_run(f, x, packed, scale, (1, n)), want, rtol=1e-4, atol=1e-4)
    # the float weight is never stored: the kernel allocates nothing of its size
    assert "alloc_buffer" not in scheduled.script()


def test_decode_schedule_is_a_trace_that_replays():
    func = _kernel((1,), 128, 64, 8, 16)
    rule, sch = default_schedule(func, 16, 2)
    assert rule == "dequant_gemv"
    verify_trace_roundtrip(sch, func)
    # a float GEMV or a batch of rows is left to the other rules
    rows = tir.Schedule(_kernel((4,), 128, 64, 8, 16))
    assert not is_dequant_gemv(rows.get(rows.get_block("quantized_matmul")))
    x, w = te.placeholder((1, 128), name="x"), te.placeholder((128, 64), name="w")
    float_gemv = te.create_prim_func([x, w, mlc_lab.topi.matmul(x, w)])
    gemv = tir.Schedule(float_gemv)
    assert not is_dequant_gemv(gemv.get(gemv.get_block("T_matmul")))
    # ... unless asked: a float layer at batch 1 streams its weights the same way ("gemv")
    assert is_dequant_gemv(gemv.get(gemv.get_block("T_matmul")), floats=True)
    rule, sch = default_schedule(float_gemv, 16, 2)
    assert rule == "gemv"
    verify_trace_roundtrip(sch, float_gemv)
    args = [rng.standard_normal((1, 128)).astype("float32"),
            rng.standard_normal((128, 64)).astype("float32"), np.zeros((1, 64), "float32")]
    mlc_lab.build(sch.mod, "llvm")["main"](*args)
    np.testing.assert_allclose(args[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)


def test_kernel_with_a_symbolic_number_of_rows():
    k, n = 64, 32
    w = rng.standard_normal((k, n)).astype("float32")
    packed, scale = quantize(w, 4, 16)
    lib = mlc_lab.build(_kernel((tir.Var("m", "int64"),), k, n, 4, 16), "llvm")
    for m in (1, 3, 8):
        x = rng.standard_normal((m, k)).astype("float32")
        out = mlc_lab.nd.empty((m, n), "float32")
        lib(*(mlc_lab.nd.array(a) for a in (x, packed, scale)), out)
        np.testing.assert_allclose(out.numpy(), x @ dequantize(packed, scale, 4), rtol=1e-4, atol=1e-4)


def test_kernel_refuses_mismatched_shapes():
    x = te.placeholder((1, 64), "float32", "x")
    with pytest.raises(ValueError, match="shapes do not fit int4"):
        quantized_matmul(x, te.placeholder((4, 8), "uint32", "p"), te.placeholder((2, 8), name="s"), 4)
    with pytest.raises(TypeError, match="int8 wants float32 x, int8 packed"):
        quantized_matmul(x, te.placeholder((64, 8), "uint32", "p"), te.placeholder((2, 8), name="s"), 8)


# -- the pass -------------------------------------------------------------------------------------
def _mlp(rows):
    x = relax.Var("x", relax.TensorStructInfo(rows + (64,), "float32"))
    params = [relax.Var(name, relax.TensorStructInfo(shape, "float32"))
              for name, shape in (("w1", (64, 128)), ("b1", (128,)), ("w2", (32, 128)))]
    bb = relax.BlockBuilder()
    with bb.function("main", [x, *params]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(R.add(R.matmul(x, params[0]), params[1])))
            out = bb.emit_output(R.matmul(h, R.permute_dims(params[2])))   # a Linear layer: x W^T
        bb.emit_func_output(out)
    return bb.get()


WEIGHTS = {"w1": (rng.standard_normal((64, 128)) / 8).astype("float32"),
           "b1": rng.standard_normal(128).astype("float32"),
           "w2": (rng.standard_normal((32, 128)) / 11).astype("float32")}


def _constants(mod):
    return [leaf for leaf in leaves(mod["main"]) if isinstance(leaf, relax.Constant)]


@pytest.mark.parametrize("bits", [4, 8])
def test_pass_on_an_mlp_with_symbolic_batch(bits):
    mod = relax.transform.BindParams("main", WEIGHTS)(_mlp((tir.Var("n", "int64"),)))
    quantizer = QuantizeWeights(bits=bits)
    qmod = quantizer(mod)
    assert quantizer.quantized == 2
    kinds = sorted(c.data.dtype.name for c in _constants(qmod))
    # no float weight is left: the constants are the packed values, the scales, and the bias
    assert kinds == sorted(["float32"] * 3 + [("uint32" if bits == 4 else "int8")] * 2)
    assert all(c.data.size < 64 * 128 for c in _constants(qmod) if c.data.dtype == np.float32)
    ex = relax.build(qmod, "llvm")
    kernels = [gv.name_hint for gv in ex.mod.functions if gv.name_hint != "main"]
    assert len(kernels) == 2 and any("add_relu" in name for name in kernels)
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    w1 = dequantize(*quantize(WEIGHTS["w1"], bits, 32), bits)
    w2 = dequantize(*quantize(np.ascontiguousarray(WEIGHTS["w2"].T), bits, 32), bits)
    for m in (1, 5):
        x = rng.standard_normal((m, 64)).astype("float32")
        h = np.maximum(x @ w1 + WEIGHTS["b1"], 0)
        np.testing.assert_allclose(vm["main"](x).numpy(), h @ w2, rtol=1e-4, atol=1e-4)
        # against the float model: within the error the scales allow
        h_float = np.maximum(x @ WEIGHTS["w1"] + WEIGHTS["b1"], 0)
        _, s1 = quantize(WEIGHTS["w1"], bits, 32)
        assert np.all(np.abs(x @ w1 - x @ WEIGHTS["w1"]) <= output_error_bound(x, s1, 32) + 1e-5)
        relative = np.abs(vm["main"](x).numpy() - h_float @ WEIGHTS["w2"].T).max() / \
            np.abs(h_float @ WEIGHTS["w2"].T).max()
        assert relative < (0.3 if bits == 4 else 0.03)


def test_batch_one_gets_the_decode_schedule_with_its_epilogue():
    mod = relax.transform.BindParams("main", WEIGHTS)(_mlp((1,)))
    ex = relax.build(QuantizeWeights(bits=4)(mod), "llvm")
    report = default_schedule_report(ex.mod)
    assert set(report.values()) == {"dequant_gemv"}, report
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    x = rng.standard_normal((1, 64)).astype("float32")
    w1 = dequantize(*quantize(WEIGHTS["w1"], 4, 32), 4)
    w2 = dequantize(*quantize(np.ascontiguousarray(WEIGHTS["w2"].T), 4, 32), 4)
    np.testing.assert_allclose(vm["main"](x).numpy(), np.maximum(x @ w1 + WEIGHTS["b1"], 0) @ w2,
                               rtol=1e-4, atol=1e-4)


def test_pass_on_an_attention_projection_with_symbolic_length():
    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((1, n, 64), "float32"))
    w = relax.Var("w_qkv", relax.TensorStructInfo((64, 192), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            qkv = bb.emit(R.split(R.matmul(x, w), 3, axis=-1))
            q, k = (bb.emit(R.reshape(relax.TupleGetItem(qkv, i), (1, n, 4, 16))) for i in range(2))
            scores = bb.emit_output(R.matmul(R.permute_dims(q, [0, 2, 1, 3]),
                                             R.permute_dims(k, [0, 2, 3, 1])))
        bb.emit_func_output(scores)
    weight = (rng.standard_normal((64, 192)) / 8).astype("float32")
    qmod = QuantizeWeights(bits=8, group_size=16)(relax.transform.BindParams("main", {"w_qkv": weight})(bb.get()))
    vm = relax.VirtualMachine(relax.build(qmod, "llvm"), mlc_lab.cpu())
    wq = dequantize(*quantize(weight, 8, 16), 8)
    for length in (1, 6):
        xs = rng.standard_normal((1, length, 64)).astype("float32")
        heads = [(xs @ wq)[..., 64 * i:64 * (i + 1)].reshape(1, length, 4, 16).transpose(0, 2, 1, 3)
                 for i in range(2)]
        want = heads[0] @ heads[1].transpose(0, 1, 3, 2)
        np.testing.assert_allclose(vm["main"](xs).numpy(), want, rtol=1e-3, atol=1e-3)


def test_pass_error_names_the_binding_and_the_rule():
    x = relax.Var("x", relax.TensorStructInfo((1, 100), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.matmul(x, relax.const(np.ones((100, 16), "float32"))), "proj")
        bb.emit_func_output(out)
    with pytest.raises(QuantizeError, match=r"the weight of proj = R.matmul\(...\) in main: group_size "
                                            r"32 does not divide the reduction dimension k=100"):
        QuantizeWeights(bits=4)(bb.get())
    kept = QuantizeWeights(bits=4, skip=["proj"])
    kept(bb.get())
    assert kept.quantized == 0
    with pytest.raises(QuantizeError, match="bits must be 4 or 8"):
        QuantizeWeights(bits=2)
