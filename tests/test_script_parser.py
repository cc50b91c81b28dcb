"""The script parser: TVMScript-style Python -> loop IR, and its error messages."""
import pytest

from mlc_lab import IRModule, tir
from mlc_lab.ir import assert_structural_equal, structural_equal
from mlc_lab.script import ScriptError, from_source
from mlc_lab.script import ir as I
from mlc_lab.script import tir as T

N_GLOBAL = 16


@I.ir_module
class MatmulRelu:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def _loops(stmt):
    loops = []
    while isinstance(stmt, tir.For):
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


def _region(region):
    return [(str(r.min), str(r.extent)) for r in region.region]


def test_mm_relu_structure():
    assert isinstance(MatmulRelu, IRModule)
    func = MatmulRelu["mm_relu"]
    assert isinstance(func, tir.PrimFunc)
    assert [p.name for p in func.params] == ["A", "B", "C"]
    assert func.attrs == (("global_symbol", "mm_relu"), ("tir.noalias", True))
    root = func.body
    assert isinstance(root, tir.BlockRealize) and root.block.name_hint == "root"
    assert root.iter_values == () and root.block.reads == () and root.block.writes == ()
    (y_buf,) = root.block.alloc_buffers
    assert y_buf.name == "Y" and [s.value for s in y_buf.shape] == [128, 128] and y_buf.dtype == "float32"

    first, second = root.block.body.seq
    loops, realize = _loops(first)
    assert [l.loop_var.name for l in loops] == ["i", "j", "k"]
    assert all(l.kind == "serial" and l.extent.value == 128 and l.min.value == 0 for l in loops)
    assert loops[0].loop_var.dtype == "int32"
    block = realize.block
    assert block.name_hint == "Y"
    assert [iv.iter_type for iv in block.iter_vars] == ["spatial", "spatial", "reduce"]
    assert all(v is l.loop_var for v, l in zip(realize.iter_values, loops))
    assert isinstance(block.init, tir.BufferStore) and block.init.value.value == 0.0
    assert [r.buffer.name for r in block.reads] == ["A", "B"]
    assert [r.buffer for r in block.writes] == [y_buf]
    assert _region(block.writes[0]) == [("vi", "1"), ("vj", "1")]

    loops_c, realize_c = _loops(second)
    assert len(loops_c) == 2
    c_block = realize_c.block
    assert [iv.iter_type for iv in c_block.iter_vars] == ["spatial", "spatial"]
    assert [r.buffer for r in c_block.reads] == [y_buf]
    assert isinstance(c_block.body.value, tir.Max)


def test_global_symbol_added_and_plain_loops_not_wrapped():
    @T.prim_func
    def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            B[i] = A[i] + 1

    assert add_one.attrs == (("global_symbol", "add_one"),)
    assert isinstance(add_one.body, tir.For)
    store = add_one.body.body
    assert isinstance(store.value.b, tir.FloatImm) and store.value.b.dtype == "float32"


def test_handle_and_match_buffer_equal_buffer_annotations():
    @T.prim_func
    def with_handles(a: T.handle, b: T.handle):
        A = T.match_buffer(a, (64, 32), "float32")
        B = T.match_buffer(b, (64, 32), "float32")
        for i, j in T.grid(64, 32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)

    @T.prim_func
    def with_buffers(A: T.Buffer((64, 32), "float32"), B: T.Buffer[(64, 32), "float32"]):
        T.func_attr({"global_symbol": "with_handles"})
        for i, j in T.grid(64, 32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)

    assert [p.name for p in with_handles.params] == ["A", "B"]
    assert_structural_equal(with_handles, with_buffers)


