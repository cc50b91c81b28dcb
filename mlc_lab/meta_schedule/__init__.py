"""Automatic program optimization: search spaces of schedules, a learned cost model, measurement
and a tuning database, under the course-era ``meta_schedule`` names."""
from . import cost_model
from .cost_model import CostModel, create_cost_model

__all__ = ["CostModel", "cost_model", "create_cost_model"]
