"""Ray itself: the task a node runs, and the driver's ``Cluster`` (nodes, submit, cancel).

Each kernel group is a Ray generator task (``measure_group``): its events come back one by one
while it runs. Ray's own retry is off (``max_retries=0``): a retried generator replays from its
start and must yield the same values, which measurements never do; the driver retries instead
(``driver``). A node or worker that died becomes ``NodeLost``, Ray's memory monitor ending the
worker ``HostOutOfMemory``, a cancellation ``Cancelled``, and any other failure (the task's own
exception, a task Ray cannot schedule or set up) ``TaskFailed``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Iterator

from .connect import connect
from .cluster_api import Cancelled, HostOutOfMemory, NodeLost, TaskFailed
from .node import GroupTask, stream_group

# Ray is imported only once ``connect`` has chosen how (a cluster of this machine alone listens on
# the loopback interface only, which Ray reads as it is imported).


def measure_group(task: GroupTask) -> Iterator[dict[str, Any]]:
    """A kernel group measured on the node Ray placed it on (``node.stream_group``)."""
    import ray

    yield from stream_group(task, node_id=ray.get_runtime_context().get_node_id())


@functools.lru_cache(maxsize=1)
def _remote_measure_group():
    import ray

    # max_calls=1: a fresh worker process per group, so no task inherits another's environment
    # (its CUDA_VISIBLE_DEVICES, the GPU torch saw first, the placement variables)
    return ray.remote(max_retries=0, max_calls=1)(measure_group)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__


class RayCluster:
    """``with RayCluster(address) as cluster:``: connected to Ray for the run, then disconnected."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self._running: set = set()
        self._cancelled = False
        self._lock = threading.Lock()

    def __enter__(self) -> "RayCluster":
        connect(self.address)  # ClusterUnreachable: one line, exit status 2
        return self

    def __exit__(self, *exc_info) -> None:
        import ray

        ray.shutdown()

    def nodes(self) -> list[dict[str, Any]]:
        import ray

        return [{"id": node["NodeID"], "alive": node["Alive"], "resources": node.get("Resources") or {}}
                for node in ray.nodes()]

    def submit(self, task: GroupTask, options: dict[str, Any]) -> Iterator[dict[str, Any]]:
        import ray

        generator = _remote_measure_group().options(**options).remote(task)
        with self._lock:
            self._running.add(generator)
            cancelled = self._cancelled
        finished = False
        try:
            if cancelled:  # a stop came while this task was being sent
                raise Cancelled("cancelled")
            for ref in generator:
                yield ray.get(ref)
            finished = True
        except Exception as exc:
            _raise_as_driver_error(exc)
        finally:
            with self._lock:
                self._running.discard(generator)
            if not finished:  # never leave a task measuring that nobody follows
                _cancel(generator)

    def cancel_all(self) -> None:
        """End every running task, its worker and so its kernel; no task starts after (a stop)."""
        with self._lock:
            self._cancelled = True
            running = list(self._running)
        for generator in running:
            _cancel(generator)


def _cancel(generator) -> None:
    import ray

    try:
        ray.cancel(generator, force=True)
    except Exception:  # finished meanwhile, or Ray is shutting down
        pass


def _raise_as_driver_error(exc: Exception) -> None:
    """Ray's exception as the driver reads it: which failures a retry elsewhere can mend."""
    from ray import exceptions as ray_errors

    if isinstance(exc, (Cancelled, ray_errors.TaskCancelledError)):
        raise Cancelled("cancelled") from None
    if isinstance(exc, ray_errors.RayTaskError):  # the task's own exception (its cause)
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        raise TaskFailed(f"{type(cause).__name__}: {_first_line(cause)}") from None
    if isinstance(exc, ray_errors.OutOfMemoryError):  # Ray's memory monitor ended the worker
        raise HostOutOfMemory(f"{type(exc).__name__}: {_first_line(exc)}") from None
    if isinstance(exc, (ray_errors.NodeDiedError, ray_errors.WorkerCrashedError, ray_errors.LocalRayletDiedError,
                        ray_errors.ObjectLostError)):
        raise NodeLost(f"{type(exc).__name__}: {_first_line(exc)}") from None
    if isinstance(exc, ray_errors.RayError):  # unschedulable, runtime environment, Ray's own errors
        raise TaskFailed(f"{type(exc).__name__}: {_first_line(exc)}") from None
    raise exc