def test_remap_equals_explicit_axes_and_explicit_root():
    @T.prim_func
    def remapped(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
        for i, k in T.grid(16, 16):
            with T.block("sum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]

    @T.prim_func
    def explicit(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
        T.func_attr({"global_symbol": "remapped"})
        with T.block("root"):
            for i in range(16):
                for k in T.serial(0, 16):
                    with T.block("sum"):
                        vi = T.axis.S(16, i)
                        vk = T.axis.reduce((0, 16), k)
                        T.reads(A[vi, vk])
                        T.writes(B[vi])
                        with T.init():
                            B[vi] = T.float32(0)
                        B[vi] = B[vi] + A[vi, vk]

    assert_structural_equal(remapped, explicit)


def test_explicit_root_with_allocations_equals_implicit_root():
    @T.prim_func
    def implicit(A: T.Buffer((8,), "float32")):
        X = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("X"):
                vi = T.axis.remap("S", [i])
                X[vi] = A[vi]

    @T.prim_func
    def explicit(A: T.Buffer((8,), "float32")):
        T.func_attr({"global_symbol": "implicit"})
        with T.block("root"):
            X = T.alloc_buffer((8,), "float32")
            for i in range(8):
                with T.block("X"):
                    vi = T.axis.remap("S", [i])
                    X[vi] = A[vi]

    assert_structural_equal(implicit, explicit, map_free_vars=True)
    assert implicit.body.block.alloc_buffers[0].name == "X"


def test_buffer_options_scalar_params_and_private():
    size = 6

    @T.prim_func(private=True)
    def opts(A: T.Buffer((size, 4), "float16", strides=(8, 1), scope="shared"), B: T.Buffer((4,)),
             n: T.int64, x: T.float32):
        m = T.var("int32")
        for i in range(n):
            B[0] = x

    A, B, n, x = opts.params
    assert [d.value for d in A.shape] == [6, 4] and A.dtype == "float16" and A.scope == "shared"
    assert [s.value for s in A.strides] == [8, 1]
    assert B.dtype == "float32"
    assert (n.dtype, x.dtype) == ("int64", "float32")
    assert opts.attrs == () and opts.body.loop_var.dtype == "int64"


def test_module_from_text_with_two_functions():
    mod = from_source(
        "@I.ir_module\n"
        "class Module:\n"
        "    @T.prim_func\n"
        "    def one(A: T.Buffer((4,), \"float32\")):\n"
        "        A[0] = T.float32(1)\n"
        "    @T.prim_func\n"
        "    def two(A: T.Buffer((4,), \"int32\")):\n"
        "        A[0] = 2\n")
    assert sorted(gv.name_hint for gv in mod.functions) == ["one", "two"]
    assert mod["two"].body.value.dtype == "int32"


def test_symbolic_shape_matmul():
    @T.prim_func
    def matmul(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        m = T.int64()
        A = T.match_buffer(a, (n, T.int64(64)), "float32")
        B = T.match_buffer(b, (T.int64(64), m), "float32")
        C = T.match_buffer(c, (n, m), "float32")
        for i, j, k in T.grid(n, m, T.int64(64)):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    A, B, C = matmul.params
    n, m = A.shape[0], B.shape[1]
    assert isinstance(n, tir.Var) and n.name == "n" and n.dtype == "int64"
    assert C.shape[0] is n and C.shape[1] is m
    loops, realize = _loops(matmul.body.block.body)
    assert loops[0].extent is n and loops[0].loop_var.dtype == "int64"
    assert realize.block.iter_vars[0].dom.extent is n
    assert realize.block.iter_vars[0].var.dtype == "int64"


def test_symbolic_shape_in_buffer_annotation_from_text():
    func = from_source(
        "@T.prim_func\n"
        "def f(A: T.Buffer((n,), \"float32\"), B: T.Buffer((n,), \"float32\")):\n"
        "    n = T.int32()\n"
        "    for i in range(n):\n"
        "        B[i] = A[i]\n")
    A, B = func.params
    assert A.shape[0] is B.shape[0] and func.body.extent is A.shape[0]


def test_loop_kinds_and_thread_binding():
    @T.prim_func
    def kinds(A: T.Buffer((4, 8, 16, 32), "float32")):
        for b in T.thread_binding(4, thread="blockIdx.x"):
            for t in T.thread_binding(0, 8, thread="threadIdx.x"):
                for p in T.parallel(16, annotations={"pragma_auto_unroll_max_step": 16}):
                    for u in T.unroll(2, 6):
                        for v in T.vectorized(4):
                            A[b, t, p, u * 4 + v] = T.float32(1)

    loops, store = _loops(kinds.body)
    assert [l.kind for l in loops] == ["thread_binding", "thread_binding", "parallel", "unrolled", "vectorized"]
    assert [l.thread_binding for l in loops[:2]] == ["blockIdx.x", "threadIdx.x"]
    assert loops[2].annotations == (("pragma_auto_unroll_max_step", 16),)
    assert (loops[3].min.value, loops[3].extent.value) == (2, 4)
    assert isinstance(store, tir.BufferStore)


def test_where_if_else_let_and_closure_values():
    tile = 4

    @T.prim_func
    def guarded(A: T.Buffer((N_GLOBAL,), "float32"), B: T.Buffer((N_GLOBAL,), "float32")):
        for io, ii in T.grid((N_GLOBAL + tile - 1) // tile, tile):
            with T.block("B"):
                vi = T.axis.spatial(N_GLOBAL, io * tile + ii)
                T.where(io * tile + ii < N_GLOBAL)
                scale: T.float32 = 2.0
                if vi % 2 == 0:
                    B[vi] = A[vi] * scale
                else:
                    B[vi] = T.exp(A[vi])

    loops, realize = _loops(guarded.body.block.body)
    assert loops[0].extent.value == 4 and loops[1].extent.value == 4
    assert isinstance(realize.predicate, tir.LT)
    let = realize.block.body
    assert isinstance(let, tir.LetStmt) and let.var.dtype == "float32" and let.value.value == 2.0
    branch = let.body
    assert isinstance(branch, tir.IfThenElse) and isinstance(branch.condition, tir.EQ)
    assert isinstance(branch.else_case.value, tir.Call) and branch.else_case.value.op == "exp"


def test_expressions():
    @T.prim_func
    def exprs(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "int64"), n: T.int32):
        for i in range(8):
            A[i] = T.Select(0 <= i < n and not i == 3, T.Cast("float32", i), T.float32("-inf"))
            B[i] = T.int64(i) // 2 + T.truncmod(T.int64(i), T.int64(3)) + T.max_value("int8")
        T.evaluate(T.if_then_else(n > 0, 1, 0))

    loop, evaluate = exprs.body.seq
    first, second = loop.body.seq
    select = first.value
    assert isinstance(select, tir.Select) and isinstance(select.condition, tir.And)
    assert isinstance(select.true_value, tir.Cast) and select.false_value.value == float("-inf")
    assert second.value.dtype == "int64"
    assert exprs.params[2].dtype == "int32"
    assert isinstance(evaluate, tir.Evaluate) and evaluate.value.op == "if_then_else"


def test_block_match_buffer_alloc_and_attrs():
    @T.prim_func
    def tiles(A: T.Buffer((16, 4), "float32")):
        for i in range(4):
            with T.block("tile"):
                vi = T.axis.opaque(4, i)
                T.reads(A[vi * 4:vi * 4 + 4, 0:4])
                T.writes([A[vi * 4:vi * 4 + 4, 0:4]])
                T.block_attr({"meta": 1})
                local = T.alloc_buffer((4,), scope="local")
                sub = T.match_buffer(A[vi * 4:vi * 4 + 4, 0:4], (4, 4), "float32")
                for j in range(4):
                    local[j] = sub[j, 0]
                    sub[j, 1] = local[j]

    block = tiles.body.block.body.body.block
    assert block.iter_vars[0].iter_type == "opaque"
    assert _region(block.reads[0]) == [("vi * 4", "4"), ("0", "4")]
    assert block.annotations == (("meta", 1),)
    assert block.alloc_buffers[0].scope == "local"
    (match,) = block.match_buffers
    assert match.buffer.name == "sub" and match.source.buffer is tiles.params[0]


def test_allocate_and_vector_expressions():
    @T.prim_func
    def vec(A: T.Buffer((8,), "float32")):
        X = T.allocate((8,), "float32", "local")
        X[T.Ramp(0, 1, 4)] = T.Broadcast(T.float32(1), 4)
        A[T.Ramp(0, 1, 4)] = X[T.Ramp(0, 1, 4)]

    assert isinstance(vec.body, tir.Allocate) and vec.body.buffer.scope == "local"
    assert isinstance(vec.body.body, tir.SeqStmt)


def test_printer_output_parses_back():
    text = MatmulRelu.script()
    assert structural_equal(from_source(text), MatmulRelu, map_free_vars=True)


# -- errors -------------------------------------------------------------------------------------
def _line_of(marker: str) -> int:
    with open(__file__) as f:
        lines = f.read().splitlines()
    hits = [n for n, line in enumerate(lines, start=1) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def _check_location(err: ScriptError, marker: str, culprit: str) -> None:
    """The error points at the marked line, with carets exactly under ``culprit``."""
    line = _line_of(marker)
    assert err.filename == __file__ and err.line == line
    text = str(err).splitlines()
    source_row = next(r for r in text if r.startswith(f"{line} | "))
    caret_row = text[text.index(source_row) + 1]
    source, carets = source_row.split(" | ", 1)[1], caret_row.split(" | ", 1)[1]
    start = source.index(culprit)
    assert carets == " " * start + "^" * len(culprit)
    assert f":{line}:{start + 1}" in text[1]


def test_error_remap_kind_count():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4, 4, 4), "float32")):
            for i, j, k in T.grid(4, 4, 4):
                with T.block("A"):
                    vi, vj = T.axis.remap("SS", [i, j, k])  # E:remap-count
                    A[vi, vj, 0] = T.float32(0)
    assert 'kinds "SS" for 3 loop variables' in info.value.message
    _check_location(info.value, "E:remap-count", 'T.axis.remap("SS", [i, j, k])')


def test_error_remap_bad_kind_and_non_loop_value():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("A"):
                    vi = T.axis.remap("X", [i])  # E:remap-kind
                    A[vi] = T.float32(0)
    assert '"X"' in info.value.message and "S (spatial) or R (reduce)" in info.value.message
    _check_location(info.value, "E:remap-kind", '"X"')

    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def g(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("A"):
                    vi = T.axis.remap("S", [i + 1])  # E:remap-value
                    A[vi] = T.float32(0)
    assert "i + 1" in info.value.message
    _check_location(info.value, "E:remap-value", "i + 1")


def test_error_undefined_name_suggests_close_match():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32"), scale: T.float32):
            for i in range(4):
                A[i] = A[i] * scal  # E:undefined
    assert "'scal'" in info.value.message and "did you mean 'scale'" in info.value.message
    _check_location(info.value, "E:undefined", "scal")


def test_error_unknown_t_function():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = T.sqrtt(A[i])  # E:unknown-fn
    assert "T.sqrtt" in info.value.message and "did you mean T.sqrt" in info.value.message
    _check_location(info.value, "E:unknown-fn", "T.sqrtt")


def test_error_wrong_index_count():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4, 4), "float32")):
            for i in range(4):
                A[i] = T.float32(0)  # E:index-count
    msg = info.value.message
    assert "buffer A" in msg and "2 dimension(s)" in msg and "1 index" in msg
    _check_location(info.value, "E:index-count", "A[i]")


