"""Ray itself: the task a node runs, and the driver's ``Cluster`` (nodes, submit, cancel); docs/cluster.md.

Each kernel group is a plain Ray task (``measure_group``) with Ray's own retry off: the driver sends only the
unrecorded cells again. Its events reach the driver through an inbox, one small actor on the head node for the run
(Ray's streaming generators do not cross Ray Client); the task waits for its last event to arrive before it ends,
so the driver's last take, after the task's end, has them all. An inbox lost (``InboxLost``) stops the run.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Iterator
import uuid

from .connect import ClusterUnreachable, connect
from .cluster_api import Cancelled, HostOutOfMemory, NodeLost, TaskFailed
from .node import GroupTask, stream_group

# Ray is imported only once ``connect`` has set what Ray reads as it is imported (a local cluster's loopback only)

HEAD_NODE_RESOURCE = "node:__internal_head__"   # Ray's resource of the head node (its docs: Resources)
POLL_S = 0.5            # how often the driver takes a running task's events
INBOX_READY_S = 60.0    # for the inbox to start on the head (a worker process of the project's Python)
INBOX_TAKE_S = 120.0    # for one take: longer, and the head is lost or stuck


class InboxLost(RuntimeError):
    """The run's inbox on the head died or stopped answering: the run stops (run it again to resume)."""


class EventInbox:
    """The tasks' events by task key, until the driver takes them (a Ray actor on the head node); not a
    ``ray.util.queue.Queue`` per task: each is an actor, so a worker process on the head per GPU of the fleet."""

    def __init__(self) -> None:
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.closed: set[str] = set()

    def put(self, key: str, event: dict[str, Any]) -> None:
        if key not in self.closed:  # a task the driver let go of, still sending
            self.events.setdefault(key, []).append(event)

    def take(self, key: str) -> list[dict[str, Any]]:
        return self.events.pop(key, [])

    def close(self, key: str) -> None:
        """The driver is done with ``key``: what it has not taken, and what comes later, is dropped."""
        self.closed.add(key)
        self.events.pop(key, None)


def measure_group(task: GroupTask, inbox, key: str) -> None:
    """A kernel group measured on the node Ray placed it on (``node.stream_group``)."""
    import ray

    context = ray.get_runtime_context()
    gpus = ",".join(str(gpu) for gpu in context.get_accelerator_ids().get("GPU", []))
    last = None
    try:
        for event in stream_group(task, node_id=context.get_node_id(), slot=f"GPU {gpus}" if gpus else None):
            # not waited for: a task blocked in ray.get lends its CPUs to other tasks (Ray's rule),
            # and a CPU group holds its whole node. Ray runs one caller's calls of an actor in order.
            last = inbox.put.remote(key, event)
    finally:  # ended or failed, every event is in the inbox before the driver hears of it
        if last is not None:
            with contextlib.suppress(Exception):  # the inbox is gone: the driver hears of that itself
                ray.get(last)


@functools.lru_cache(maxsize=1)
def _remote_measure_group():
    import ray

    # max_calls=1: a fresh worker process per group: no task inherits another's CUDA_VISIBLE_DEVICES or placement
    return ray.remote(max_retries=0, max_calls=1)(measure_group)


def _said(exc: BaseException) -> str:
    """``Type: the message's first line``."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:300] if lines else type(exc).__name__}"


class RayCluster:
    """``with RayCluster(address) as cluster:``: connected to Ray for the run, then disconnected."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self._running: set = set()
        self._cancelled = False
        self._lock = threading.Lock()

    def __enter__(self) -> "RayCluster":
        connect(self.address)  # ClusterUnreachable: one line, exit status 2
        import ray

        try:
            # Any: Ray types an actor method's .remote only where @ray.method decorates it (Ray imported here)
            inbox_actor: Any = ray.remote(EventInbox)
            # num_cpus=0: it never waits for a CPU the group tasks hold; it ends with the run
            self._inbox = inbox_actor.options(
                num_cpus=0, resources={HEAD_NODE_RESOURCE: 0.001}, max_restarts=0).remote()
            ray.get(self._inbox.take.remote(""), timeout=INBOX_READY_S)  # up, before any task is sent
        except Exception as exc:
            ray.shutdown()
            raise ClusterUnreachable(
                f"the Ray cluster's head did not start the run's inbox in {INBOX_READY_S:.0f} s ({_said(exc)}): "
                "start Ray on the head from the project's .venv (docs/cluster.md)") from None
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

        key = uuid.uuid4().hex
        ref = _remote_measure_group().options(**options).remote(task, self._inbox, key)
        with self._lock:
            self._running.add(ref)
            cancelled = self._cancelled
        finished = False
        try:
            if cancelled:  # a stop came while this task was being sent
                raise Cancelled("cancelled")
            while True:
                ended, _ = ray.wait([ref], timeout=POLL_S)
                # taken after the end was seen: every event the task sent is in this take
                yield from self._take(key)
                if ended:
                    ray.get(ref)  # the task's failure, if it failed
                    finished = True
                    return
        except Exception as exc:
            _raise_as_driver_error(exc)
        finally:
            with self._lock:
                self._running.discard(ref)
            if not finished:  # never leave a task measuring that nobody follows
                _cancel(ref)
            with contextlib.suppress(Exception):  # Ray is shutting down
                self._inbox.close.remote(key)  # nor its events, nor any still on their way

    def _take(self, key: str) -> list[dict[str, Any]]:
        import ray
        from ray import exceptions as ray_errors

        try:
            return ray.get(self._inbox.take.remote(key), timeout=INBOX_TAKE_S)
        except (ray_errors.RayActorError, ray_errors.GetTimeoutError) as exc:
            # not this task's failure, nor its node's: no retry would mend it
            raise InboxLost(f"the run's inbox on the Ray head was lost ({_said(exc)}); "
                            "run the command again to resume") from None

    def cancel_all(self) -> None:
        """End every running task, its worker and so its kernel; no task starts after (a stop)."""
        with self._lock:
            self._cancelled = True
            running = list(self._running)
        for ref in running:
            _cancel(ref)


def _cancel(ref) -> None:
    import ray

    with contextlib.suppress(Exception):  # finished meanwhile, or Ray is shutting down
        ray.cancel(ref, force=True)


def _raise_as_driver_error(exc: Exception) -> None:
    """Ray's exception as the driver reads it: which failures a retry elsewhere can mend."""
    from ray import exceptions as ray_errors

    if isinstance(exc, (Cancelled, ray_errors.TaskCancelledError)):
        raise Cancelled("cancelled") from None
    if isinstance(exc, ray_errors.RayTaskError):  # the task's own exception (its cause)
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        raise TaskFailed(_said(cause)) from None
    if isinstance(exc, ray_errors.OutOfMemoryError):  # Ray's memory monitor ended the worker
        raise HostOutOfMemory(_said(exc)) from None
    if isinstance(exc, (ray_errors.NodeDiedError, ray_errors.WorkerCrashedError, ray_errors.LocalRayletDiedError,
                        ray_errors.ObjectLostError)):
        raise NodeLost(_said(exc)) from None
    if isinstance(exc, ray_errors.RayError):  # unschedulable, runtime environment, Ray's own errors
        raise TaskFailed(_said(exc)) from None
    raise exc
