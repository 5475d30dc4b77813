"""What each kernel group asks of the cluster, checked against its nodes before anything runs (docs/cluster.md).

A CUDA group asks for one GPU, a CPU group for every CPU of the smallest node it may land on (no two CPU measurements
share a machine), and a grid's accelerator type for Ray's ``accelerator_type``. A kind, or a GPU, that no live node
offers is refused in one line: its tasks would wait for ever.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..study.grid.grid_file import Grid

ACCELERATOR_RESOURCE = "accelerator_type:"   # Ray's resource for a node's accelerator type


def node_kinds(node: dict[str, Any]) -> list[str]:
    """The accelerator types a node offers (``ray start --resources`` declares custom ones)."""
    return sorted(name[len(ACCELERATOR_RESOURCE):] for name, amount in node["resources"].items()
                  if name.startswith(ACCELERATOR_RESOURCE) and amount > 0)


def live_nodes(nodes: list[dict[str, Any]], kind: str | None, device: str) -> list[dict[str, Any]]:
    """The live nodes a group of ``device`` cells on accelerator type ``kind`` (None: any) may run on."""
    return [node for node in nodes if node["alive"] and (kind is None or kind in node_kinds(node))
            and (device != "cuda" or node["resources"].get("GPU", 0) >= 1)
            and (device == "cuda" or node["resources"].get("CPU", 0) >= 1)]


def task_resources(grid: Grid, nodes: list[dict[str, Any]]) -> dict[tuple[str | None, str], dict[str, Any]]:
    """Ray options per (accelerator type or None, device kind) of the grid; UserError if the cluster
    cannot run some of them. ``nodes``: ``{"id", "alive", "resources"}`` per node."""
    alive = [node for node in nodes if node["alive"]]
    offered = sorted({kind for node in alive for kind in node_kinds(node)})
    resources: dict[tuple[str | None, str], dict[str, Any]] = {}
    kinds: list[str | None] = [*grid.accelerators] or [None]
    for kind in kinds:
        if not any(kind is None or kind in node_kinds(node) for node in alive):
            raise UserError(f"the Ray cluster has no live node of accelerator type {kind} (its types: "
                            f"{', '.join(offered) or 'none declared'}); start one with "
                            f"`ray start --address ... --resources '{{\"{ACCELERATOR_RESOURCE}{kind}\": 1}}'` "
                            "or a GPU Ray names so")
        for device in sorted({cell.device for cell in grid.cells}):
            where = f" of accelerator type {kind}" if kind else ""
            fit = live_nodes(nodes, kind, device)
            if not fit:
                raise UserError(f"the grid has {'CUDA' if device == 'cuda' else 'CPU'} cells, but no live "
                                f"node{where} of the Ray cluster has a {'GPU' if device == 'cuda' else 'CPU'}")
            if device == "cuda":
                options: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1}
            else:  # a whole node: CPU measurements never share one
                options = {"num_cpus": int(min(node["resources"]["CPU"] for node in fit)), "num_gpus": 0}
            if kind:
                options["accelerator_type"] = kind
            resources[(kind, device)] = options
    return resources
