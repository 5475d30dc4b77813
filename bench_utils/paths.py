"""Where the project's folders are: its root, the notebooks and the published reports.

Resolved once, from this file, so that every layer agrees on them whatever the working directory is.
"""

from __future__ import annotations

from pathlib import Path

from .errors import UserError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
REPORTS_DIR = PROJECT_ROOT / "reports"


def make_folder(folder: Path, what: str) -> Path:
    """``folder`` created with its parents where missing; UserError in one line where it cannot be (a path under
    /proc, a name too long, a file on the way): a folder the user named is bad input, not a crash."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {what} {folder}: {exc.strerror or exc}") from None
    return folder


def _site_packages() -> dict[str, str]:
    """This interpreter's package folders (a GPU image's /opt/.../site-packages in warnings and tracebacks)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return {paths[name]: "<site-packages>" for name in ("purelib", "platlib") if paths.get(name)}


def scrub(text: str, replacements: dict[str, str] | None = None) -> str:
    """``text`` with this machine's absolute paths replaced (published files name no user and no absolute path): the
    given folders by what stands for them, this interpreter's site-packages (``<site-packages>``), the project root
    (``<project>``) and the home directory (``~``)."""
    mapping = {**(replacements or {}), **_site_packages(), str(PROJECT_ROOT): "<project>", str(Path.home()): "~"}
    for path in sorted(mapping, key=len, reverse=True):  # the longest first: a folder inside another
        if path not in ("", "/"):
            text = text.replace(path, mapping[path])
    return text


def scrub_file(path: Path, replacements: dict[str, str] | None = None) -> None:
    """Scrub a text file in place (see ``scrub``); a file that is gone or not UTF-8 is left as it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    scrubbed = scrub(text, replacements)
    if scrubbed != text:
        temporary = path.with_name(f".{path.name}.scrub")
        temporary.write_text(scrubbed, encoding="utf-8")
        temporary.replace(path)
