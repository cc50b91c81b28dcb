"""``Profile``: a simulated launch's counters as a table (text, HTML in Jupyter) and a plot.

    >>> print(run.report("nvidia/a100"))          # doctest: +SKIP
    main_kernel0: grid (16, 16, 1) x block (64, 1, 1) = 16384 threads
    buffer    scope   reads       writes  requests  sectors  sect/req  coalesced  ...
    A         global  16,777,216  0       ...
    ...
    run.report().plot()                           # efficiency of each buffer's accesses
"""
from __future__ import annotations

from ..._html import escape as esc, page   # the shared, theme-following view
from .gpus import gpu_spec
from .timing import estimate

_COLUMNS = ("buffer", "scope", "reads", "writes", "requests", "sectors", "sect/req", "coalesced",
            "wavefronts", "conflicts")


_CSS = """
.mlc-lab-cuda-sim table { border-collapse: collapse; margin: 4px 0; font-size: 0.92em; }
.mlc-lab-cuda-sim th, .mlc-lab-cuda-sim td { padding: 2px 8px; border-bottom: 1px solid var(--mlc-border); }
.mlc-lab-cuda-sim .mlc-summary th, .mlc-lab-cuda-sim .mlc-summary td { text-align: left; }
.mlc-lab-cuda-sim .mlc-counters td { text-align: right; font-variant-numeric: tabular-nums; }
.mlc-lab-cuda-sim .mlc-counters td:first-child, .mlc-lab-cuda-sim .mlc-counters td:nth-child(2) {
  text-align: left; }
.mlc-lab-cuda-sim .mlc-scroll { overflow-x: auto; max-width: 100%; }
"""


class Profile:
    """The counters of ``run`` and its estimate on ``target`` (default: the run's, else A100)."""

    def __init__(self, run, target=None):
        self.run = run
        self.spec = gpu_spec(target if target is not None else run.target)
        self.estimate = estimate(run, self.spec)

    def rows(self) -> list[tuple]:
        """One row per buffer, the columns of ``_COLUMNS``, as strings."""
        out = []
        for c in self.run.counters.buffers.values():
            memory = c.scope != "local"
            out.append((
                c.name, c.scope, f"{c.reads:,}", f"{c.writes:,}",
                f"{c.requests:,}" if memory else "",
                f"{c.sectors:,}" if c.scope == "global" else "",
                f"{c.sectors_per_request:.1f}" if c.sectors_per_request else "",
                f"{c.efficiency:.0%}" if c.efficiency else "",
                f"{c.wavefronts:,}" if c.scope == "shared" else "",
                f"{c.conflict_degree:.2f}-way" if c.conflict_degree else ""))
        return out

    def summary(self) -> list[tuple[str, str]]:
        run, k, counters = self.run, self.run.kernel, self.run.counters
        per_thread = ", ".join(f"{n} {v:g}" for n, v in counters.per_thread().items() if v)
        occ = self.estimate.occupancy
        return [
            ("launch", f"grid {k.grid} x block {k.block} = "
                       f"{k.num_blocks * k.threads_per_block:,} threads" +
                       (f" (simulated {run.blocks_run} blocks)" if run.blocks_run < k.num_blocks
                        else "")),
            ("per thread", per_thread or "no memory accesses"),
            ("flops", f"{counters.flops:,}"),
            *([("tensor cores", f"{counters.tensor_instructions:,} warp mma instructions, "
                                f"{counters.tensor_flops:,} flops")]
              if counters.tensor_instructions else []),
            ("shared memory", f"{run.shared_bytes:,} bytes per block"),
            ("registers", f"{run.registers} per thread"),
            ("occupancy", f"{occ.occupancy:.0%} on {self.spec.name}: {occ.blocks_per_sm} "
                          f"block(s) / {occ.warps_per_sm} warps per SM, limited by {occ.limiter}"),
            ("estimate", str(self.estimate)),
            ("simulated in", f"{run.wall_seconds:.3f} s"),
        ]

    def __str__(self) -> str:
        lines = [f"{self.run.kernel.name}"]
        lines += [f"  {label}: {value}" for label, value in self.summary()]
        table = [_COLUMNS] + self.rows()
        widths = [max(len(row[i]) for row in table) for i in range(len(_COLUMNS))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                  for row in table]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        summary = "".join(f"<tr><th>{esc(a)}</th><td>{esc(b)}</td></tr>" for a, b in self.summary())
        head = "".join(f"<th>{esc(c)}</th>" for c in _COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>"
                       for row in self.rows())
        return page(f"<b>{esc(self.run.kernel.name)}</b><table class='mlc-summary'>{summary}</table>"
                    f"<div class='mlc-scroll'><table class='mlc-counters'><thead><tr>{head}</tr></thead>"
                    f"<tbody>{body}</tbody></table></div>", _CSS, "mlc-lab-cuda-sim")

    def plot(self, ax=None):
        """Bars of each global buffer's coalescing efficiency and each shared buffer's bank
        efficiency (1 / conflict degree), in percent: 100% is the best a warp can do."""
        if ax is None:
            import matplotlib.pyplot as plt
            _, ax = plt.subplots(figsize=(5, 0.5 + 0.35 * max(len(self.run.counters.buffers), 1)))
        names, values, colors = [], [], []
        for c in self.run.counters.buffers.values():
            if c.scope == "global" and c.efficiency:
                names.append(f"{c.name} (coalescing)")
                values.append(100 * c.efficiency)
                colors.append("tab:blue")
            elif c.scope == "shared" and c.conflict_degree:
                names.append(f"{c.name} (banks)")
                values.append(100 / c.conflict_degree)
                colors.append("tab:orange")
        ax.barh(names, values, color=colors)
        ax.set_xlim(0, 105)
        ax.invert_yaxis()
        ax.set_xlabel("efficiency of memory accesses (%)")
        ax.set_title(f"{self.run.kernel.name}: {self.estimate.seconds * 1e3:.3f} ms estimated "
                     f"on {self.spec.name}", fontsize="medium")
        return ax
