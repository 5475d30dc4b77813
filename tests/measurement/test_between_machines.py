"""The interval for a new machine's figure, on simulated studies whose truth is known.

The sizes are the H200's (reports/hf-guide-h200, gpu-check-h200, anchors-h200): machines move a cell's log speed-up
by about 0.05 (up to 0.14 on host-bound small batches, about 0 at batch 16); a fresh process by 0.029; a pair of
blocks has a log-ratio noise of 0.06; drift inside a run is left mostly to the pairing; half the processes change
regime for a stretch of blocks (+0.16 on those pairs). A machine's effect is its own, the same in every cell it
measures (a host; ``shared`` 0.5: half of it, the rest the cell's). Each cell is measured on 1 to 3 of 6 machines,
in 3 replicates of 10 pairs (or one run of 30).
"""

import math

import numpy as np
import pytest

from bench_utils.measurement.between_machines import (BetweenMachines, MachineFigure, between_machines, group_of,
                                                      machine_figure, new_machine_interval)

PROCESS, PAIR_NOISE, DRIFT = 0.029, 0.06, 0.02
REGIME_CHANCE, REGIME_STEP = 0.5, 0.16
STUDIES, CELLS, MACHINES = 150, 20, 6


def process(rng, log_speedup, pairs):
    """One fresh process's per-pair log ratios."""
    ratios = log_speedup + rng.normal(0, PROCESS) + rng.normal(0, PAIR_NOISE, pairs)
    ratios += rng.normal(0, DRIFT) * (np.arange(pairs) / pairs - 0.5)
    if rng.random() < REGIME_CHANCE:
        ratios[(np.arange(pairs) + 0.5) / pairs >= rng.random()] += REGIME_STEP
    return ratios


def measured(rng, machine, log_speedup, replicates):
    return machine_figure(machine, [process(rng, log_speedup, 30 // replicates) for _ in range(replicates)])


def simulate(seed, tau, replicates=3, shared=1.0):
    """Over simulated studies: how often the interval covers a new machine's figure (all cells; cells on one
    machine), how often one machine's own interval (its replicates', ``replicates``) does, the median width."""
    rng = np.random.default_rng(seed)
    covered, single, own, widths = [], [], [], []
    for _ in range(STUDIES):
        effects = rng.normal(0, tau * math.sqrt(shared), MACHINES + 1)  # the last: the new machine's
        cells = []
        for _ in range(CELLS):
            truth = math.log(1.5) + rng.normal(0, 0.3)
            chosen = rng.choice(MACHINES, int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2])), replace=False)
            cell_sd = tau * math.sqrt(1 - shared)
            figures = [measured(rng, str(m), truth + effects[m] + rng.normal(0, cell_sd), replicates) for m in chosen]
            cells.append((figures, measured(rng, "new", truth + effects[-1] + rng.normal(0, cell_sd), replicates)))
        between = between_machines([figures for figures, _ in cells])
        for figures, new in cells:
            interval = new_machine_interval(figures, between)
            covered.append(interval.covers(math.exp(new.log_speedup)))
            if len(figures) == 1:
                single.append(covered[-1])
            first = figures[0]
            own.append(abs(new.log_speedup - first.log_speedup) <= 1.96 * first.se)
            widths.append(interval.high / interval.low)
    return np.mean(covered), np.mean(single), np.mean(own), float(np.median(widths))


def test_with_machine_process_and_regime_effects_the_interval_covers_a_new_machines_figure():
    covered, single, own, width = simulate(0, tau=0.08)
    assert 0.93 <= covered <= 0.98 and 0.92 <= single <= 0.98  # about 95 %, on one machine or several
    assert own < 0.5            # one machine's interval, the spread between processes in it, misses most
    assert width < 1.7          # and the price: about +-20 % around the figure at this spread


def test_a_larger_spread_between_machines_widens_it_and_it_still_holds():
    covered, _, own, width = simulate(1, tau=0.14)
    assert 0.93 <= covered <= 0.98 and own < 0.35 and width > simulate(0, tau=0.08)[3]


def test_with_no_spread_between_machines_it_holds_without_growing_much():
    covered, _, own, width = simulate(2, tau=0.0)
    assert 0.93 <= covered <= 0.98 and width < 1.4


def test_one_run_a_machine_holds_too():
    covered, _, _, _ = simulate(3, tau=0.08, replicates=1)
    assert 0.93 <= covered <= 0.98


