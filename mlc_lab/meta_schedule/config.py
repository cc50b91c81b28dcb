"""``TuneConfig``: the 2022 course's way of giving ``tune_tir`` its budget.

    sch = ms.tune_tir(mod=MyModule, target="llvm --num-cores=1",
                      config=ms.TuneConfig(max_trials_global=64, num_trials_per_iter=64),
                      work_dir="./tune_tmp", task_name="main")

Called so, ``tune_tir`` returns what it returned then: the best schedule (a ``tir.Schedule``),
or None when no trial succeeded. Today's form passes ``max_trials_global`` and
``num_trials_per_iter`` directly and returns the database.
"""
from __future__ import annotations

from typing import NamedTuple

# The 2022 names of the search strategies.
STRATEGIES = {"evolutionary": "evolutionary", "replay_trace": "random", "replay_func": "random",
              "random": "random"}


class TuneConfig(NamedTuple):
    """The budget and strategy of one tuning run. The fields after ``strategy`` are accepted so
    that 2022 code runs; mlc_lab's tuner has one task per ``tune_tir`` call and no adaptive
    scheduler, so they change nothing."""
    max_trials_global: int
    num_trials_per_iter: int = 64
    max_trials_per_task: int | None = None
    task_scheduler: str = "gradient"
    strategy: str = "evolutionary"
    task_scheduler_config: dict | None = None
    search_strategy_config: dict | None = None
    logger_config: dict | None = None
    adaptive_training: bool | None = None

    def search_strategy(self) -> str:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"TuneConfig: unknown strategy {self.strategy!r}; known: "
                             f"{', '.join(STRATEGIES)}")
        return STRATEGIES[self.strategy]
