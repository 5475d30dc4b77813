"""Bring a study folder back from a GPU command's $OUT into reports/: the records byte for byte, the rest scrubbed.

    python tools/bring_back.py <files_at>/guide-<start>.tgz reports/hf-guide-h200 --lease lease-2026-11-27
    python tools/bring_back.py OUT_COPY/hf-guide reports/hf-guide-h200

The archive is what ``tools/gpu_lease.sh`` packs: ``study/<name>/`` (measured in ``/tmp/study/<name>`` on the
host, shown as ``<study>``) and ``lease/`` (the lease's checks and logs, copied into ``<destination>/<lease>``).
The records are merged: the destination's lines stay as they are, and the source's lines it lacks follow them in
their order. A host that started from the committed study (the guide) holds them all, and the merge is its file; a
lease's anchors, measured afresh in an empty study, join the earlier leases' instead of replacing them.

A command's compile caches (``caches-<start>-<pid>.tgz``, or its ``.part-aa``, ``.part-ab``... where larger than
15 MiB) hold each kept cell's ``cold.json`` and ``artifacts.bin`` (``bench_utils.variants.kept_caches``): they are
unpacked into the destination, ``.compile-caches/`` (ignored by git), which the next lease carries in:

    python tools/bring_back.py <files_at>/caches-<start>-<pid>.tgz .compile-caches

A GPU host writes its own absolute paths into what it logs: its study folder (``/tmp/hfg``), its image's
site-packages in warnings and tracebacks, pytest's ``/tmp/pytest-of-<user>``. Published reports name none
(the developers' guide), so every text file but the results is scrubbed as it is copied; ``results.jsonl`` is
copied as measured (records are never edited: a field known wrong goes to ``corrections.yaml``). A file of
the destination that the source lacks is kept (the committed pages, corrections, earlier grids).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
import datetime
import os
from pathlib import Path
import re
import shutil
import sys
import tarfile
import tempfile

RECORDS = "results.jsonl"
TEXT_SUFFIXES = {".log", ".txt", ".ipynb", ".json", ".yaml", ".md", ".html"}
# the host's own state, never published: the runner's lock, the lease script's "checks ran" mark
HOST_ONLY = {".runner.lock", "checks-done"}
# where tools/gpu_lease.sh measures a study on the host
HOST_STUDY_ROOT = "/tmp/study"
# (pattern, replacement), in order: a host's folders as what they are
SCRUBS = [
    (re.compile(r"/[\w.+-]+(?:/[\w.+-]+)*/site-packages"), "<site-packages>"),
    (re.compile(r"/tmp/pytest-of-[\w.-]+"), "<pytest-tmp>"),
    # the lease's own packages (gpu_lease.sh installs the wheels with pip --target $T/site) and the image's Python
    (re.compile(r"/tmp/site(?=[/\s\"'])"), "<site-packages>"),
    (re.compile(r"/[\w.+-]+(?:/[\w.+-]+)*/bin/python[\d.]*(?=[\s\"',])"), "<python>"),
    (re.compile(r"/(?:root|home/[\w.-]+)(?=[/\s\"'])"), "~"),
]


def scrub_host_paths(text: str, study_folder: str | None = None) -> str:
    """``text`` with a GPU host's absolute paths replaced: its study folder (``<study>``), site-packages,
    pytest's temporary folders and home directories."""
    if study_folder:
        text = text.replace(study_folder.rstrip("/"), "<study>")
    for pattern, replacement in SCRUBS:
        text = pattern.sub(replacement, text)
    return text


def bring_back(source: Path, destination: Path, study_folder: str | None = None) -> list[Path]:
    """Copy ``source`` into ``destination``; return the files written."""
    if not (source / RECORDS).is_file():
        raise SystemExit(f"error: {source} holds no {RECORDS}: not a study folder")
    kept = destination / RECORDS
    if kept.is_file() and kept.stat().st_size:  # checked before anything is copied
        with kept.open("rb") as records:
            records.seek(-1, os.SEEK_END)
            if records.read() != b"\n":
                raise SystemExit(f"error: {kept} ends in a partial line: mend it before bringing records back")
    return copy_scrubbed(source, destination, study_folder)


