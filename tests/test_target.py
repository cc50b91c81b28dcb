"""Targets (parsing, tags, canonical printing, errors), the Backend registry that mlc_lab.build
and relax.build dispatch through, and device memory."""
import pickle

import llvmlite.binding as llvm
import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd, relax, te, topi
from mlc_lab.runtime.interpreter import Program
from mlc_lab.runtime.module import Module
from mlc_lab.target import (TAGS, Attr, Backend, Capabilities, Target, TargetKind,
                            available_targets, get_backend, get_kind, register_backend,
                            unregister_backend)


def add_one_func(n=64):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return te.create_prim_func([A, B]).with_attr("global_symbol", "add_one")


# -- parsing ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["llvm -num-cores=2", "llvm --num-cores=2",
                                  "llvm -num_cores=2", "  llvm   --num-cores=2 "])
def test_both_option_spellings_parse_the_same(text):
    target = Target(text)
    assert target.kind.name == "llvm" and target.attrs["num-cores"] == 2
    assert target == Target("llvm -num-cores=2") == Target({"kind": "llvm", "num-cores": 2})


def test_attribute_types_defaults_and_properties():
    target = Target("llvm -bounds-check -fast-math=false -mcpu=skylake")
    assert dict(target.attrs) == {"num-cores": None, "fast-math": False, "bounds-check": True,
                                  "mcpu": "skylake"}
    assert (target.bounds_check, target.mcpu, target.device_type) == (True, "skylake", "cpu")
    cuda = Target("cuda -arch=sm_80")
    assert (cuda.arch, cuda.max_num_threads, cuda.thread_warp_size) == ("sm_80", 1024, 32)
    assert cuda.attrs["max-shared-memory-per-block"] == 49152 and cuda.device_type == "cuda"
    with pytest.raises(AttributeError, match="target 'llvm' has no attribute 'max_num_threads'"):
        Target("llvm").max_num_threads
    with pytest.raises(AttributeError, match="immutable"):
        target.host = Target("llvm")


def test_python_and_numpy_are_one_kind():
    assert Target("numpy") == Target("python") and str(Target("numpy")) == "python"
    assert Target("cuda-sim").kind.name == "cuda-sim"


def test_tags_fill_in_a_gpu():
    h100 = Target("nvidia/h100")
    assert h100.kind.name == "cuda" and (h100.arch, h100.model) == ("sm_90", "h100")
    assert Target("nvidia/geforce-rtx-2080-ti").arch == "sm_75"
    assert Target("nvidia/a100").attrs["l2-cache-size-bytes"] == 40 * 1024 * 1024
    assert Target("nvidia/a100 -max-threads-per-block=512").max_num_threads == 512
    assert all(Target(tag).kind.name == spec["kind"] for tag, spec in TAGS.items())


def test_host_and_copies():
    target = Target("cuda", host="llvm -num-cores=2")
    assert target.host == Target("llvm -num-cores=2")
    assert Target(target) == target and Target(str(target)) == target
    assert Target({"kind": "cuda", "host": "llvm -num-cores=2"}) == target
    assert Target("cuda", host="llvm") != target
    with pytest.raises(ValueError, match="names its host already"):
        Target(str(target), host="llvm")


@pytest.mark.parametrize("text", [
    "llvm", "llvm -num-cores=2 -bounds-check", "llvm -mcpu=skylake -fast-math", "python",
    "cuda", "cuda -arch=sm_80", "cuda-sim -warp-size=16", "nvidia/h100",
    "nvidia/geforce-rtx-2080-ti"])
def test_canonical_string_round_trips(text):
    target = Target(text)
    assert Target(str(target)) == target and eval(repr(target)) == target
    assert str(Target(str(target))) == str(target)
    assert pickle.loads(pickle.dumps(target)) == target
    assert len({target, Target(str(target))}) == 1


def test_canonical_string_uses_table_order_and_drops_defaults():
    assert str(Target("llvm --mcpu=skylake -bounds-check=1 -num-cores=4 -fast-math=0")) == (
        "llvm -num-cores=4 -bounds-check -mcpu=skylake")
    assert str(Target("cuda -warp-size=32")) == "cuda"


def test_unknown_kind_lists_known_kinds():
    with pytest.raises(ValueError, match=r"unknown target kind 'lvm' \(did you mean 'llvm'\?\); "
                                         r"known kinds: cuda, cuda-sim, llvm, numpy, opencl, python"):
        Target("lvm")
    with pytest.raises(ValueError, match="unknown target tag 'nvidia/h10' .*known tags: .*h100"):
        Target("nvidia/h10")


