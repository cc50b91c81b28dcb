"""The region arithmetic the primitives use; its home is mlc_lab/tir/intervals.py."""
from ...intervals import (Interval, Region, comparisons, constant_on_right, guard_scale,  # noqa: F401
                          guarded_bounds, intersect, narrowed_ranges, relax, relax_region,
                          satisfiable_over, union, union_regions)
