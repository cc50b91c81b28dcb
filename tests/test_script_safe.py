"""Safe parsing (``from_source(text, safe=True)``): text from a student's submission builds IR
and nothing else. Every module the corpus prints parses the same in safe mode, and each way out
of the IR world is refused with a ScriptError that names the culprit."""
import pytest

from mlc_lab.ir import assert_structural_equal
from mlc_lab.script.errors import ScriptError
from mlc_lab.script.parser import from_source

from corpus import CORPUS

PROGRAM = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = T.max(A[vi], VALUE)
'''


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_printed_programs_parse_the_same_in_safe_mode(name):
    func = CORPUS[name].func
    assert_structural_equal(from_source(func.script(), safe=True), func)


def test_relax_module_parses_in_safe_mode():
    from test_course_end_to_end import TwoLayer      # a relax main calling prim_funcs
    assert_structural_equal(from_source(TwoLayer.script(), safe=True), TwoLayer)


@pytest.mark.parametrize("escape,culprit", [
    ('__import__("os").getpid()', "name '__import__' is not defined"),
    ('open("/etc/passwd")', "name 'open' is not defined"),
    ("T.__dict__", "'T.__dict__' is not allowed in safe mode"),
    ("T.np.load", "'T.np' is not allowed in safe mode"),
    ("A.__class__", "'A.__class__' is not allowed in safe mode"),
    ("T.float32(0).__reduce__()", "is not allowed in safe mode"),
    ("T.float32(len(T.Buffer.__mro__))", "is not allowed in safe mode"),
])
def test_ways_out_are_refused(escape, culprit):
    text = PROGRAM.replace("VALUE", escape)
    with pytest.raises(ScriptError, match=culprit.replace("(", r"\(").replace(")", r"\)")):
        from_source(text, safe=True)
    if "__import__" in escape:
        from_source(text)     # the normal mode trusts the text: the builtin resolves


def test_normal_mode_is_unchanged_after_a_safe_parse():
    with pytest.raises(ScriptError):
        from_source(PROGRAM.replace("VALUE", "open"), safe=True)
    from_source(PROGRAM.replace("VALUE", "T.float32(abs(-1))"))


def test_foreign_objects_inside_ir_are_out_of_reach():
    """A constant's numpy array (whose ``tofile`` would write a file) is not IR: refused."""
    text = """
@R.function
def main(x: R.Tensor((1,), "float32")) -> R.Tensor((1,), "float32"):
    y = R.add(x, R.const([1.0], "float32").data.tofile("/tmp/mlc-lab-safe-mode-test"))
    return y
"""
    with pytest.raises(ScriptError, match=r"is not allowed in safe mode \(it is a ndarray, not IR\)"):
        from_source(text, safe=True)
