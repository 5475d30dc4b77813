"""bench_utils: measure, explain and publish torch.compile inference speed-ups.

Public API: ``measure`` and ``compare`` (timing), ``MemoryProbe`` (memory),
``capture_environment`` (environment), ``make_record`` / ``append_record`` /
``read_results`` (result records). Modules: timing, compare, stats, memory, env,
records, devices, timer_check, cli.
"""

from .compare import Comparison, compare
from .env import capture_environment
from .memory import MemoryProbe
from .records import append_record, make_record, read_records, read_results
from .timing import Measurement, measure

__version__ = "0.1.0"

__all__ = ["Comparison", "Measurement", "MemoryProbe", "append_record", "capture_environment",
           "compare", "make_record", "measure", "read_records", "read_results"]
