"""compute_inline / reverse_compute_inline where the intermediate is accessed at expressions
of the block iterators (reshapes, shifts, parts of a buffer), and the orders of execution the
two primitives must keep: expected IR, numerics, trace replay, every refusal."""
from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip
from schedule_checks import assert_runs_like, assert_schedule_ok
from test_schedule_inline import inline_fails

errors = tir.schedule.errors


# ----------------------------------------------------------------------------------------------
# reverse_compute_inline of a consumer that loads at expressions of its iterators
def reverse_inlines(original, block_name="C", expected=None):
    sch = tir.Schedule(original, check_numerics=True)
    sch.reverse_compute_inline(sch.get_block(block_name))
    assert_schedule_ok(sch, original, expected)
    assert_runs_like(original, sch, [len(original.params) - 1])   # the output, written in full
    return sch.mod["main"]


def test_reverse_compute_inline_shifted_load_guards_the_first_element():
    @T.prim_func
    def shifted(A: T.Buffer((9,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((9,))
        for i in range(9):
            with T.block("B"):
                vi = T.axis.spatial(9, i)
                B[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi + 1]

    @T.prim_func
    def expected(A: T.Buffer((9,), "float32"), C: T.Buffer((8,), "float32")):
        for i in range(9):
            with T.block("B"):
                vi = T.axis.spatial(9, i)
                if vi >= 1:
                    C[vi - 1] = A[vi]

    reverse_inlines(shifted, expected=expected)


def test_reverse_compute_inline_of_a_consumer_reading_part_of_the_buffer():
    @T.prim_func
    def head(A: T.Buffer((16,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] * T.float32(3)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)

    @T.prim_func
    def expected(A: T.Buffer((16,), "float32"), C: T.Buffer((8,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                if vi < 8:
                    C[vi] = A[vi] * T.float32(3) + T.float32(1)

    reverse_inlines(head, expected=expected)


def test_reverse_compute_inline_of_a_reshape():
    @T.prim_func
    def reshape(A: T.Buffer((2, 16), "float32"), C: T.Buffer((4, 8), "float32")):
        B = T.alloc_buffer((2, 16))
        for i, j in T.grid(2, 16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] - T.float32(1)
        for i, j in T.grid(4, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[(vi * 8 + vj) // 16, (vi * 8 + vj) % 16]

    @T.prim_func
    def expected(A: T.Buffer((2, 16), "float32"), C: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(2, 16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[(vj + vi * 16) // 8, (vj + vi * 16) % 8] = A[vi, vj] - T.float32(1)

    reverse_inlines(reshape, expected=expected)


def test_reverse_compute_inline_of_one_row_keeps_only_that_row():
    @T.prim_func
    def first_row(A: T.Buffer((4, 8), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((4, 8))
        for i, j in T.grid(4, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for j in range(8):
            with T.block("C"):
                vj = T.axis.spatial(8, j)
                C[vj] = B[0, vj]

    func = reverse_inlines(first_row)
    assert "if vi == 0" in func.script()


def test_reverse_compute_inline_of_a_wrapping_digit_keeps_its_range():
    @T.prim_func
    def halves(A: T.Buffer((2, 8), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((2, 8))
        for i, j in T.grid(2, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for k in range(8):
            with T.block("C"):
                vk = T.axis.spatial(8, k)
                C[vk] = B[vk // 4, vk % 4]

    func = reverse_inlines(halves)
    assert "vj < 4" in func.script()


def test_reverse_compute_inline_conditional_load_inside_what_is_written():
    @T.prim_func
    def upper(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = T.if_then_else(vi >= 4, B[vi], T.float32(0))

    reverse_inlines(upper)


def test_reverse_compute_inline_into_a_guarded_producer_merges_the_guards():
    @T.prim_func
    def guarded(A: T.Buffer((16,), "float32"), C: T.Buffer((12,), "float32")):
        B = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                if vi < 12:
                    B[vi] = A[vi]
        for i in range(12):
            with T.block("C"):
                vi = T.axis.spatial(12, i)
                C[vi] = B[vi] * T.float32(2)

    @T.prim_func
    def expected(A: T.Buffer((16,), "float32"), C: T.Buffer((12,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                if vi < 12:
                    C[vi] = A[vi] * T.float32(2)

    reverse_inlines(guarded, expected=expected)


def test_reverse_compute_inline_chain_of_reshapes_in_either_order():
    @T.prim_func
    def chain(A: T.Buffer((16, 4), "float32"), D: T.Buffer((1, 4, 4, 4), "float32")):
        B = T.alloc_buffer((16, 4))
        C = T.alloc_buffer((4, 4, 4))
        for i, j in T.grid(16, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                C[vi, vj, vk] = B[vi * 4 + vj, vk] * T.float32(2)
        for i, j, k, l in T.grid(1, 4, 4, 4):
            with T.block("D"):
                vi, vj, vk, vl = T.axis.remap("SSSS", [i, j, k, l])
                D[vi, vj, vk, vl] = C[vj, vk, vl]

    for order in (("C", "D"), ("D", "C")):
        sch = tir.Schedule(chain, check_numerics=True)
        for name in order:
            sch.reverse_compute_inline(sch.get_block(name))
        assert_schedule_ok(sch, chain)
        assert "D[0, vi // 4, vi % 4, vj]" in sch.mod["main"].script()


# What stays refused: loads that skip elements or leave iterators undetermined, elements the
# producer may not write, consumers whose order of writes matters, outputs read too early.
@T.prim_func
def strided(A: T.Buffer((16,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi * 2]


def test_reverse_compute_inline_strided_load_is_refused():
    inline_fails(strided, "reverse_compute_inline", "C", errors.IndicesNotIteratorsError, "skips")


def test_reverse_compute_inline_load_missing_an_iterator_is_refused():
    @T.prim_func
    def broadcast(A: T.Buffer((8,), "float32"), C: T.Buffer((8, 4), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i, j in T.grid(8, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi]

    inline_fails(broadcast, "reverse_compute_inline", "C", errors.IndicesNotIteratorsError, "vj")


def test_reverse_compute_inline_conditional_load_beyond_the_producer_is_refused():
    @T.prim_func
    def padded(A: T.Buffer((8,), "float32"), C: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = T.if_then_else(vi >= 8, B[vi - 8], T.float32(0))

    inline_fails(padded, "reverse_compute_inline", "C", errors.ProducerNotCoverConsumerError, '"B"')


def test_reverse_compute_inline_conditional_load_of_a_guarded_producer_is_refused():
    @T.prim_func
    def guarded(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                if vi >= 2:
                    B[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = T.if_then_else(vi >= 2, B[vi], T.float32(0))

    inline_fails(guarded, "reverse_compute_inline", "C", errors.ProducerNotCoverConsumerError)


def test_reverse_compute_inline_store_to_one_place_is_refused():
    @T.prim_func
    def last(A: T.Buffer((8,), "float32"), C: T.Buffer((1,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[0] = B[7 - vi]

    inline_fails(last, "reverse_compute_inline", "C", errors.IndicesNotIteratorsError)


def test_reverse_compute_inline_overlapping_stores_are_refused():
    @T.prim_func
    def overlap(A: T.Buffer((8,), "float32"), C: T.Buffer((4,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi // 2] = B[vi]

    inline_fails(overlap, "reverse_compute_inline", "C", errors.NonInjectiveStoreError, "C[vi // 2]")


def test_reverse_compute_inline_producer_reading_the_output_is_refused():
    @T.prim_func
    def in_place(C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = C[7 - vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)

    inline_fails(in_place, "reverse_compute_inline", "C", errors.OutputReadBetweenError, '"B"')


def test_reverse_compute_inline_of_a_consumer_running_part_of_its_domain_is_refused():
    @T.prim_func
    def half(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(4):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi]

    inline_fails(half, "reverse_compute_inline", "C", errors.PartialConsumerError)


# ----------------------------------------------------------------------------------------------
# compute_inline of a producer storing at expressions of its iterators
def test_compute_inline_of_a_flattening_producer():
    @T.prim_func
    def flatten(A: T.Buffer((4, 8), "float32"), C: T.Buffer((32,), "float32")):
        B = T.alloc_buffer((32,))
        for i, j in T.grid(4, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi * 8 + vj] = A[vi, vj] * T.float32(2)
        for k in range(32):
            with T.block("C"):
                vk = T.axis.spatial(32, k)
                C[vk] = B[vk] + T.float32(1)

    @T.prim_func
    def expected(A: T.Buffer((4, 8), "float32"), C: T.Buffer((32,), "float32")):
        for k in range(32):
            with T.block("C"):
                vk = T.axis.spatial(32, k)
                C[vk] = A[vk // 8, vk % 8] * T.float32(2) + T.float32(1)

    sch = tir.Schedule(flatten, check_numerics=True)
    sch.compute_inline(sch.get_block("B"))
    assert_schedule_ok(sch, flatten, expected)
    verify_trace_roundtrip(sch, flatten)


def test_compute_inline_of_a_producer_with_a_unit_iterator():
    @T.prim_func
    def row(A: T.Buffer((1, 8), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i, j in T.grid(1, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vj] = A[vi, vj] + T.float32(1)
        for k in range(8):
            with T.block("C"):
                vk = T.axis.spatial(8, k)
                C[vk] = B[vk] * T.float32(3)

    sch = tir.Schedule(row, check_numerics=True)
    sch.compute_inline(sch.get_block("B"))
    assert_schedule_ok(sch, row)
    assert "A[0, vk]" in sch.mod["main"].script()


def test_reverse_compute_inline_symbolic_extent_needs_no_guard():
    @T.prim_func
    def scale(a: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, T.int64(4)))
        C = T.match_buffer(c, (n, T.int64(4)))
        B = T.alloc_buffer((n, T.int64(4)))
        for i, j in T.grid(n, T.int64(4)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(n, T.int64(4)):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)

    sch = tir.Schedule(scale)
    sch.reverse_compute_inline(sch.get_block("C"))
    text = sch.mod["main"].script()
    assert "if " not in text and "C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)" in text
    verify_trace_roundtrip(sch, scale)


def test_compute_inline_with_its_input_overwritten_before_the_consumer_is_refused():
    @T.prim_func
    def overwrite(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(8):
            with T.block("X"):
                vi = T.axis.spatial(8, i)
                A[vi] = T.float32(0)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)

    inline_fails(overwrite, "compute_inline", "B", errors.InputWrittenBetweenError, '"X"', "A")


def test_reverse_compute_inline_with_its_output_read_in_between_is_refused():
    @T.prim_func
    def read_early(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"),
                   D: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(8):
            with T.block("X"):
                vi = T.axis.spatial(8, i)
                D[vi] = C[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)

    inline_fails(read_early, "reverse_compute_inline", "C", errors.OutputReadBetweenError, '"X"')
