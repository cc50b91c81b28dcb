"""The attention KV cache builtins, a script module that grows one, and the small GPT: prefill and
decode against numpy at every step, greedy generation token for token, one build for every
prompt length."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax
from mlc_lab.frontend.gpt import GPT, GPTConfig, NumpyDecoder, as_tokens
from mlc_lab.ir import structural_equal
from mlc_lab.relax.lifetime import tensor_sites, upper_bounds
from mlc_lab.relax.transform import PLAN_ATTR
from mlc_lab.runtime.kv_cache import AttentionKVCache, KVCacheError
from mlc_lab.script import ir as I
from mlc_lab.script import relax as R
from mlc_lab.script import tir as T

rng = np.random.default_rng(7)
create = mlc_lab.get_global_func("vm.builtin.attention_kv_cache_create")
append = mlc_lab.get_global_func("vm.builtin.attention_kv_cache_append")
view = mlc_lab.get_global_func("vm.builtin.attention_kv_cache_view")


def rows(k, shape=(2, 3), dtype="float32"):
    return rng.standard_normal((k,) + shape).astype(dtype)


# -- the builtins ---------------------------------------------------------------------------------
def test_create_counts_the_initial_rows_unless_a_fill_count_is_given():
    init = rows(3)
    kept = create(mlc_lab.nd.array(init), (8, 2, 3), -1)
    assert (kept.fill_count, kept.capacity, kept.row_shape, kept.dtype) == (3, 8, (2, 3), "float32")
    np.testing.assert_array_equal(view(kept, (3, 2, 3)).numpy(), init)
    empty = create(init, (8, 2, 3), 0)
    assert empty.fill_count == 0 and view(empty, (0, 2, 3)).shape == (0, 2, 3)
    with pytest.raises(KVCacheError, match="fill count 5 is more than the 3 row"):
        create(init, (8, 2, 3), 5)


def test_append_grows_past_the_reserve_by_doubling_and_keeps_every_row():
    cache = create(rows(1), (4, 2, 3), 0)
    written, moves, buffer = [], 0, cache.data
    for step in range(100):
        new = rows(1 + step % 3)
        assert append(cache, new) is cache      # the same cache comes back: it changes in place
        written.append(new)
        moves, buffer = moves + (cache.data is not buffer), cache.data
    total = sum(len(w) for w in written)
    assert cache.fill_count == total == 199
    assert cache.capacity == 256                # 4 -> 8 -> ... -> 256: six moves for 199 rows
    assert moves == 6
    np.testing.assert_array_equal(view(cache, (total, 2, 3)).numpy(), np.concatenate(written))


def test_a_view_shares_the_rows_and_survives_later_appends():
    cache = create(rows(2), (2, 2, 3), -1)
    first = view(cache)
    snapshot = first.numpy().copy()
    assert np.shares_memory(first.numpy_view(), cache.data)
    append(cache, rows(5))                      # moves the rows to a larger buffer
    np.testing.assert_array_equal(first.numpy(), snapshot)
    np.testing.assert_array_equal(view(cache, (7, 2, 3)).numpy()[:2], snapshot)


def test_pop_and_clear_forget_rows():
    cache = create(rows(6), (8, 2, 3), -1)
    mlc_lab.get_global_func("vm.builtin.attention_kv_cache_array_popn")([cache], 2)
    assert cache.fill_count == 4
    mlc_lab.get_global_func("vm.builtin.attention_kv_cache_array_clear")([cache])
    assert cache.fill_count == 0 and cache.capacity == 8
    with pytest.raises(KVCacheError, match="cannot pop 1"):
        cache.pop(1)


@pytest.mark.parametrize("value, text", [
    (np.zeros((1, 3, 2), "float32"), r"holds rows of shape \(2, 3\), so an appended value must "
                                     r"have shape \(rows, 2, 3\); got \(1, 3, 2\)"),
    (np.zeros((2, 3), "float32"), r"holds rows of shape \(2, 3\), .* got \(2, 3\)"),
    (np.zeros((1, 2, 3), "float16"), "holds float32 rows, cannot append a float16 value; the "
                                     "dtypes must match"),
])
def test_append_errors_name_the_cache_and_the_rule(value, text):
    cache = create(rows(1), (4, 2, 3), 0)
    with pytest.raises(KVCacheError, match=rf"attention_kv_cache_append: {cache.name} " + text):
        append(cache, value)
    assert cache.fill_count == 0


def test_view_errors_name_the_filled_length():
    cache = create(rows(3), (4, 2, 3), -1)
    with pytest.raises(KVCacheError, match=r"cannot view kv_cache#\d+ as shape \(4, 2, 3\): the "
                                           r"first axis must be the 3 row\(s\) filled"):
        view(cache, (4, 2, 3))
    with pytest.raises(KVCacheError, match=r"the rows have shape \(2, 3\)"):
        view(cache, (3, 6))
    with pytest.raises(TypeError, match="expected the cache that attention_kv_cache_create made"):
        view(np.zeros((3, 2, 3)), (3, 2, 3))


# -- a cache as state of compiled functions ------------------------------------------------------
@I.ir_module
class Running:
    @R.function
    def create(init: R.Tensor((1, 2), "float32")):
        cache = R.call_pure_packed("vm.builtin.attention_kv_cache_create", init, R.shape([2, 2]),
                                   R.prim_value(0), sinfo_args=R.Object)
        return cache

    @R.function
    def step(cache: R.Object, x: R.Tensor(("n", 2), "float32"), total: R.Shape(["m"])):
        m = T.int64()
        with R.dataflow():
            doubled = R.multiply(x, R.const(2.0, "float32"))
            grown = R.call_packed("vm.builtin.attention_kv_cache_append", cache, doubled,
                                  sinfo_args=R.Object)
            everything = R.call_pure_packed("vm.builtin.attention_kv_cache_view", grown,
                                            R.shape([m, 2]), sinfo_args=R.Tensor((m, 2), "float32"))
            total_sum = R.sum(everything, axis=[0])
            R.output(total_sum, grown)
        return (total_sum, grown)


def test_a_script_module_grows_a_cache_across_calls_with_a_symbolic_view():
    text = Running.script()
    assert 'R.call_packed("vm.builtin.attention_kv_cache_view", grown, R.shape([m, 2])' in text
    assert structural_equal(mlc_lab.script.from_source(text), Running)
    step = Running["step"]
    view_var = step.body.blocks[0].bindings[2].var
    assert str(view_var.struct_info.shape[0]) == "m"
    vm = relax.VirtualMachine(relax.build(Running, "llvm"), mlc_lab.cpu())
    cache = vm["create"](np.zeros((1, 2), "float32"))
    expected = np.zeros(2, "float32")
    for length in (3, 1, 4, 1):
        x = rng.standard_normal((length, 2)).astype("float32")
        expected += 2 * x.sum(0)
        total, cache = vm["step"](cache, x, (cache.fill_count + length,))
        np.testing.assert_allclose(total.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert isinstance(cache, AttentionKVCache) and cache.fill_count == 9 and cache.capacity == 16
    with pytest.raises(KVCacheError, match="the first axis must be the 10 row"):
        vm["step"](cache, x[:1], (11,))       # stated length disagrees with the cache


# -- the small GPT --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpt():
    model = GPT(GPTConfig(), seed=3)
    vm = relax.VirtualMachine(relax.build(model.to_relax(), "llvm"), mlc_lab.cpu())
    return model, vm


def decode(vm, token, total, caches):
    return vm["decode"](np.array([[token]], "int32"), np.array([total - 1], "int32"), (total,),
                        caches)


def test_prefill_and_every_decode_step_match_numpy(gpt):
    model, vm = gpt
    tokens = list(as_tokens(b"kv cache"))
    caches = vm["create_kv_cache"]()
    logits, caches = vm["prefill"](np.array([tokens], "int32"), caches)
    cached = NumpyDecoder(model)
    np.testing.assert_allclose(cached.prefill(tokens), model.forward_numpy(tokens)[-1:],
                               rtol=1e-4, atol=1e-4)
    for _ in range(6):
        full = model.forward_numpy(tokens)
        np.testing.assert_allclose(logits.numpy(), full[-1:], rtol=1e-4, atol=1e-4)
        token = int(rng.integers(0, 256))          # any token: not only the greedy one
        tokens.append(token)
        logits, caches = decode(vm, token, len(tokens), caches)
        np.testing.assert_allclose(cached.decode(token), model.forward_numpy(tokens)[-1:],
                                   rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(logits.numpy(), model.forward_numpy(tokens)[-1:], rtol=1e-4,
                               atol=1e-4)
    assert all(c.fill_count == len(tokens) for c in caches)


def test_greedy_generation_matches_numpy_token_for_token(gpt):
    model, vm = gpt
    prompt = b"Hello, "
    generated = model.generate(vm, prompt, 16)
    assert generated == model.generate_numpy(prompt, 16)
    assert len(generated) == 16 and len(set(generated)) > 1   # not a constant stream


def test_one_build_prefills_prompts_of_any_length(gpt):
    model, vm = gpt
    prefill = vm.executable.mod["prefill"]
    assert str(prefill.params[0].struct_info.shape[1]) == "n"
    for length in (1, 5, 19):            # 19 rows: the caches grow past their reserve of 16
        tokens = rng.integers(0, 256, length).astype("int32")
        logits, caches = vm["prefill"](tokens[None], vm["create_kv_cache"]())
        np.testing.assert_allclose(logits.numpy(), model.forward_numpy(tokens)[-1:], rtol=1e-4,
                                   atol=1e-4)
        assert {c.fill_count for c in caches} == {length}


def test_the_growing_tensors_are_planned_up_to_the_longest_text(gpt):
    model, vm = gpt
    for name in ("prefill", "decode"):
        func = vm.executable.mod[name]
        assert upper_bounds(func) == {"n": model.config.max_length, "m": model.config.max_length}
        symbolic = {s.name for s in tensor_sites(func)
                    if isinstance(s.sinfo, relax.TensorStructInfo) and s.sinfo.static_shape is None}
        assert symbolic & {entry[0] for entry in func.attrs[PLAN_ATTR]}, name
    model.generate(vm, b"plan", 3)
    stats = vm.memory_stats()
    assert stats["function"] == "decode" and stats["memory_plan"] and stats["plan_fallbacks"] == 0
    too_long = np.ones((1, model.config.max_length + 1), "int32")
    with pytest.raises(ValueError, match='"tir_var_upper_bound" attribute'):
        vm["prefill"](too_long, vm["create_kv_cache"]())


def test_prefill_needs_empty_caches_and_decode_the_right_length(gpt):
    _, vm = gpt
    caches = vm["create_kv_cache"]()
    _, caches = vm["prefill"](np.array([[1, 2, 3]], "int32"), caches)
    with pytest.raises(KVCacheError, match="the first axis must be the 6 row"):
        vm["prefill"](np.array([[4, 5, 6]], "int32"), caches)
    caches = vm["create_kv_cache"]()
    _, caches = vm["prefill"](np.array([[1, 2, 3]], "int32"), caches)
    with pytest.raises(KVCacheError, match="the first axis must be the 4 row"):
        decode(vm, 7, 9, caches)            # total_len 9, but the caches hold 3 + 1 rows
