"""What each kernel group asks of the cluster, checked against its nodes before anything runs.

A group of CUDA cells asks for one GPU (Ray sets the task's CUDA_VISIBLE_DEVICES to it, and the
node's runner pins its kernel there); a group of CPU cells asks for every CPU of the smallest node
it may land on, so that no two CPU measurements share a machine. A grid that names accelerator
types adds Ray's ``accelerator_type`` to each group of that kind, so it runs only on nodes of it.
A kind, or a GPU, that no live node offers is refused in one line: its tasks would wait for ever.
"""

from __future__ import annotations

from typing import Any

from ..study.grid import Grid

ACCELERATOR_RESOURCE = "accelerator_type:"   # Ray's resource for a node's accelerator type


def node_kinds(node: dict[str, Any]) -> list[str]:
    """The accelerator types a node offers (``ray start --resources`` declares custom ones)."""
    return sorted(name[len(ACCELERATOR_RESOURCE):] for name, amount in node["resources"].items()
                  if name.startswith(ACCELERATOR_RESOURCE) and amount > 0)


def task_resources(grid: Grid, nodes: list[dict[str, Any]]) -> dict[tuple[str | None, str], dict[str, Any]]:
    """Ray options per (accelerator type or None, device kind) of the grid; ValueError if the cluster
    cannot run some of them. ``nodes``: ``{"id", "alive", "resources"}`` per node."""
    alive = [node for node in nodes if node["alive"]]
    offered = sorted({kind for node in alive for kind in node_kinds(node)})
    resources = {}
    for kind in grid.accelerators or [None]:
        of_kind = [node for node in alive if kind is None or kind in node_kinds(node)]
        if not of_kind:
            raise ValueError(f"the Ray cluster has no live node of accelerator type {kind} (its types: "
                             f"{', '.join(offered) or 'none declared'}); start one with "
                             f"`ray start --address ... --resources '{{\"{ACCELERATOR_RESOURCE}{kind}\": 1}}'` "
                             "or a GPU Ray names so")
        for device in sorted({cell.device for cell in grid.cells}):
            where = f" of accelerator type {kind}" if kind else ""
            if device == "cuda":
                if not any(node["resources"].get("GPU", 0) >= 1 for node in of_kind):
                    raise ValueError(f"the grid has CUDA cells, but no live node{where} of the Ray cluster "
                                     "has a GPU")
                options: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1}
            else:  # a whole node: CPU measurements never share one
                options = {"num_cpus": max(1, int(min(node["resources"].get("CPU", 1) for node in of_kind))),
                           "num_gpus": 0}
            if kind:
                options["accelerator_type"] = kind
            resources[(kind, device)] = options
    return resources