def test_unknown_attribute_names_it_and_lists_known_ones():
    with pytest.raises(ValueError, match="target 'llvm' has no option -foo; known options: "
                                         "-num-cores, -fast-math, -bounds-check, -mcpu"):
        Target("llvm -foo=1")
    with pytest.raises(ValueError, match=r"no option -bounds-chek \(did you mean 'bounds-check'"):
        Target("llvm -bounds_chek")
    with pytest.raises(ValueError, match="-num-cores must be a positive integer, got 0"):
        Target("llvm -num-cores=0")
    with pytest.raises(ValueError, match="-mcpu expects a str"):
        Target("llvm -mcpu")
    with pytest.raises(ValueError, match="should look like -key=value"):
        Target("llvm num-cores=2")
    with pytest.raises(TypeError):
        Target(3)


# -- backends --------------------------------------------------------------------------------------
def test_builtin_backends_and_unavailable_targets():
    assert available_targets() == ["cuda", "cuda-sim", "llvm", "numpy", "opencl", "python"]
    assert get_backend("numpy") is get_backend("python")
    assert get_backend("llvm").capabilities.supports_parallel
    assert not get_backend("llvm").capabilities.supports_thread_binding
    assert get_backend("cuda").capabilities.supports_thread_binding
    kinds = ("llvm", "python", "cuda", "cuda-sim", "opencl")
    assert [k for k in kinds if Target(k).capabilities.gpu] == ["cuda", "cuda-sim", "opencl"]
    assert [Target(k).capabilities.dialect for k in kinds] == ["llvm", None, "cuda", "cuda", "opencl"]
    # kernels nobody bound to GPU threads cannot run on a GPU: the error says what to bind
    with pytest.raises(ValueError, match="is not bound to a GPU block or thread and is outside "
                                         "every kernel"):
        relax.build(_relu_module(), target="nvidia/a100")


def test_render_gives_source_text():
    func = add_one_func()
    llvm_backend = get_backend("llvm")
    lowered = llvm_backend.lower(mlc_lab.IRModule({"add_one": func}), Target("llvm"))
    assert 'define i32 @"add_one"' in llvm_backend.render({"add_one": lowered["add_one"]})
    checked = llvm_backend.render({"add_one": lowered["add_one"]}, Target("llvm -bounds-check"))
    assert "mlc_bounds_error" in checked
    assert "T.prim_func" in get_backend("python").render({"add_one": func})


class ToyBackend(Backend):
    """Runs PrimFuncs on the interpreter and counts what the driver asked of it."""
    kind = "toy"
    new_kind = TargetKind("toy", "cpu", {"scale": Attr(int, None, "unused")})
    capabilities = Capabilities(device_type="cpu")

    def __init__(self):
        self.calls = []

    def lower(self, mod, target):
        self.calls.append(("lower", str(target)))
        return mod

    def compile(self, functions, target):
        self.calls.append(("compile", sorted(functions)))
        return functions

    def load(self, compiled, target, signatures):
        self.calls.append(("load", sorted(signatures)))
        return Module({name: Program(f, name) for name, f in compiled.items()}, self.kind)


@pytest.fixture
def toy():
    backend = register_backend(ToyBackend())
    try:
        yield backend
    finally:
        unregister_backend("toy")


def test_a_registered_backend_is_used_by_build(toy):
    lib = mlc_lab.build(add_one_func(), target="toy -scale=3")
    assert toy.calls == [("lower", "toy -scale=3"), ("compile", ["add_one"]),
                         ("load", ["add_one"])]
    a, b = nd.array(np.arange(64, dtype="float32")), nd.empty((64,), "float32")
    lib(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(64, dtype="float32") + 1)
    assert "toy" in available_targets() and lib.target == "toy"
    with pytest.raises(ValueError, match="has a backend already"):
        register_backend(ToyBackend())


def test_unregistering_removes_the_backend_and_its_kind():
    register_backend(ToyBackend())
    unregister_backend("toy")
    assert "toy" not in available_targets()
    with pytest.raises(ValueError, match="unknown target kind 'toy'"):
        mlc_lab.build(add_one_func(), target="toy")
    assert get_kind("llvm").name == "llvm"


def test_relax_build_goes_through_the_backend(toy):
    ex = relax.build(_relu_module(), target=Target("toy"))
    assert [call[0] for call in toy.calls] == ["lower", "compile", "load"]
    x = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    out = relax.VirtualMachine(ex, mlc_lab.cpu())["main"](nd.array(x))
    np.testing.assert_array_equal(out.numpy(), np.maximum(x, 0))


