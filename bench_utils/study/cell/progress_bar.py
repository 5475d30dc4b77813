"""A task notebook's progress for a person: a bar over its cells that moves as each part of a cell begins, with the
cell, what it is doing and tqdm's estimate of the time left; none under the grid runner. Updated only as a part
begins (``time_by_phase.now_doing``), never during a timed window, tqdm's monitor thread off; a failing display goes.
"""

from __future__ import annotations

import logging

from tqdm.auto import tqdm

from .time_by_phase import PARTS

DOING = {"load": "building the model", "ready": "readying the compiler", "compile": "compiling",
         "flops": "counting FLOPs", "timed": "warming up and timing", "parity": "accuracy gate",
         "memory": "measuring memory", "energy": "measuring energy", "profile": "profiling"}
# what it is doing goes into the format itself (tqdm's postfix field would prefix it with a comma)
tqdm.monitor_interval = 0  # its stall monitor is a thread that wakes every 10 s: none beside timed windows
BAR_FORMAT = "{{desc}} {{percentage:3.0f}}%|{{bar}}| {doing} [{{elapsed}} so far, ~{{remaining}} left]"


class CellsBar:
    """Told ``cell`` as one begins, ``doing`` (a ``time_by_phase`` listener) as each of its parts does, ``done``."""

    def __init__(self, cells: int, disable: bool = False) -> None:
        self.cells, self.finished, self.name, self.doing_now, self.seen = cells, 0, "", "starting", set[str]()
        self.bar = tqdm(total=cells, desc="cells", disable=disable, leave=True,
                        bar_format=BAR_FORMAT.format(doing="starting"))

    def cell(self, name: str) -> None:
        self.name, self.seen = name, set()
        self._show(max(self.bar.n, self.finished), "starting")

    def doing(self, part: str) -> None:
        self.seen.add(part)
        share = min(len(self.seen) / (len(PARTS) + 1), 0.95)
        self._show(max(self.bar.n, self.finished + share), DOING.get(part, part))

    def done(self) -> None:
        self.finished += 1
        self._show(self.finished, "done")

    def _show(self, position: float, doing: str) -> None:
        self.doing_now = f"{self.name}: {doing}" if self.name else doing
        if self.bar.disable:  # under the runner, or a display that failed
            return
        try:
            self.bar.n = position
            self.bar.bar_format = BAR_FORMAT.format(doing=self.doing_now.replace("{", "{{").replace("}", "}}"))
            self.bar.set_description_str(f"cell {min(self.finished + 1, self.cells)} of {self.cells}", refresh=False)
            self.bar.refresh()
        except Exception as problem:  # a display's failure is never the measurement's: the bar goes, the cells go on
            self.bar.disable = True
            logging.getLogger(__name__).warning("progress display stopped: %s", problem)
