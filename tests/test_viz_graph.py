"""The graph view of relax functions: what it draws (a node per call, an edge per tensor use,
parameters, constants, fused groups and outputs told apart), that the built-in layout keeps
boxes apart and edges downward, the Graphviz path (with a fake ``dot``, and the real one where
installed), graph_diff's highlights, and the text fallback. Counts are taken from the IR."""
import doctest
import importlib
import os
import random
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from mlc_lab import relax
from mlc_lab.frontend import nn
from mlc_lab.relax import op as R
from mlc_lab.relax import transform as RT
from mlc_lab.viz.graph import graph, graph_diff
from mlc_lab.viz.graph.layout import NODE_GAP, layered_layout
from mlc_lab.viz.graph.svg import CHAR_EM

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def stages():
    """An MLP as the frontend gives it, legalized, after FuseOps, and after FuseTIR."""
    mod = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to_relax((1, 64))
    legal = RT.LegalizeOps()(mod)
    fused = RT.FuseOps()(RT.AnnotateTIROpPattern()(legal))
    return {"ops": mod, "legal": legal, "fused": fused, "fused_tir": RT.FuseTIR()(fused)}


def tensor(name, shape):
    return relax.Var(name, relax.TensorStructInfo(shape, "float32"))


def residual_with_tuples():
    """Two parameters, a tensor used twice by one call, a tuple taken apart, two outputs."""
    x, w = tensor("x", (4, 8)), tensor("w", (8, 8))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(R.matmul(x, w))
            b = bb.emit(R.nn.relu(a))
            pair = bb.emit(relax.Tuple([bb.emit(R.add(b, x)), a]))
            first = bb.emit(relax.TupleGetItem(pair, 0))
            product = bb.emit(R.multiply(first, first))
            out = bb.emit_output(relax.Tuple([product, b]))
        bb.emit_func_output(out)
    return bb.get()


def nodes(svg: str, *classes) -> list:
    """The <g> elements whose class attribute holds all of ``classes``."""
    return [g for g in ET.fromstring(svg).iter(f"{SVG}g") if set(classes) <= set(g.get("class", "").split())]


def texts(group) -> list:
    return [t.text for t in group.iter(f"{SVG}text")]


def box(group) -> tuple:
    rect = group.find(f"{SVG}rect")
    return tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))


def call_bindings(func) -> list:
    return [b for block in func.body.blocks for b in block.bindings if isinstance(b.value, relax.Call)]


def tensor_uses(call) -> int:
    """Tensors a call reads: call_tir / call_dps_packed inputs, or an op's arguments."""
    args = call.args[1].elements if call.op.name in ("relax.call_tir", "relax.call_dps_packed") else call.args
    return sum(isinstance(a, (relax.Var, relax.Constant)) for a in args)


@pytest.mark.parametrize("stage", ["ops", "legal", "fused_tir"])
def test_one_node_per_call_and_one_edge_per_tensor_use(stages, stage):
    func = stages[stage]["main"]
    svg = graph(stages[stage], engine="python").svg()
    calls = call_bindings(func)
    drawn = nodes(svg, "node", "call")
    assert [texts(g)[0] for g in drawn] == [_title(b.value) for b in calls]
    assert len(nodes(svg, "edge")) == sum(tensor_uses(b.value) for b in calls) + 1   # + the output
    for g, binding in zip(drawn, calls):     # second line: the result's shape and dtype
        sinfo = binding.var.struct_info
        assert texts(g)[1] == f"{tuple(sinfo.static_shape)} {sinfo.dtype}"
    assert len(nodes(svg, "node", "output")) == 1


def _title(call) -> str:
    if call.op.name == "relax.call_tir":
        return call.args[0].name_hint
    return call.op.name.removeprefix("relax.")


def test_kinds_of_call_are_told_apart(stages):
    ops = nodes(graph(stages["ops"], engine="python").svg(), "call")
    assert {g.get("class") for g in ops} == {"node op call"}
    legal = nodes(graph(stages["legal"], engine="python").svg(), "call")
    assert {g.get("class") for g in legal} == {"node kernel call"}
    fused = nodes(graph(stages["fused_tir"], engine="python").svg(), "fused")
    assert sorted(texts(g)[0] for g in fused) == ["fused_matmul1_add1", "fused_matmul_add_relu"]