class CUDATextBackend(Backend):
    """Source only: the GPU lowering pipeline, then CUDA C; nothing runs. Everything it needs is
    here, registered by the test alone."""
    kind = "cuda-text"
    new_kind = TargetKind("cuda-text", "cuda", doc="CUDA C source of GPU kernels, not compiled")
    capabilities = Capabilities(device_type="cuda", supports_thread_binding=True, gpu=True,
                                dialect="cuda")

    def lower(self, mod, target):
        from mlc_lab.tir.transform import gpu_passes, lower
        return lower(mod, extra_passes=gpu_passes(target))

    def lowered_functions(self, lowered, names):
        from mlc_lab.tir.transform import device_programs
        return {name: device_programs(lowered)[name] for name in names}

    def compile(self, programs, target):
        from mlc_lab.codegen.cuda import render_cuda
        return render_cuda(list(programs.values()))

    def load(self, source, target, signatures):
        from mlc_lab.runtime.cuda_module import SourceOnlyModule
        return SourceOnlyModule(list(signatures), source, self.kind)


def test_a_source_only_backend_needs_nothing_outside_its_own_module():
    from mlc_lab.meta_schedule.schedule_rule_gpu import is_gpu_target
    from mlc_lab.testing import gpu_schedules as gs
    register_backend(CUDATextBackend())
    try:
        lib = mlc_lab.build(gs.vector_add(256, threads=64).mod, target="cuda-text")
        source = lib.imported_modules[0].get_source()
        assert "__global__" in source and "main_kernel0" in source
        assert is_gpu_target(Target("cuda-text"))   # the tuner would use its GPU rules
        with pytest.raises(RuntimeError, match="produces source only"):
            lib["main"]()
    finally:
        unregister_backend("cuda-text")


@pytest.mark.parametrize("text", ["llvm", "llvm -num-cores=2", "llvm --num-cores=1 -bounds-check",
                                  "python", "numpy"])
def test_target_objects_and_strings_build_the_same(text):
    x = np.random.default_rng(0).standard_normal(64).astype("float32")
    results = []
    for target in (text, Target(text), {"kind": Target(text).kind.name, **_explicit(text)}):
        out = nd.empty((64,), "float32")
        mlc_lab.build(add_one_func(), target=target)(nd.array(x), out)
        results.append(out.numpy())
    np.testing.assert_array_equal(results[0], x + 1)
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])


def test_relax_build_accepts_strings_and_targets_alike():
    x = np.random.default_rng(1).standard_normal((3, 4)).astype("float32")
    outs = [relax.VirtualMachine(relax.build(_relu_module(), target=t), mlc_lab.cpu())["main"](
        nd.array(x)).numpy() for t in ("llvm --num-cores=1", Target("llvm -num-cores=1"))]
    np.testing.assert_array_equal(outs[0], np.maximum(x, 0))
    np.testing.assert_array_equal(outs[1], outs[0])
    assert relax.build(_relu_module(), target=Target("llvm")).target == "llvm"


def test_num_cores_and_mcpu_reach_the_llvm_runtime():
    lib = mlc_lab.build(add_one_func(), target="llvm -num-cores=3")
    assert lib["add_one"].num_cores == 3
    host = llvm.get_host_cpu_name()
    lib = mlc_lab.build(add_one_func(), target=f"llvm -mcpu={host}")
    out = nd.empty((64,), "float32")
    lib(nd.array(np.zeros(64, "float32")), out)
    np.testing.assert_array_equal(out.numpy(), np.ones(64, "float32"))


# -- devices ---------------------------------------------------------------------------------------
def test_host_device_allocation_round_trip():
    dev = mlc_lab.cpu()
    assert (str(dev), dev.device_type, dev.device_id) == ("cpu(0)", "cpu", 0)
    storage = dev.allocate((2, 3), "float32")
    assert storage.shape == (2, 3) and not storage.any()
    data = np.arange(6, dtype="float32").reshape(2, 3)
    dev.copy_from_host(storage, data)
    back = dev.copy_to_host(storage)
    np.testing.assert_array_equal(back, data)
    back[0, 0] = 99   # a copy, not the device's memory
    assert dev.copy_to_host(storage)[0, 0] == 0
    dev.free(storage)


def test_ndarrays_are_allocated_on_their_device():
    a = nd.array([[1, 2], [3, 4]], mlc_lab.cpu(), dtype="int32")
    assert a.device == mlc_lab.cpu() and a.dtype == "int32" and a.shape == (2, 2)
    e = nd.empty((2, 2), "int32", mlc_lab.cpu())
    e.copyfrom(a)
    np.testing.assert_array_equal(e.numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(a.copyto(mlc_lab.cpu()).numpy(), a.numpy())


def test_cuda_device_is_representable():
    dev = mlc_lab.cuda(1)
    assert (str(dev), dev.device_type, dev.device_id) == ("cuda(1)", "cuda", 1)


# -- helpers ---------------------------------------------------------------------------------------
def _relu_module():
    x = relax.Var("x", relax.TensorStructInfo((3, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit_te(topi.relu, x))
        bb.emit_func_output(gv)
    return bb.get()


def _explicit(text):
    target = Target(text)
    return {k: v for k, v in target.attrs.items() if v != target.kind.attrs[k].default}
