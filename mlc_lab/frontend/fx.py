"""Import a torch.fx graph as a relax module (torch is needed only when this is called).

    gm = torch.fx.symbolic_trace(model.eval())
    mod = from_fx(gm, [((1, 3, 28, 28), "float32")])

Each fx node becomes high-level relax ops, in graph order; module parameters and ``get_attr``
tensors become Constants (or function parameters with ``keep_params_as_input``).

Supported nodes: placeholder, get_attr, output; call_module of nn.Linear, nn.ReLU, nn.Conv2d,
nn.MaxPool2d, nn.Flatten, nn.Softmax, nn.Identity, nn.Dropout (an identity, as in eval mode);
call_function of torch.matmul, operator.add/sub/mul/matmul/getitem, torch.add/sub/mul, torch.relu,
F.relu, F.linear, torch.flatten, torch.reshape, F.softmax, torch.softmax, x.shape, x.T;
call_method view, reshape, flatten, relu, softmax, add, sub, mul, matmul, size.
Anything else raises NotImplementedError naming the node and its op.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import relax
from ..relax.struct_info import dim_value
from .nn import build_module


def from_fx(graph_module, input_info, keep_params_as_input: bool = False, name: str = "main"):
    """An IRModule whose function ``name`` takes one tensor per fx placeholder, with shape and
    dtype from ``input_info`` (a list of ``(shape, dtype)``), and returns the graph's output.

    An ``nn.Module`` that is not a GraphModule is traced with ``torch.fx.symbolic_trace`` first.
    With ``keep_params_as_input`` weights are parameters after the inputs (named after their
    module path, ``fc1_weight``) and the result is ``(mod, params)``, params {name: array}."""
    try:
        import torch
    except ImportError as err:
        raise ImportError("from_fx needs PyTorch: pip install torch") from err
    if isinstance(graph_module, torch.nn.Module) and not isinstance(graph_module, torch.fx.GraphModule):
        graph_module = torch.fx.symbolic_trace(graph_module)
    if not isinstance(graph_module, torch.fx.GraphModule):
        raise TypeError(f"from_fx: expected a torch.fx.GraphModule (torch.fx.symbolic_trace(model)), "
                        f"got {type(graph_module).__name__}")
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    input_info = list(input_info)
    if len(input_info) != len(placeholders):
        raise ValueError(f"from_fx: the graph has {len(placeholders)} input(s) "
                         f"({', '.join(n.name for n in placeholders)}) but input_info describes "
                         f"{len(input_info)}")
    inputs = []
    for node, info in zip(placeholders, input_info):
        if not (isinstance(info, (tuple, list)) and len(info) == 2):
            raise TypeError(f"from_fx: input_info entries are (shape, dtype) pairs, got {info!r} "
                            f"for input {node.name!r}")
        shape, dtype = info
        inputs.append(relax.Var(node.name, relax.TensorStructInfo(tuple(shape), str(dtype))))
    translator = _Translator(torch, graph_module, dict(zip(placeholders, inputs)))
    return build_module(name, inputs, translator.run, None, keep_params_as_input)


class _Translator:
    """Walks the fx graph once, mapping each node to a relax expression (or a Python value such as
    a size) in ``env``."""

    def __init__(self, torch, graph_module, inputs: dict):
        self.torch, self.gm, self.env = torch, graph_module, dict(inputs)
        nn, F = torch.nn, torch.nn.functional
        self.modules = {nn.Linear: self._linear_module, nn.ReLU: self._relu, nn.Conv2d: self._conv2d,
                        nn.MaxPool2d: self._max_pool2d, nn.Flatten: self._flatten_module,
                        nn.Softmax: self._softmax_module, nn.Identity: self._identity,
                        nn.Dropout: self._identity}
        self.functions = {
            torch.matmul: self._matmul, operator.matmul: self._matmul,
            operator.add: self._binary(relax.op.add), torch.add: self._binary(relax.op.add),
            operator.sub: self._binary(relax.op.subtract), torch.sub: self._binary(relax.op.subtract),
            operator.mul: self._binary(relax.op.multiply), torch.mul: self._binary(relax.op.multiply),
            torch.relu: self._relu_call, F.relu: self._relu_call, F.linear: self._linear_call,
            torch.flatten: self._flatten_call, torch.reshape: self._reshape,
            F.softmax: self._softmax_call, torch.softmax: self._softmax_call,
            operator.getitem: self._getitem, getattr: self._getattr,
        }
        self.methods = {"view": self._reshape, "reshape": self._reshape, "flatten": self._flatten_call,
                        "relu": self._relu_call, "softmax": self._softmax_call,
                        "add": self._binary(relax.op.add), "sub": self._binary(relax.op.subtract),
                        "mul": self._binary(relax.op.multiply), "matmul": self._matmul,
                        "size": self._size}

    def run(self, bb, weight):
        self.weight = weight
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                return self._value(node.args[0])
            value = self._translate(node)
            self.env[node] = bb.emit(value) if isinstance(value, relax.Call) else value
        raise ValueError("from_fx: the graph has no output node")

    def _translate(self, node):
        if node.op == "get_attr":
            return self._tensor(node.target, _fetch_attr(self.gm, node.target))
        if node.op == "call_module":
            module = self.gm.get_submodule(node.target)
            handler = self.modules.get(type(module))
            what = f"call_module {node.target} ({type(module).__module__}.{type(module).__name__})"
            supported = ", ".join(f"nn.{cls.__name__}" for cls in self.modules)
            args = (node, module)
        elif node.op == "call_function":
            handler = self.functions.get(node.target)
            what = f"call_function {_function_name(node.target)}"
            supported = ", ".join(sorted({_function_name(f) for f in self.functions}))
            args = (node,)
        elif node.op == "call_method":
            handler = self.methods.get(node.target)
            what = f"call_method .{node.target}()"
            supported = ", ".join(f".{m}()" for m in self.methods)
            args = (node,)
        else:
            handler, what, supported, args = None, node.op, "placeholder, get_attr, call_*, output", ()
        if handler is None:
            raise NotImplementedError(f"from_fx: node {node.name!r} ({what}) is not supported; "
                                      f"supported: {supported}")
        return handler(*args)

    # -- arguments ---------------------------------------------------------------------------
    def _value(self, arg):
        """A node's translation, with nodes inside tuples, lists and dicts translated too."""
        if isinstance(arg, self.torch.fx.Node):
            return self.env[arg]
        if isinstance(arg, (tuple, list)):
            values = [self._value(a) for a in arg]
            return relax.Tuple(values) if values and all(isinstance(v, relax.Expr) for v in values) \
                else type(arg)(values)
        return arg

    def _arg(self, node, index: int, name: str, default=None):
        if index < len(node.args):
            return self._value(node.args[index])
        return self._value(node.kwargs.get(name, default))

    def _tensor(self, name: str, tensor) -> relax.Expr:
        array = tensor.detach().cpu().numpy()
        return self.weight(name.replace(".", "_"), array)

    # -- modules -----------------------------------------------------------------------------
    def _linear_module(self, node, module):
        weight = self._tensor(f"{node.target}.weight", module.weight)
        bias = self._tensor(f"{node.target}.bias", module.bias) if module.bias is not None else None
        return relax.op.linear(self._arg(node, 0, "input"), weight, bias)

    def _relu(self, node, module):
        return relax.op.nn.relu(self._arg(node, 0, "input"))

    def _identity(self, node, module):
        return self._arg(node, 0, "input")

    def _conv2d(self, node, module):
        if isinstance(module.padding, str) or module.padding_mode != "zeros":
            raise NotImplementedError(f"from_fx: node {node.name!r} (nn.Conv2d): padding={module.padding!r}, "
                                      f"padding_mode={module.padding_mode!r} is not supported; give "
                                      "integer padding with padding_mode='zeros'")
        out = relax.op.nn.conv2d(self._arg(node, 0, "input"),
                                 self._tensor(f"{node.target}.weight", module.weight),
                                 strides=module.stride, padding=module.padding,
                                 dilation=module.dilation, groups=module.groups)
        if module.bias is None:
            return out
        bias = self._tensor(f"{node.target}.bias", module.bias)
        return relax.op.add(out, relax.op.reshape(bias, (1, module.out_channels, 1, 1)))

    def _max_pool2d(self, node, module):
        if module.return_indices:
            raise NotImplementedError(f"from_fx: node {node.name!r} (nn.MaxPool2d): "
                                      "return_indices=True is not supported")
        return relax.op.nn.max_pool2d(self._arg(node, 0, "input"), module.kernel_size,
                                      module.stride, module.padding, module.dilation,
                                      module.ceil_mode)

    def _flatten_module(self, node, module):
        return _flatten(node, self._arg(node, 0, "input"), module.start_dim, module.end_dim)

    def _softmax_module(self, node, module):
        if module.dim is None:
            raise NotImplementedError(f"from_fx: node {node.name!r} (nn.Softmax): give dim explicitly")
        return relax.op.nn.softmax(self._arg(node, 0, "input"), axis=module.dim)

    # -- functions and methods ---------------------------------------------------------------
    def _binary(self, op):
        def convert(node):
            a, b = self._arg(node, 0, "input"), self._arg(node, 1, "other")
            if not isinstance(a, relax.Expr) and not isinstance(b, relax.Expr):
                return {relax.op.add: operator.add, relax.op.subtract: operator.sub,
                        relax.op.multiply: operator.mul}[op](a, b)
            if not isinstance(a, relax.Expr):
                a = relax.const(a, b.struct_info.dtype)
            if not isinstance(b, relax.Expr):
                b = relax.const(b, a.struct_info.dtype)
            return op(a, b)
        return convert

    def _matmul(self, node):
        return relax.op.matmul(self._arg(node, 0, "input"), self._arg(node, 1, "other"))

    def _relu_call(self, node):
        return relax.op.nn.relu(self._arg(node, 0, "input"))

    def _linear_call(self, node):
        return relax.op.linear(self._arg(node, 0, "input"), self._arg(node, 1, "weight"),
                               self._arg(node, 2, "bias"))

    def _softmax_call(self, node):
        dim = self._arg(node, 1, "dim")
        if dim is None:
            raise NotImplementedError(f"from_fx: node {node.name!r} (softmax): give dim explicitly")
        return relax.op.nn.softmax(self._arg(node, 0, "input"), axis=dim)

    def _flatten_call(self, node):
        return _flatten(node, self._arg(node, 0, "input"), self._arg(node, 1, "start_dim", 0),
                        self._arg(node, 2, "end_dim", -1))

    def _reshape(self, node):
        shape = [self._value(a) for a in node.args[1:]] or self._value(node.kwargs.get("shape"))
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return relax.op.reshape(self._arg(node, 0, "input"), tuple(shape))

    def _size(self, node):
        shape = _static_dims(self._arg(node, 0, "input"))
        dim = self._arg(node, 1, "dim")
        return shape if dim is None else shape[dim]

    def _getattr(self, node):
        value, attr = self._arg(node, 0, "obj"), self._arg(node, 1, "name")
        if attr not in ("shape", "T") or not isinstance(value, relax.Expr):
            raise NotImplementedError(f"from_fx: node {node.name!r} (getattr {attr!r}) is not supported; "
                                      "only tensor.shape and tensor.T are")
        return _static_dims(value) if attr == "shape" else relax.op.permute_dims(value)

    def _getitem(self, node):
        value, index = self._arg(node, 0, "a"), self._arg(node, 1, "b")
        if isinstance(value, relax.Tuple):
            return value[index]
        if isinstance(value, (tuple, list)):
            return value[index]
        raise NotImplementedError(f"from_fx: node {node.name!r} (indexing a tensor, x[{index!r}]) is "
                                  "not supported; only tuples and shapes can be indexed")


