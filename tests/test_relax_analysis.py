"""relax.analysis: the References collector (vars, constants, global vars, ops, calls, kernels)
and the helpers built on it (used_vars, leaves, substitute, remove_unused_bindings), checked on a
small scripted module; the passes' old import paths give the same objects."""
from mlc_lab import relax
from mlc_lab.relax import analysis
from mlc_lab.relax.analysis import References, leaves, remove_unused_bindings, substitute, used_vars
from mlc_lab.script import ir as I
from mlc_lab.script import relax as R
from mlc_lab.script import tir as T


@I.ir_module
class Module:
    @T.prim_func
    def double(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] + A[vi]

    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((4,), "float32"))
            lv1 = R.call_tir(cls.double, (lv,), out_sinfo=R.Tensor((4,), "float32"))
            dead = R.multiply(lv, y)
            dead1 = R.add(dead, dead)
            lv2 = R.add(lv1, R.const(1.0, "float32"))
            gv = cls.negate(lv2)
            R.output(gv)
        return gv

    @R.function(private=True)
    def negate(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return R.negative(x)


def names(exprs) -> list:
    return [e.name_hint if isinstance(e, (relax.Var, relax.GlobalVar)) else "const" for e in exprs]


def test_references_records_every_kind_in_one_walk():
    main = Module["main"]
    refs = References(main)
    assert names(refs.leaves) == ["x", "lv", "y", "dead", "lv1", "const", "lv2", "gv"]
    assert sorted(v.name_hint for v in refs.vars) == ["dead", "gv", "lv", "lv1", "lv2", "x", "y"]
    assert len(refs.constants) == 1 and isinstance(refs.constants[0], relax.Constant)
    assert {gv.name_hint: n for gv, n in refs.global_vars.items()} == {"double": 2, "negate": 1}
    assert refs.ops == {"relax.call_tir": 2, "relax.multiply": 1, "relax.add": 2}
    assert names(refs.kernels()) == ["double", "double"]
    assert [names(c.args) for c in refs.calls_to("relax.add")] == [["dead", "dead"], ["lv1", "const"]]
    assert len(refs.calls) == 6 and refs.calls[-1].op.name_hint == "negate"


def test_references_of_a_module_walks_its_relax_functions_only():
    refs = References.of_module(Module)
    assert refs.ops["relax.negative"] == 1 and names(refs.kernels()) == ["double", "double"]


def test_used_vars_and_leaves_count_uses_not_definitions():
    bindings = Module["main"].body.blocks[0].bindings
    assert used_vars(bindings[0].var) == {bindings[0].var}
    assert names(used_vars(bindings[3].value)) == ["dead"]
    assert names(leaves(bindings[2].value, bindings[4].value, bindings[2].value)) == [
        "lv", "y", "lv1", "const"]


def test_substitute_replaces_vars_and_constants():
    lv2 = Module["main"].body.blocks[0].bindings[4].value
    z = relax.Var("z", relax.TensorStructInfo((4,), "float32"))
    one = leaves(lv2)[1]
    out = substitute(lv2, {lv2.args[0]: z, one: z})
    assert names(out.args) == ["z", "z"] and lv2.args[0].name_hint == "lv1"


def test_remove_unused_bindings_drops_dead_chains():
    main = Module["main"]
    cleaned = remove_unused_bindings(main)
    assert [b.var.name_hint for b in cleaned.body.blocks[0].bindings] == ["lv", "lv1", "lv2", "gv"]
    assert remove_unused_bindings(cleaned) is cleaned
    assert analysis.remove_all_unused(main).script() == cleaned.script()


def test_old_import_paths_give_the_same_helpers():
    from mlc_lab.relax.transform import dead_code_elimination, fuse_ops
    assert fuse_ops.is_call_tir is analysis.is_call_tir and fuse_ops.substitute is substitute
    assert fuse_ops.leaves is leaves and dead_code_elimination.used_vars is used_vars
    assert dead_code_elimination.remove_unused_bindings is remove_unused_bindings
