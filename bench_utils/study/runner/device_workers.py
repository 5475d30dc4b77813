"""The runner's workers: one per device, checked against this machine before anything runs."""

from __future__ import annotations

from typing import Any

from ...errors import UserError
from ..grid.grid_file import Grid


def workers_of(grid: Grid, devices: list[str] | None, kind: str) -> list[str]:
    """The devices of ``kind`` that cells run on: ``--devices`` where it names some, else the grid's."""
    if devices:
        chosen = [device for device in devices if device.split(":")[0] == kind]
        if chosen:
            return chosen
    return grid.workers(kind)


def check_workers(grid: Grid, devices: list[str] | None, environment: dict[str, Any], *,
                  this_machine: bool = True) -> list[str]:
    """Every worker's device, checked against this machine before anything runs: a GPU that is not there, or one
    device listed twice, is refused in one line. With ``this_machine`` False (``--device-model``) no GPU is looked for.
    """
    kinds = sorted({cell.device for cell in grid.cells})
    unused = [device for device in devices or [] if device.split(":")[0] not in kinds]
    if unused:
        raise UserError(f"--devices {unused[0]}: the grid has no {unused[0].split(':')[0]} cells "
                        f"(its devices: {', '.join(kinds)})")
    workers = [device for kind in kinds for device in workers_of(grid, devices, kind)]
    twice = sorted({device for device in workers if workers.count(device) > 1})
    if twice:
        raise UserError(f"device {twice[0]} is listed twice: one worker per device, so that "
                        "no two measurements share it")
    visible = environment.get("gpu_count") or 0
    for device in workers if this_machine else []:
        if device.startswith("cuda") and int(device.partition(":")[2] or 0) >= visible:
            raise UserError(f"the grid needs {device}, but this machine shows {visible} CUDA "
                            f"device(s){'' if visible else ': run a CPU grid, or on a GPU machine'}")
    return workers
