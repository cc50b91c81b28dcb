"""Pass infrastructure: pass objects and decorators, Sequential, PassContext and instruments, at
the graph level and for the lowering passes."""
import io
from pathlib import Path

import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, tir
from mlc_lab.ir import IRModule
from mlc_lab.relax import op as R
from mlc_lab.relax import transform as RT
from mlc_lab.tir import transform as tir_transform
from mlc_lab.ir.transform import (PassContext, PassInfo, PassTimingInstrument, PrintAfterAll,
                                  PrintBeforeAll, PrintDiff, PrintIRBeforeAfter, Sequential,
                                  function_pass, module_pass)


def small_module():
    x = relax.Var("x", relax.TensorStructInfo((4, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(R.nn.relu(bb.emit(R.exp(x))))
        bb.emit_func_output(gv)
    return bb.get()


class Recorder:
    """An instrument that writes down every hook call."""

    def __init__(self, log=None):
        self.log = [] if log is None else log

    def enter_pass_ctx(self):
        self.log.append("enter")

    def exit_pass_ctx(self):
        self.log.append("exit")

    def run_before_pass(self, mod, info):
        self.log.append(f"before {info.name}")

    def run_after_pass(self, mod, info):
        self.log.append(f"after {info.name}")


def recording_pass(name, log, opt_level=0):
    @module_pass(opt_level=opt_level, name=name)
    def run(mod, ctx):
        log.append(name)
        return mod
    return run


def test_transform_is_the_ir_transform_module():
    assert mlc_lab.transform is mlc_lab.ir.transform
    assert RT.LegalizeOps().info == PassInfo(0, "LegalizeOps")


def test_module_pass_from_function_and_class():
    @module_pass(opt_level=1)
    def drop_prim_funcs(mod, ctx):
        return IRModule({gv: f for gv, f in mod.functions.items() if not isinstance(f, tir.PrimFunc)})

    assert drop_prim_funcs.info.name == "drop_prim_funcs" and drop_prim_funcs.info.opt_level == 1
    mod = RT.LegalizeOps()(small_module())
    assert [gv.name_hint for gv in drop_prim_funcs(mod).functions] == ["main"]

    @module_pass(opt_level=0, name="Rename")
    class Rename:
        def __init__(self, new_name):
            self.new_name = new_name

        def transform_module(self, mod, ctx):
            return IRModule({self.new_name: mod["main"]})

    renamed = Rename("entry")(mod)
    assert Rename("entry").info.name == "Rename" and list(renamed.functions)[0].name_hint == "entry"


def test_function_pass_rewrites_relax_functions_only():
    seen = []

    @function_pass(opt_level=0)
    def tag(func, mod, ctx):
        seen.append(type(func).__name__)
        return func.with_attr("tagged", 1)

    out = tag(RT.LegalizeOps()(small_module()))
    assert seen == ["Function"] and out["main"].attrs["tagged"] == 1
    assert "tagged" not in out["exp"].attr_dict


def test_sequential_runs_passes_in_order_and_respects_opt_level():
    log = []
    seq = Sequential([recording_pass("a", log), recording_pass("b", log, opt_level=3),
                      recording_pass("c", log)])
    seq(small_module())
    assert log == ["a", "c"]                       # the default context has opt_level 2
    log.clear()
    with PassContext(opt_level=3):
        seq(small_module())
    assert log == ["a", "b", "c"]
    log.clear()
    with PassContext(opt_level=0, required_pass=["b"], disabled_pass=["c"]):
        seq(small_module())
    assert log == ["a", "b"]


def test_sequential_rejects_pass_classes_and_passes_reject_non_modules():
    with pytest.raises(TypeError, match=r"forget the \(\)"):
        Sequential([RT.LegalizeOps])
    with pytest.raises(TypeError, match="expects an IRModule"):
        RT.LegalizeOps()(small_module()["main"])


def test_instruments_see_every_pass_and_the_sequential_around_them():
    rec = Recorder()
    seq = Sequential([RT.LegalizeOps(), RT.AnnotateTIROpPattern()])
    with PassContext(instruments=[rec]):
        seq(small_module())
    assert rec.log == ["enter", "before sequential", "before LegalizeOps", "after LegalizeOps",
                       "before AnnotateTIROpPattern", "after AnnotateTIROpPattern",
                       "after sequential", "exit"]


def test_should_run_can_skip_a_pass():
    class SkipFusion:
        def should_run(self, mod, info):
            return info.name != "FuseOps"

    mod = RT.AnnotateTIROpPattern()(RT.LegalizeOps()(small_module()))
    with PassContext(instruments=[SkipFusion()]):
        assert RT.FuseOps()(mod) is mod


def test_print_ir_before_after(capsys):
    with PassContext(instruments=[PrintIRBeforeAfter()]):
        Sequential([RT.LegalizeOps()])(small_module())
    out = capsys.readouterr().out
    assert out.count("# Before pass: LegalizeOps") == 1 and out.count("# After pass: LegalizeOps") == 1
    before, after = out.split("# After pass: LegalizeOps")
    assert "R.nn.relu(lv)" in before and "R.call_tir(cls.relu" in after
    assert "sequential" not in out


def test_print_diff_shows_what_each_pass_changed():
    text = io.StringIO()
    mod = RT.LegalizeOps()(small_module())
    with PassContext(instruments=[PrintDiff(file=text)]):
        Sequential([RT.AnnotateTIROpPattern(), RT.DeadCodeElimination()])(mod)
    out = text.getvalue()
    assert "# AnnotateTIROpPattern" in out and '+        T.func_attr({"global_symbol": "exp", ' in out
    assert out.rstrip().endswith("# DeadCodeElimination\n(no change)")


def test_print_diff_without_a_file_prints_the_diff(capsys):
    with PassContext(instruments=[PrintDiff()]):
        RT.LegalizeOps()(small_module())
    out = capsys.readouterr().out
    assert "# LegalizeOps" in out and "-            lv: R.Tensor((4, 4), dtype=\"float32\") = R.exp(x)" in out


def test_timing_instrument_renders_nested_passes():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        Sequential([RT.LegalizeOps(), RT.AnnotateTIROpPattern()])(small_module())
    lines = timing.render().splitlines()
    assert lines[0] == "pass timings (ms):"
    assert lines[1].startswith("  sequential: ") and lines[2].startswith("    LegalizeOps: ")
    assert [name for name, _, _ in timing.timings] == ["sequential", "LegalizeOps",
                                                       "AnnotateTIROpPattern"]
    assert all(seconds >= 0 for _, _, seconds in timing.timings)


def test_pass_contexts_nest_and_restore():
    log = []
    outer, inner = PassContext(opt_level=1, instruments=[Recorder(log)]), PassContext(opt_level=3)
    default = PassContext.current()
    with outer:
        assert PassContext.current() is outer
        with inner:
            assert PassContext.current() is inner
            RT.LegalizeOps()(small_module())      # the inner context has no instruments
        assert PassContext.current() is outer
        RT.LegalizeOps()(small_module())
    assert PassContext.current() is default
    assert log == ["enter", "before LegalizeOps", "after LegalizeOps", "exit"]


def test_debug_mode_names_the_pass_that_broke_the_ir(monkeypatch):
    monkeypatch.delenv("MLC_LAB_DEBUG", raising=False)
    @module_pass(name="DropAllocations")
    def drop_allocations(mod, ctx):
        out = IRModule(mod.functions)
        for gv, f in mod.functions.items():
            if isinstance(f, tir.PrimFunc) and f.body.block.alloc_buffers:
                out[gv] = f.replace(body=f.body.replace(block=f.body.block.replace(alloc_buffers=())))
        return out

    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(R.nn.softmax(x)))
    mod = RT.LegalizeOps()(bb.get())
    drop_allocations(mod)                          # not checked outside debug mode
    with PassContext(config={"debug": True}):
        with pytest.raises(tir.VerifyError, match="pass DropAllocations produced ill-formed IR"):
            drop_allocations(mod)
        RT.FuseOps()(mod)                          # a well-behaved pass passes the check


# ----------------------------------------------------------------------------------------------
# The lowering passes are passes like the graph-level ones: the same context and instruments.
LOWERING_NAMES = ["lower_init_block", "plan_and_compact_allocations", "lower_blocks",
                  "flatten_buffer", "simplify", "unroll_loop", "partition_tail", "vectorize_loop", "simplify"]


def small_prim_func():
    from corpus import loop_kinds
    return loop_kinds


def printed_passes(out: str, when: str) -> list:
    return [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith(f"# {when} pass: ")]


def test_print_ir_before_after_shows_every_lowering_pass(capsys):
    with PassContext(instruments=[PrintIRBeforeAfter()]):
        low = mlc_lab.lower(small_prim_func())
    out = capsys.readouterr().out
    assert printed_passes(out, "Before") == LOWERING_NAMES == printed_passes(out, "After")
    assert "sequential" not in out and "# Before pass: lower\n" not in out
    sections = out.split("# After pass: ")
    after_lower_blocks = next(s for s in sections if s.startswith("lower_blocks\n"))
    assert "T.block" not in after_lower_blocks and "for io in T.parallel(4):" in after_lower_blocks
    assert "with T.block" in sections[0]                     # the IR before lowering is shown
    assert sections[-1].split("\n", 1)[1].strip() == IRModule({"loop_kinds": low["loop_kinds"]}).script()


def test_print_ir_before_after_around_build_llvm_shows_the_lowering(capsys):
    with PassContext(instruments=[PrintIRBeforeAfter()]):
        lib = mlc_lab.build(small_prim_func(), target="llvm")
    assert printed_passes(capsys.readouterr().out, "After") == LOWERING_NAMES
    a = np.random.rand(64, 64).astype("float32")
    b = mlc_lab.nd.empty((64, 64), "float32")
    lib["loop_kinds"](mlc_lab.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * 0.5 + np.arange(64, dtype="float32"), rtol=1e-6)


def test_print_before_all_after_all_and_diff_see_lowering_passes(capsys):
    text = io.StringIO()
    with PassContext(instruments=[PrintBeforeAll(), PrintAfterAll(), PrintDiff(file=text)]):
        mlc_lab.lower(small_prim_func())
    out = capsys.readouterr().out
    assert printed_passes(out, "Before") == LOWERING_NAMES == printed_passes(out, "After")
    diff = text.getvalue()
    assert [line[2:] for line in diff.splitlines() if line.startswith("# ")] == LOWERING_NAMES
    lower_blocks_diff = diff.split("# lower_blocks\n")[1].split("\n# ")[0]
    assert '-                    with T.block("B"):' in lower_blocks_diff
    assert "+                    B[io * 16 + ii, j] = A[io * 16 + ii, j]" in lower_blocks_diff


def test_timing_lists_graph_and_lowering_passes_of_relax_build():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        ex = relax.build(small_module(), target="llvm", opt_level=1)
    names = [name for name, _, _ in timing.timings]
    assert {"LegalizeOps", "FuseOps", "FuseTIR"} <= set(names)
    lower_at = names.index("lower")
    assert names[lower_at + 1:lower_at + 1 + len(LOWERING_NAMES)] == LOWERING_NAMES
    assert names.index("LegalizeOps") < lower_at
    depth = {name: d for name, d, _ in timing.timings}
    assert depth["lower_blocks"] == depth["lower"] + 1
    assert "    lower_blocks: " in timing.render()
    x = np.random.rand(4, 4).astype("float32")
    out = relax.VirtualMachine(ex, mlc_lab.cpu())["main"](mlc_lab.nd.array(x))
    np.testing.assert_allclose(out.numpy(), np.maximum(np.exp(x), 0), rtol=1e-5)


def test_lowering_in_debug_mode_keeps_the_instruments_of_the_context():
    timing, rec = PassTimingInstrument(), Recorder()
    with PassContext(instruments=[timing, rec]):
        mlc_lab.lower(small_prim_func(), debug=True)
    assert [name for name, _, _ in timing.timings] == ["lower"] + LOWERING_NAMES
    assert rec.log[0] == "enter" and rec.log.count("enter") == 1 and rec.log[-1] == "exit"


@tir_transform.prim_func_pass(opt_level=0)
def drop_allocations(func):
    """Deliberately broken: removes every allocation but keeps the buffer's uses."""
    class Drop(tir.StmtExprMutator):
        def visit_Allocate(self, alloc):
            return self.visit(alloc.body)
    return func.replace(body=Drop().visit(func.body))


def test_debug_verifier_names_a_broken_prim_func_pass_in_a_sequential(monkeypatch):
    monkeypatch.delenv("MLC_LAB_DEBUG", raising=False)
    from corpus import mm_relu
    lowered_early = Sequential(tir_transform.PASSES[:4])(IRModule({"mm_relu": mm_relu}))
    seq = Sequential([tir_transform.simplify, drop_allocations, tir_transform.unroll_loop])
    seq(lowered_early)                                   # not checked outside debug mode
    with PassContext(config={"debug": True}):
        with pytest.raises(tir.VerifyError, match="pass drop_allocations produced ill-formed IR.*Y"):
            seq(lowered_early)
        Sequential([tir_transform.simplify, tir_transform.unroll_loop])(lowered_early)


def test_lowering_checks_the_stage_each_pass_reaches(monkeypatch):
    """In debug mode a lowering pass is checked with verify_lowered at the stage reached after it,
    which tir.verify alone would not catch: here a lower_blocks that leaves the blocks."""
    from corpus import mm_relu
    keep_blocks = tir_transform.prim_func_pass(lambda func: func, name="lower_blocks")
    passes = [keep_blocks if p is tir_transform.lower_blocks else p for p in tir_transform.PASSES]
    monkeypatch.setattr(tir_transform.pipeline, "PASSES", passes)
    with PassContext(config={"debug": True}):
        with pytest.raises(tir_transform.LoweringError, match="lowering pass lower_blocks broke") as info:
            mlc_lab.lower(mm_relu)
    assert info.value.pass_name == "lower_blocks" and "block" in str(info.value)


def test_disabled_pass_turns_off_a_lowering_optimization_only():
    from corpus import loop_kinds
    with PassContext(disabled_pass=["unroll_loop", "vectorize_loop"]):
        low = mlc_lab.lower(loop_kinds)["loop_kinds"]
        lib = mlc_lab.build(loop_kinds, target="llvm")
    tir_transform.verify_lowered(low)
    assert "T.unroll(16)" in low.script() and "T.vectorized(64)" in low.script()
    assert "T.unroll" not in mlc_lab.lower(loop_kinds)["loop_kinds"].script()
    a = np.random.rand(64, 64).astype("float32")
    b = mlc_lab.nd.empty((64, 64), "float32")
    lib["loop_kinds"](mlc_lab.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * 0.5 + np.arange(64, dtype="float32"), rtol=1e-6)
    with PassContext(disabled_pass=["lower_blocks"]):
        with pytest.raises(ValueError, match="lowering pass lower_blocks cannot be disabled"):
            mlc_lab.lower(loop_kinds)


def test_prim_func_pass_forms():
    from corpus import vector_add
    seen = []

    @tir_transform.prim_func_pass
    def bare(func):
        seen.append("bare")
        return func.with_attr("bare", True)

    @tir_transform.prim_func_pass(opt_level=1, name="WithModule")
    def with_module(func, mod, ctx):
        seen.append((type(mod).__name__, type(ctx).__name__))
        return func

    @tir_transform.prim_func_pass(opt_level=0)
    class Tag:
        def __init__(self, key):
            self.key = key

        def transform_function(self, func, mod, ctx):
            return func.with_attr(self.key, 1)

    assert isinstance(bare, tir_transform.PrimFuncPass) and bare.info == PassInfo(0, "bare")
    assert with_module.info == PassInfo(1, "WithModule") and Tag("k").info.name == "Tag"
    mod = RT.LegalizeOps()(small_module())
    out = Sequential([bare, with_module, Tag("tagged")])(mod)
    assert seen == ["bare", "bare", ("IRModule", "PassContext"), ("IRModule", "PassContext")]
    assert out["exp"].attr_dict["bare"] is True and out["relu"].attr_dict["tagged"] == 1
    assert out["main"] is mod["main"]                    # graph-level functions pass through
    assert bare(vector_add).attr_dict["bare"] is True
    with pytest.raises(TypeError, match="bare expects an IRModule or a PrimFunc"):
        bare("vector_add")
    with pytest.raises(TypeError, match="turned PrimFunc 'vector_add' into int"):
        tir_transform.prim_func_pass(lambda func: 0, name="broken")(vector_add)


def test_mlc_lab_debug_is_read_in_one_place(monkeypatch):
    from mlc_lab._env import debug_enabled
    for value, expected in (("", False), ("0", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("MLC_LAB_DEBUG", value)
        assert debug_enabled() is expected and PassContext().debug is expected
    root = Path(mlc_lab.__file__).parent
    readers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                     if '"MLC_LAB_DEBUG"' in p.read_text())
    assert readers == ["_env.py"]
