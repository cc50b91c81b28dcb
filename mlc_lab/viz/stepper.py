"""Step through a schedule: each instruction of its trace, the IR after it, the diff from the
step before, and the loop nest of the block the step touched.

    stepper(sch)                       a slider with previous/next buttons in a live notebook;
                                       every step as static HTML (one <details> each) elsewhere
    print(stepper(sch))                every step as text
    Stepper.from_trace(mod, trace)     the same for a trace (or its JSON) and the module it
                                       was recorded on, e.g. a tuning record
    side_by_side(sch_a, sch_b)         steppers in columns, each with its own slider (a live
                                       view that keeps every step as static HTML for a saved page)

The stepper replays the trace on the schedule's original module and keeps the module after
every instruction, so what it shows at step k is exactly what the first k instructions of the
trace produce; queries such as get_block and get_loops are steps too (they leave the module
as it was, and their picture shows the block or loops they returned).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .._env import in_notebook
from ..ir import hooks
from ..ir.diff import diff
from ..ir.module import IRModule
from ..tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError, Trace
from ..tir.schedule.func_index import FuncIndex
from .html import escape, highlight, page
from .ir_diff import IRDiff
from .loop_nest import blocks_under, loop_nest


def stepper(sch, live: bool | None = None) -> "Stepper":
    """A ``Stepper`` over ``sch.trace``. ``live``: a widget (True), static HTML (False), or a
    widget exactly when running in a notebook kernel with ipywidgets installed (None)."""
    return Stepper(sch, live=live)


@dataclass
class StepView:
    """One instruction of the trace and what it did."""
    number: int                 # 1 for the first instruction
    call: str                   # the instruction as Python, as the trace prints it
    before: IRModule
    after: IRModule
    func_name: str | None = None
    block: str | None = None    # the block it touched, by its name after the step
    loops: list = field(default_factory=list)   # LoopRVs it took or returned that still exist

    @property
    def changed(self) -> bool:
        return self.after is not self.before

    def picture(self):
        """The loop-nest picture of the touched block (None when the step touched none)."""
        if self.block is None:
            return None
        return loop_nest(self.after[self.func_name], self.block, highlight=self.loops)


class _Recorder:
    """Stands in for the schedule during ``Trace.apply_to_schedule``: forwards each instruction
    and keeps, right after it, the module, the handles it took or returned, and the names
    those block handles have then (decompose_reduction renames its block)."""

    def __init__(self, sch):
        self.sch, self.calls = sch, []

    def __getattr__(self, name):
        method = getattr(self.sch, name)
        if not callable(method):
            return method

        def call(*args, **kwargs):
            result = method(*args, **kwargs)
            handles = list(_handles([args, kwargs, result]))
            names = {}
            for handle in handles:
                if isinstance(handle, BlockRV):
                    try:
                        names[id(handle)] = self.sch.get(handle).name_hint
                    except ScheduleError:   # the step removed it (compute_inline)
                        pass
            self.calls.append((self.sch.mod, handles, names))
            return result
        return call


class Stepper:
    """One position per instruction of a schedule's trace (see the module docstring)."""

    def __init__(self, sch, live: bool | None = None):
        if not isinstance(sch, Schedule):
            raise TypeError(f"stepper expects a tir.Schedule, got {type(sch).__name__} (for a trace "
                            "and a module, use Stepper.from_trace(mod, trace))")
        self.live = live
        self.original = sch.history[0].mod
        replay = Schedule(self.original)
        recorder = _Recorder(replay)
        sch.trace.apply_to_schedule(recorder)
        self.steps: list[StepView] = []
        before = self.original
        for number, (call, (after, handles, names)) in enumerate(
                zip(sch.trace.as_python(), recorder.calls), start=1):
            self.steps.append(_step_view(number, call, before, after, handles, names))
            before = after
        self._html: dict[int, str] = {}

    @classmethod
    def from_trace(cls, mod, trace, live: bool | None = None) -> "Stepper":
        """A stepper over ``trace`` (a Trace, or the JSON ``Trace.as_json`` writes) replayed
        on ``mod`` (an IRModule or PrimFunc), the module it was recorded on."""
        if not isinstance(trace, Trace):
            trace = Trace.from_json(trace)
        sch = trace.apply_to_schedule(Schedule(mod))
        return cls(sch, live=live)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, position: int) -> StepView:
        return self.steps[position]

    def mod_at(self, k: int) -> IRModule:
        """The module after the first ``k`` instructions (0: the original module)."""
        if not 0 <= k <= len(self.steps):
            raise IndexError(f"the trace has {len(self.steps)} steps: k must be 0 .. {len(self.steps)}, "
                             f"got {k}")
        return self.steps[k - 1].after if k else self.original

    # -- rendering ----------------------------------------------------------------------------
    def step_html(self, number: int) -> str:
        """The body of step ``number`` (1-based): the loop nest, the diff, the IR after it."""
        if number not in self._html:
            self._html[number] = _step_html(self.steps[number - 1])
        return self._html[number]

    def to_html(self) -> str:
        """Every step as static HTML: one ``<details>`` per step, the call as its summary."""
        if not self.steps:
            return _frame("<p>The schedule has no steps yet.</p>")
        parts = [f"<p style='margin:0 0 6px'><b>{len(self.steps)} schedule steps</b> (open one to see "
                 "the loop nest it touched, the diff and the IR after it)</p>"]
        for step in self.steps:
            parts.append(f'<details class="mlc-lab-step" data-step="{step.number}">'
                         f"<summary>step {step.number}: <code>{escape(step.call)}"
                         f"</code></summary>{self.step_html(step.number)}</details>")
        return _frame("".join(parts))

    def _repr_html_(self) -> str:
        return self.to_html()

    def widget(self):
        """The live view: a slider and previous/next buttons above the step's HTML."""
        import ipywidgets as widgets
        if not self.steps:
            return widgets.HTML(self.to_html())
        # The controls wrap rather than squeeze: a narrow column (steppers side by side on a
        # projector) would otherwise cut the buttons' labels and shrink the slider to a dot.
        slider = widgets.IntSlider(value=1, min=1, max=len(self.steps), description="step",
                                   continuous_update=False, style={"description_width": "initial"},
                                   layout=widgets.Layout(flex="1 1 160px", width="auto", min_width="160px"))
        prev, next_ = (widgets.Button(description=label, layout=widgets.Layout(width="auto", flex="0 0 auto"))
                       for label in ("\u25c0 prev", "next \u25b6"))
        body = widgets.HTML(self._widget_page(1))

        def show(change):
            body.value = self._widget_page(change["new"])
        slider.observe(show, names="value")
        prev.on_click(lambda _: setattr(slider, "value", max(slider.value - 1, 1)))
        next_.on_click(lambda _: setattr(slider, "value", min(slider.value + 1, len(self.steps))))
        return widgets.VBox([widgets.HBox([prev, slider, next_], layout=widgets.Layout(flex_flow="row wrap")),
                             body])

    def _widget_page(self, number: int) -> str:
        call = self.steps[number - 1].call
        return _frame(f'<div class="mlc-lab-step-call">'
                      f"step {number}/{len(self.steps)}: {escape(call)}</div>" + self.step_html(number))

    def _ipython_display_(self) -> None:
        _display(self)

    def __str__(self) -> str:
        if not self.steps:
            return "the schedule has no steps yet"
        out = []
        for step in self.steps:
            out.append(f"=== step {step.number}/{len(self.steps)}: {step.call}")
            out.append(diff(step.before, step.after) if step.changed else
                       "(the module is unchanged: this step looks something up)")
            picture = step.picture()
            if picture is not None:
                out.append(f"--- loop nest of block {step.block}:\n{picture}")
        return "\n".join(out)

    __repr__ = __str__


