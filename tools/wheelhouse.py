"""make wheelhouse: download the wheels that a GPU host with no registry lacks, for that host's Python."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
import subprocess
import sys

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_image  # noqa: E402  (this folder's sibling module)

# What travels to a device machine (the working tree and what is carried with it) is at most 64 MiB.
MAX_MIB = 64.0
# Linux x86-64 wheels that the host's pip accepts: pip download takes no "this glibc or older" tag.
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_28_x86_64", "manylinux1_x86_64", "manylinux2010_x86_64", "any"]


def download_command(pins: list[str], dest: Path, python_version: str) -> list[str]:
    """pip download of exactly these wheels (no dependencies, no source builds) for CPython ``python_version``."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    return [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version, *platforms,
            "--dest", str(dest), *pins]


def download(pins: list[str], dest: Path, python_version: str,
             run: Callable[..., subprocess.CompletedProcess] | None = None) -> list[str]:
    """Download the wheels; return the pins for which none was found (pip stops at the first: ask each then)."""
    run = run or subprocess.run
    if run(download_command(pins, dest, python_version), capture_output=True).returncode == 0:
        return []
    return [pin for pin in pins if run(download_command([pin], dest, python_version), capture_output=True).returncode]


def size_mib(dest: Path) -> float:
    return sum(path.stat().st_size for path in dest.glob("*.whl")) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python-version", default="3.12", help="the GPU host's Python, e.g. 3.12")
    parser.add_argument("--dest", type=Path, default=gpu_image.ROOT / ".whl", help="the folder (emptied of wheels)")
    parser.add_argument("--max-mib", type=float, default=MAX_MIB, help="fail when the wheels weigh more")
    args = parser.parse_args(argv)

    requirements = gpu_image.project_requirements(extras=["test"])
    pins, missing = gpu_image.travelling(requirements, gpu_image.image_packages(), args.python_version)
    if missing:
        print(f"[wheelhouse] FAILED: needed on Python {args.python_version} but not installed in {sys.prefix} "
              f"(make setup; pip install those only that Python needs): {' '.join(missing)}", file=sys.stderr)
        return 2
    args.dest.mkdir(parents=True, exist_ok=True)
    for old in args.dest.glob("*.whl"):  # the host installs every wheel in the folder: none of an earlier run
        old.unlink()
    (args.dest / "requirements.txt").write_text("".join(f"{pin}\n" for pin in pins), encoding="utf-8")
    print(f"[wheelhouse] {len(pins)} distributions the GPU image lacks, for Python {args.python_version}:")
    print("  " + " ".join(pins))
    failed = download(pins, args.dest, args.python_version)
    size = size_mib(args.dest)
    print(f"[wheelhouse] {len(list(args.dest.glob('*.whl')))} wheels in {args.dest}/: {size:.1f} MiB")
    if failed:
        print(f"[wheelhouse] FAILED: no wheel for Python {args.python_version} on PyPI for: {' '.join(failed)} "
              "(install another version of it in .venv/ and run again)", file=sys.stderr)
        return 1
    if size > args.max_mib:
        print(f"[wheelhouse] FAILED: {size:.1f} MiB is over the {args.max_mib:g} MiB that can travel", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
