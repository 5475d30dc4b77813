"""The interference check: does compiling beside the kernel move what it times, on this host?

``python -m bench_utils check-interference --device cuda --out STUDY/interference_check.json``

Compile ahead (``compile_ahead``) puts compile processes on the host's other cores while the kernel times; the GPU's
token keeps their GPU work out of its windows, but not their load on the host (memory bandwidth, caches, the PCIe
bus, the CPU's power budget). So each lease checks it, next to the timer check: compile processes compile large
models cold beside one process that times a launch-bound cell (ResNet-50 at batch 1: the host's cost is most of its
latency), eager and compiled, in rounds; each round times it with the compile processes stopped (SIGSTOP) and
compiling, in a random order (``measurement.interference``). It passes where the effect on eager, compiled and the
speed-up is within 2 %, as the rounds show. The runner reads the verdict from the study folder (``pause_wanted``):
where there is none, or it did not pass on this machine, the compile processes pause through every timed window.
"""

from __future__ import annotations

from contextlib import nullcontext
import json
import os
from pathlib import Path
import random
import shutil
import tempfile
import time
from typing import Any, Callable, Sequence

import psutil

from ...errors import UserError
from ...measurement import gpu_token, interference
from ..grid.grid_file import Cell, parse_grid
from .compile_ahead import CompileAhead

CHECK_FILE = "interference_check.json"   # in a study folder, beside timer_check.json
BESIDE_MODELS = ("mask2former", "maskformer")  # the guide's slowest compiles (65-78 s cold on the H200's host)
# a compile process's holding logged as its first dynamo compile begins (``cell.compile_process`` lets the token go)
COMPILING_CALLS = "compiling calls"
MIN_BESIDE_CORES = 0.25   # a round counts where the compile processes kept this much of a core busy while compiling
START_WAIT_S = 240.0                      # for the compile processes to begin compiling (imports, a model load)


def machine_of(environment: dict[str, Any], device: str) -> str | None:
    """What a check's verdict holds for: the GPU ``device`` names, or the CPU's model on a CPU."""
    if device.startswith("cuda"):
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        gpus = environment.get("gpus") or []
        return next((gpu.get("name") for gpu in gpus if gpu.get("index", 0) == index), None)
    return environment.get("cpu_model")


def pause_wanted(cells: Sequence[Cell], study_folder: Path, environment: dict[str, Any]) -> tuple[bool, str]:
    """Whether the compile processes pause through the kernel's timed windows, and why: as the grid says where it
    says (``pause_compiles``), else unless the study folder's interference check passed on this machine."""
    forced = {cell.settings.pause_compiles for cell in cells} - {None}
    if forced:
        pause = bool(forced.pop())
        return pause, f"pause_compiles: {str(pause).lower()} in the grid"
    path = study_folder / CHECK_FILE
    try:
        check = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True, f"no interference check in the study folder ({CHECK_FILE}: python -m bench_utils check-interference)"
    here = machine_of(environment, cells[0].device) if cells else None
    if check.get("machine") != here:
        return True, f"its interference check ran on another machine ({check.get('machine')}, not {here})"
    if check.get("verdict") != "pass":
        return True, f"its interference check did not pass ({_effects_text(check)})"
    return False, f"its interference check passed ({_effects_text(check)})"


def _effects_text(check: dict[str, Any]) -> str:
    parts = []
    for side, found in (check.get("effects") or {}).items():
        low, high = found["ci95"]
        parts.append(f"{side} {found['ratio'] - 1:+.1%} [{low - 1:+.1%}, {high - 1:+.1%}] {found['judged']}")
    return "; ".join(parts) or "no effect measured"


def beside_cells(device: str, models: tuple[str, ...] = BESIDE_MODELS) -> list[Cell]:
    """The cells the compile processes compile cold during the check: large models, each a process's."""
    return parse_grid({"study": "interference-check", "devices": [device], "compile_ahead": True,
                       "grids": [{"models": list(models), "batch_sizes": [1, 4, 16],
                                  "compile_modes": ["default"]}]}).cells