def copy_scrubbed(source: Path, destination: Path, study_folder: str | None = None) -> list[Path]:
    """Every file of ``source`` into ``destination``: the records as measured, other text scrubbed."""
    written = []
    for path in sorted(source.rglob("*")):
        if not path.is_file() or path.name in HOST_ONLY:
            continue
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name == RECORDS:
            merge_records(path, target)
        elif path.suffix not in TEXT_SUFFIXES:
            shutil.copyfile(path, target)  # as it is
        else:
            target.write_text(scrub_host_paths(path.read_text(encoding="utf-8"), study_folder), encoding="utf-8")
        written.append(target)
    return written


def merge_records(source: Path, target: Path) -> None:
    """``target``'s records (none where it is new), then those of ``source`` it lacks, each line byte for byte
    (written whole, then moved). A last line of ``source`` without its end is no record (a kernel killed while it
    wrote): left out, and said, so that the whole line a later archive brings is the one kept."""
    kept = target.read_bytes() if target.is_file() else b""
    have = set(kept.splitlines(keepends=True))
    lines = source.read_bytes().splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        print(f"left out: {source}'s last line, unfinished ({len(lines[-1])} bytes)", file=sys.stderr)
        lines.pop()
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(kept + b"".join(line for line in lines if line not in have))
    partial.replace(target)


@contextmanager
def unpacked(archive: Path) -> Iterator[tuple[Path, Path | None]]:
    """The study folder and the lease folder (or None) of a ``gpu_lease.sh`` archive, unpacked for a while."""
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(archive) as tar:
        root = Path(scratch)
        tar.extractall(root, filter="data")  # no absolute paths, no links out of the folder
        studies = sorted(path for path in (root / "study").glob("*") if path.is_dir())
        if len(studies) != 1:
            raise SystemExit(f"error: {archive} holds {len(studies)} study folders under study/, not one")
        lease = root / "lease"
        yield studies[0], lease if lease.is_dir() else None


def bring_back_archive(archive: Path, destination: Path, lease_name: str) -> list[Path]:
    """The archive's study into ``destination`` and its lease's files into ``destination / lease_name``."""
    with unpacked(archive) as (study, lease):
        written = bring_back(study, destination, f"{HOST_STUDY_ROOT}/{study.name}")
        if lease is not None:
            written += copy_scrubbed(lease, destination / lease_name, f"{HOST_STUDY_ROOT}/{study.name}")
        return written


CACHE_FILES = {"cold.json", "artifacts.bin"}


def bring_back_caches(source: Path, destination: Path) -> list[Path]:
    """A caches archive (``source``: the archive, or any of its parts) unpacked into ``destination``: its
    ``cold.json`` and ``artifacts.bin`` files only, a newer one replacing an older of the same cell."""
    stem = source.name.split(".part-")[0]
    parts = sorted(source.parent.glob(stem + ".part-*")) or [source]
    with tempfile.TemporaryDirectory() as scratch:
        whole = Path(scratch) / stem
        with whole.open("wb") as joined:
            for part in parts:
                joined.write(part.read_bytes())
        with tarfile.open(whole) as tar:
            members = [member for member in tar.getmembers() if member.isfile() and Path(member.name).name in CACHE_FILES]
            tar.extractall(destination, members=members, filter="data")
    return [destination / member.name for member in members]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path,
                        help="the archive gpu_lease.sh left under $OUT (a caches-* one too), or a study folder as a "
                        "command left it")
    parser.add_argument("destination", type=Path, help="reports/<study> (a caches archive: .compile-caches)")
    parser.add_argument("--study-folder", help="the study folder's path on the GPU host (/tmp/hfg), shown as <study>")
    parser.add_argument("--lease", default=f"lease-{datetime.date.today().isoformat()}",
                        help="where in the destination an archive's lease files go (default lease-<today>)")
    args = parser.parse_args(argv)
    if args.source.name.startswith("caches-"):
        written = bring_back_caches(args.source, args.destination)
    elif args.source.is_file():
        written = bring_back_archive(args.source, args.destination, args.lease)
    else:
        written = bring_back(args.source, args.destination, args.study_folder)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
