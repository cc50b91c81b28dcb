"""Cost models: predict which candidate schedules run fastest, so that search measures only the
promising ones.

The interface the search strategies use (every model implements it):

    model = create_cost_model("gbdt", seed=0)      # "gbdt" | "mlp" | "random" | a CostModel
    model.update(funcs, seconds, workload=key)     # scheduled PrimFuncs, their measured run times,
                                                   # and (optional) the key of their workload
    scores = model.predict(funcs)                  # np.ndarray, one score per func: higher = faster
    model.save(path); model = CostModel.load(path)  # JSON records (never pickles)

``funcs`` are block-form PrimFuncs as a schedule produces them (``sch.mod["main"]``); a model
extracts its own features (``feature.py``). ``seconds`` may hold ``inf`` for a candidate that
failed: a model treats it as the slowest possible.

The learned models (``GBDTModel``, ``MLPModel``) keep every record they are given and refit
on each ``update``. They learn a normalised throughput: within one workload (the function's
key given to ``update``; tune_tir passes the task name and a digest of the module's script, so
kernels of one model with equal signatures stay apart; without one, the function's name and
its parameters' shapes and dtypes) a record's target is the workload's best time over its own
time, so the fastest is 1 and a failed candidate 0. Before they have two records that
differ they score at random, from their seed. Saved models hold the records, not the fitted
trees or weights; loading refits from them, so a model saved after tuning one workload ranks
the schedules of another (the features are mostly per-work ratios and logs).
"""
from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np

from .feature import FEATURE_NAMES, extract_features

# How many functions' features a learned model remembers (a few batches' populations).
FEATURE_CACHE = 1024


class CostModel:
    """Base class; see the module docstring for the interface."""
    kind = "base"

    def update(self, funcs: list, seconds: list, workload: str | None = None) -> None:
        raise NotImplementedError

    def predict(self, funcs: list) -> np.ndarray:
        raise NotImplementedError

    def to_json(self) -> dict:
        return {"kind": self.kind}

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_json(), f)

    @staticmethod
    def load(path: str) -> "CostModel":
        with open(path) as f:
            data = json.load(f)
        if data.get("kind") not in _KINDS:
            raise ValueError(f"{path}: not a saved cost model of a known kind (kind "
                             f"{data.get('kind')!r}; known: {', '.join(sorted(_KINDS))})")
        return _KINDS[data["kind"]].from_json(data)


class RandomModel(CostModel):
    """The control: scores are random, so search with it is random search over the candidates."""
    kind = "random"

    def __init__(self, seed: int | None = None):
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def update(self, funcs: list, seconds: list, workload: str | None = None) -> None:
        pass

    def predict(self, funcs: list) -> np.ndarray:
        return self.rng.random(len(funcs))

    def to_json(self) -> dict:
        return {"kind": self.kind, "seed": self.seed}

    @classmethod
    def from_json(cls, data: dict) -> "RandomModel":
        return cls(data.get("seed"))


class LearnedModel(CostModel):
    """A scikit-learn regressor refitted on all records at every update (see the module
    docstring). Subclasses name the ``kind``, the ``defaults`` of their hyper-parameters and
    build the ``estimator``; keyword arguments override the defaults."""
    defaults: dict = {}

    def __init__(self, seed: int | None = None, **params):
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown hyper-parameter(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(self.defaults))}")
        self.seed = seed
        self.params = {**self.defaults, **params}
        self.rng = np.random.default_rng(0 if seed is None else seed)
        self.features: list = []    # one feature vector (np.ndarray) per record
        self.seconds: list = []     # its measured time, inf when it failed
        self.workloads: list = []   # the key of the workload it belongs to
        self.fitted = None
        # id(func) -> (func, features): search scores one candidate in several generations and
        # then learns from it; functions are immutable, so their features never change
        self._feature_cache: dict = {}

    @property
    def num_records(self) -> int:
        return len(self.seconds)

    def estimator(self):
        raise NotImplementedError

    def update(self, funcs: list, seconds: list, workload: str | None = None) -> None:
        if len(funcs) != len(seconds):
            raise ValueError(f"update: {len(funcs)} funcs but {len(seconds)} times")
        for func, sec in zip(funcs, seconds):
            sec = float(sec)
            if not sec > 0:
                raise ValueError(f"update: a run time must be positive (or inf for a failed "
                                 f"candidate), got {sec}")
            self.features.append(self.features_of(func))
            self.seconds.append(sec)
            self.workloads.append(workload or workload_key(func))
        self.refit()

    def refit(self) -> None:
        """Fit the estimator on every record, or leave the model untrained while the targets
        cannot tell records apart."""
        targets = normalised_throughput(self.seconds, self.workloads)
        self.fitted = None
        if len(targets) < 2 or np.ptp(targets) == 0:
            return
        estimator = self.estimator()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # lbfgs stopping at max_iter is expected
            estimator.fit(np.vstack(self.features), targets)
        self.fitted = estimator

    def predict(self, funcs: list) -> np.ndarray:
        if self.fitted is None:
            return self.rng.random(len(funcs))
        if not funcs:
            return np.zeros(0)
        return self.predict_features(np.vstack([self.features_of(f) for f in funcs]))

    def predict_features(self, features: np.ndarray) -> np.ndarray:
        """Scores of candidates given by their feature vectors (one row each)."""
        if self.fitted is None:
            return self.rng.random(len(features))
        return self.fitted.predict(features)

    def has_features(self, func) -> bool:
        hit = self._feature_cache.get(id(func))
        return hit is not None and hit[0] is func

    def features_of(self, func) -> np.ndarray:
        """``extract_features(func)``, remembered for the last ``FEATURE_CACHE`` functions."""
        hit = self._feature_cache.get(id(func))
        if hit is not None and hit[0] is func:
            return hit[1]
        if len(self._feature_cache) >= FEATURE_CACHE:
            self._feature_cache.clear()
        vector = extract_features(func)
        self._feature_cache[id(func)] = (func, vector)
        return vector

    def to_json(self) -> dict:
        return {"kind": self.kind, "seed": self.seed, "params": self.params,
                "feature_names": FEATURE_NAMES,
                "records": {"features": [[float(x) for x in f] for f in self.features],
                            "seconds": [s if math.isfinite(s) else None for s in self.seconds],
                            "workloads": self.workloads}}

    @classmethod
    def from_json(cls, data: dict) -> "LearnedModel":
        """The model ``to_json`` described, refitted on its records. Features saved under other
        names (an older feature set) are matched by name; ones it lacks are 0."""
        model = cls(data.get("seed"), **data.get("params", {}))
        records = data.get("records", {"features": [], "seconds": [], "workloads": []})
        column = {name: n for n, name in enumerate(data.get("feature_names", FEATURE_NAMES))}
        for vector, sec, key in zip(records["features"], records["seconds"], records["workloads"]):
            model.features.append(np.array([vector[column[name]] if name in column else 0.0
                                            for name in FEATURE_NAMES]))
            model.seconds.append(math.inf if sec is None else float(sec))
            model.workloads.append(key)
        model.refit()
        return model


