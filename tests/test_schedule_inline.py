"""compute_inline / reverse_compute_inline: expected IR, numerics, trace replay, every failure."""
import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from schedule_checks import assert_schedule_ok, unchanged_after

errors = tir.schedule.errors


# ----------------------------------------------------------------------------------------------
# Programs
@T.prim_func
def scale_add(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


def inline_fails(original, primitive, block_name, error, *names):
    """sch.<primitive>(block) raises ``error`` (an InlineError) naming the block and ``names``,
    underlines the culprit, and leaves the schedule unchanged."""
    assert issubclass(error, errors.InlineError)
    sch = tir.Schedule(original)
    block = sch.get_block(block_name)
    message = unchanged_after(sch, lambda: getattr(sch, primitive)(block), error,
                              f"sch.{primitive}", f'"{block_name}"', *names)
    assert "^^^" in message
    return message


@T.prim_func
def mm_relu(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
            C: T.Buffer((32, 32), "float32")):
    Y = T.alloc_buffer((32, 32))
    for i, j, k in T.grid(32, 32, 32):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@T.prim_func
def add_bias_relu(A: T.Buffer((8, 16), "float32"), bias: T.Buffer((8,), "float32"),
                  C: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((16, 8))
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] + T.float32(1)
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(B[vj, vi] + bias[vi], T.float32(0))


# ----------------------------------------------------------------------------------------------
# compute_inline
def test_compute_inline_elementwise_producer():
    @T.prim_func
    def expected(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)

    sch = tir.Schedule(scale_add, check_numerics=True)
    sch.compute_inline(sch.get_block("B"))
    assert_schedule_ok(sch, scale_add, expected)


def test_compute_inline_into_consumers_with_other_indices():
    @T.prim_func
    def shifted(A: T.Buffer((16,), "float32"), C: T.Buffer((8,), "float32"),
                D: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] * A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi * 2] + B[vi * 2 + 1]
        for i in range(16):
            with T.block("D"):
                vi = T.axis.spatial(16, i)
                D[vi] = B[15 - vi]

    @T.prim_func
    def expected(A: T.Buffer((16,), "float32"), C: T.Buffer((8,), "float32"),
                 D: T.Buffer((16,), "float32")):
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = A[vi * 2] * A[vi * 2] + A[vi * 2 + 1] * A[vi * 2 + 1]
        for i in range(16):
            with T.block("D"):
                vi = T.axis.spatial(16, i)
                D[vi] = A[15 - vi] * A[15 - vi]

    sch = tir.Schedule(shifted)
    sch.compute_inline(sch.get_block("B"))
    assert_schedule_ok(sch, shifted, expected)


def test_compute_inline_after_compute_at_removes_emptied_loops():
    @T.prim_func
    def expected(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        for i in range(16):
            for j in range(16):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)

    sch = tir.Schedule(scale_add)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    sch.compute_inline(sch.get_block("B"))
    assert_schedule_ok(sch, scale_add, expected)