def test_where_machines_effects_are_partly_each_cells_own_it_errs_on_the_wide_side():
    covered, _, _, width = simulate(4, tau=0.08, shared=0.5)
    assert 0.95 <= covered <= 0.985 and width < 1.8  # the degrees of freedom capped at the machines less one


def test_a_machines_figure_is_its_replicates_mean_with_their_spread_floored_by_the_pairs():
    one = machine_figure("a", [[0.1, 0.3, 0.2]])
    assert one.log_speedup == pytest.approx(0.2) and one.dof == 2 and one.replicates == 1
    assert one.se == pytest.approx(0.1 / math.sqrt(3))
    apart = machine_figure("a", [[0.0, 0.02], [0.5, 0.52]])  # replicates apart: their spread
    assert apart.log_speedup == pytest.approx(0.26) and apart.dof == 1
    assert apart.se == pytest.approx(0.5 / math.sqrt(2) / math.sqrt(2))
    alike = machine_figure("a", [[0.0, 0.4], [0.0, 0.4]])  # replicates alike, pairs spread: the pairs' error
    assert alike.se == pytest.approx(math.sqrt(0.08 * 2 / 2 / 4)) and alike.dof == 2
    assert machine_figure("a", [[0.3]]) is None and machine_figure("a", []) is None


def test_the_spread_between_machines_is_the_figures_variance_less_their_own_pooled_over_cells():
    def figure(machine, value, se=0.01):
        return MachineFigure(machine, value, se, 10, 3)

    cells = [[figure("a", 0.0), figure("b", 0.2)], [figure("a", 1.0), figure("b", 1.0), figure("c", 1.3)],
             [figure("a", 5.0)]]  # a cell on one machine says nothing of the spread
    found = between_machines(cells)
    expected = (1 * (0.02 - 1e-4) + 2 * (0.03 - 1e-4)) / 3
    assert found.tau2 == pytest.approx(expected) and found.cells == 2
    assert found.dof == 2  # 3 cells' worth of differences, but only 3 machines' effects: 2 degrees of freedom
    many = [[figure(m, 0.0), figure(n, 0.1)] for m, n in ("ab", "cd", "ef", "gh")]
    assert between_machines(many).dof == 4  # 8 machines: the cells' own count
    assert between_machines([[figure("a", 1.0), figure("b", 1.0)]]).tau2 == 0.0  # never below nothing
    assert between_machines([cells[2]]) is None


def test_a_cell_on_one_machine_counts_the_spread_between_machines_twice_and_more_machines_narrow_it():
    between = BetweenMachines(tau2=0.05 ** 2, dof=200, cells=100)
    one = new_machine_interval([MachineFigure("a", 0.5, 0.001, 1000, 3)], between)
    three = new_machine_interval([MachineFigure(m, 0.5, 0.001, 1000, 3) for m in "abc"], between)
    assert one.speedup == pytest.approx(math.exp(0.5))
    assert math.log(one.high / one.speedup) == pytest.approx(1.96 * 0.05 * math.sqrt(2), rel=0.01)
    assert math.log(three.high / three.speedup) == pytest.approx(1.96 * 0.05 * math.sqrt(4 / 3), rel=0.01)
    with pytest.raises(ValueError, match="no machine"):
        new_machine_interval([], between)


def test_small_batches_and_large_ones_are_separate_groups():
    assert group_of(1) == group_of(4) == "small batch" and group_of(16) == "large batch"


def test_figures_that_agree_to_the_last_bit_give_a_point_and_a_spread_of_zero_is_not_trusted():
    from bench_utils.measurement.between_machines import spread_for

    same = [MachineFigure("a", 0.1, 0.0, 5, 1), MachineFigure("b", 0.1, 0.0, 5, 1)]
    interval = new_machine_interval(same, BetweenMachines(0.0, 3, 2))
    assert interval.low == interval.high == interval.speedup == pytest.approx(math.exp(0.1))
    agree = [[MachineFigure(m, v, 0.01, 10, 3) for m in "abc"] for v in (0.1, 0.5)]  # machines that agree: tau^2 0
    apart = [[MachineFigure(m, v + d, 0.01, 10, 3) for m, d in zip("abc", (0, 0.1, -0.1))] for v in (0.1, 0.5)]
    groups = {"large batch": agree, "small batch": apart}
    assert between_machines(agree).tau2 == 0.0
    assert spread_for("large batch", groups).tau2 == between_machines(agree + apart).tau2 > 0  # the pooled one
    assert spread_for("small batch", groups) == between_machines(apart)