class GBDTModel(LearnedModel):
    """Gradient-boosted regression trees (scikit-learn's GradientBoostingRegressor). Fitted on
    fewer than ``small`` records, every tree sees every record and a leaf may hold one."""
    kind = "gbdt"
    small = 16
    defaults = {"n_estimators": 150, "max_depth": 3, "learning_rate": 0.1, "min_samples_leaf": 2,
                "subsample": 0.9}

    def estimator(self):
        from sklearn.ensemble import GradientBoostingRegressor
        params = dict(self.params)
        if self.num_records < self.small:     # too few records to hold some out of each tree
            params.update(subsample=1.0, min_samples_leaf=1)
        return GradientBoostingRegressor(random_state=0 if self.seed is None else self.seed,
                                         **params)


class MLPModel(LearnedModel):
    """A small multi-layer perceptron (scikit-learn's MLPRegressor) on standardised features."""
    kind = "mlp"
    defaults = {"hidden_layer_sizes": [64, 32], "alpha": 1e-3, "max_iter": 300}

    def estimator(self):
        from sklearn.neural_network import MLPRegressor
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        params = {**self.params, "hidden_layer_sizes": tuple(self.params["hidden_layer_sizes"])}
        return make_pipeline(StandardScaler(), MLPRegressor(
            solver="lbfgs", random_state=0 if self.seed is None else self.seed, **params))


def workload_key(func) -> str:
    """What makes two scheduled functions schedules of one workload: name, parameter shapes, dtypes."""
    params = ", ".join(f"{b.dtype}[{', '.join(str(s) for s in b.shape)}]" for b in func.buffer_params)
    return f"{func.name or 'main'}({params})"


def normalised_throughput(seconds: list, workloads: list) -> np.ndarray:
    """best / seconds within each workload: 1 for its fastest record, 0 for a failed (inf) one."""
    seconds = np.asarray(seconds, dtype=np.float64)
    keys = np.asarray(workloads, dtype=object)
    targets = np.zeros(len(seconds))
    for key in set(workloads):
        group = keys == key
        best = seconds[group].min()
        if math.isfinite(best):
            targets[group] = best / seconds[group]
    return targets


_KINDS = {"random": RandomModel, "gbdt": GBDTModel, "mlp": MLPModel}


def create_cost_model(kind="gbdt", seed: int | None = None) -> CostModel:
    """A cost model by name ("gbdt", "mlp" or "random"), loaded from the path of a saved one
    (a ``.json`` file, such as the ``cost_model.json`` tune_tir leaves in its work_dir), or
    ``kind`` itself when it already is one (then ``seed`` is not used)."""
    if isinstance(kind, CostModel):
        return kind
    if isinstance(kind, (str, os.PathLike)) and str(kind).endswith(".json"):
        return CostModel.load(str(kind))
    if kind not in _KINDS:
        raise ValueError(f"unknown cost model {kind!r}; known: {', '.join(sorted(_KINDS))} "
                         "(or pass a CostModel object)")
    return _KINDS[kind](seed=seed)
