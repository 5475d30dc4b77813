"""The results file: records appended crash-safe, read back skipping what is torn (docs/records.md).

Each line a reader skips warns (``CorruptRecordWarning``, naming the file and line); inside ``skipped_lines_said``
each is said as one line and counted. No torch is imported, and pandas only by ``read_results``.
"""

from __future__ import annotations

import codecs
from contextlib import contextmanager
from dataclasses import dataclass
import fcntl
import json
import os
from pathlib import Path
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping
import warnings

from ..errors import UserError
from .schema import CELL_FIELDS, SCHEMA_VERSION, Record
from .check import InvalidRecord
from .key import VARIANT_FIELDS

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class SkippedLine:
    """A line of a results file that a reader skipped, and why."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: skipped: {self.reason}"


class CorruptRecordWarning(UserWarning):
    """A line of a results file could not be read as a record and was skipped (``skipped`` says which)."""

    def __init__(self, skipped: SkippedLine) -> None:
        super().__init__(str(skipped))
        self.skipped = skipped


def _say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def skipped_lines_said(say: Callable[[str], None] = _say_on_stderr) -> Iterator[list[SkippedLine]]:
    """Within: each line a reader skips is said once as ``path:line: skipped: why`` and collected in the
    list this yields; other warnings are shown as before.

    A file read again (a resumed run, then each kernel's estimate) says its lines once: the same file
    named relative or absolute is one file. The warnings module's state is the process's, so lines
    that threads skip are said too, but this is entered once, not by concurrent threads.
    """
    skipped: list[SkippedLine] = []
    seen: set[tuple[str, int, str]] = set()
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            line_skipped = getattr(message, "skipped", None)
            if not isinstance(line_skipped, SkippedLine):  # any other warning, as it was shown before
                shown(message, category, filename, lineno, file, line)
                return
            key = (os.path.abspath(line_skipped.path), line_skipped.line, line_skipped.reason)
            if key not in seen:
                seen.add(key)
                skipped.append(line_skipped)
                say(str(line_skipped))

        # "always": the registry of each call site would otherwise hide a line read again from
        # another file position; repeats are left out above instead
        warnings.simplefilter("always", CorruptRecordWarning)
        warnings.showwarning = show
        yield skipped


# --- writing ----------------------------------------------------------------------

class StaleWriterError(RuntimeError):
    """The writer's guard refused the append (its runner is gone or was replaced)."""


@contextmanager
def locked(path: str | os.PathLike, shared: bool = False) -> Iterator[None]:
    """Hold the results file's lock (exclusive, or shared for readers)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def append_record(path: str | os.PathLike, record: Record | Mapping[str, Any],
                  guard: Callable[[], bool] | None = None) -> None:
    """Append ``record`` (a ``Record``, or one as JSON holds it, of any schema version: ``Record.of`` reads and
    checks it, ``InvalidRecord`` where a reader would skip it) as one line of ``path``, at the current version:
    one write, locked, flushed and fsynced.

    ``guard``, if given, runs under the lock just before the write; when it returns
    False nothing is written and StaleWriterError is raised.
    """
    data = (json.dumps(Record.of(record).to_json(), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if guard is not None and not guard():
            raise StaleWriterError(f"refused to append to {path}: this writer's runner is gone "
                                   "or was replaced")
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # fence off a torn line left by a killed writer
        written = os.write(fd, data)
        while written < len(data):  # only on exotic file systems
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)  # also releases the lock
    if created:
        _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- reading ----------------------------------------------------------------------

def iter_records(path: str | os.PathLike, start: int = 0) -> Iterator[tuple[int, Record]]:
    """(line number, record) for each readable record, of any schema version (``Record.from_json``), saying where
    it was read from (``Record.origin``); warns on and skips the rest.

    ``start`` is a byte offset to read from (a size taken earlier, so a line boundary); line
    numbers are the file's all the same. A byte-order mark before the first line is read past.
    """
    path = Path(path)
    with open(path, "rb") as lines:
        first = 1 + (_newlines_before(lines, start) if start else 0)
        lines.seek(start)
        for number, raw in enumerate(lines, start=first):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):  # what "utf-8-sig" would drop
                raw = raw[len(codecs.BOM_UTF8):]
            if not raw.strip():
                continue
            reason, record = _read(raw)
            if record is None:
                warnings.warn(CorruptRecordWarning(SkippedLine(str(path), number, reason)), stacklevel=2)
                continue
            yield number, record.read_from(str(path), number)


MAX_DEPTH = 32  # a record nests 6 deep (speedup.switch_ms.eager, a block, its calls); a line deeper is no record


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once: a repeated key is refused, not silently the last."""
    data = dict(pairs)
    if len(data) != len(pairs):
        repeated = next(key for index, (key, _) in enumerate(pairs) if key in dict(pairs[:index]))
        raise ValueError(f"the key {repeated[:40]!r} is given twice in one object")
    return data


def _depth(value: Any) -> int:
    """How deep ``value``'s lists and objects nest (a number: 0), counted without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _read(raw: bytes) -> tuple[str, Record | None]:
    """The record a line holds, or why none."""
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError and a repeated key are ValueErrors
        return f"not valid JSON ({exc.__class__.__name__}: {str(exc)[:200]})", None
    except RecursionError:  # the decoder's own recursion, on brackets nested thousands deep
        return f"not a result record (nested deeper than {MAX_DEPTH} levels)", None
    if not isinstance(data, dict) or "schema_version" not in data:
        return "not a result record (no schema_version)", None
    if _depth(data) > MAX_DEPTH:
        return f"not a result record (nested deeper than {MAX_DEPTH} levels)", None
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool):
        return f"schema_version must be a whole number, got {str(json.dumps(version))[:40]}", None
    if version > SCHEMA_VERSION:
        return (f"schema_version {version!r} is newer than this bench_utils reads ({SCHEMA_VERSION}); "
                "upgrade bench_utils"), None
    try:
        return "", Record.from_json(data)
    except InvalidRecord as exc:
        return f"not a valid record ({exc})", None


def _newlines_before(lines, offset: int, chunk: int = 1 << 20) -> int:
    """Line breaks in the first ``offset`` bytes of the open file ``lines``."""
    lines.seek(0)
    count = 0
    while offset > 0:
        data = lines.read(min(chunk, offset))
        if not data:
            break
        count += data.count(b"\n")
        offset -= len(data)
    return count


def read_records(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Record]:
    """Every readable record of one or more results files, in file and line order."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [record for path in paths for _, record in iter_records(path)]


def read_results(paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                 include_values: bool = False) -> "pd.DataFrame":
    """One flat row per record: cell fields as plain columns, blocks as 'latency.mean' etc.

    The per-run latency values are left out unless ``include_values`` (they are
    long lists; every summary statistic is already a column).
    """
    import pandas as pd

    records = read_records(paths)
    if not records:
        return pd.DataFrame(columns=[*CELL_FIELDS, "status"])
    frame = pd.json_normalize([{**record.to_json(), "source": record.origin[0], "line": record.origin[1]}
                               for record in records if record.origin], sep=".")
    frame = frame.rename(columns={f"cell.{name}": name for name in (*CELL_FIELDS, *VARIANT_FIELDS)})
    if not include_values and "latency.values" in frame:
        frame = frame.drop(columns=["latency.values"])
    leading = [c for c in (*CELL_FIELDS, "status", "error") if c in frame]
    return frame[leading + [c for c in frame.columns if c not in leading]]


# --- a file no record can be read from --------------------------------------------

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))


