"""Automatic program optimization: search spaces of schedules, a learned cost model, measurement
and a tuning database, under the course-era ``meta_schedule`` names.

    database = ms.tune_tir(mod, target="llvm --num-cores=1", max_trials_global=64,
                           space=ms.space_generator.ScheduleFn(f), work_dir="./tune_tmp")
    sch = ms.tir_integration.compile_tir(database, mod, target="llvm --num-cores=1")
"""
from . import (apply_database, cost_model, database, feature, postproc, relax_integration, runner, schedule_rule,
               search_strategy, space_generator, tir_integration)
from .config import TuneConfig
from .cost_model import CostModel, GBDTModel, MLPModel, RandomModel, create_cost_model
from .database import JSONDatabase, TuningRecord
from .flop_counter import estimate_flops
from .runner import LocalRunner
from .search_strategy import EvolutionarySearch, RandomSearch
from .space_generator import PostOrderApply, ScheduleFn
from .tune import tune_tir

__all__ = ["CostModel", "EvolutionarySearch", "GBDTModel", "MLPModel", "RandomModel", "JSONDatabase", "LocalRunner", "PostOrderApply",
           "RandomSearch", "ScheduleFn", "TuneConfig", "TuningRecord", "cost_model", "create_cost_model",
           "database", "estimate_flops", "feature", "postproc", "relax_integration", "runner", "schedule_rule", "search_strategy",
           "space_generator", "tir_integration", "tune_tir"]
