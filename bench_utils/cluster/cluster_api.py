"""What the driver asks of a cluster (``Cluster``), and the ways a task can end other than done."""

from __future__ import annotations

from typing import Any, Iterator, Protocol

from .node import GroupTask


class NodeLost(RuntimeError):
    """The task's node or worker died under it."""


class TaskFailed(RuntimeError):
    """The task raised, or Ray could not schedule or set it up (the message says which)."""


class HostOutOfMemory(RuntimeError):
    """Ray's memory monitor ended the task's worker: its host ran out of memory."""


class Cancelled(RuntimeError):
    """The task was cancelled (the run was stopped)."""


class Cluster(Protocol):
    """``nodes()``: ``{"id", "alive", "resources"}`` each; ``submit``: the task's events, or one of
    the exceptions above; ``cancel_all``: a stop (Ray's: ``ray_cluster.RayCluster``)."""

    def nodes(self) -> list[dict[str, Any]]: ...
    def submit(self, task: GroupTask, options: dict[str, Any]) -> Iterator[dict[str, Any]]: ...
    def cancel_all(self) -> None: ...
