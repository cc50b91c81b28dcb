"""The loop-nest picture: one box per loop with its label and kind colour, the tiles one iteration
of a loop touches (checked cell by cell against the loops run by hand), and the visit-order
animation, which refuses programs too big to watch."""
import itertools
import xml.etree.ElementTree as ET

import pytest

from mlc_lab import te, tir
from mlc_lab.viz.loop_nest import (KIND_COLOURS, animate_visit_order, loop_nest,
                                   touched_regions)

SVG = "{http://www.w3.org/2000/svg}"


def matmul(n: int, m: int | None = None):
    m = m or n
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, m), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def tiled(n: int = 16, tile: int = 4, m: int | None = None):
    """C = A @ B in tiles: i_0, j_0, k_0, i_1, j_1, k_1 (the classic blocked loop order)."""
    sch = tir.Schedule(matmul(n, m))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    k0, k1 = sch.split(k, [None, tile])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return sch, (i0, j0, k0, i1, j1, k1)


def loop_rects(svg: str) -> list:
    return [r for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("class") == "loop"]


def texts(svg: str) -> list:
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text")]


def test_one_box_per_loop_with_its_label_and_kind_colour():
    sch, (i0, j0, k0, i1, j1, k1) = tiled(16)
    sch.parallel(i0)
    sch.unroll(i1)
    sch.vectorize(j1)
    svg = loop_nest(sch, "C").svg
    rects = loop_rects(svg)
    assert [(r.get("data-loop"), r.get("data-kind"), r.get("data-extent")) for r in rects] == [
        ("i_0", "parallel", "4"), ("j_0", "serial", "4"), ("k_0", "serial", "4"),
        ("i_1", "unrolled", "4"), ("j_1", "vectorized", "4"), ("k_1", "serial", "4")]
    for rect in rects:
        assert rect.get("stroke") == KIND_COLOURS[rect.get("data-kind")][0]
    # nested: each box lies inside the one before it
    boxes = [tuple(float(r.get(a)) for a in ("x", "y", "width", "height")) for r in rects]
    for (x0, y0, w0, h0), (x1, y1, w1, h1) in zip(boxes, boxes[1:]):
        assert x0 < x1 and y0 < y1 and x1 + w1 < x0 + w0 and y1 + h1 < y0 + h0
    [block] = [r for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("class") == "block"]
    assert block.get("data-block") == "C" and float(block.get("x")) > boxes[-1][0]
    words = texts(svg)
    for label in ["for i_0 in range(4)", "for k_1 in range(4)", 'block "C"  (v_i: S, v_j: S, v_k: R)',
                  "parallel", "unrolled", "vectorized", "serial"]:
        assert label in words, (label, words)
    legend = [r.get("data-kind") for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("class") == "legend"]
    assert legend == ["serial", "parallel", "vectorized", "unrolled", "thread_binding", "block"]


def test_thread_bound_loops_show_their_tag_and_the_text_form_matches():
    sch = tir.Schedule(matmul(8))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    picture = loop_nest(sch, "C")
    rects = loop_rects(picture.svg)
    assert [r.get("data-kind") for r in rects] == ["thread_binding", "thread_binding", "serial"]
    assert rects[0].get("stroke") == KIND_COLOURS["thread_binding"][0]
    assert {"blockIdx.x", "threadIdx.x"} <= set(texts(picture.svg))
    lines = str(picture).splitlines()
    assert lines[0].split() == ["for", "i", "in", "range(8)", "blockIdx.x"]
    assert lines[1].split() == ["for", "j", "in", "range(8)", "threadIdx.x"]
    assert 'block "C"' in lines[3] and "<- this block" in lines[3]


def test_whole_function_and_sibling_nests():
    from test_viz_stepper import MyModule, chapter_schedule
    picture = loop_nest(MyModule["mm_relu"])
    assert [r.get("data-loop") for r in loop_rects(picture.svg)] == ["i", "j", "k", "i", "j"]
    sch = chapter_schedule()
    picture = loop_nest(sch, "C")      # the nest that holds C now holds Y_init and Y_update too
    assert [r.get("data-loop") for r in loop_rects(picture.svg)] == \
        ["i", "j_0", "j_1_init", "k", "j_1", "ax0"]
    blocks = [r.get("data-block") for r in ET.fromstring(picture.svg).iter(f"{SVG}rect")
              if r.get("class") == "block"]
    assert blocks == ["Y_init", "Y_update", "C"]