def _static_dims(x: relax.Expr) -> tuple:
    """The shape of ``x``: ints for static dimensions, PrimExprs for symbolic ones."""
    sinfo = x.struct_info
    if not isinstance(sinfo, relax.TensorStructInfo) or sinfo.shape is None:
        raise NotImplementedError("from_fx: the shape of a tensor is needed but is not known")
    return tuple(v if (v := dim_value(d)) is not None else d for d in sinfo.shape)


def _flatten(node, x: relax.Expr, start_dim: int, end_dim: int) -> relax.Expr:
    """torch.flatten(x, start_dim, end_dim): relax.op.flatten for (1, -1), else a reshape."""
    shape = _static_dims(x)
    ndim = len(shape)
    start, end = start_dim % max(ndim, 1), end_dim % max(ndim, 1)
    if (start, end) == (1, ndim - 1):
        return relax.op.flatten(x)
    if any(not isinstance(d, int) for d in shape[start:end + 1]):
        raise NotImplementedError(f"from_fx: node {node.name!r} (flatten from {start_dim} to "
                                  f"{end_dim}) needs static sizes for the flattened axes")
    return relax.op.reshape(x, shape[:start] + (int(np.prod(shape[start:end + 1])),) + shape[end + 1:])


def _fetch_attr(gm, target: str):
    value = gm
    for part in target.split("."):
        if not hasattr(value, part):
            raise AttributeError(f"from_fx: the module has no attribute {target!r} (get_attr node)")
        value = getattr(value, part)
    return value


def _function_name(func) -> str:
    module = getattr(func, "__module__", None) or ""
    short = {"_operator": "operator", "torch.nn.functional": "F", "torch._C._nn": "F", "builtins": ""}
    prefix, name = short.get(module, module), getattr(func, "__name__", repr(func))
    return f"{prefix}.{name}" if prefix else name


__all__ = ["from_fx"]