def side_by_side(*schedules, titles=(), live: bool | None = None) -> "SideBySide":
    """Steppers over ``schedules`` (Schedules or Steppers) in columns of equal width, each column
    headed by its title; ``live`` as for ``stepper``."""
    steppers = [s if isinstance(s, Stepper) else Stepper(s) for s in schedules]
    return SideBySide(steppers, list(titles) or [f"schedule {i + 1}" for i in range(len(steppers))], live)


@dataclass
class SideBySide:
    """Steppers next to each other (see ``side_by_side``)."""
    steppers: list
    titles: list
    live: bool | None = None

    def to_html(self) -> str:
        columns = "".join(f'<div class="mlc-lab-column"><div class="mlc-lab-column-title">{escape(title)}'
                          f"</div>{stepper.to_html()}</div>" for title, stepper in zip(self.titles, self.steppers))
        return page(columns, _CSS, "mlc-lab-columns")

    def _repr_html_(self) -> str:
        return self.to_html()

    def widget(self):
        import ipywidgets as widgets
        columns = [widgets.VBox([widgets.HTML(page(f'<div class="mlc-lab-column-title">{escape(title)}</div>',
                                                   _CSS)), stepper.widget()],
                                layout=widgets.Layout(flex=f"1 1 {COLUMN_PX}px", min_width="0"))
                   for title, stepper in zip(self.titles, self.steppers)]
        box = widgets.HBox(columns, layout=widgets.Layout(width="100%", flex_flow="row wrap", grid_gap="12px"))
        box.add_class("mlc-lab-steppers")
        return box

    def _ipython_display_(self) -> None:
        _display(self)

    def __str__(self) -> str:
        return "\n\n".join(f"##### {title}\n{stepper}" for title, stepper in zip(self.titles, self.steppers))

    __repr__ = __str__


