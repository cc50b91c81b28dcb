"""Example programs and schedules shared by the course notebooks, the benchmarks and the tests."""
from . import matmul_schedules

__all__ = ["matmul_schedules"]
