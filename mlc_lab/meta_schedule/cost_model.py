"""Cost models: predict which candidate schedules run fastest, so that search measures only the
promising ones.

The interface the search strategies use (every model implements it):

    model = create_cost_model("gbdt", seed=0)      # "gbdt" | "mlp" | "random" | a CostModel
    model.update(funcs, seconds)                   # scheduled PrimFuncs and their measured run times
    scores = model.predict(funcs)                  # np.ndarray, one score per func: higher = faster
    model.save(path); model = CostModel.load(path)  # JSON records (never pickles)

``funcs`` are block-form PrimFuncs as a schedule produces them (``sch.mod["main"]``); a model
extracts its own features (``feature.py``). ``seconds`` may hold ``inf`` for a candidate that
failed: a model treats it as the slowest possible.
"""
from __future__ import annotations

import json

import numpy as np


class CostModel:
    """Base class; see the module docstring for the interface."""
    kind = "base"

    def update(self, funcs: list, seconds: list) -> None:
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
        return _KINDS[data["kind"]].from_json(data)


class RandomModel(CostModel):
    """The control: scores are random, so search with it is random search over the candidates."""
    kind = "random"

    def __init__(self, seed: int | None = None):
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def update(self, funcs: list, seconds: list) -> None:
        pass

    def predict(self, funcs: list) -> np.ndarray:
        return self.rng.random(len(funcs))

    def to_json(self) -> dict:
        return {"kind": self.kind, "seed": self.seed}

    @classmethod
    def from_json(cls, data: dict) -> "RandomModel":
        return cls(data.get("seed"))


_KINDS = {"random": RandomModel}


def create_cost_model(kind="gbdt", seed: int | None = None) -> CostModel:
    """A cost model by name, or ``kind`` itself when it already is one."""
    if isinstance(kind, CostModel):
        return kind
    if kind not in _KINDS:
        raise ValueError(f"unknown cost model {kind!r}; known: {', '.join(sorted(_KINDS))} "
                         "(or pass a CostModel object)")
    return _KINDS[kind](seed=seed)
