"""Pass infrastructure: pass objects and decorators, Sequential, PassContext and instruments."""
import io

import pytest

import mlc_lab
from mlc_lab import relax, tir
from mlc_lab.ir import IRModule
from mlc_lab.relax import op as R
from mlc_lab.relax import transform as RT
from mlc_lab.ir.transform import (PassContext, PassInfo, PassTimingInstrument, PrintDiff,
                                  PrintIRBeforeAfter, Sequential, function_pass, module_pass)


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


def test_debug_mode_names_the_pass_that_broke_the_ir():
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
