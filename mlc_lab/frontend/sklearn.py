"""Import a trained scikit-learn multi-layer perceptron as a relax module.

    mod = from_sklearn(clf, batch_size=32)       # main(x: (32, n_features) float32) -> scores
    labels = clf.classes_[scores.argmax(axis=1)]  # equal to clf.predict(x)

What ``main`` returns:
- MLPClassifier: the class probabilities, ``predict_proba`` computed in float32, shape
  (batch, n_classes). A multi-class model ends in a softmax. A binary model, whose single
  output unit sklearn passes through the logistic function, becomes a two-column softmax over
  logits [0, z], which is exactly [1 - sigmoid(z), sigmoid(z)]; so argmax picks the same class as
  ``predict`` (sigmoid(z) > 0.5) in every case.
- MLPRegressor: the predictions, shape (batch, n_outputs) (sklearn ravels a single output).
"""
from __future__ import annotations

import numpy as np

from .. import relax
from ..tir.expr import PrimExpr
from .nn import build_module

_ACTIVATIONS = {
    "identity": None,
    "relu": relax.op.nn.relu,
    "tanh": relax.op.tanh,
    "logistic": relax.op.sigmoid,
}

# Output-layer functions (``out_activation_``); a Poisson-loss regressor ends in exp.
_OUTPUT_ACTIVATIONS = {**_ACTIVATIONS, "exp": relax.op.exp,
                       "softmax": lambda h: relax.op.nn.softmax(h, axis=-1)}

_SUPPORTED = "sklearn.neural_network.MLPClassifier and sklearn.neural_network.MLPRegressor"


def from_sklearn(model, batch_size=1, keep_params_in_input: bool = False):
    """An IRModule whose ``main(x)`` runs the trained ``model`` on ``x`` of shape
    (batch_size, n_features) float32; see the module docstring for what it returns.

    ``batch_size`` is an int or an int64 ``tir.Var`` (a symbolic batch). Weights are float32
    Constants; with ``keep_params_in_input`` they are parameters after ``x`` (``layer0_weight``,
    ``layer0_bias``, ...) and the result is ``(mod, params)`` with params {name: array}.

    Raises TypeError for other estimators, ValueError for an unfitted model."""
    kind = _kind(model)
    if not hasattr(model, "coefs_"):
        raise ValueError(f"from_sklearn: this {type(model).__name__} is not fitted yet; call "
                         "model.fit(X, y) first")
    if not _is_batch_size(batch_size):
        raise ValueError(f"from_sklearn: batch_size must be a positive int or a tir.Var, got {batch_size!r}")
    for what, activation, table in (("hidden", model.activation, _ACTIVATIONS),
                                    ("output", model.out_activation_, _OUTPUT_ACTIVATIONS)):
        if activation not in table:
            raise NotImplementedError(f"from_sklearn: the {what} activation {activation!r} is not "
                                      f"supported; supported: {', '.join(table)}")
    hidden = _ACTIVATIONS[model.activation]
    weights = [np.asarray(w) for w in model.coefs_]
    biases = [np.asarray(b) for b in model.intercepts_]
    out_activation = model.out_activation_
    if kind == "MLPClassifier" and out_activation == "logistic":
        if weights[-1].shape[1] != 1:
            raise NotImplementedError("from_sklearn: multi-label MLPClassifier models (one logistic "
                                      "output per label) are not supported")
        weights[-1] = np.concatenate([np.zeros_like(weights[-1]), weights[-1]], axis=1)
        biases[-1] = np.concatenate([np.zeros_like(biases[-1]), biases[-1]])
        out_activation = "softmax"

    def body(bb, weight):
        h = x
        for i, (w, b) in enumerate(zip(weights, biases)):
            h = relax.op.add(relax.op.matmul(h, weight(f"layer{i}_weight", w)),
                             weight(f"layer{i}_bias", b))
            activation = hidden if i < len(weights) - 1 else _OUTPUT_ACTIVATIONS[out_activation]
            if activation is not None:
                h = activation(h)
            if i < len(weights) - 1:
                h = bb.emit(h)
        return h

    x = relax.Var("x", relax.TensorStructInfo((batch_size, weights[0].shape[0]), "float32"))
    return build_module("main", [x], body, "float32", keep_params_in_input)


def _is_batch_size(value) -> bool:
    if isinstance(value, PrimExpr):
        return True
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _kind(model) -> str:
    try:
        from sklearn.neural_network import MLPClassifier, MLPRegressor
    except ImportError:  # without scikit-learn installed, no model can be one of its estimators
        MLPClassifier = MLPRegressor = None
    for cls in (MLPClassifier, MLPRegressor):
        if cls is not None and isinstance(model, cls):
            return cls.__name__
    raise TypeError(f"from_sklearn: {type(model).__module__}.{type(model).__name__} is not supported; "
                    f"supported: {_SUPPORTED}")


__all__ = ["from_sklearn"]
