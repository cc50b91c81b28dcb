"""The schedule stepper: one position per trace instruction, whose IR is what replaying the first
k instructions gives; the block and loops each step touched; the live widget's controls; the
static HTML (one <details> per step) and text shown outside a notebook."""
import re
import sys

import pytest

from mlc_lab import te, tir
from mlc_lab.ir import IRModule, structural_equal
from mlc_lab.tir.schedule import Trace
from mlc_lab.viz.stepper import Stepper, stepper

from corpus import mm_relu


MyModule = IRModule({"mm_relu": mm_relu})    # chapter 2's module


def chapter_schedule() -> tir.Schedule:
    """Chapter 2's schedule of mm_relu: seven instructions, three of them queries."""
    sch = tir.Schedule(MyModule)
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j0)
    sch.decompose_reduction(block_Y, k)
    return sch


def replayed(k: int):
    """The module after the first k instructions, replayed from the trace's JSON."""
    insts = Trace.json_prefix(chapter_schedule().trace.as_json(), k)
    return Trace.from_json(insts).apply_to_schedule(tir.Schedule(MyModule)).mod


@pytest.fixture(scope="module")
def steps():
    return stepper(chapter_schedule(), live=False)


def test_one_position_per_trace_step_and_its_ir_is_the_replay(steps):
    sch = chapter_schedule()
    assert len(steps) == len(sch.trace.insts) == 7
    assert [s.call for s in steps.steps] == sch.trace.as_python()
    for k in range(len(steps) + 1):
        assert structural_equal(steps.mod_at(k), replayed(k)), f"step {k}"
    assert structural_equal(steps.mod_at(7), sch.mod)
    assert steps.mod_at(0) is MyModule
    with pytest.raises(IndexError, match="k must be 0 .. 7"):
        steps.mod_at(8)


def test_each_step_names_the_block_and_loops_it_touched(steps):
    assert [s.block for s in steps.steps] == ["Y", "Y", "Y", "Y", "C", "C", "Y_update"]
    assert [s.changed for s in steps.steps] == [False, False, True, True, False, True, True]
    assert [[loop.var.name for loop in s.loops] for s in steps.steps] == [
        [], ["i", "j", "k"], ["j_0", "j_1"], ["j_0", "k", "j_1"], [], ["j_0"], ["k"]]
    split = steps[2].picture()
    thick = [r for r in re.findall(r'<rect class="loop"[^>]*>', split.svg) if 'stroke-width="3"' in r]
    assert [re.search(r'data-loop="(\w+)"', r).group(1) for r in thick] == ["j_0", "j_1"]


def test_static_html_has_one_details_per_step(steps):
    page = steps.to_html()
    assert page.count('<details class="mlc-lab-step"') == 7
    summaries = re.findall(r"<summary[^>]*>step (\d+): <code>(.*?)</code></summary>", page)
    assert [int(n) for n, _ in summaries] == list(range(1, 8))
    assert summaries[2][1] == "l4, l5 = sch.split(loop=l2, factors=[None, 4])"
    bodies = page.split('<details class="mlc-lab-step"')[1:]
    for body, step in zip(bodies, steps.steps):
        assert body.count('<svg xmlns="http://www.w3.org/2000/svg" class="mlc-lab-loop-nest-svg"') == 1
        assert ("only looks something up" in body) != step.changed
        assert "the IR after this step" in body
    assert 'data-loop="j_1_init"' in bodies[6] and 'data-block="Y_update"' in bodies[6]
    assert steps._repr_html_() == page


def test_text_form_lists_every_step_with_its_diff(steps):
    text = str(steps)
    assert [int(n) for n in re.findall(r"^=== step (\d+)/7: ", text, re.M)] == list(range(1, 8))
    assert "+        for i, j_0, j_1, k in T.grid(128, 32, 4, 128):" in text
    assert text.count("(the module is unchanged: this step looks something up)") == 3
    assert "--- loop nest of block Y_update:" in text


def test_widget_steps_with_slider_and_buttons(steps):
    pytest.importorskip("ipywidgets")
    view = steps.widget()
    prev, slider, next_ = view.children[0].children
    body = view.children[1]
    assert (slider.min, slider.max, slider.value) == (1, 7, 1)
    assert "step 1/7: b0 = sch.get_block" in body.value
    next_.click()
    next_.click()
    assert slider.value == 3 and "step 3/7: l4, l5 = sch.split" in body.value
    prev.click()
    prev.click()
    prev.click()
    assert slider.value == 1
    slider.value = 7
    assert "step 7/7: b7 = sch.decompose_reduction" in body.value


def test_display_is_static_html_outside_a_kernel_and_a_widget_in_one(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    chapter_schedule().stepper()._ipython_display_()     # not in a kernel: no widget
    [html] = shown
    assert html.data.count('<details class="mlc-lab-step"') == 7
    pytest.importorskip("ipywidgets")
    chapter_schedule().stepper(live=True)._ipython_display_()   # the widget, its static view beside it
    assert "application/vnd.jupyter.widget-view+json" in shown[1]
    assert shown[1]["text/html"].count('<details class="mlc-lab-step"') == 7
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # a kernel without ipywidgets: static again
    chapter_schedule().stepper(live=True)._ipython_display_()
    assert shown[2].data.count('<details class="mlc-lab-step"') == 7


def test_from_trace_json_and_a_step_that_removes_a_block():
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    func = te.create_prim_func([A, C])
    sch = tir.Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    view = Stepper.from_trace(func, sch.trace.as_json())
    assert len(view) == 2 and structural_equal(view.mod_at(2), sch.mod)
    assert view[1].block is None and view[1].picture() is None      # B is gone after the step
    assert "step 2/2: sch.compute_inline(block=b0)" in str(view)
    assert "no steps yet" in tir.Schedule(MyModule).stepper().to_html()


def test_stepper_refuses_what_is_not_a_schedule():
    with pytest.raises(TypeError, match=r"stepper expects a tir.Schedule.*Stepper.from_trace"):
        stepper(MyModule)
