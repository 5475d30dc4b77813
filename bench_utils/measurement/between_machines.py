"""A speed-up's interval for the figure another machine will show: the spread between machines in it.

Why (machines of one kind differ by more than a run's interval), and what the interval covers in simulation and on
real records: docs/measurement.md, *Between machines*. The model, per cell c and machine m: a machine's figure y_cm
(its log speed-up, ``machine_figure``) is mu_c + M_cm + e_cm, where M_cm ~ N(0, tau^2) is the machine's effect,
shared by the cells of one group (``group_of``), and e_cm the figure's own noise, whose standard error s_cm it states
(its replicates' spread, or one run's pairs').

- tau^2 (``between_machines``): the method of moments pooled over the group's cells measured on k_c >= 2 machines
  (DerSimonian and Laird's estimator, one tau^2 for many cells): each cell's sample variance of its machines'
  figures has expectation tau^2 + the mean s^2, so tau^2 = max(0, sum (k_c - 1) (S_c^2 - mean s_c^2) / sum (k_c - 1)),
  on d = sum (k_c - 1) degrees of freedom, but at most the machines less one: a machine's effect is largely its own,
  the same in every cell it measures (a host), so many cells on few machines see few machines' effects (with 3
  machines and machine-level effects, the uncapped d covered 91 % in simulation, the capped 95 %). A cell takes its
  group's where d >= ``MIN_DOF`` and tau^2 > 0 (an estimate truncated at 0 is no evidence of none), else every
  group's pooled (``spread_for``).
- The interval (``new_machine_interval``): around the mean of the cell's k machines' figures, a new machine's figure
  differs from it by its own effect and noise and by the mean's: variance (tau^2 + s^2)(1 + 1/k), s^2 the cell's mean
  s^2 (the new machine measuring as ours did); Student's t on Satterthwaite's degrees of freedom of that sum.
  A cell measured on one machine gets the same formula with k = 1: the between-machine part twice.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Iterable, Mapping, Sequence

import numpy as np
from scipy import stats as scipy_stats

from .paired import CONFIDENCE
from .replicates import pooled_standard_error

METHOD = ("prediction interval for a new machine's figure: the machines' mean, the spread between machines "
          "(pooled method of moments over the cells of its group) and each figure's own error, Student's t "
          "on Satterthwaite's degrees of freedom")
SMALL_BATCH_MAX = 4  # batch sizes up to this: the host-bound group, where machines differed most
# A spread estimated on fewer degrees of freedom is not used: one cell on two machines that happen to agree says
# little of the spread (its estimate is 0 half the time), and an interval built on it would be the figures' own.
MIN_DOF = 2


def group_of(batch_size: int) -> str:
    """The cells that share one spread between machines: host-bound small batches, or compute-bound large ones."""
    return "small batch" if batch_size <= SMALL_BATCH_MAX else "large batch"


@dataclass(frozen=True)
class MachineFigure:
    """One machine's figure of one cell: its log speed-up and that figure's standard error, on ``dof`` degrees of
    freedom (its replicates less one; one run: its pairs less one)."""

    machine: str
    log_speedup: float
    se: float
    dof: int
    replicates: int


def machine_figure(machine: str, log_ratios: Sequence[Sequence[float]]) -> MachineFigure | None:
    """A machine's figure from its replicates' per-pair log ratios: the mean of the replicates' means, its error
    from their spread (never under that of all the pairs pooled), or one run's from its pairs; None where one run
    of one pair states no error."""
    replicates = [np.asarray(ratios, dtype=np.float64) for ratios in log_ratios if len(ratios)]
    if not replicates:
        return None
    means = np.array([ratios.mean() for ratios in replicates])
    pooled_dof = sum(ratios.size for ratios in replicates) - len(replicates)
    pooled_se = pooled_standard_error(replicates)
    if len(replicates) == 1:
        if pooled_se is None:
            return None
        return MachineFigure(machine, float(means[0]), pooled_se, pooled_dof, 1)
    between_se = float(means.std(ddof=1)) / math.sqrt(len(means))
    if pooled_se is not None and pooled_se > between_se:
        return MachineFigure(machine, float(means.mean()), pooled_se, pooled_dof, len(replicates))
    return MachineFigure(machine, float(means.mean()), between_se, len(means) - 1, len(replicates))


@dataclass(frozen=True)
class BetweenMachines:
    """The spread between machines of one group: the variance of a machine's effect on the log speed-up."""

    tau2: float
    dof: int       # sum over its cells of (machines - 1), at most the machines less one
    cells: int     # cells measured on two machines or more

    @property
    def sd(self) -> float:
        return math.sqrt(self.tau2)


