"""Where a runner's time goes: per measured candidate, the wall and worker-CPU seconds of each
phase ("build", "check", "timing"), plus what the tuning process spent waiting ("reference":
for the worker to finish computing expected outputs; "transfer": sending a candidate and
receiving its result, the part of a round trip that no phase accounts for).

>>> stats = MeasureStats()
>>> stats.add({"build": (0.5, 0.4), "check": (0.2, 0.2)})
>>> stats.add({"build": (0.3, 0.3)})
>>> round(stats.wall("build"), 3), stats.count("build"), round(stats.median_wall("build"), 3)
(0.8, 2, 0.4)
"""
from __future__ import annotations

from collections import defaultdict

PHASES = ("build", "cached build", "check", "timing", "reference", "transfer")


class MeasureStats:
    def __init__(self):
        self.samples: dict = defaultdict(list)   # phase -> [(wall, cpu), ...]
        self.counters: dict = defaultdict(int)   # e.g. "build cache hits"

    def add(self, phases: dict | None) -> None:
        for name, (wall, cpu) in (phases or {}).items():
            self.samples[name].append((float(wall), float(cpu)))

    def count_event(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def merge(self, other: "MeasureStats") -> None:
        for name, values in other.samples.items():
            self.samples[name].extend(values)
        for name, n in other.counters.items():
            self.counters[name] += n

    def wall(self, phase: str) -> float:
        return sum(w for w, _ in self.samples.get(phase, ()))

    def cpu(self, phase: str) -> float:
        return sum(c for _, c in self.samples.get(phase, ()))

    def count(self, phase: str) -> int:
        return len(self.samples.get(phase, ()))

    def median_wall(self, phase: str) -> float | None:
        values = sorted(w for w, _ in self.samples.get(phase, ()))
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

    def summary(self) -> str:
        """One line: total wall seconds (worker CPU seconds) and count of each phase."""
        parts = [f"{name} {self.wall(name):.1f} s (cpu {self.cpu(name):.1f}, n={self.count(name)})"
                 for name in PHASES if self.count(name)]
        parts += [f"{name} {n}" for name, n in sorted(self.counters.items())]
        return ", ".join(parts)