def time_rounds(eager: Callable[[], Any], compiled: Callable[[], Any], ahead: CompileAhead, *, device: str,
                rounds: int, runs: int, blocks: int, seed: int = 0,
                say: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """``rounds`` rounds, each the cell timed with the compile processes paused and compiling, in a random order
    (``seed``); each condition under the GPU's token, as the kernel times (its windows never hold a compile
    process's GPU work). A round with no compile process left is marked: it cannot tell."""
    from ...measurement.compare import compare

    order = random.Random(seed)
    found = []
    for index in range(rounds):
        conditions = ["paused", "compiling"]
        order.shuffle(conditions)
        entry: dict[str, Any] = {"order": conditions, "processes": len(ahead.beside.registered())}
        for condition in conditions:
            pids = ahead.beside.registered()
            cpu_before, wall_before = tree_cpu_s(pids), time.monotonic()
            # the token first: a compile process stopped while it held it would never let it go
            with gpu_token.window("timed runs"), ahead.beside.paused() if condition == "paused" else nullcontext():
                timed = compare(eager, compiled, warmup=2, runs=runs, blocks=blocks, device=device,
                                order_seed=seed * 1000 + index)
            entry[condition] = {"eager": timed.baseline.mean_ms, "compiled": timed.candidate.mean_ms,
                                "speedup": timed.baseline.mean_ms / timed.candidate.mean_ms,
                                # the cores the compile processes kept busy meanwhile: a process waiting for the
                                # token, or between cells, puts nothing beside the timing
                                "beside_cores": round((tree_cpu_s(pids) - cpu_before)
                                                      / max(time.monotonic() - wall_before, 1e-9), 3)}
        found.append(entry)
        say(f"round {index + 1}/{rounds} ({entry['processes']} beside, "
            f"{entry['compiling']['beside_cores']:.2f} cores busy while compiling): "
            + ", ".join(f"{c} eager {entry[c]['eager']:.3f} ms compiled {entry[c]['compiled']:.3f} ms"
                        for c in conditions))
    return found


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` and their living descendants have used so far."""
    total = 0.0
    for pid in pids:
        try:
            parent = psutil.Process(pid)
            for process in (parent, *parent.children(recursive=True)):
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            continue
    return total


def verdict(found: list[dict[str, Any]]) -> dict[str, Any]:
    """The check's effects and verdict from its rounds: those whose compile processes kept at least
    ``MIN_BESIDE_CORES`` busy while compiling (a round beside processes that waited tells nothing)."""
    counted = [entry for entry in found if entry["processes"] > 0
               and entry["compiling"]["beside_cores"] >= MIN_BESIDE_CORES]
    if len(counted) < 2:
        return {"verdict": "unclear", "reason": f"{len(counted)} of {len(found)} round(s) had compile processes busy "
                f"beside (at least {MIN_BESIDE_CORES} of a core)", "effects": {}}
    effects = interference.effects(counted)
    return {"verdict": "pass" if interference.passed(effects) else "fail", "limit": interference.LIMIT,
            "effects": {side: found_.to_dict() for side, found_ in effects.items()}, "rounds_counted": len(counted)}


def wait_for_compiling(ahead: CompileAhead, wait_s: float) -> float:
    """Seconds until a compile process held the token for compiling (its first compile phase began), at most
    ``wait_s``: the rounds time beside compiling, not beside imports."""
    started = time.monotonic()
    while time.monotonic() - started < wait_s:
        if any(entry.get("role") == gpu_token.COMPILING and entry.get("what") == COMPILING_CALLS
               for entry in gpu_token.holdings(ahead.token_log)):
            break
        time.sleep(0.5)
    return time.monotonic() - started


def check_interference(device: str = "cuda", *, model: str = "resnet", batch_size: int = 1, rounds: int = 6,
                       runs: int = 100, blocks: int = 10, beside: tuple[str, ...] = BESIDE_MODELS,
                       start_wait_s: float = START_WAIT_S, seed: int = 0,
                       say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Time ``model`` at ``batch_size`` beside compile processes compiling ``beside`` cold, paused and not, and
    return the check (what the study folder keeps as ``CHECK_FILE``)."""
    import torch

    from ...environment.capture import capture_environment
    from ...variants import modes
    from ...variants.compilation import forward_call
    from ...zoo.loading import load

    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        raise UserError("check-interference needs two cores or more: one to time on, others to compile on")
    scratch = Path(tempfile.mkdtemp(prefix="interference-check-"))
    ahead = CompileAhead(beside_cells(device, beside), scratch, cpus, worker=device)
    os.sched_setaffinity(0, ahead.measuring_cpus)  # as the kernel runs: cores apart from the compile processes
    shutil.rmtree(ahead.root, ignore_errors=True)  # cold compiles, every time
    try:
        loaded = load(model, weights="random", device=device, seed=seed)
        inputs = loaded.inputs(batch_size)
        eager = forward_call(loaded.model, inputs, "eager")
        with torch.no_grad():
            compiled = forward_call(modes.compile_model(loaded.model, "default"), inputs, "default")
            compiled()  # compiled here, before the compile processes start
            gpu_token.measure_beside_compiles(ahead.token, device)
            with ahead.running():
                waited = wait_for_compiling(ahead, start_wait_s)
                say(f"compile processes compiling after {waited:.0f} s; {rounds} rounds of {runs} runs a side")
                found = time_rounds(eager, compiled, ahead, device=device, rounds=rounds, runs=runs, blocks=blocks,
                                    seed=seed, say=say)
            overlaps = gpu_token.overlaps(gpu_token.holdings(ahead.token_log))
    finally:
        gpu_token.use(None, gpu_token.MEASURING)
        shutil.rmtree(ahead.root, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    environment = capture_environment()
    return {"machine": machine_of(environment, device), "device": device, "torch": torch.__version__,
            "model": model, "batch_size": batch_size, "runs": runs, "blocks": blocks, "beside": list(beside),
            "measuring_cores": len(ahead.measuring_cpus), "compile_processes": len(ahead.compile_cpus),
            "host_cores": len(cpus), "waited_for_compiling_s": round(waited, 1), "token_overlaps": len(overlaps),
            "timestamp_utc": environment.get("timestamp_utc"), **verdict(found), "rounds": found}