def between_machines(cells: Iterable[Sequence[MachineFigure]]) -> BetweenMachines | None:
    """tau^2 pooled over ``cells`` (each a cell's machines' figures): None where no cell has two machines."""
    excess = dof = used = 0.0
    machines: set[str] = set()
    for figures in cells:
        k = len(figures)
        if k < 2:
            continue
        values = np.array([figure.log_speedup for figure in figures])
        own = float(np.mean([figure.se ** 2 for figure in figures]))
        excess += (k - 1) * (float(values.var(ddof=1)) - own)
        dof += k - 1
        used += 1
        machines.update(figure.machine for figure in figures)
    if not dof:
        return None
    return BetweenMachines(max(0.0, excess / dof), int(min(dof, len(machines) - 1)), int(used))


def spread_for(group: str,
               cells_by_group: Mapping[str, Sequence[Sequence[MachineFigure]]]) -> BetweenMachines | None:
    """The spread between machines that a cell of ``group`` takes: its group's, where it rests on ``MIN_DOF``
    degrees of freedom or more and is not 0, else every group's pooled where that does, else None (not known)."""
    own = between_machines(cells_by_group.get(group, []))
    # a spread estimated at exactly 0 was truncated there (likely on few degrees of freedom): it says the spread is
    # small, not that there is none, and an interval on it would be the figures' own
    if own is not None and own.dof >= MIN_DOF and own.tau2 > 0:
        return own
    pooled = between_machines([cell for cells in cells_by_group.values() for cell in cells])
    return pooled if pooled is not None and pooled.dof >= MIN_DOF else None


@dataclass(frozen=True)
class NewMachineInterval:
    """A cell's speed-up over its machines and the interval for a new machine's figure."""

    speedup: float                  # exp of the mean of its machines' log speed-ups
    low: float
    high: float
    machines: int
    dof: float

    def covers(self, speedup: float) -> bool:
        return self.low <= speedup <= self.high


def new_machine_interval(figures: Sequence[MachineFigure], between: BetweenMachines,
                         confidence: float = CONFIDENCE) -> NewMachineInterval:
    """The interval in which a new machine's figure of the cell falls with probability ``confidence``."""
    if not figures:
        raise ValueError("no machine's figure: an interval needs at least one")
    k = len(figures)
    center = float(np.mean([figure.log_speedup for figure in figures]))
    own = float(np.mean([figure.se ** 2 for figure in figures]))
    # the mean s^2's degrees of freedom (Satterthwaite), then those of the whole variance
    own_dof = own ** 2 * k ** 2 / sum(figure.se ** 4 / figure.dof for figure in figures) if own > 0 else math.inf
    parts = [(between.tau2 * (1 + 1 / k), between.dof), (own * (1 + 1 / k), own_dof)]
    variance = sum(value for value, _ in parts)
    if variance <= 0:  # machines and runs that agree to the last bit: nothing to spread
        return NewMachineInterval(math.exp(center), math.exp(center), math.exp(center), k, math.inf)
    dof = variance ** 2 / sum(value ** 2 / part_dof for value, part_dof in parts if value > 0)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, dof)) * math.sqrt(variance)
    return NewMachineInterval(math.exp(center), math.exp(center - half), math.exp(center + half), k, dof)
