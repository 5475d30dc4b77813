"""Which Ray cluster a run uses, and a clear error when it cannot be reached (docs/cluster.md).

``--address``: ``auto``, ``HOST:PORT`` or ``ray://HOST:10001`` (Ray Client); else ``$RAY_ADDRESS``; else a cluster of
this machine alone, on the loopback interface only. Ray retries an unreachable address for a minute or more: the
head's port is tried here first, so a wrong address costs seconds and says so in one line.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from typing import Any
import warnings

from ..errors import UserError

ADDRESS_ENV = "RAY_ADDRESS"
# Ray's own switch: with "0" every Ray process of a local cluster listens on 127.0.0.1 only.
LOOPBACK_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
AUTH_MODE_ENV = "RAY_AUTH_MODE"   # Ray's: token (the default for new local clusters) or disabled
PROBE_TIMEOUT_S = 5.0
CLIENT_TRIES = 3   # connections through Ray Client whose server process died as it started
PROBE_PAUSE_S = 0.25
NO_RAY = "Ray is not installed here (the GPU machines' image lacks it): pip install -e '.[ray]', as make setup does"


class ClusterUnreachable(UserError):
    """The Ray cluster named by ``--address`` (or ``$RAY_ADDRESS``) cannot be reached."""


def requested_address(address: str | None) -> str | None:
    """The address to connect to, or None for a cluster of this machine alone."""
    address = (address or os.environ.get(ADDRESS_ENV) or "").strip()
    return address or None


def head_endpoint(address: str) -> tuple[str, int]:
    """The head's host and port that ``address`` names (``auto`` as Ray resolves it)."""
    text = address
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address_or_die
        except ImportError:
            raise ClusterUnreachable(NO_RAY) from None
        try:  # Ray's own rule: $RAY_ADDRESS, then the cluster `ray start` recorded on this machine
            text = canonicalize_bootstrap_address_or_die("auto")
        except ConnectionError as exc:
            raise ClusterUnreachable(f"--address auto: {exc} (start one with `ray start --head`)") from None
    text = text.removeprefix("ray://")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterUnreachable(f"--address {address!r}: use auto, HOST:PORT or ray://HOST:PORT")
    return host.strip("[]"), int(port)


def probe(address: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise ClusterUnreachable unless the head that ``address`` names accepts a connection within
    ``timeout`` (tried again meanwhile: a head just started opens its ports one by one)."""
    host, port = head_endpoint(address)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic())):
                return
        except OSError as exc:
            if time.monotonic() + PROBE_PAUSE_S < deadline:
                time.sleep(PROBE_PAUSE_S)
                continue
            reason = exc.strerror or type(exc).__name__
            raise ClusterUnreachable(f"cannot reach the Ray cluster at {host}:{port} ({reason}): start it with "
                                     "`ray start --head`, or check --address / $RAY_ADDRESS") from None


def connect(address: str | None) -> None:
    """``ray.init`` for this run: the cluster at ``address``, or one of this machine alone."""
    address = requested_address(address)
    if address is None:
        os.environ[LOOPBACK_ONLY_ENV] = "0"  # read when ray is imported: before that, here
        if "ray" not in sys.modules:  # Ray reads it as it is imported (later, it would be half set)
            # Ray's default for a new local cluster, set so that Ray does not warn of it; the user's own is kept
            os.environ.setdefault(AUTH_MODE_ENV, "token")
    else:
        probe(address)
    try:
        import ray
    except ImportError:
        raise ClusterUnreachable(NO_RAY) from None

    logging.getLogger("ray").setLevel(logging.WARNING)  # Ray Client's notes on how it connected
    # and the client server's warnings it relays: a filter, as Ray Client sets that logger's level as it connects
    logging.getLogger("ray.util.client.logsclient").addFilter(_errors_only)  # once, however many runs
    options: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.WARNING)
    for attempt in range(1, CLIENT_TRIES + 1):
        try:
            with warnings.catch_warnings():  # Ray Client's own warning of a timeout: the error says it
                warnings.simplefilter("ignore", UserWarning)
                if address is None:  # "local": a new cluster, never one `ray start` left on this machine
                    ray.init(address="local", include_dashboard=False, **options)
                else:
                    ray.init(address=address, **options)
            return
        except (ConnectionError, TimeoutError, RuntimeError) as exc:
            if isinstance(exc, ConnectionAbortedError) and attempt < CLIENT_TRIES:
                # Ray Client's server process for this driver died as it started (ray-project/ray#63202): a new one
                ray.shutdown()
                continue
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            raise ClusterUnreachable(f"cannot connect to the Ray cluster at {address or 'this machine'}: "
                                     f"{lines[0]}{_token_hint(address)}") from None


def _errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


def _token_hint(address: str | None) -> str:
    """What to try when a cluster did not let the driver in: its token, which Ray sends to an
    address given explicitly only when told to (to ``auto``'s, it finds and sends it itself)."""
    if address in (None, "auto") or os.environ.get(AUTH_MODE_ENV, "").lower() == "token":
        return ""
    return (f" (if it uses token authentication, Ray's default for `ray start --head`: set "
            f"{AUTH_MODE_ENV}=token, with the head's token in ~/.ray/auth_token or $RAY_AUTH_TOKEN)")
