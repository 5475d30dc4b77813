"""The kinds of value a record's fields hold: ranges, and names checked to be what they say (docs/records.md,
"Checked against its schema"). A checked name's function's docstring is the reason a record is refused with.
Nothing here imports torch, pandas or pydantic.
"""

from __future__ import annotations

import re
from typing import Annotated

from annotated_types import Ge, Gt, Le, Len, Predicate

from ..settings import IDENTITY, setting_fields
from ..vocabulary import CompileMode, DType

# The cell's identity fields, in the schema's order: a grid's ``study.grid.Cell`` is these and its settings
# (its tests check it), and ``records`` builds and checks a record's cell by them.
CELL_FIELDS = ("study", "task", "model", "batch_size", "compile_mode", "dtype", "device")
# A cell's variant beyond the guide's way (the settings whose ``record`` is IDENTITY), each with the names it
# may take, the default first: the value a record without it means (records written before variants existed
# are the guide's cells; ``records.upgrade`` fills it in).
VARIANT_FIELDS = {item.name: (item.default, *(name for name in item.metadata["choices"] if name != item.default))
                  for item in setting_fields() if item.metadata["record"] == IDENTITY}

# --- ranges ---------------------------------------------------------------------------------------------
Positive = Annotated[float, Gt(0)]        # a duration, a mean latency, a speed-up: 0 or less was not measured
NonNegative = Annotated[float, Ge(0)]     # seconds of a phase, bytes, FLOPs, joules
Count = Annotated[int, Ge(0)]             # calls, graphs, outliers, bytes
Share = Annotated[float, Ge(0), Le(1)]    # a p-value
Bounds = Annotated[list[float], Len(2, 2)]         # (low, high) of a mean whose lower bound may dip below 0
# physical ranges: a figure outside is no measurement; small values stay (committed p-values of 1e-22)
Seconds = Annotated[float, Ge(1e-9), Le(3600.0)]         # one call's latency: a nanosecond to an hour
Milliseconds = Annotated[float, Ge(1e-6), Le(3.6e6)]     # the same, in milliseconds
Ratio = Annotated[float, Ge(1e-6), Le(1e6)]              # a speed-up
# an interval's bound: few noisy pairs take it towards 0 (2 pairs on a loaded CPU: 1e-10), a real measurement still;
# at most what the page can write (Babel's decimals fail near 1e28)
RatioInterval = Annotated[list[Annotated[float, Gt(0), Le(1e20)]], Len(2, 2)]
BatchSize = Annotated[int, Ge(1), Le(2 ** 20)]
PerSecond = Annotated[float, Gt(0), Le(1e12)]            # a throughput: samples a second
NAME_LENGTH = 256                                          # a model, a study, a GPU or a CPU named longer is no name


def is_device(text: str) -> bool:
    """must be cpu, cuda or cuda:N"""
    return re.fullmatch(r"cpu|cuda(:[0-9]+)?", text) is not None


def is_name_part(text: str) -> bool:
    """must be letters, digits, '.', '_', '+' or '-' (it names a file)"""
    return re.fullmatch(r"[A-Za-z0-9._+-]{1,64}", text) is not None


def is_package_name(text: str) -> bool:
    """must be a package name (PEP 508: letters, digits, '.', '_', '-')"""
    return re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?", text) is not None


_VERSION = None


def is_version(text: str) -> bool:
    """must be a version (PEP 440, such as 2.14.1+cu130)"""
    global _VERSION
    if _VERSION is None:
        from packaging.version import VERSION_PATTERN

        _VERSION = re.compile(VERSION_PATTERN, re.VERBOSE | re.IGNORECASE)
    return len(text) <= 100 and _VERSION.fullmatch(text) is not None


def is_compile_mode(text: str) -> bool:
    """must be eager, a torch.compile mode (default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs) or
    aot-inductor"""
    return text in CompileMode.__members__.values()


def is_dtype(text: str) -> bool:
    """must be float32, float16 or bfloat16"""
    return text in DType.__members__.values()


Device = Annotated[str, Predicate(is_device)]
CompileModeName = Annotated[str, Predicate(is_compile_mode)]
DTypeName = Annotated[str, Predicate(is_dtype)]
NamePart = Annotated[str, Predicate(is_name_part)]
PackageName = Annotated[str, Predicate(is_package_name)]
Version = Annotated[str, Predicate(is_version)]
Text = Annotated[str, Len(1, NAME_LENGTH)]  # a name: not empty, not a page long
MachineName = Annotated[str, Len(0, NAME_LENGTH)]  # a CPU's or a GPU's