def _encoding_of(data: bytes) -> str | None:
    """The text encoding ``data`` is in where it is not UTF-8 (by its byte-order mark, or UTF-16's zero
    bytes between ASCII ones); None where it is UTF-8 or cannot be told."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    if len(data) >= 4 and data[1:4:2] == b"\0\0" and data[0:4:2].isascii():
        return "UTF-16 (little-endian, no byte-order mark)"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 (perhaps Latin-1 or Windows-1252)"
    return None


def unreadable(path: str | os.PathLike) -> str | None:
    """Why no record at all can be read from the results file ``path``, in one sentence saying what it holds
    (and, for another text encoding, how to convert it); None where one record or more can be read."""
    path = Path(path)
    data = path.read_bytes()
    if not data.strip():
        return f"{path} is empty: no cell has been measured into it yet (run a grid into its folder)"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CorruptRecordWarning)
        if any(True for _ in iter_records(path)):
            return None  # its bad lines, an undecodable byte among them, are skipped one by one
    encoding = _encoding_of(data)
    if encoding:
        source = encoding.split(" ")[0] if encoding.startswith("UTF") else "WINDOWS-1252"
        return (f"{path} is {'in ' + encoding if encoding.startswith('UTF') else encoding}: records are UTF-8, "
                f"one JSON object a line; convert it with: iconv -f {source} -t UTF-8 {path} > results-utf8.jsonl")
    reasons = [str(warning.message) for warning in caught if issubclass(warning.category, CorruptRecordWarning)]
    lines = len([line for line in data.splitlines() if line.strip()])
    first = reasons[0].split(": skipped: ", 1)[-1] if reasons else "unreadable"
    return (f"{path} holds {lines} line{'s' if lines != 1 else ''} and no result record "
            f"(line 1: {first}): it is not a study's results.jsonl")


class NoRecordsError(UserError):
    """A results file no record can be read from. One line wherever it is raised: the command prints it
    (exit 2), and IPython shows ``_render_traceback_``'s line in a notebook instead of a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"error: {self}"]


def check_readable(paths: Iterable[str | os.PathLike]) -> None:
    """NoRecordsError, saying what the file holds, for the first of ``paths`` no record can be read from."""
    for path in paths:
        reason = unreadable(path)
        if reason:
            raise NoRecordsError(reason)