def test_error_store_to_undeclared_buffer():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                Out[i] = A[i]  # E:undeclared
    assert "'Out'" in info.value.message and "not a declared buffer" in info.value.message
    _check_location(info.value, "E:undeclared", "Out")


def test_error_unsupported_syntax():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            while True:  # E:while
                A[0] = T.float32(0)
    assert "while loops are not supported in T.prim_func" in info.value.message
    assert info.value.line == _line_of("E:while")


def test_error_store_lanes_mismatch():
    # A store converts a value of another dtype (tests/test_script_tvm_forms.py); lanes it cannot.
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[T.Ramp(0, 1, 4)] = i  # E:dtype
    msg = info.value.message
    assert "int32" in msg and "float32" in msg and "A" in msg and "lane" in msg
    assert info.value.line == _line_of("E:dtype")


def test_error_init_outside_block():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.init():  # E:init
                    A[i] = T.float32(0)
    assert "T.init()" in info.value.message and "T.block" in info.value.message
    _check_location(info.value, "E:init", "T.init()")


def test_error_alloc_buffer_inside_loop():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                X = T.alloc_buffer((4,))  # E:alloc-loop
                X[i] = A[i]
    assert "T.alloc_buffer" in info.value.message and "loop" in info.value.message
    assert info.value.line == _line_of("E:alloc-loop")