def run_by_hand(n, tile, fixed: dict, at_loop: str, at: int):
    """The cells of A, B and C that the tiled loops touch with the loops outside ``at_loop``
    at ``fixed`` values and ``at_loop`` at ``at``: every inner iteration, run in Python."""
    names = ["i_0", "j_0", "k_0", "i_1", "j_1", "k_1"]
    ranges = [range(fixed[name], fixed[name] + 1) if name in fixed else
              range(at, at + 1) if name == at_loop else range(n // tile if name.endswith("0") else tile)
              for name in names]
    a, b, c = set(), set(), set()
    for i0, j0, k0, i1, j1, k1 in itertools.product(*ranges):
        i, j, k = i0 * tile + i1, j0 * tile + j1, k0 * tile + k1
        a.add((i, k))
        b.add((k, j))
        c.add((i, j))
    return {"A": a, "B": b, "C": c}


@pytest.mark.parametrize("loop_index, at, fixed", [
    (1, 2, {"i_0": 0}),                     # j_0 = 2: row strip of A, column strip of B, a tile of C
    (2, 1, {"i_0": 0, "j_0": 0}),           # k_0 = 1: one tile of A, of B, and the C tile it adds to
    (0, 3, {}),                             # i_0 = 3: a row strip of A and of C, all of B
])
def test_tiles_of_a_tiled_matmul_are_exact(loop_index, at, fixed):
    sch, loops = tiled(16)
    touched = touched_regions(sch, loops[loop_index], at=at)
    expected = run_by_hand(16, 4, fixed, loops[loop_index].var.name, at)
    assert set(touched) == {"A", "B", "C"}
    assert touched["A"].cells("read") == expected["A"] and not touched["A"].writes
    assert touched["B"].cells("read") == expected["B"] and not touched["B"].writes
    assert touched["C"].cells("write") == expected["C"]


def test_tiles_picture_draws_the_regions_it_computed():
    sch, (i0, j0, *_) = tiled(16)
    picture = loop_nest(sch, "C", loop=j0, at=2)
    regions = {(r.get("data-buffer"), r.get("data-role")): (r.get("data-rows"), r.get("data-cols"))
               for r in ET.fromstring(picture.tiles_svg).iter(f"{SVG}rect") if r.get("class") == "region"}
    assert regions == {("A", "read"): ("0:4", "0:16"), ("B", "read"): ("0:16", "8:12"),
                       ("C", "write"): ("0:4", "8:12")}
    assert "read       A[0:4, 0:16]" in str(picture) and "write      C[0:4, 8:12]" in str(picture)
    [chosen] = [r for r in loop_rects(picture.svg) if r.get("stroke-dasharray")]
    assert chosen.get("data-loop") == "j_0"
    assert "mlc-lab-loop-nest" in picture._repr_html_()


def test_tiles_after_the_chapter_schedule_and_a_predicate_that_clips_them():
    from test_viz_stepper import chapter_schedule
    sch = chapter_schedule()
    touched = touched_regions(sch, "j_0", at=1, block="Y_update")
    assert touched["A"].reads == [((0, 1), (0, 128))]
    assert touched["B"].reads == [((0, 128), (4, 8))]
    assert touched["Y"].reads == touched["Y"].writes == [((0, 1), (4, 8))]
    assert "C" not in touched
    everything = loop_nest(sch, "C", loop="j_0", at=1).touched     # every block under j_0
    assert everything["C"].writes == [((0, 1), (4, 8))]
    # 10 columns in tiles of 4: the last tile holds columns 8 and 9 only (T.where clips it)
    sch = tir.Schedule(matmul(10))
    _, j, _ = sch.get_loops(sch.get_block("C"))
    j0, _ = sch.split(j, [None, 4])
    assert touched_regions(sch, j0, at=2)["C"].writes == [((0, 1), (8, 10))]


def test_bad_requests_say_what_is_wrong():
    from test_viz_stepper import MyModule
    sch, (i0, j0, *_) = tiled(16)
    with pytest.raises(ValueError, match=r"at=4 is not an iteration of loop j_0 \(it has 4: 0 \.\. 3\)"):
        touched_regions(sch, j0, at=4)
    with pytest.raises(ValueError, match=r'no block "D" in function main; its blocks are C'):
        loop_nest(sch, "D")
    with pytest.raises(ValueError, match=r"2 loops named 'j' in mm_relu .*name a block too"):
        loop_nest(MyModule["mm_relu"], loop="j")
    with pytest.raises(ValueError, match="block C is not inside loop k"):
        touched_regions(MyModule, loop=_loop_of(MyModule, "Y", "k"), block="C")
    with pytest.raises(TypeError, match="expected a tir.Schedule, an IRModule or a PrimFunc"):
        loop_nest("C")


def _loop_of(mod, block, name):
    sch = tir.Schedule(mod)
    return next(loop for loop in sch.get_loops(sch.get_block(block, "mm_relu")) if loop.var.name == name)


def test_visit_order_frames_of_a_small_matmul():
    animation = animate_visit_order(matmul(4), "C")
    assert len(animation) == 16                          # k innermost: one frame per element of C
    first = animation.frames[0]
    assert first.writes["C"] == {(0, 0)}
    assert first.reads["A"] == {(0, k) for k in range(4)} and first.reads["B"] == {(k, 0) for k in range(4)}
    assert first.describe() == "writes C[0, 0]; reads A[0, 0:4], B[0:4, 0]"
    assert [sorted(f.writes["C"])[0] for f in animation.frames[:5]] == \
        [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    svg = ET.fromstring(animation.frame_svg(5))
    cells = [r for r in svg.iter(f"{SVG}rect") if r.get("data-i") is not None]
    assert len(cells) == 3 * 16
    fills = [r.get("fill") for r in cells]
    assert fills[32:].count("#f7d9bd") == 5              # C elements written in earlier frames
    html = animation._repr_html_()
    assert html.count('type="range"') == 1 and f'max="{len(animation) - 1}"' in html and "<script>" in html


def test_visit_order_follows_the_schedule():
    sch, (i0, j0, k0, i1, j1, k1) = tiled(8)
    animation = animate_visit_order(sch, "C")
    # k_0 sits outside i_1 and j_1: each element of a 4 x 4 tile is visited once per k_0
    assert len(animation) == 2 * 2 * 2 * 16
    assert [sorted(f.writes["C"])[0] for f in animation.frames[:17]] == \
        [(i, j) for i in range(4) for j in range(4)] + [(0, 0)]
    assert animation.frames[16].reads["A"] == {(0, k) for k in range(4, 8)}


def test_visit_order_refuses_big_programs_with_the_reason():
    with pytest.raises(ValueError, match=r"at most 16 x 16 elements; buffer A of block C is 32 x 32"):
        animate_visit_order(matmul(32), "C")
    sch, _ = tiled(16, tile=2)                           # 16 x 16 buffers, but 8 visits of each element
    with pytest.raises(ValueError, match=r"2048 times, one frame each; .* at most 1024 frames"):
        animate_visit_order(sch, "C")
