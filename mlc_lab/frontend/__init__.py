"""Frontends: relax modules from trained models.

- ``from_sklearn(model, batch_size=1)``: a scikit-learn MLPClassifier / MLPRegressor.
- ``from_fx(graph_module, input_info)``: a torch.fx GraphModule (torch is imported only then).
- ``nn``: a small model builder with numpy weights (``nn.Sequential(nn.Linear(784, 10), ...)``)
  whose ``to_relax(input_shape)`` emits the model and whose ``forward_numpy`` is the reference.
"""
from . import nn
from .fx import from_fx
from .sklearn import from_sklearn

__all__ = ["from_fx", "from_sklearn", "nn"]
