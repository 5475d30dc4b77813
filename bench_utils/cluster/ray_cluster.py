"""Ray itself: the task a node runs, and the driver's ``Cluster`` (nodes, submit, cancel).

Each kernel group is a Ray generator task (``measure_group``): its events come back one by one
while it runs. Ray's own retry is off (``max_retries=0``): a retried generator replays from its
start and must yield the same values, which measurements never do; the driver retries instead
(``driver``). Ray's system errors (a node or worker that died) become ``NodeLost``, an exception
the task raised ``TaskFailed``, a cancellation ``Cancelled``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Iterator

from .connect import connect
from .driver import Cancelled, NodeLost, TaskFailed
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

    return ray.remote(max_retries=0)(measure_group)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__


class RayCluster:
    """``with RayCluster(address) as cluster:``: connected to Ray for the run, then disconnected."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self._running: set = set()
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
        from ray.exceptions import RayError, RayTaskError, TaskCancelledError

        generator = _remote_measure_group().options(**options).remote(task)
        with self._lock:
            self._running.add(generator)
        try:
            for ref in generator:
                yield ray.get(ref)
        except TaskCancelledError:
            raise Cancelled("cancelled") from None
        except RayTaskError as exc:  # the task's own exception (its cause), not the node's death
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            raise TaskFailed(f"{type(cause).__name__}: {_first_line(cause)}") from None
        except RayError as exc:
            raise NodeLost(f"{type(exc).__name__}: {_first_line(exc)}") from None
        finally:
            with self._lock:
                self._running.discard(generator)

    def cancel_all(self) -> None:
        """End every running task, its worker and so its kernel (a stop request)."""
        import ray

        with self._lock:
            running = list(self._running)
        for generator in running:
            try:
                ray.cancel(generator, force=True)
            except Exception:  # finished meanwhile
                pass