def test_compute_inline_softmax_exp_into_two_consumers():
    @T.prim_func
    def softmax(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
        expval = T.alloc_buffer((4, 8))
        expsum = T.alloc_buffer((4,))
        for i, j in T.grid(4, 8):
            with T.block("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                expval[vi, vj] = T.exp(A[vi, vj])
        for i, k in T.grid(4, 8):
            with T.block("expsum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    expsum[vi] = T.float32(0)
                expsum[vi] = expsum[vi] + expval[vi, vk]
        for i, j in T.grid(4, 8):
            with T.block("norm"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = expval[vi, vj] / expsum[vi]

    sch = tir.Schedule(softmax, check_numerics=True)
    sch.compute_inline(sch.get_block("exp"))
    result = sch.mod["main"]
    assert [b.name for b in result.body.block.alloc_buffers] == ["expsum"]
    assert_schedule_ok(sch, softmax)


def test_compute_inline_reduction_is_refused():
    inline_fails(mm_relu, "compute_inline", "Y", errors.NotCompleteBlockError)


def test_compute_inline_output_block_is_refused():
    inline_fails(scale_add, "compute_inline", "C", errors.OutputBlockError)


def test_compute_inline_needs_a_single_store():
    @T.prim_func
    def two_stores(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        B2 = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
                B2[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + B2[vi]

    inline_fails(two_stores, "compute_inline", "B", errors.BodyNotSingleStoreError)


def test_compute_inline_needs_plain_iterator_indices():
    @T.prim_func
    def strided(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((16,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi * 2] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi * 2]

    inline_fails(strided, "compute_inline", "B", errors.IndicesNotIteratorsError, "vi * 2")


def test_compute_inline_value_using_another_iterator_is_refused():
    @T.prim_func
    def broadcast(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i, j in T.grid(8, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi] = A[vi, vj]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi]

    inline_fails(broadcast, "compute_inline", "B", errors.ValueUsesOtherIteratorError)


def test_compute_inline_of_a_second_writer_is_refused():
    @T.prim_func
    def two_writers(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B0"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(8):
            with T.block("B1"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi]

    inline_fails(two_writers, "compute_inline", "B0", errors.NotSingleWriterError)


# ----------------------------------------------------------------------------------------------
# reverse_compute_inline
def test_reverse_compute_inline_relu_into_elementwise_producer():
    @T.prim_func
    def expected(A: T.Buffer((8, 16), "float32"), bias: T.Buffer((8,), "float32"),
                 C: T.Buffer((8, 16), "float32")):
        for i, j in T.grid(16, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vj, vi] = T.max(A[vj, vi] + T.float32(1) + bias[vj], T.float32(0))

    sch = tir.Schedule(add_bias_relu, check_numerics=True)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_schedule_ok(sch, add_bias_relu, expected)


def test_reverse_compute_inline_after_decomposed_matmul():
    @T.prim_func
    def mm_then_bias_then_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                               C: T.Buffer((16, 16), "float32")):
        Y = T.alloc_buffer((16, 16))
        Z = T.alloc_buffer((16, 16))
        for i, j, k in T.grid(16, 16, 16):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(16, 16):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + T.float32(1)
        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Z[vi, vj], T.float32(0))

    @T.prim_func
    def expected(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                 C: T.Buffer((16, 16), "float32")):
        Y = T.alloc_buffer((16, 16))
        for i, j, k in T.grid(16, 16, 16):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(16, 16):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj] + T.float32(1), T.float32(0))

    sch = tir.Schedule(mm_then_bias_then_relu, check_numerics=True)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_schedule_ok(sch, mm_then_bias_then_relu, expected)


def test_reverse_compute_inline_into_reduction_is_refused():
    message = inline_fails(mm_relu, "reverse_compute_inline", "C", errors.NotCompleteBlockError, '"Y"')
    assert "producer" in message


def test_reverse_compute_inline_two_intermediates_is_refused():
    @T.prim_func
    def two_inputs(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B0 = T.alloc_buffer((8,))
        B1 = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B0"):
                vi = T.axis.spatial(8, i)
                B0[vi] = A[vi]
        for i in range(8):
            with T.block("B1"):
                vi = T.axis.spatial(8, i)
                B1[vi] = A[vi] * T.float32(2)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B0[vi] + B1[vi]

    inline_fails(two_inputs, "reverse_compute_inline", "C", errors.NotSingleIntermediateError,
                 "B0, B1")


def test_reverse_compute_inline_loads_at_two_places_is_refused():
    @T.prim_func
    def two_loads(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + B[7 - vi]

    inline_fails(two_loads, "reverse_compute_inline", "C", errors.InconsistentLoadIndicesError)


def test_reverse_compute_inline_with_another_reader_is_refused():
    @T.prim_func
    def shared_input(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"),
                     D: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] * T.float32(2)
        for i in range(8):
            with T.block("D"):
                vi = T.axis.spatial(8, i)
                D[vi] = B[vi] * T.float32(3)

    inline_fails(shared_input, "reverse_compute_inline", "C", errors.NotSingleConsumerError, '"D"')


def test_argument_types_are_checked():
    sch = tir.Schedule(scale_add)
    loop = sch.get_loops(sch.get_block("B"))[0]
    with pytest.raises(TypeError, match="BlockRV"):
        sch.compute_inline(loop)
    with pytest.raises(TypeError, match="BlockRV"):
        sch.reverse_compute_inline(loop)


# -- an accumulator written back under a tile -------------------------------------------------
@T.prim_func
def row_sums_relu(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16,), "float32")):
    S = T.alloc_buffer((16,))
    for i, k in T.grid(16, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]
    for i in range(16):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = T.max(S[vi], T.float32(0))


def tiled_accumulator(move_consumer: bool):
    """S accumulated in a "local" cache under a tile of 4 rows, written back there; C moved
    under the tile too when ``move_consumer``."""
    sch = tir.Schedule(row_sums_relu)
    i, _ = sch.get_loops(sch.get_block("S"))
    tile, _ = sch.split(i, [4, 4])
    write_back = sch.cache_write(sch.get_block("S"), 0, "local")
    sch.reverse_compute_at(write_back, tile)
    if move_consumer:
        sch.reverse_compute_at(sch.get_block("C"), tile)
    return sch, write_back


def test_compute_inline_of_a_write_back_read_in_the_same_tile():
    # The reduction rewrites S_local in every tile, before the write-back; C reads, in the same
    # tile, only rows the write-back copied there: reading S_local directly is the same.
    sch, write_back = tiled_accumulator(move_consumer=True)
    sch.compute_inline(write_back)
    text = sch.mod["main"].script()
    assert "C[vi] = T.max(S_local[vi], T.float32(0))" in text and "S = T.alloc_buffer" not in text
    assert_schedule_ok(sch, row_sums_relu)


def test_compute_inline_of_a_write_back_read_after_the_tiles_is_refused():
    # After the loop, S_local holds the last value the reduction wrote for each row, and
    # nothing proves the earlier write-back saw the same: kept refused.
    sch, write_back = tiled_accumulator(move_consumer=False)
    unchanged_after(sch, lambda: sch.compute_inline(write_back), errors.InputWrittenBetweenError,
                    "sch.compute_inline", 'block "S" writes S_local')