def _display(view) -> None:
    """Show ``view`` (a Stepper or SideBySide) live or static, as its ``live`` says. The live
    widget is published together with the static HTML: JupyterLab shows the widget, and an HTML
    export of the saved notebook (which keeps no widget state) shows every step instead."""
    from IPython.display import HTML, display
    live = view.live if view.live is not None else in_notebook()
    if live:
        try:
            bundle = view.widget()._repr_mimebundle_()
        except ImportError:     # no ipywidgets: the static view says everything too
            bundle = None
        if bundle:
            display({**bundle, "text/html": view.to_html()}, raw=True)
            return
    display(HTML(view.to_html()))


def _step_view(number, call, before, after, handles, names) -> StepView:
    """Which block and loops step ``number`` touched: a block it took or returned (by its name
    right after the step), else the first block under a loop it took or returned; loops that
    the step replaced are left out."""
    func_name = next((h.func_name for h in handles), None)
    if func_name is None:
        return StepView(number, call, before, after)
    index = FuncIndex(after[func_name])
    loops = [h for h in handles if isinstance(h, LoopRV) and id(h.var) in index.loops]
    block = next((names[id(h)] for h in handles if id(h) in names), None)
    if block is None and loops:
        under = blocks_under(index.loops[id(loops[0].var)])
        block = under[0].block.name_hint if under else None
    return StepView(number, call, before, after, func_name, block, loops)


def _handles(value):
    if isinstance(value, (BlockRV, LoopRV)):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _handles(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _handles(item)


COLUMN_PX = 400   # side by side, steppers stack rather than get narrower than this
_CSS = """
.mlc-lab-stepper { padding: 8px; border: 1px solid var(--mlc-border); border-radius: 6px;
  overflow-x: auto; }
.mlc-lab-stepper details { margin: 4px 0; }
.mlc-lab-stepper code, .mlc-lab-step-call { font-family: var(--mlc-code-font); }
.mlc-lab-step-call { font-weight: bold; }
.mlc-lab-step-diff { overflow-x: auto; max-width: 100%; margin-top: 6px; }
.mlc-lab-columns { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.mlc-lab-column { flex: 1 1 COLUMN_PXpx; min-width: 0; }
.mlc-lab-column-title { font-weight: bold; font-size: 1.15em; margin: 0 0 4px; overflow-wrap: anywhere; }
.mlc-lab-step-ir { overflow-x: auto; max-width: 100%; margin: 4px 0; font-family: var(--mlc-code-font);
  font-size: var(--mlc-code-size); line-height: 1.35; color: var(--mlc-fg); background: transparent; }
""".replace("COLUMN_PX", str(COLUMN_PX))


def _step_html(step: StepView) -> str:
    parts = []
    picture = step.picture()
    if picture is not None:
        parts.append(picture._repr_html_())
    if step.changed:   # side by side where the box is wide enough, else one column (IRDiff's "auto")
        parts.append('<div class="mlc-lab-step-diff">'
                     + IRDiff(step.before, step.after, "what the step changed")._repr_html_() + "</div>")
    else:
        parts.append("<p>The module is unchanged: this step only looks something up.</p>")
    ir = "\n".join(highlight(line) for line in step.after.script().split("\n"))
    parts.append('<details><summary>the IR after this step</summary>'
                 f'<pre class="mlc-lab-step-ir">{ir}</pre></details>')
    return "".join(parts)


def _frame(body: str) -> str:
    """The stepper's box, a view with the shared stylesheet: its text follows the page's theme,
    the pictures bring their own background, and the diff styles itself."""
    return page(body, _CSS, "mlc-lab-stepper")


hooks.provide("viz.stepper", Stepper)   # sch.stepper()

__all__ = ["side_by_side", "stepper", "SideBySide", "Stepper", "StepView"]