def test_error_from_text_names_string_file():
    text = "@T.prim_func\ndef f(A: T.Buffer((4,), \"float32\")):\n    for i in range(4):\n        A[i, i] = 1.0\n"
    with pytest.raises(ScriptError) as info:
        from_source(text)
    assert info.value.filename == "<string>" and info.value.line == 4
    assert "A[i, i] = 1.0" in str(info.value)


def test_bad_input_never_leaks_raw_python_errors():
    bad_bodies = [
        "A[0] = T.axis.spatial(4, 0)",
        "x = T.block('a')",
        "A[0] = A.nonexistent",
        "A[0] = T.float32(\"bogus\")",
        "for i in 5:\n        A[i] = 0.0",
        "A[0] = {}[1]",
        "T.reads(A[0])",
        "Y = T.match_buffer(A, (4,))",
    ]
    for body in bad_bodies:
        text = f"@T.prim_func\ndef f(A: T.Buffer((4,), \"float32\")):\n    {body}\n"
        with pytest.raises(ScriptError):
            from_source(text)


# -- malformed programs refused at parse time, each with the culprit underlined ------------------
def test_error_assignment_to_loop_variable():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                i = i + 1  # E:assign-loop-var
                A[0] = T.float32(0)
    assert "cannot assign to the loop variable i" in info.value.message
    _check_location(info.value, "E:assign-loop-var", "i")


