"""The experiments a GPU lease runs while the reproducible-figures and pipelined-lease designs are open (issue 47).

Three questions, each answered by fresh processes on the lent machine, everything kept per block:

- **regime**: why the host changes regime inside a cell while the GPU's clock holds. The same launch-bound
  cells (ResNet-50 and BEiT at batch 1, eager against the default mode, 300 runs a side in 30 random-order
  pairs of blocks, as the study times them) in fresh processes, one condition each, in random order: as the
  study runs them (``study``: cold then warm compile in fresh caches, the compile-worker pool up, NVML read
  after every block), the same from a warm cache (``warm``), pinned to a few cores (``pinned``), with no NVML
  read and no worker pool (``quiet``), with ``gc.freeze()`` after compiling (``gc-freeze``), with the pool shut
  before timing (``pool-shut``), with the lease's archive packer stopped (``packer-stopped``). After every
  block: the wall clock, the host's CPU counters (steal, idle; ``/proc/stat``), the CPU the process ran on and
  its frequency where the host exposes it, the process's context switches, the GPU's SM clock (NVML).
- **interference**: what compiling beside timing costs. Three processes compile Mask2Former cold on the other
  cores while one process, pinned to its own cores, times the same cells in segments; between segments it
  pauses (SIGSTOP) or resumes (SIGCONT) the compilers, in random order: the effect on eager, compiled and the
  speed-up. The compilers' cold compiles are the large model's "beside two others" figure.
- **compile-alone**: the same cold compile with nothing beside it, on the same cores.

``run`` does them in that order against a deadline (a step that does not fit is left for the next command,
which skips what is done); ``probe`` and ``compiler`` are its fresh processes. On a CPU it runs as well
(``--device cpu`` and small models): that is how it is tried before a lease.

    python tools/lease_experiments.py run --out /tmp/lease/experiments --deadline-s 300
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
import json
import os
from pathlib import Path
import random
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

HERE = Path(__file__).resolve()

PROBE_CORES = "{probe cores}"  # in a condition's flags: the timing process's cores (``core_groups``)
# condition -> how its probe process differs from the study's way (the flags of ``probe``)
CONDITIONS: dict[str, list[str]] = {
    "study": ["--study-compile"],
    "warm": [],
    "pinned": ["--pin", PROBE_CORES],
    "quiet": ["--no-nvml", "--compile-threads", "1"],
    "gc-freeze": ["--gc-freeze"],
    "pool-shut": ["--pool-shut"],
    "packer-stopped": [],   # the orchestrator pauses the lease's packer around it
}
REGIME_PLAN = ["study", "study", "warm", "warm", "pinned", "quiet", "gc-freeze", "pool-shut", "packer-stopped"]


# --- the host, read between blocks ------------------------------------------------------------------------

def parse_cores(text: str) -> list[int]:
    """``"0-3,8"`` -> [0, 1, 2, 3, 8]."""
    cores: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        cores += range(int(low), int(high or low) + 1)
    return cores


def core_groups(cpus: list[int]) -> dict[str, list[int]]:
    """The timing process's cores (a quarter, at least one) and three compilers' (the rest, in thirds)."""
    probe = cpus[:max(1, len(cpus) // 4)]
    rest = cpus[len(probe):] or cpus
    third = max(1, len(rest) // 3)
    groups = {"probe": probe}
    for i in range(3):
        groups[f"compiler{i}"] = rest[i * third:(i + 1) * third] or rest
    return groups


def as_text(cores: list[int]) -> str:
    return ",".join(map(str, cores))


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def current_cpu() -> int | None:
    """The CPU this process last ran on (``/proc/self/stat``'s 39th field)."""
    text = _read("/proc/self/stat")
    if text is None:
        return None
    return int(text.rsplit(")", 1)[1].split()[36])


def cpu_mhz(cpu: int | None) -> float | None:
    """That CPU's frequency, where the host exposes it (cpufreq, else ``/proc/cpuinfo``)."""
    if cpu is None:
        return None
    khz = _read(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq")
    if khz is not None:
        return int(khz) / 1000
    info = _read("/proc/cpuinfo") or ""
    for block in info.split("\n\n"):
        fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
        if fields.get("processor\t", fields.get("processor", "")).strip() == str(cpu):
            mhz = next((value for key, value in fields.items() if key.strip() == "cpu MHz"), None)
            return float(mhz) if mhz else None
    return None


def cpu_counters() -> dict[str, int] | None:
    """The host's CPU time so far, in jiffies: all, idle (with iowait), steal (``/proc/stat``)."""
    text = _read("/proc/stat")
    if not text:
        return None
    values = [int(x) for x in text.splitlines()[0].split()[1:]]
    values += [0] * (8 - len(values))
    return {"total": sum(values[:8]), "idle": values[3] + values[4], "steal": values[7]}


def host_reading(minimal: bool = False) -> dict[str, Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    reading: dict[str, Any] = {"t": time.time(), "nvcsw": usage.ru_nvcsw, "nivcsw": usage.ru_nivcsw}
    if not minimal:
        cpu = current_cpu()
        reading.update(cpu=cpu, mhz=cpu_mhz(cpu), stat=cpu_counters(), load1=os.getloadavg()[0])
    return reading


def host_canary_ms() -> float:
    """The best of three runs of a fixed pure-Python loop (about half a millisecond): the host's single-thread
    speed now. Where a block's latency moves and this does not, the host's core did not slow down."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        sum(range(20_000))
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def device_canary(torch: Any, device: Any) -> Callable[[], float] | None:
    """The best of three device-timed 2048x2048 float32 matmuls: the GPU's own speed now, free of the host."""
    if device.type != "cuda":
        return None
    a = torch.randn(2048, 2048, device=device)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(3)]

    def read() -> float:
        for start, end in events:
            start.record()
            a @ a
            end.record()
        torch.cuda.synchronize(device)
        return min(start.elapsed_time(end) for start, end in events)

    read()
    return read


def os_threads() -> int | None:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


# --- one timing process -----------------------------------------------------------------------------------

def probe(args: argparse.Namespace) -> int:
    """Fresh process: load, compile and time each model, append one JSON line per model to ``--out``."""
    started = time.time()
    if args.pin:
        os.sched_setaffinity(0, parse_cores(args.pin))
    if args.compile_threads:
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(args.compile_threads)
    if args.cache_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.cache_dir
    import gc

    import torch

    from bench_utils.measurement.block_clocks import BlockClocks
    from bench_utils.measurement.compare import compare
    from bench_utils.variants import compile_workers, modes
    from bench_utils.variants.compilation import forward_call
    from bench_utils.variants.compile_cost import compile_cold_then_warm, fresh_caches, no_recompile
    from bench_utils.variants.precision import configure_fp32_math
    from bench_utils.zoo.loading import load

    imported = time.time()
    math = configure_fp32_math("default")
    device = torch.device(args.device)
    compilers = _Compilers(args.compilers) if args.compilers else None
    for key in args.models.split(","):
        line: dict[str, Any] = {"condition": args.condition, "model": key, "batch_size": args.batch,
                                "device": str(device), "pid": os.getpid(), "cores": sorted(os.sched_getaffinity(0)),
                                "import_s": imported - started, "tf32": math, "torch": torch.__version__}
        t0 = time.time()
        loaded = load(key, weights="random", device=device, seed=0)
        inputs = loaded.inputs(args.batch)
        eager = forward_call(loaded.model, inputs, "eager")
        line["load_s"] = time.time() - t0
        with torch.no_grad(), (fresh_caches() if args.study_compile else nullcontext()):
            t0 = time.time()
            compiled = compile_cold_then_warm(loaded.model, "default",
                                              lambda m: forward_call(m, inputs, "default"), device,
                                              warm=args.study_compile)
            line["compile"] = {"wall_s": time.time() - t0, "cold_calls_ms": compiled.cold_calls_ms,
                               "warm_calls_ms": compiled.warm_calls_ms, "workers": compiled.workers,
                               "fx_cache_hits": (compiled.warm_stats or compiled.cold_stats).get("fx_graph_cache_hits"),
                               "kind": "cold then warm, fresh caches" if args.study_compile else "one compile, shared cache"}
            if args.pool_shut:
                from torch._inductor import async_compile

                shut = getattr(async_compile, "shutdown_compile_workers", None)
                line["pool_shut"] = shut is not None and compile_workers.in_use()
                if shut is not None:
                    shut()
            if args.gc_freeze:
                gc.collect()
                gc.freeze()
                line["gc_frozen"] = gc.get_freeze_count()
            line["threads_before"] = {"python": threading.active_count(), "os": os_threads()}
            segments = _segments(args, compilers)
            with BlockClocks(device) if not args.no_nvml else nullcontext() as clocks, no_recompile():
                gpu_canary = None if args.no_nvml else device_canary(torch, device)

                def between_blocks() -> dict[str, Any]:
                    reading = host_reading(minimal=args.no_nvml)
                    if clocks is not None:
                        reading.update(clocks())
                    if not args.no_nvml:
                        reading["host_canary_ms"] = host_canary_ms()
                    if gpu_canary is not None:
                        reading["device_canary_ms"] = gpu_canary()
                    return reading

                line["start"] = host_reading()
                line["segments"] = []
                for index, state in enumerate(segments):
                    if compilers is not None:
                        compilers.set(state)
                    seg_start = time.time()
                    comparison = compare(eager, compiled.forward, warmup=args.warmup, runs=args.runs,
                                         blocks=args.blocks, device=device, order_seed=args.seed + index,
                                         between_blocks=between_blocks)
                    line["segments"].append(_segment(comparison, state, seg_start))
                if compilers is not None:
                    compilers.set("running")
                    line["compilers"] = {"pgids": compilers.pgids, "compiling_from": compilers.waited_until,
                                         "states": compilers.log}
                line["end"] = host_reading()
            line["threads_after"] = {"python": threading.active_count(), "os": os_threads()}
        modes.reset()
        del loaded, eager, compiled
        if device.type == "cuda":
            torch.cuda.empty_cache()
        with open(args.out, "a") as handle:
            handle.write(json.dumps(line) + "\n")
        print(f"[probe {args.condition}] {key}: " + "; ".join(
            f"{s['state']}: eager {s['eager_mean_ms']:.3f} ms, compiled {s['compiled_mean_ms']:.3f} ms, "
            f"x{s['speedup']:.3f}" for s in line["segments"]), flush=True)
    return 0


def _segments(args: argparse.Namespace, compilers: "_Compilers | None") -> list[str]:
    """One segment (``alone``), or ``--segments`` of them, half with the compilers paused, in random order."""
    if compilers is None:
        return ["alone"]
    states = ["paused", "running"] * (args.segments // 2)
    random.Random(args.seed).shuffle(states)
    return states


def _rounded(values: list[float]) -> list[float]:
    return [round(value, 5) for value in values]  # ms: to 10 ns, plenty


def _segment(comparison: Any, state: str, start: float) -> dict[str, Any]:
    rounded = _rounded
    paired = comparison.paired
    return {"state": state, "t_start": start, "t_end": time.time(),
            "eager_mean_ms": comparison.baseline.mean_ms, "compiled_mean_ms": comparison.candidate.mean_ms,
            "eager_median_ms": comparison.baseline.median_ms, "compiled_median_ms": comparison.candidate.median_ms,
            "speedup": paired.mean, "speedup_ci95": paired.mean_ci95, "median_speedup": paired.median,
            "order": comparison.order, "switch_calls": comparison.switch_calls,
            "eager_ms": rounded(comparison.baseline.times_ms), "compiled_ms": rounded(comparison.candidate.times_ms),
            "switch_ms": {side: [rounded(block) for block in blocks] for side, blocks in comparison.switch_ms.items()},
            "probes": {side: list(found) for side, found in comparison.block_probes.items()}}


class _Compilers:
    """The compile processes beside a timing process: paused (SIGSTOP to their process groups) or running."""

    def __init__(self, pgid_file: str) -> None:
        deadline = time.time() + 60
        while not Path(pgid_file).exists() and time.time() < deadline:
            time.sleep(0.2)
        self.pgids = [int(x) for x in Path(pgid_file).read_text().split()]
        # each compiler marks the moment it starts compiling: the segments time beside compiling, not importing
        while not all((Path(pgid_file).parent / f"compiling-{pgid}").exists() for pgid in self.pgids) \
                and time.time() < deadline + 60:
            time.sleep(0.2)
        self.waited_until = time.time()
        self.log: list[tuple[float, str]] = []

    def set(self, state: str) -> None:
        sig = signal.SIGSTOP if state == "paused" else signal.SIGCONT
        for pgid in self.pgids:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        self.log.append((time.time(), state))
        time.sleep(0.2)  # let a stopped compiler's last GPU work drain before timing


# --- one compile process ----------------------------------------------------------------------------------

def compiler(args: argparse.Namespace) -> int:
    """Fresh process: compile ``--model`` cold (empty caches of its own) and log when, and how long."""
    started = time.time()
    if args.pin:
        os.sched_setaffinity(0, parse_cores(args.pin))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold-", dir=args.scratch)
    import torch

    from bench_utils.measurement.timing import time_first_call
    from bench_utils.variants import compile_workers, modes
    from bench_utils.variants.compilation import forward_call
    from bench_utils.variants.precision import configure_fp32_math
    from bench_utils.zoo.loading import load

    configure_fp32_math("default")
    device = torch.device(args.device)
    loaded = load(args.model, weights="random", device=device, seed=0)
    inputs = loaded.inputs(args.batch)
    line: dict[str, Any] = {"label": args.label, "model": args.model, "batch_size": args.batch, "pid": os.getpid(),
                            "cores": sorted(os.sched_getaffinity(0)), "t_started": started, "t_loaded": time.time()}
    with torch.no_grad():
        line["workers"] = compile_workers.ready()
        forward = forward_call(modes.compile_model(loaded.model, "default"), inputs, "default")
        line["t_compile_start"] = time.time()
        (Path(args.log).parent / f"compiling-{os.getpid()}").touch()  # the timing process waits for this
        cpu_before = os.times()
        line["first_call_ms"] = time_first_call(forward, device)
        cpu_after = os.times()
        line["t_compile_end"] = time.time()
        line["cpu_s"] = {"self": cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system,
                         "children": (cpu_after.children_user + cpu_after.children_system
                                      - cpu_before.children_user - cpu_before.children_system)}
        line["next_call_ms"] = time_first_call(forward, device)
    with open(args.log, "a") as handle:
        handle.write(json.dumps(line) + "\n")
    print(f"[compiler {args.label}] {args.model}: first call {line['first_call_ms'] / 1e3:.1f} s", flush=True)
    return 0


# --- the orchestrator -------------------------------------------------------------------------------------

class Lease:
    """What is left of the command's time, and the steps already done (marks in ``out``)."""

    def __init__(self, out: Path, deadline: float) -> None:
        self.out, self.deadline = out, deadline
        out.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.time()

    def done(self, step: str) -> bool:
        return (self.out / f"done-{step}").exists()

    def mark(self, step: str) -> None:
        (self.out / f"done-{step}").write_text(f"{time.time()}\n")

    def note(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        print(line, flush=True)
        with open(self.out / "experiments.log", "a") as handle:
            handle.write(line + "\n")


def _child(args: argparse.Namespace, verb: str, extra: list[str], log: Path, **popen: Any) -> subprocess.Popen:
    command = [sys.executable, str(HERE), verb, "--device", args.device, *extra]
    handle = open(log, "a")
    return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, **popen)


def _wait(process: subprocess.Popen, lease: Lease, what: str, margin: float = 5.0) -> int | None:
    try:
        return process.wait(timeout=max(1.0, lease.left() - margin))
    except subprocess.TimeoutExpired:
        lease.note(f"{what}: stopped at the deadline")
        _kill(process)
        return None


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGCONT)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def _probe_flags(args: argparse.Namespace, condition: str, groups: dict[str, list[str]], index: int) -> list[str]:
    flags = [as_text(groups["probe"]) if flag == PROBE_CORES else flag for flag in CONDITIONS[condition]]
    return ["--condition", condition, "--models", args.models, "--batch", str(args.batch), "--runs", str(args.runs),
            "--blocks", str(args.blocks), "--seed", str(index), "--cache-dir", str(args.scratch / "shared-cache"),
            "--out", str(args.out / "regime.jsonl"), *flags]


def regime(args: argparse.Namespace, lease: Lease, groups: dict[str, Any]) -> bool:
    conditions = args.regime_plan.split(",") if args.regime_plan else REGIME_PLAN
    unknown = sorted(set(conditions) - set(CONDITIONS))
    if unknown:
        raise SystemExit(f"error: unknown regime condition(s) {', '.join(unknown)}: use {', '.join(CONDITIONS)}")
    plan = list(enumerate(conditions))
    random.Random(args.seed).shuffle(plan)
    complete = True
    for index, condition in plan:
        step = f"regime-{index}-{condition}"
        if lease.done(step):
            continue
        need = args.probe_s * (1.5 if condition == "study" else 1)
        if lease.left() < need:
            lease.note(f"{step}: left for the next command ({lease.left():.0f} s left, ~{need:.0f} s needed)")
            complete = False
            continue
        pause = args.packer_pause if condition == "packer-stopped" else None
        if pause:
            Path(pause).touch()
        lease.note(f"{step}: starts")
        try:
            process = _child(args, "probe", _probe_flags(args, condition, groups, index), args.out / f"{step}.log")
            code = _wait(process, lease, step)
        finally:
            if pause:
                Path(pause).unlink(missing_ok=True)
        lease.note(f"{step}: exit {code}")
        if code == 0:
            lease.mark(step)
        else:
            complete = False
    return complete


def _compilers(args: argparse.Namespace, groups: dict[str, list[int]], names: list[str], label: str,
               lease: Lease) -> list[subprocess.Popen]:
    processes = []
    for name in names:
        flags = ["--model", args.big_model, "--batch", str(args.batch), "--pin", as_text(groups[name]),
                 "--label", f"{label}-{name}", "--log", str(args.out / "compilers.jsonl"), "--scratch", str(args.scratch)]
        processes.append(_child(args, "compiler", flags, args.out / f"{label}-{name}.log", start_new_session=True))
    lease.note(f"{label}: compilers {[p.pid for p in processes]} on {[as_text(groups[n]) for n in names]}")
    return processes


def interference(args: argparse.Namespace, lease: Lease, groups: dict[str, Any]) -> bool:
    if lease.done("interference"):
        return True
    if lease.left() < args.interference_s:
        lease.note(f"interference: left for the next command ({lease.left():.0f} s left)")
        return False
    compilers = _compilers(args, groups, ["compiler0", "compiler1", "compiler2"], "beside", lease)
    pgids = args.out / "compiler-pgids.txt"
    pgids.unlink(missing_ok=True)
    pgids.write_text(" ".join(str(p.pid) for p in compilers))
    flags = ["--condition", "interference", "--models", args.models, "--batch", str(args.batch),
             "--runs", str(args.segment_runs), "--blocks", str(args.segment_blocks), "--seed", "100",
             "--cache-dir", str(args.scratch / "shared-cache"), "--out", str(args.out / "interference.jsonl"),
             "--pin", as_text(groups["probe"]), "--compilers", str(pgids), "--segments", str(args.segments)]
    lease.note("interference: the timing process starts")
    code = _wait(_child(args, "probe", flags, args.out / "interference.log"), lease, "interference probe")
    lease.note(f"interference: timing exit {code}; waiting for the compilers")
    codes = [_wait(p, lease, "a compiler") for p in compilers]
    lease.note(f"interference: compilers exit {codes}")
    if code == 0:
        lease.mark("interference")
    return code == 0


def compile_alone(args: argparse.Namespace, lease: Lease, groups: dict[str, Any]) -> bool:
    if lease.done("compile-alone"):
        return True
    if lease.left() < args.compile_s:
        lease.note(f"compile-alone: left for the next command ({lease.left():.0f} s left)")
        return False
    (process,) = _compilers(args, groups, ["compiler0"], "alone", lease)
    code = _wait(process, lease, "compile alone")
    lease.note(f"compile-alone: exit {code}")
    if code == 0:
        lease.mark("compile-alone")
    return code == 0


def run(args: argparse.Namespace) -> int:
    args.out = Path(args.out)
    args.scratch = Path(args.scratch) if args.scratch else args.out.parent / "experiments-scratch"
    args.scratch.mkdir(parents=True, exist_ok=True)  # compile caches: never in what the lease packs
    lease = Lease(args.out, time.time() + args.deadline_s)
    groups = core_groups(sorted(os.sched_getaffinity(0)))
    lease.note(f"cores {groups}; {lease.left():.0f} s to spend")
    steps: list[tuple[str, Callable[..., bool]]] = [("regime", regime), ("interference", interference),
                                                    ("compile-alone", compile_alone)]
    results = {}
    for name, step in steps:
        if name in args.skip.split(","):
            continue
        results[name] = step(args, lease, groups)
    lease.note(f"done: {results}; {lease.left():.0f} s left")
    for name in ("regime.jsonl", "interference.jsonl"):
        if (args.out / name).exists():
            summarize(argparse.Namespace(files=[args.out / name]))
    return 0 if all(results.values()) else 3


# --- what the lines say -----------------------------------------------------------------------------------

def block_means(times: list[float], blocks: int) -> list[float]:
    """A side's block means, its calls cut as ``compare`` cut them (``compare.block_sizes``)."""
    from bench_utils.measurement.compare import block_sizes
    from bench_utils.measurement.stats import split_blocks

    return [sum(block) / len(block) for block in split_blocks(times, block_sizes(len(times), blocks))]


def shift(means: list[float]) -> str:
    """A side's regime shift in words (``measurement.regime``, as the report flags it), or "steady"."""
    from bench_utils.measurement.regime import regime_shift, shift_text

    found = regime_shift(means)
    return shift_text(found, len(means)) if found else "steady"


def summarize(args: argparse.Namespace) -> int:
    for path in args.files:
        for text in Path(path).read_text().splitlines():
            line = json.loads(text)
            for segment in line["segments"]:
                blocks = len(segment["order"])
                eager, compiled = (block_means(segment[f"{side}_ms"], blocks) for side in ("eager", "compiled"))
                probes = segment["probes"].get("baseline") or []
                stats = [p["stat"] for p in probes if p.get("stat")]
                busy = steal = None
                if len(stats) > 1:
                    total = stats[-1]["total"] - stats[0]["total"]
                    busy = 1 - (stats[-1]["idle"] - stats[0]["idle"]) / total if total else None
                    steal = (stats[-1]["steal"] - stats[0]["steal"]) / total if total else None
                clocks = sorted({p.get("sm_clock_mhz") for p in probes if p.get("sm_clock_mhz")})
                ci = segment["speedup_ci95"] or (float("nan"), float("nan"))
                inside = ci[0] <= segment["median_speedup"] <= ci[1]
                print(f"{line['condition']:>15} {line['model']:>9} {segment['state']:>8} "
                      f"eager {segment['eager_mean_ms']:7.3f} compiled {segment['compiled_mean_ms']:7.3f} "
                      f"x{segment['speedup']:.3f} ({ci[0]:.3f}-{ci[1]:.3f}) median x{segment['median_speedup']:.3f}"
                      f"{'' if inside else ' (outside)'} | eager {shift(eager)}; compiled {shift(compiled)} | "
                      f"blocks eager {min(eager):.2f}-{max(eager):.2f} | "
                      f"host busy {busy if busy is None else round(busy, 3)} steal {steal} sm {clocks} "
                      f"compile {line['compile']['wall_s']:.1f}s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb in ("run", "probe", "compiler"):
        sub = verbs.add_parser(verb)
        sub.add_argument("--device", default="cuda")
        sub.add_argument("--batch", type=int, default=1)
        sub.add_argument("--pin", default=None, help="cores, as 0-3,8")
    r = verbs.choices["run"]
    r.add_argument("--out", required=True)
    r.add_argument("--deadline-s", type=float, required=True, help="seconds this command may spend")
    r.add_argument("--models", default="resnet,beit")
    r.add_argument("--big-model", default="mask2former")
    r.add_argument("--runs", type=int, default=300)
    r.add_argument("--blocks", type=int, default=30)
    r.add_argument("--segments", type=int, default=8)
    r.add_argument("--segment-runs", type=int, default=100)
    r.add_argument("--segment-blocks", type=int, default=10)
    r.add_argument("--seed", type=int, default=47)
    # what each took on the H200 (2026-11-27): a probe 35-75 s (a study one 74-87 s: two cold compiles), with
    # its exit; the compile steps are not measured yet
    r.add_argument("--probe-s", type=float, default=60, help="what one probe is given (a study one 1.5 times)")
    r.add_argument("--interference-s", type=float, default=150)
    r.add_argument("--compile-s", type=float, default=120)
    r.add_argument("--packer-pause", default=None, help="a file whose presence pauses the lease's packer")
    r.add_argument("--scratch", default=None, help="where compile caches go (default: beside --out)")
    r.add_argument("--skip", default="", help="steps not to run, comma-separated")
    r.add_argument("--regime-plan", default=None, help="the regime step's conditions, comma-separated, repeats "
                   f"allowed (default: {','.join(REGIME_PLAN)})")
    p = verbs.choices["probe"]
    p.add_argument("--condition", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--blocks", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--study-compile", action="store_true")
    p.add_argument("--no-nvml", action="store_true")
    p.add_argument("--compile-threads", type=int, default=None)
    p.add_argument("--gc-freeze", action="store_true")
    p.add_argument("--pool-shut", action="store_true")
    p.add_argument("--compilers", default=None, help="a file naming the compilers' process groups")
    p.add_argument("--segments", type=int, default=8)
    c = verbs.choices["compiler"]
    c.add_argument("--model", required=True)
    c.add_argument("--label", required=True)
    c.add_argument("--log", required=True)
    c.add_argument("--scratch", default=None)
    verbs.add_parser("summarize").add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    return {"run": run, "probe": probe, "compiler": compiler, "summarize": summarize}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
