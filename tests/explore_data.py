"""Two study folders for the explorer's tests: the checked-in example, and the same cells as if
measured again under another torch version, with chosen speed-ups (intervals of 25 pairs)."""

import copy
import json
from pathlib import Path

from bench_utils.paths import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "notebooks" / "examples" / "cpu-quick.jsonl"


def example_records() -> list[dict]:
    return [json.loads(line) for line in EXAMPLE.read_text().splitlines() if line.strip()]


def write_study(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def remeasured(speedups: dict[str, float], torch_version: str = "2.99.0",
               statuses: dict[str, str] | None = None, parities: dict[str, str] | None = None) -> list[dict]:
    """The example's records under another torch version: a model's compiled speed-up set to
    ``speedups[model]`` with a tight interval, its status or accuracy gate changed where asked."""
    records = []
    for record in copy.deepcopy(example_records()):
        record["environment"]["torch_version"] = torch_version
        record["environment"]["timestamp_utc"] = "2026-11-30T00:00:00+00:00"
        model = record["cell"]["model"]
        if record["cell"]["compile_mode"] != "eager" and model in speedups:
            value = speedups[model]
            record["speedup"].update(mean=value, mean_ci95=[value * 0.98, value * 1.02], pairs=25)
        if statuses and model in statuses and record["cell"]["compile_mode"] != "eager":
            record["status"] = statuses[model]
            record["error"] = "Traceback...\nRuntimeError: boom"
            for measured in ("latency", "throughput", "speedup"):  # an error record measured nothing
                record.pop(measured, None)
        if parities and model in parities and record.get("parity"):
            record["parity"]["parity"] = parities[model]
        records.append(record)
    return records