def test_error_assignment_to_block_iterator():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("A"):
                    vi = T.axis.spatial(4, i)
                    vi = vi * 2  # E:assign-iter-var
                    A[vi] = T.float32(0)
    assert "cannot assign to the block iterator vi" in info.value.message
    _check_location(info.value, "E:assign-iter-var", "vi")


def test_error_assignment_to_parameters():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32"), n: T.int32):
            n = 3  # E:assign-param
            A[0] = T.float32(0)
    assert "cannot assign to the parameter n" in info.value.message
    _check_location(info.value, "E:assign-param", "n")

    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def g(A: T.Buffer((4,), "float32")):
            A = T.float32(1)  # E:assign-buffer
    assert "cannot assign to the buffer A" in info.value.message and "A[i] = ..." in info.value.message
    _check_location(info.value, "E:assign-buffer", "A")


def test_let_variables_and_fresh_names_still_bind():
    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("A"):
                vi = T.axis.spatial(4, i)
                twice = vi * 2
                A[vi] = T.Cast("float32", twice)
    assert tir.verify(f)


def test_error_implicit_float_int_mix():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32"), C: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("C"):
                    vi = T.axis.spatial(4, i)
                    C[vi] = A[vi] + B[vi]  # E:mix
    assert "implicit conversion between float32 and int32" in info.value.message
    assert "T.float32(B[vi])" in info.value.message
    _check_location(info.value, "E:mix", "A[vi] + B[vi]")

    with pytest.raises(ScriptError, match="implicit conversion between float32 and int32"):
        @T.prim_func
        def g(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32")):
            for i in range(4):
                with T.block("A"):
                    vi = T.axis.spatial(4, i)
                    A[vi] = T.max(A[vi], B[vi])


def test_python_literals_adopt_the_other_sides_dtype_and_casts_mix_freely():
    @T.prim_func
    def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                C[vi] = A[vi] * 2 + 1.5 + T.float32(B[vi]) + T.Cast("float32", vi + 1)
    store = f.body.block.body.body.block.body
    assert store.value.dtype == "float32" and tir.verify(f)


def test_error_negative_buffer_shape():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            X = T.alloc_buffer((-4,), "float32")  # E:negative-alloc
            A[0] = T.float32(0)
    assert "buffer X: dimension sizes cannot be negative" in info.value.message
    _check_location(info.value, "E:negative-alloc", 'X = T.alloc_buffer((-4,), "float32")')

    text = 'T.prim_func\ndef g(A: T.Buffer((-16,), "float32")):\n    T.evaluate(0)\n'
    with pytest.raises(ScriptError, match=r"dimension sizes cannot be negative, got shape \(-16\)"):
        from_source("@" + text)
    # A live annotation is evaluated by Python itself, before the parser sees it.
    with pytest.raises(ValueError, match="dimension sizes cannot be negative"):
        T.Buffer((-16,), "float32")


def test_error_float_intrinsic_on_integers():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "int32")):
            for i in range(4):
                with T.block("A"):
                    vi = T.axis.spatial(4, i)
                    A[vi] = T.exp(A[vi])  # E:exp-int
    assert "T.exp computes on floats, but its argument A[vi] has dtype int32" in info.value.message
    _check_location(info.value, "E:exp-int", "T.exp(A[vi])")

    @T.prim_func
    def g(A: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("A"):
                vi = T.axis.spatial(4, i)
                A[vi] = T.sqrt(2) * T.exp(A[vi])   # a Python int is a float here
    assert tir.verify(g)


def test_align_and_offset_factor_are_accepted_and_warn_once_when_they_ask_for_more(monkeypatch):
    import warnings
    from mlc_lab.script import tir as script_tir
    monkeypatch.setattr(script_tir, "_WARNED_OPTIONS", set())
    source = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32", align={align}), B: T.Buffer((8,), "float32")):
    C = T.alloc_buffer((8,), align={align}, offset_factor={factor})
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = A[vi]
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = C[vi]
'''
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # what mlc_lab already does raises no warning
        plain = from_source(source.format(align=0, factor=0))
        assert_structural_equal(from_source(source.format(align=64, factor=1)), plain)
    with pytest.warns(UserWarning) as record:
        assert_structural_equal(from_source(source.format(align=128, factor=16)), plain)
        from_source(source.format(align=256, factor=4))
    messages = sorted(str(w.message) for w in record)
    assert len(messages) == 2, messages                # once per option, not once per use
    assert messages[0].startswith("align=128 is ignored")
    assert messages[1].startswith("offset_factor=16 is ignored")
