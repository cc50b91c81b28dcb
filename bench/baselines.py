"""The models of bench/e2e.py in other runtimes, built from the same weights: numpy
(``forward_numpy``), onnxruntime on CPU (an ONNX graph made with onnx.helper) and torch eager.
onnx, onnxruntime and torch are optional: a builder whose package is missing raises
ImportError, and bench/e2e.py leaves that column empty.

Each builder walks the ``nn.Sequential``'s layers (Linear -> Gemm / nn.Linear, ReLU, Conv2d,
MaxPool2d, Flatten, Softmax) and returns a ``Baseline``: ``run(x)`` for timing, ``kernels`` (ops
per call) and ``bytes_allocated(x)`` (None where it cannot be observed).

Run: python bench/baselines.py   (checks every baseline against forward_numpy)
"""
import os
import tempfile
import tracemalloc
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from mlc_lab.frontend import nn

INSTALL_HINT = "pip install -e '.[bench]'"


@dataclass
class Baseline:
    run: Callable                      # x -> output (any array type); what is timed
    output: Callable                   # x -> numpy output, to check against forward_numpy
    kernels: Optional[int]             # ops launched per call, as the runtime counts them
    bytes_allocated: Optional[Callable] = None   # x -> bytes one call allocates


def traced_peak(fn) -> int:
    """Most bytes that ``fn()`` holds at once beyond what was held before, as tracemalloc sees
    them (numpy arrays, and so mlc_lab NDArrays, report their buffers to it)."""
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - start
    tracemalloc.stop()
    return peak


def numpy_baseline(model) -> Baseline:
    """``forward_numpy``: numpy and its BLAS, one temporary per op; ops are not counted."""
    return Baseline(model.forward_numpy, model.forward_numpy, None,
                    lambda x: traced_peak(lambda: model.forward_numpy(x)))


def onnx_graph(model, input_shape, opset: int = 17):
    """``model`` as an ONNX ModelProto with input "x" of ``input_shape`` and the weights as
    initializers."""
    from onnx import TensorProto, helper, numpy_helper
    nodes, weights, x = [], [], "x"
    for i, layer in enumerate(model.layers):
        y, attrs, inputs = f"t{i}", {}, [x]
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            for kind in ("weight", "bias"):
                weights.append(numpy_helper.from_array(getattr(layer, kind), f"layer{i}_{kind}"))
                inputs.append(f"layer{i}_{kind}")
        if isinstance(layer, nn.Linear):
            op, attrs = "Gemm", {"transB": 1}
        elif isinstance(layer, nn.Conv2d):
            (ph, pw) = layer.padding
            op, attrs = "Conv", {"kernel_shape": list(layer.kernel_size),
                                 "strides": list(layer.stride), "pads": [ph, pw, ph, pw]}
        elif isinstance(layer, nn.MaxPool2d):
            (ph, pw) = layer.padding
            op, attrs = "MaxPool", {"kernel_shape": list(layer.kernel_size),
                                    "strides": list(layer.stride), "pads": [ph, pw, ph, pw]}
        elif isinstance(layer, (nn.ReLU, nn.Flatten, nn.Softmax)):
            op = {nn.ReLU: "Relu", nn.Flatten: "Flatten", nn.Softmax: "Softmax"}[type(layer)]
            attrs = {"axis": 1} if op == "Flatten" else {"axis": layer.axis} if op == "Softmax" else {}
        else:
            raise TypeError(f"onnx_graph: no ONNX op for layer {i} ({layer!r})")
        nodes.append(helper.make_node(op, inputs, [y], name=f"{op.lower()}{i}", **attrs))
        x = y
    out_shape = model.forward_numpy(np.zeros(input_shape, "float32")).shape
    graph = helper.make_graph(
        nodes, "mlc_lab_model", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, out_shape)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def onnxruntime_baseline(model, input_shape, threads: int) -> Baseline:
    """An InferenceSession on the CPU provider with ``threads`` intra-op threads (one inter-op),
    every graph optimisation on; ``kernels`` counts the nodes left in the optimised graph.
    Its memory comes from its own arena, so bytes per call are not observed."""
    import onnx
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3   # not the warning that an optimised graph is machine-specific
    options.optimized_model_filepath = os.path.join(tempfile.mkdtemp(prefix="bench_ort_"), "opt.onnx")
    session = ort.InferenceSession(onnx_graph(model, input_shape).SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    kernels = len(onnx.load(options.optimized_model_filepath).graph.node)

    def run(x):
        return session.run(None, {"x": x})[0]
    return Baseline(run, run, kernels)


def torch_baseline(model, input_shape, threads: int) -> Baseline:
    """torch eager under ``torch.inference_mode`` with ``torch.set_num_threads(threads)``; the
    profiler (profile_memory=True) counts the top-level aten ops of one call and the bytes the
    ops allocate."""
    import torch
    torch.set_num_threads(threads)
    layers = []
    for layer in model.layers:
        if isinstance(layer, nn.Linear):
            layers.append(torch.nn.Linear(layer.in_features, layer.out_features))
        elif isinstance(layer, nn.Conv2d):
            layers.append(torch.nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size,
                                          layer.stride, layer.padding))
        elif isinstance(layer, nn.MaxPool2d):
            layers.append(torch.nn.MaxPool2d(layer.kernel_size, layer.stride, layer.padding))
        elif isinstance(layer, (nn.ReLU, nn.Flatten)):
            layers.append({nn.ReLU: torch.nn.ReLU, nn.Flatten: torch.nn.Flatten}[type(layer)]())
        elif isinstance(layer, nn.Softmax):
            layers.append(torch.nn.Softmax(layer.axis))
        else:
            raise TypeError(f"torch_baseline: no torch module for {layer!r}")
        if hasattr(layer, "weight"):
            with torch.no_grad():
                layers[-1].weight.copy_(torch.from_numpy(layer.weight))
                layers[-1].bias.copy_(torch.from_numpy(layer.bias))
    net = torch.nn.Sequential(*layers).eval().requires_grad_(False)

    def run(x):
        with torch.inference_mode():
            return net(torch.from_numpy(x))

    def profile(x):
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            run(x)
        # aten::lift_fresh is from_numpy wrapping the input: no computation, no allocation
        events = [e for e in prof.events() if e.name not in ("[memory]", "aten::lift_fresh")]
        return (sum(e.cpu_parent is None for e in events),
                sum(max(e.self_cpu_memory_usage, 0) for e in events))

    kernels = profile(np.zeros(input_shape, "float32"))[0]
    return Baseline(run, lambda x: run(x).numpy(), kernels, lambda x: profile(x)[1])


def main():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from e2e import cases
    for name, model, shape in cases(quick=False):
        x = np.random.default_rng(0).random(shape, dtype="float32")
        want = model.forward_numpy(x)
        errors = []
        for label, make in (("onnxruntime", lambda: onnxruntime_baseline(model, shape, 1)),
                            ("torch", lambda: torch_baseline(model, shape, 1))):
            try:
                errors.append(f"{label} {np.abs(make().output(x) - want).max():.2g}")
            except ImportError as missing:
                errors.append(f"{label}: {missing.name} not installed ({INSTALL_HINT})")
        print(f"{name:<21} {'x'.join(map(str, shape)):<12} max error " + ", ".join(errors))


if __name__ == "__main__":
    main()
