"""What inductor did with CUDA graphs in a block: the graphs it skipped (and why) and those it recorded.

Each skip goes through ``torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter``, which logs
"skipping cudagraphs due to ..." on that module's ``cudagraphs`` logger and bumps
``counters["inductor"]["cudagraph_skips"]`` (graphs on CPU devices bump it without a message). CUDA-graph trees
record inside ``callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, ...)`` (torch 2.7+), so a
start callback counts the recordings; on a torch without that trigger they are not counted (None).
``watch()`` collects all three over the compiling calls (``compile_cost``) and the timed runs (``no_recompile``).
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
import logging
from typing import Any, Iterator

from . import modes

PARTIAL = "partial"


@dataclass
class CudaGraphWatch:
    """Skips, their logged reasons, and recordings seen in a block (final when the block ends)."""

    skips: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    recordings: int | None = 0          # None: this torch has no recording callback

    def report(self) -> dict[str, Any]:
        return {"cudagraph_skips": self.skips, "cudagraph_skip_reasons": dict(self.reasons),
                "cudagraph_recordings": self.recordings}


class _Reasons(logging.Handler):
    def __init__(self, reasons: dict[str, int]) -> None:
        super().__init__(logging.WARNING)
        self.reasons = reasons

    def emit(self, record: logging.LogRecord) -> None:
        reason = modes.summarize_reason(record.getMessage())  # its first line: the rest is a stack
        self.reasons[reason] = self.reasons.get(reason, 0) + 1


@contextmanager
def _skip_messages(reasons: dict[str, int]) -> Iterator[None]:
    from torch._inductor.cudagraph_utils import cudagraphs_log as logger

    handler, level = _Reasons(reasons), logger.level
    if not logger.isEnabledFor(logging.WARNING):  # quieted (TORCH_LOGS): its warnings must still reach us
        logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@contextmanager
def _recordings(seen: CudaGraphWatch) -> Iterator[None]:
    try:
        from torch._dynamo.callback import CallbackTrigger, callback_handler
        trigger = CallbackTrigger.CUDAGRAPH_RECORDING
    except (ImportError, AttributeError):
        seen.recordings = None
        yield
        return

    def count(args: Any = None) -> None:  # dynamo's compilations call it too, with their own trigger
        if getattr(args, "callback_trigger", None) is trigger and seen.recordings is not None:
            seen.recordings += 1

    callback_handler.register_start_callback(count)
    try:
        yield
    finally:
        callback_handler.remove_start_callback(count)


@contextmanager
def watch() -> Iterator[CudaGraphWatch]:
    """Count inductor's CUDA-graph skips (with their reasons) and recordings inside the block."""
    from torch._dynamo.utils import counters

    seen = CudaGraphWatch()
    before = counters["inductor"]["cudagraph_skips"]
    with ExitStack() as stack:
        stack.enter_context(_skip_messages(seen.reasons))
        stack.enter_context(_recordings(seen))
        try:
            yield seen
        finally:
            seen.skips = max(0, counters["inductor"]["cudagraph_skips"] - before)


def used(mode: str, device_type: str, seen: dict[str, Any]) -> bool | str | None:
    """Whether the calls ``seen`` (a ``CudaGraphWatch`` report) ran in CUDA graphs: True (graphs
    recorded, none skipped), ``"partial"`` (some recorded, some skipped), False (none recorded), or
    None where recordings cannot be counted on this torch."""
    if mode not in modes.CUDA_GRAPH_MODES or device_type != "cuda":
        return False
    if seen["cudagraph_recordings"] is None:
        return None
    if seen["cudagraph_recordings"] == 0:
        return False
    return True if seen["cudagraph_skips"] == 0 else PARTIAL


def changed_during(seen: CudaGraphWatch) -> str | None:
    """Why a block that should only replay (the timed runs) did not, or None."""
    if not seen.recordings and not seen.skips:
        return None
    reasons = "; ".join(seen.reasons) or "no reason logged"
    return (f"{seen.recordings or 0} CUDA graph(s) recorded and {seen.skips} skipped during the timed runs "
            f"({reasons})")
