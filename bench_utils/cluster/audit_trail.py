"""The nodes' executed notebooks and logs, kept in the study folder beside a local run's."""

from __future__ import annotations

import os
from pathlib import Path

from ..paths import PROJECT_ROOT, scrub
from ..study.grid.kernel_groups import KernelGroup, kernel_groups


def kept_name(group: KernelGroup, kind: str | None, tries: int, relative: str) -> Path:
    """Where the driver keeps a node's notebook or log (``logs/NAME.log``): the group's own id (a node names it after
    its cells alone), tagged with the accelerator type and the try, so that none overwrites another."""
    path = Path(relative)
    node_id = kernel_groups(group.cells)[0].group_id
    rest = path.name[len(node_id):] if path.name.startswith(node_id) else "." + path.name
    rest = rest[:-len(path.suffix)] if path.suffix else rest
    tags = [tag for tag in (kind, f"try{tries}" if tries > 1 else None) if tag]
    return path.with_name("__".join([group.group_id + rest, *tags]) + path.suffix)


def keep_files(out_dir: Path, group: KernelGroup, kind: str | None, tries: int, files: dict[str, str],
               folder: str | None) -> None:
    """Write a node's files into ``out_dir``; ``folder``, the node's study folder as the notebooks
    name it (relative to the project), becomes this study's, and no absolute path is left."""
    here = os.path.relpath(out_dir, PROJECT_ROOT)
    for relative, text in files.items():
        target = out_dir / kept_name(group, kind, tries, relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = text.replace(folder, here) if folder else text
        partial = target.with_name(f".{target.name}.partial")  # a reader never sees half of it
        partial.write_text(scrub(text, {str(out_dir): ".."}), encoding="utf-8")
        partial.replace(target)