def test_parameters_and_constants_are_distinguished(stages):
    svg = graph(stages["legal"], engine="python").svg()
    [param] = nodes(svg, "node", "param")
    constants = nodes(svg, "node", "const")
    assert texts(param) == ["x", "(1, 64) float32"]
    assert len(constants) == 4 and all(texts(g)[0] == "const" for g in constants)
    param_rect, const_rect = param.find(f"{SVG}rect"), constants[0].find(f"{SVG}rect")
    assert param_rect.get("fill") != const_rect.get("fill")
    assert const_rect.get("stroke-dasharray") and not param_rect.get("stroke-dasharray")
    assert float(param_rect.get("rx")) == float(param_rect.get("height")) / 2   # a pill
    legend = " ".join(texts(nodes(svg, "legend")[0]))
    assert "parameter" in legend and "constant" in legend


def test_fused_functions_show_their_name_and_on_request_their_ops(stages):
    mod = stages["fused"]
    closed = graph(mod, engine="python").svg()
    assert sorted(texts(g)[0] for g in nodes(closed, "node", "fused")) == \
        ["fused_matmul1_add1", "fused_matmul_add_relu"]
    assert not nodes(closed, "cluster")

    opened = graph(mod, expand_fused=True, engine="python").svg()
    clusters = nodes(opened, "cluster", "fused")
    titles = [t.text for t in ET.fromstring(opened).iter(f"{SVG}text") if t.get("class") == "cluster-title"]
    assert sorted(titles) == ["fused_matmul1_add1", "fused_matmul_add_relu"] and len(clusters) == 2
    inner = sum(len(call_bindings(mod[name])) for name in titles)
    outer_plain = sum(not isinstance(b.value.op, relax.GlobalVar) for b in call_bindings(mod["main"]))
    assert len(nodes(opened, "node", "call")) == inner + outer_plain
    ports = nodes(opened, "node", "port")
    params = [p.name_hint for name in titles for p in mod[name].params]
    assert sorted(texts(g)[0] for g in ports) == sorted(params)
    for cluster in clusters:                  # its ops and ports are drawn inside its frame
        cx, cy, cw, ch = box(cluster)
        inside = [g for g in nodes(opened, "node") if g.get("id").startswith(cluster.get("id") + ".")]
        assert len(inside) >= 4
        for g in inside:
            x, y, w, h = box(g)
            assert cx <= x and x + w <= cx + cw and cy <= y and y + h <= cy + ch


def test_outputs_are_marked_and_tuples_followed_to_their_items():
    view = graph(residual_with_tuples(), engine="python")
    svg = view.svg()
    assert [texts(g)[0] for g in nodes(svg, "node", "output")] == ["output0", "output1"]
    assert [texts(g)[0] for g in nodes(svg, "call")] == ["matmul", "nn.relu", "add", "multiply"]
    # x read by matmul and add, w by matmul, the add read twice by multiply, two outputs
    assert len(nodes(svg, "edge")) == 2 + 1 + 2 + 2 + 2
    text = str(view)
    assert "lv5 = multiply(lv2, lv2)" in text and "output0(lv5)" in text and "output1(lv1)" in text


