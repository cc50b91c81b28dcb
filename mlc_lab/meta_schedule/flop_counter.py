"""``estimate_flops``: it lives with the schedule policy in ``mlc_lab.tir.schedule.policy.flops``."""
from ..tir.schedule.policy.flops import estimate_flops

__all__ = ["estimate_flops"]
