"""reindex, reindex_cache_read, reindex_cache_write and cache_index: expected IR, numerics,
trace replay, and each refusal rule."""
import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir import IndexMap
from mlc_lab.tir.schedule import errors
from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after


# -- programs ---------------------------------------------------------------------------------------
@T.prim_func
def flip(A: T.Buffer((6, 10), "float32"), B: T.Buffer((10, 6), "float32")):
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] + T.float32(3)


@T.prim_func
def flip_reindexed(A: T.Buffer((6, 10), "float32"), B: T.Buffer((10, 6), "float32")):
    A_reindex = T.alloc_buffer((10, 6))
    for ax0, ax1 in T.grid(10, 6):
        with T.block("A_reindex"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            A_reindex[v0, v1] = A[v1, v0]
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A_reindex[vi, vj] + T.float32(3)


@T.prim_func
def mm(A: T.Buffer((8, 12), "float32"), B: T.Buffer((12, 16), "float32"),
       C: T.Buffer((8, 16), "float32")):
    for i, j, k in T.grid(8, 16, 12):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def mm_C_reindexed(A: T.Buffer((8, 12), "float32"), B: T.Buffer((12, 16), "float32"),
                   C: T.Buffer((8, 16), "float32")):
    C_reindex = T.alloc_buffer((8, 16))
    for i, j, k in T.grid(8, 16, 12):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C_reindex[vi, vj] = T.float32(0)
            C_reindex[vi, vj] = C_reindex[vi, vj] + A[vi, vk] * B[vk, vj]
    for ax0, ax1 in T.grid(8, 16):
        with T.block("C_reindex"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            C[v0, v1] = C_reindex[v0, v1]


@T.prim_func
def window(X: T.Buffer((20,), "float32"), Y: T.Buffer((8,), "float32")):
    for o, r in T.grid(8, 3):
        with T.block("Y"):
            vo, vr = T.axis.remap("SR", [o, r])
            with T.init():
                Y[vo] = T.float32(0)
            Y[vo] = Y[vo] + X[vo * 2 + vr + T.floordiv(vo, 8) * 5]


@T.prim_func
def padded(X: T.Buffer((8,), "float32"), P: T.Buffer((12,), "float32")):
    for i in range(12):
        with T.block("P"):
            vi = T.axis.spatial(12, i)
            P[vi] = T.if_then_else(2 <= vi and vi < 10, X[vi - 2], T.float32(0))


@T.prim_func
def two_patterns(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + A[vj, vi]


@T.prim_func
def accumulate(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = B[vi] + A[vi]


@T.prim_func
def guarded(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(12):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            T.where(i < 10)
            B[vi] = A[vi] * T.float32(2)


@T.prim_func
def every_other(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            if vi % 2 == 0:
                B[vi] = A[vi]


@T.prim_func
def two_stages(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] + T.float32(1)


@T.prim_func
def tiled(A: T.Buffer((32,), "float32"), C: T.Buffer((32,), "float32")):
    B = T.alloc_buffer((32,))
    for o in range(4):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(32, o * 8 + i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(32, o * 8 + i)
                C[vi] = B[vi] * T.float32(3)


@T.prim_func
def tiled_cached(A: T.Buffer((32,), "float32"), C: T.Buffer((32,), "float32")):
    B = T.alloc_buffer((32,))
    B_shared = T.alloc_buffer((8, 4), scope="shared")
    for o in range(4):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(32, o * 8 + i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("B_shared"):
                vi = T.axis.spatial(32, o * 8 + i)
                B_shared[vi % 8, vi // 8] = B[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(32, o * 8 + i)
                C[vi] = B_shared[vi % 8, vi // 8] * T.float32(3)


@T.prim_func
def upsample(A: T.Buffer((1, 2, 10, 10), "float32"), B: T.Buffer((1, 2, 20, 20), "float32")):
    for n, c, h, w in T.grid(1, 2, 20, 20):
        with T.block("B"):
            vn, vc, vh, vw = T.axis.remap("SSSS", [n, c, h, w])
            B[vn, vc, vh, vw] = A[vn, vc, vh // 4 + vw // 4, vw // 2]


# -- reindex ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("buffer", [("read", 0), "A"])
def test_reindex_read_makes_the_access_a_plain_grid(buffer):
    sch = tir.Schedule(flip)
    stage = sch.reindex("B", buffer)
    assert stage.name == "A_reindex"
    assert_schedule_ok(sch, flip, flip_reindexed)
    assert sch.trace.as_python()[-1] == 'b0 = sch.reindex(block="B", buffer=["read", 0])'


@pytest.mark.parametrize("buffer", [("write", 0), "C"])
def test_reindex_write_of_a_reduction_copies_back_after_it(buffer):
    sch = tir.Schedule(mm)
    sch.reindex(sch.get_block("C"), buffer)   # C is read and written: the name means the write
    assert_schedule_ok(sch, mm, mm_C_reindexed)
    assert_runs_like(mm, sch, outputs=[2])


def test_reindex_keeps_only_the_iterators_the_simplified_indices_use():
    sch = tir.Schedule(window)
    sch.reindex("Y", ("read", 0))
    buffer = sch.mod["main"].body.block.alloc_buffers[0]
    assert buffer.name == "X_reindex" and [int(d) for d in buffer.shape] == [8, 3]
    assert "X[v0 * 2 + v1]" in sch.mod["main"].script()   # the vo // 8 term is gone
    assert_schedule_ok(sch, window)


def test_reindex_by_buffer_object():
    sch = tir.Schedule(flip)
    sch.reindex("B", sch.get("B").reads[0].buffer)
    assert_schedule_ok(sch, flip, flip_reindexed)


def test_reindex_refusals():
    sch = tir.Schedule(two_patterns)
    unchanged_after(sch, lambda: sch.reindex("B", "A"), errors.NonUniqueAccessError, "A[vi, vj]",
                    "A[vj, vi]")
    sch = tir.Schedule(accumulate)
    n = [r.buffer.name for r in sch.get("B").reads].index("B")
    unchanged_after(sch, lambda: sch.reindex("B", ("read", n)), errors.ReindexWritesReadBufferError,
                    "also writes buffer B")
    sch = tir.Schedule(accumulate)
    unchanged_after(sch, lambda: sch.reindex("B", ("write", 0)),
                    errors.ReindexReadsWrittenBufferError, "without being a reduction")
    sch = tir.Schedule(guarded)
    unchanged_after(sch, lambda: sch.reindex("B", ("write", 0)), errors.PartialWriteError, "T.where")
    sch = tir.Schedule(padded)
    unchanged_after(sch, lambda: sch.reindex("P", "X"), errors.ReindexOutOfBoundsError, "vi - 2")
    sch = tir.Schedule(flip)
    unchanged_after(sch, lambda: sch.reindex("B", ("read", 3)), errors.BufferIndexOutOfRangeError)
    unchanged_after(sch, lambda: sch.reindex("B", "Q"), errors.BufferNotAccessedError, "'Q'")
    assert issubclass(errors.NonUniqueAccessError, errors.ReindexError)


def test_reindex_refuses_blocks_not_alone_in_their_loops():
    sch = tir.Schedule(tiled)
    unchanged_after(sch, lambda: sch.reindex("C", "B"), errors.NotLoopChainError, '"C"')
    sch = tir.Schedule(flip)
    sch.blockize(sch.get_loops("B")[1])
    unchanged_after(sch, lambda: sch.reindex("B_o", ("read", 0)), errors.NotLeafBlockError, '"B"')


# -- reindex_cache_read / reindex_cache_write -------------------------------------------------------
@pytest.mark.parametrize("index_map", [lambda i: (i % 8, i // 8), "lambda i: (i % 8, i // 8)",
                                       IndexMap.from_func(lambda i: (i % 8, i // 8),
                                                          index_dtype="int32")])
def test_reindex_cache_read_inside_a_shared_loop(index_map):
    sch = tir.Schedule(tiled)
    assert sch.reindex_cache_read("C", 0, "shared", index_map).name == "B_shared"
    assert_schedule_ok(sch, tiled, tiled_cached)


def test_reindex_cache_read_and_write_compute_the_same():
    sch = tir.Schedule(two_stages)
    sch.reindex_cache_read("C", "B", "local", lambda i: (i // 4, i % 4))
    sch.reindex_cache_write("B", 0, "shared", lambda i: (i % 4, i // 4))
    assert [int(d) for d in sch.get("B_local").writes[0].buffer.shape] == [4, 4]
    assert_schedule_ok(sch, two_stages)
    assert_runs_like(two_stages, sch, outputs=[1])


def test_reindex_cache_write_of_a_reduction():
    sch = tir.Schedule(mm)
    sch.reindex_cache_write("C", 0, "local", lambda i, j, k: (j, i))
    assert sch.get("C").writes[0].buffer.name == "C_local"
    assert [int(d) for d in sch.get("C").writes[0].buffer.shape] == [16, 8]
    assert_schedule_ok(sch, mm)


def test_reindex_cache_refusals():
    sch = tir.Schedule(two_stages)
    unchanged_after(sch, lambda: sch.reindex_cache_read("C", 0, "shared", lambda i: (0,)),
                    errors.IndexMapNotMatchError, "vi")
    unchanged_after(sch, lambda: sch.reindex_cache_read("C", 0, "shared", lambda i: (i // 2,)),
                    errors.IndexMapNotInjectiveError, "lambda i: (i // 2,)")
    unchanged_after(sch, lambda: sch.reindex_cache_read("C", 0, "shared", lambda i, j: (i,)),
                    errors.IndexMapArityError, "takes 2 argument(s)")
    unchanged_after(sch, lambda: sch.reindex_cache_read("C", 0, "sharred", lambda i: (i,)),
                    errors.UnknownStorageScopeError, "sharred")
    sch = tir.Schedule(flip)
    sch.blockize(sch.get_loops("B")[1])
    unchanged_after(sch, lambda: sch.reindex_cache_read("B_o", 0, "local", lambda i: (i,)),
                    errors.NotSinglePointAccessError, "A[0:6, vi]")
    sch = tir.Schedule(every_other)
    unchanged_after(sch, lambda: sch.reindex_cache_write("B", 0, "local", lambda i: (i,)),
                    errors.PartialWriteError, "under a condition")
    unchanged_after(sch, lambda: sch.reindex("B", ("write", 0)), errors.PartialWriteError,
                    "under a condition")
    sch = tir.Schedule(accumulate)
    unchanged_after(sch, lambda: sch.reindex_cache_read("B", "B", "local", lambda i: (i,)),
                    errors.ReindexWritesReadBufferError)
    sch = tir.Schedule(padded)
    unchanged_after(sch, lambda: sch.reindex_cache_read("P", 0, "local", lambda i: (i,)),
                    errors.ReindexOutOfBoundsError)


# -- cache_index ------------------------------------------------------------------------------------
def test_cache_index_precomputes_the_index_arithmetic():
    sch = tir.Schedule(upsample)
    stages = sch.cache_index("B", "global")
    assert [s.name for s in stages] == ["index_0", "index_1"]
    func = sch.mod["main"]
    assert [tuple(int(d) for d in b.shape) for b in func.body.block.alloc_buffers] == \
        [(20, 20), (20,)]
    assert "A[vn, vc, index_var_0[vh, vw], index_var_1[vw]]" in func.script()
    # the block's reads name the new buffers, so the dependency is visible
    assert [b.name for b in sch.get_consumers("index_0")] == ["B"]
    assert_schedule_ok(sch, upsample)
    assert_runs_like(upsample, sch, outputs=[1])


@T.prim_func
def repeated(A: T.Buffer((64,), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[(vi * 8 + vj) % 64] + A[(vi * 8 + vj) % 64 // 2] * A[vj * 7 // 8]


def test_cache_index_threshold_keeps_what_is_used_often_enough():
    sch = tir.Schedule(repeated)
    names = [b.buffer.name for b in sch.get(sch.cache_index("B", "global", 2)[0]).writes]
    assert names == ["index_var_0"]
    assert "index_var_0[vi, vj] // 2" in sch.mod["main"].script()
    assert_schedule_ok(sch, repeated)
    sch = tir.Schedule(repeated)
    assert len(sch.cache_index("B", "global", 0)) == 3
    assert_schedule_ok(sch, repeated)


@T.prim_func
def divided(A: T.Buffer((9,), "float32"), B: T.Buffer((9,), "float32")):
    for i in range(9):
        with T.block("B"):
            vi = T.axis.spatial(9, i)
            B[vi] = T.if_then_else(vi > 0, A[8 // vi], T.float32(0))


def test_cache_index_leaves_divisions_by_an_iterator_alone():
    sch = tir.Schedule(divided)
    for stage in sch.cache_index("B", "global"):   # the condition vi > 0 may be precomputed
        assert "//" not in str(sch.get(stage).body)
    assert "A[8 // vi]" in sch.mod["main"].script()
    assert_schedule_ok(sch, divided)
    sch = tir.Schedule(flip)
    sch.blockize(sch.get_loops("B")[1])
    unchanged_after(sch, lambda: sch.cache_index("B_o", "global"), errors.NotLeafBlockError)
    unchanged_after(sch, lambda: sch.cache_index("B", "globl"), errors.UnknownStorageScopeError)


def test_cache_index_of_a_condition_builds_and_runs():
    sch = tir.Schedule(divided)
    sch.cache_index("B", "global")
    assert_runs_like(divided, sch, outputs=[1])


@T.prim_func
def split_rows(A: T.Buffer((24,), "float32"), B: T.Buffer((12,), "float32")):
    for io, ii in T.grid(3, 4):
        with T.block("B"):
            vi = T.axis.spatial(12, io * 4 + ii)
            B[vi] = A[vi * 2 - vi % 3 + 2]


def test_reindex_and_cache_index_under_split_loops():
    sch = tir.Schedule(split_rows)
    sch.cache_index("B", "local")
    assert "index_var_0[vi]" in sch.mod["main"].script()
    assert_schedule_ok(sch, split_rows)
    sch = tir.Schedule(split_rows)
    sch.reindex("B", ("write", 0))           # io * 4 + ii reaches every point of vi
    sch.reindex("B", ("read", 0))
    assert_schedule_ok(sch, split_rows)
    assert_runs_like(split_rows, sch, outputs=[1])


@T.prim_func
def overhang(A: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
    B = T.alloc_buffer((10,))
    for o, i in T.grid(3, 4):
        with T.block("B"):
            vi = T.axis.spatial(10, o * 4 + i)
            T.where(o * 4 + i < 10)
            B[vi] = A[vi] * T.float32(2)
    for o, i in T.grid(3, 4):
        with T.block("C"):
            vi = T.axis.spatial(10, o * 4 + i)
            T.where(o * 4 + i < 10)
            C[vi] = B[vi] + T.float32(1)


def test_reindex_cache_copies_keep_the_blocks_t_where():
    sch = tir.Schedule(overhang)
    sch.reindex_cache_read("C", 0, "shared", lambda i: (i,))
    sch.reindex_cache_write("B", 0, "local", lambda i: (i,))
    for stage in ("B_shared", "B_local"):
        assert "T.where(" in sch.mod["main"].script().split(f'T.block("{stage}")')[1].split("T.block")[0]
    assert_schedule_ok(sch, overhang)
    assert_runs_like(overhang, sch, outputs=[1])
    sch = tir.Schedule(overhang)
    unchanged_after(sch, lambda: sch.reindex("B", ("write", 0)), errors.PartialWriteError, "T.where")


@T.prim_func
def masked_rows(A: T.Buffer((3, 8), "float32"), S: T.Buffer((3,), "float32")):
    B = T.alloc_buffer((3, 8))
    for i, k in T.grid(3, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SS", [i, k])
            T.where(k < 5)
            B[vi, vk] = A[vi, vk] * T.float32(2)
    for i, k in T.grid(3, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.where(k < 5)
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + B[vi, vk]


def test_reindex_read_of_a_predicated_block_copies_only_what_it_reads():
    # B holds values only where k < 5; a copy over the whole (3, 8) domain would read the rest,
    # which nothing wrote (the interpreter behind the numerics check stops on such a read).
    sch = tir.Schedule(masked_rows)
    sch.reindex("S", ("read", 0))
    stage = sch.mod["main"].script().split('T.block("B_reindex")')[1].split("T.block")[0]
    assert "T.where(k < 5)" in stage
    assert_schedule_ok(sch, masked_rows)
    assert_runs_like(masked_rows, sch, outputs=[1])


@T.prim_func
def masked_by_other_loop(A: T.Buffer((3, 8), "float32"), B: T.Buffer((3,), "float32"),
                         S: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.where(k < 5)
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk] * B[vi]


def test_reindex_read_refuses_a_predicate_on_a_loop_the_copy_does_not_run():
    # B[vi] is indexed by vi alone, but the T.where is on k: the copy over i cannot keep it.
    sch = tir.Schedule(masked_by_other_loop)
    unchanged_after(sch, lambda: sch.reindex("S", ("read", 1)), errors.ReindexOutOfBoundsError,
                    '"S"', "loop k")
