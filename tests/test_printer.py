"""The printer: script text, operator precedence, underlines, line numbers, HTML."""
from mlc_lab.script.highlight import to_html
from mlc_lab.script.printer import script
from mlc_lab.tir import (Block, BlockRealize, BufferStore, Div, FloatImm, FloorDiv, For, IterVar,
                         Max, Mod, PrimFunc, Range, Select, SizeVar, Var, call_intrin, const,
                         decl_buffer)

i, j = Var("i"), Var("j")


def test_expression_precedence_and_spelling():
    assert script((i + j) * 2) == "(i + j) * 2"
    assert script(i + j * 2) == "i + j * 2"
    assert script(i - (j - 1)) == "i - (j - 1)"
    assert script(FloorDiv(i, 4) % 2) == "i // 4 % 2"
    assert script(Div(i, j)) == "T.truncdiv(i, j)" and script(Mod(i, j)) == "T.truncmod(i, j)"
    x = Var("x", "float32")
    assert script(x / 2.0) == "x / T.float32(2)"
    assert script(Max(x, FloatImm("float32", 0.5))) == "T.max(x, T.float32(0.5))"
    assert script(call_intrin("exp", x)) == "T.exp(x)"
    assert script(Select(i < j, x, x * 2.0)) == "T.Select(i < j, x, x * T.float32(2))"
    assert script(const(7, "int64")) == "T.int64(7)"
    assert script(FloatImm("float32", float("-inf"))) == 'T.float32("-inf")'
    assert script((i < 3) & (j < 2)) == "i < 3 and j < 2"


def _loop_func():
    A = decl_buffer((16,), "float32", "A")
    vi = Var("vi")
    block = Block("B", (IterVar(vi, Range(const(0), const(16))),), (), (),
                  BufferStore(A, const(1.0), (vi,)))
    store = block.body
    realize = BlockRealize((i * 4 + j,), i * 4 + j < 16, block)
    loop = For(i, const(0), const(4), "parallel", For(j, const(0), const(4), "vectorized", realize))
    return PrimFunc((A,), loop, (("global_symbol", "f"),)), loop, store


def test_loop_kinds_blocks_and_predicates():
    func, _, _ = _loop_func()
    text = script(func)
    assert "for i in T.parallel(4):" in text
    assert "for j in T.vectorized(4):" in text
    assert "vi = T.axis.spatial(16, i * 4 + j)" in text
    assert "T.where(i * 4 + j < 16)" in text


def test_underline_and_line_numbers():
    func, loop, store = _loop_func()
    lines = script(func, underline=[loop.body, store], line_numbers=True).splitlines()
    j_line = next(k for k, line in enumerate(lines) if "T.vectorized" in line)
    assert lines[j_line + 1].strip() == "^" * len("for j in T.vectorized(4):")
    assert lines[j_line + 1].index("^") == lines[j_line].index("for j")
    store_line = next(k for k, line in enumerate(lines) if "A[vi] =" in line)
    assert set(lines[store_line + 1].strip()) == {"^"}
    assert lines[0].startswith("1 | ") or lines[0].startswith(" 1 | ")


def test_symbolic_shapes_print_as_match_buffer():
    n = SizeVar("n", "int64")
    A = decl_buffer((n, 4), "float32", "A")
    text = script(PrimFunc((A,), BufferStore(A, const(0.0), (const(0, "int64"), const(0, "int64"))), ()))
    assert "def main(var_A: T.handle):" in text
    assert "n = T.int64()" in text and 'A = T.match_buffer(var_A, (n, 4), "float32")' in text


def test_names_are_made_unique():
    a1, a2 = Var("a"), Var("a")
    assert script(a1 + a2) == "a + a_1"


def test_html_highlighting_escapes_and_colours():
    html = to_html('for i in T.grid(4):\n    A[i] = T.float32(0) # <note>\n    ^^^')
    assert "&lt;note&gt;" in html and "<pre>" in html
    assert '<span class="mlc-caret">    ^^^</span>' in html          # the culprit's underline
    assert '<span class="mlc-tok-keyword">for</span>' in html
    assert '<span class="mlc-tok-ns">T.grid</span>' in html
    assert '<span class="mlc-tok-comment"># &lt;note&gt;</span>' in html
    assert html.startswith('<div class="mlc-view mlc-code">') and "--jp-content-font-color1" in html


def test_zero_dimensional_buffers_round_trip():
    import numpy as np
    import mlc_lab
    from mlc_lab import te
    from mlc_lab.ir import assert_structural_equal
    from mlc_lab.script.parser import from_source
    A = te.placeholder((8,), name="A")
    k = te.reduce_axis((0, 8), name="k")
    total = te.compute((), lambda: te.sum(A[k], axis=k), name="S")
    func = te.create_prim_func([A, total])
    assert "S[()] = S[()] + A[v_k]" in func.script() and "T.writes(S[()])" in func.script()
    assert_structural_equal(from_source(func.script()), func)
    out = np.zeros((), "float32")
    mlc_lab.build(func, target="llvm")(np.arange(8, dtype="float32"), out)
    assert out == 28
