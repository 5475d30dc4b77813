"""A fresh interpreter, as a new serving process meets a model: its imports timed, one JSON line back.

Used where a start-up cost must not be helped by this process (its imported modules, compiled
kernels, warm caches): AOTInductor's package load, and a start from a portable compile cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any, Sequence

# What every such process does first: import torch and inductor, and transformers' output classes
# where installed (a Python server of a Hugging Face model needs them to rebuild its outputs).
# ``started`` and ``imported`` are the body's to report.
_IMPORTS = textwrap.dedent("""
    import json, sys, time
    started = time.perf_counter()
    import torch, torch._inductor
    try:
        import transformers.modeling_outputs
    except ImportError:
        pass
    imported = time.perf_counter()
""")


def run_script(body: str, args: Sequence[str | os.PathLike[str]], *, what: str, timeout_s: float,
               env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``body`` after the imports in a new interpreter with ``args`` as ``sys.argv[1:]``; return
    the JSON object it prints last. A failure is a RuntimeError whose first line is the process's
    last line of error (a record's note keeps one line), then the end of its stderr."""
    done = subprocess.run([sys.executable, "-c", _IMPORTS + textwrap.dedent(body), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout_s,
                          env=env if env is not None else dict(os.environ))
    if done.returncode != 0:
        stderr = done.stderr.strip()
        raise RuntimeError(f"{what} in a fresh process failed: {stderr.splitlines()[-1] if stderr else 'no output'}"
                           f"\n{stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
