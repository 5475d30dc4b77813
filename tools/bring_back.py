"""Bring a study folder back from a GPU command's $OUT into reports/: the records byte for byte, the rest scrubbed.

    python tools/bring_back.py OUT_COPY/hf-guide reports/hf-guide-h200

A GPU host writes its own absolute paths into what it logs: its study folder (``/tmp/hfg``), its image's
site-packages in warnings and tracebacks, pytest's ``/tmp/pytest-of-<user>``. Published reports name none
(the developers' guide), so every text file but the results is scrubbed as it is copied; ``results.jsonl`` is
copied as measured (records are never edited: a field known wrong goes to ``corrections.yaml``). A file of
the destination that the source lacks is kept (the committed pages, corrections, earlier grids).
"""

from __future__ import annotations

import argparse
from pathlib import Path
import re
import shutil
import sys

RECORDS = "results.jsonl"
TEXT_SUFFIXES = {".log", ".txt", ".ipynb", ".json", ".yaml", ".md", ".html"}
# (pattern, replacement), in order: a host's folders as what they are
SCRUBS = [
    (re.compile(r"/[\w.+-]+(?:/[\w.+-]+)*/site-packages"), "<site-packages>"),
    (re.compile(r"/tmp/pytest-of-[\w.-]+"), "<pytest-tmp>"),
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
    written = []
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name == RECORDS or path.suffix not in TEXT_SUFFIXES:
            shutil.copyfile(path, target)  # as measured
        else:
            target.write_text(scrub_host_paths(path.read_text(encoding="utf-8"), study_folder), encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="the study folder as the GPU command left it under $OUT")
    parser.add_argument("destination", type=Path, help="reports/<study>")
    parser.add_argument("--study-folder", help="the study folder's path on the GPU host (/tmp/hfg), shown as <study>")
    args = parser.parse_args(argv)
    for path in bring_back(args.source, args.destination, args.study_folder):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
