"""Workloads for testing the tuner and the schedules: ``te_workload`` (operators written in te,
under the names of the reference compiler's ``meta_schedule.testing.te_workload``)."""
from . import te_workload

__all__ = ["te_workload"]