def test_packed_calls_are_named_by_their_function():
    x, w = tensor("x", (2, 4)), tensor("w", (4, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(relax.call_dps_packed("env.linear", (x, w),
                                                       out_sinfo=relax.TensorStructInfo((2, 3), "float32")))
        bb.emit_func_output(out)
    [packed] = nodes(graph(bb.get(), engine="python").svg(), "node", "packed")
    assert texts(packed) == ["env.linear", "(2, 3) float32"] and "call" in packed.get("class")


def test_text_fallback_has_one_line_per_node_with_its_inputs(stages, capsys):
    view = graph(stages["fused"], expand_fused=True)
    lines = str(view).splitlines()
    assert lines[0] == "main: 4 calls" and repr(view) == str(view)
    assert lines[1].split() == ["x", "param", "(1,", "64)", "float32"]
    assert any(line.split()[:3] == ["lv3", "=", "fused_matmul_add_relu(x,"] for line in lines)
    inner = [line for line in lines if line.startswith("      ")]   # inside the fused functions
    assert any("lv1 = matmul(x, lv)" in line for line in inner)
    assert lines[-1].split() == ["output(gv)", "output"]
    stages["fused"].show_graph(expand_fused=True)     # outside Jupyter it prints the same text
    assert capsys.readouterr().out == str(view) + "\n"


def test_layout_keeps_boxes_apart_and_text_inside(stages):
    for mod, expand in [(stages["legal"], False), (stages["fused"], True), (residual_with_tuples(), False)]:
        svg = graph(mod, expand_fused=expand, engine="python").svg()
        root = ET.fromstring(svg)
        width, height = float(root.get("width")), float(root.get("height"))
        boxes = {g.get("id"): box(g) for g in nodes(svg, "node") + nodes(svg, "cluster")}
        for a, (ax, ay, aw, ah) in boxes.items():
            assert 0 <= ax and ax + aw <= width and 0 <= ay and ay + ah <= height
            for b, (bx, by, bw, bh) in boxes.items():
                if a < b and not (a.startswith(b + ".") or b.startswith(a + ".")):
                    apart = ax + aw <= bx or bx + bw <= ax or ay + ah <= by or by + bh <= ay
                    assert apart, f"{a} {boxes[a]} overlaps {b} {boxes[b]}"
        for g in nodes(svg, "node"):
            _, _, w, _ = box(g)
            for t in g.iter(f"{SVG}text"):
                assert len(t.text) * CHAR_EM * float(t.get("font-size")) <= w, t.text


def test_layered_layout_on_random_dags():
    rng = random.Random(0)
    for trial in range(30):
        n = rng.randint(2, 25)
        ids = [f"v{i}" for i in range(n)]
        sizes = {v: (rng.uniform(30, 160), rng.uniform(20, 60)) for v in ids}
        edges = [(ids[i], ids[j], 0.0, None)
                 for j in range(1, n) for i in rng.sample(range(j), min(j, rng.randint(0, 2)))]
        layout = layered_layout(ids, sizes, edges)
        rects = {v: (x - sizes[v][0] / 2, y - sizes[v][1] / 2, *sizes[v])
                 for v, (x, y) in layout.centres.items()}
        for a in ids:
            for b in ids:
                if a < b:
                    (ax, ay, aw, ah), (bx, by, bw, bh) = rects[a], rects[b]
                    assert ax + aw <= bx or bx + bw <= ax or ay + ah <= by or by + bh <= ay, (trial, a, b)
        for (src, dst, *_), route in zip(edges, layout.routes):
            assert route[0][1] == pytest.approx(rects[src][1] + rects[src][3])        # leaves the bottom
            assert route[-1][1] == pytest.approx(rects[dst][1])                         # enters the top
            assert all(p[1] <= q[1] + 1e-9 for p, q in zip(route, route[1:])), route   # always downward
            assert rects[dst][0] <= route[-1][0] <= rects[dst][0] + rects[dst][2]


def test_barycentric_ordering_removes_avoidable_crossings():
    ids = ["a", "b", "c", "d", "p", "q"]                   # a->q and b->p cross as given
    sizes = {v: (40.0, 20.0) for v in ids}
    edges = [("a", "q", 0.0, None), ("b", "p", 0.0, None), ("c", "d", 0.0, None), ("p", "d", 0.0, None),
             ("q", "d", 0.0, None)]
    layout = layered_layout(ids, sizes, edges)
    x = {v: c[0] for v, c in layout.centres.items()}
    assert (x["a"] < x["b"]) == (x["q"] < x["p"])
    assert abs(x["p"] - x["q"]) >= 40 + NODE_GAP - 1e-9


FAKE_DOT = """#!{python}
import os, sys
open(os.environ["FAKE_DOT_INPUT"], "w").write(sys.stdin.read())
if os.environ.get("FAKE_DOT_FAIL"):
    sys.exit("dot: syntax error in line 1")
print('<?xml version="1.0" encoding="UTF-8" standalone="no"?>')
print('<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">')
print('<svg width="150pt" height="300pt" viewBox="0 0 150 300" xmlns="http://www.w3.org/2000/svg">'
      '<g id="node1" class="node kernel call"><title>n1</title></g></svg>')
"""


@pytest.fixture
def fake_dot(tmp_path, monkeypatch):
    """A ``dot`` program first on PATH that records the DOT it is given and prints a fixed SVG."""
    program = tmp_path / "bin" / "dot"
    program.parent.mkdir()
    program.write_text(FAKE_DOT.format(python=sys.executable))
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOT_INPUT", str(tmp_path / "input.dot"))
    return tmp_path / "input.dot"


def test_graphviz_draws_when_dot_is_installed(stages, fake_dot):
    mod = stages["fused"]
    svg = graph(mod, expand_fused=True).svg()
    assert svg.startswith('<svg class="mlc-graph" width="200" height="400" viewBox="0 0 150 300"')
    source = fake_dot.read_text()
    statements = [line.strip() for line in source.splitlines()]
    calls = [s for s in statements if 'class="' in s and " call" in s.split('class="')[1].split('"')[0]]
    assert len(calls) == 2 + 5              # two transposes and the fused functions' five ops
    assert sum(s.startswith('subgraph "cluster_') for s in statements) == 2
    model = graph(mod, expand_fused=True).model
    edges = [s for s in statements if re.match(r'"[\w.]+" -> "[\w.]+"', s)]
    assert len(edges) == len(model.edges) + sum(len(n.inner.edges) for n in model.nodes if n.inner is not None)
    assert '"n0" -> "n4.n0"' in edges[1]      # x enters the first fused function at its parameter x
    assert 'label=<<FONT POINT-SIZE="11" COLOR="#111827"><B>matmul</B></FONT>' in source
    fake_dot.unlink()
    graph(mod, engine="python").svg()
    assert not fake_dot.exists(), "engine='python' must not run dot"


def test_a_failing_dot_falls_back_to_the_builtin_layout(stages, fake_dot, monkeypatch):
    monkeypatch.setenv("FAKE_DOT_FAIL", "1")
    with pytest.warns(UserWarning, match="Graphviz's dot failed"):
        svg = graph(stages["legal"]).svg()
    assert len(nodes(svg, "node", "call")) == 7
    with pytest.raises(subprocess.CalledProcessError):       # asked for dot: no fallback
        graph(stages["legal"], engine="dot").svg()


def test_engine_dot_without_dot_says_how_to_get_it(stages, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        graph(stages["legal"], engine="dot").svg()
    with pytest.raises(ValueError, match="engine must be"):
        graph(stages["legal"], engine="neato")


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot program is not installed (apt-get install graphviz); "
                           "the fake-dot tests check the DOT it would be given")
def test_real_graphviz_output_has_one_node_per_call(stages):
    svg = graph(stages["fused"], expand_fused=True, engine="dot").svg()
    assert len(nodes(svg, "node", "call")) == 7
    assert len(nodes(svg, "node", "param")) == 1 and len(nodes(svg, "node", "const")) == 4
    assert len(nodes(svg, "cluster")) == 2


def test_diff_highlights_what_fusion_replaced(stages):
    diff = graph_diff(stages["legal"], stages["fused_tir"], engine="python")
    before, after = diff.before.svg(), diff.after.svg()
    assert sorted(texts(g)[0] for g in nodes(before, "changed")) == ["add", "add1", "matmul", "matmul1", "relu"]
    assert sorted(texts(g)[0] for g in nodes(after, "changed")) == \
        ["fused_matmul1_add1", "fused_matmul_add_relu"]
    assert "before: main, 7 calls (5 changed)" in str(diff) and "after: main, 4 calls (2 changed)" in str(diff)
    assert "* lv1 = matmul(x, lv)" in str(diff)
    page = diff._repr_html_()
    assert page.count('class="mlc-graph-panel"') == 2 and "flex-wrap:wrap" in page
    both = ET.fromstring(diff._repr_svg_())
    assert len(both.findall(f"{SVG}g/{SVG}svg")) == 2
    same = graph_diff(stages["legal"], stages["legal"], engine="python")
    assert not nodes(same.before.svg(), "changed") and not nodes(same.after.svg(), "changed")


def test_html_shrinks_with_the_output_area(stages):
    html = graph(stages["legal"], engine="python")._repr_html_()
    assert html.startswith('<div class="mlc-graph-output" style="max-width:100%;overflow-x:auto">')
    assert 'style="display:block;max-width:100%;height:auto;min-width:' in html


def test_what_cannot_be_drawn_is_refused_with_the_reason(stages):
    with pytest.raises(TypeError, match="graph draws relax functions; 'matmul' is a PrimFunc"):
        graph(stages["legal"], "matmul")
    with pytest.raises(KeyError, match="no function named 'nope'"):
        graph(stages["legal"], "nope")


def test_docstring_example_runs():
    module = importlib.import_module("mlc_lab.viz.graph")   # the module, even where viz exports graph()
    assert doctest.testmod(module).failed == 0
