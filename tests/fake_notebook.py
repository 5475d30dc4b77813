"""A stand-in for papermill and the kernel, for the runner's tests (local and on a cluster)."""

from collections import Counter
import threading
import time

from bench_utils.measurement.timing import Measurement
from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.build import failure_record, make_record, measurement_settings, skipped_after_oom
from bench_utils.records.results_file import append_record
from bench_utils.settings import Settings
from bench_utils.study.grid.kernel_groups import execution_order
from bench_utils.study.progress_file import write_progress
from bench_utils.zoo.hub import expected_weights


class FakeNotebook:
    """Stands in for papermill and the kernel: measures a kernel group's cells in order, writing
    the records a notebook would (its own OOM rule included), or fails as told."""

    def __init__(self, oom=(), error=(), crash=(), crash_once=(), hang=(), delay=0.0, no_start=False, shifted=()):
        self.oom, self.error, self.crash, self.delay = set(oom), set(error), set(crash), delay
        # (model, batch_size, replicate[, compile_mode]): compiled blocks that change regime half-way
        self.shifted = set(shifted)
        self.no_start = no_start
        self.crash_once, self.hang = set(crash_once), set(hang)
        self.calls, self.kernels, self.active, self.lock = [], [], Counter(), threading.Lock()
        self.overlaps = []

    def __call__(self, group, device, parameters, out_dir, poll, attempt):
        assert parameters["show"] is False
        by_pair = {(c.compile_mode, c.batch_size): c for c in group.cells}
        # the kernel's order is the notebook's own (task.run), from its parameters alone
        by_batch = parameters["settings"].get("shapes", "static") == "static"  # as task.run decides
        ordered = [by_pair[pair] for pair in execution_order(map(tuple, parameters["only_cells"]), by_batch)]
        with self.lock:
            self.active[device] += 1
            if self.active[device] > 1:
                self.overlaps.append(device)
            self.kernels.append((group.group_id, attempt, [(c.compile_mode, c.batch_size) for c in group.cells]))
        log = out_dir / "logs" / f"{group.group_id}.{attempt}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("line one\nSegmentation fault (core dumped)\n")
        oom_at = {}
        try:
            # dies before it begins any cell (a broken environment, say): every kernel, or those of the models named
            if self.no_start is True or (self.no_start and group.cells[0].model in self.no_start):
                return 1, log
            for cell in ordered:
                write_progress(PROJECT_ROOT / parameters["progress_file"], cell.compile_mode, cell.batch_size)
                key = (cell.model, cell.batch_size)
                fields = dict(study=cell.study, task=cell.task, model=cell.model, batch_size=cell.batch_size,
                              compile_mode=cell.compile_mode, dtype=cell.dtype, device=cell.device,
                              **cell.settings.variant_fields())
                settings = Settings(**parameters["settings"])
                # the weights the kernel's load measured, as its records carry them (auto offline: random)
                config = {**measurement_settings(settings), "weights": expected_weights(settings.weights, cell.model)}
                if cell.compile_mode not in oom_at:  # a cell the notebook measures
                    with self.lock:
                        self.calls.append((cell.model, cell.batch_size, cell.compile_mode, device))
                    time.sleep(self.delay)
                if key in self.crash or (key in self.crash_once and attempt == 1):
                    return 139, log
                if key in self.hang:
                    while not poll():
                        time.sleep(0.02)
                    return -9, log
                if cell.compile_mode in oom_at:
                    record = skipped_after_oom(fields, oom_at[cell.compile_mode], config)
                elif key in self.oom or key in self.error:
                    status = "oom" if key in self.oom else "error"
                    if status == "oom":
                        oom_at[cell.compile_mode] = cell.batch_size
                    record = failure_record(fields, status=status, config=config, error=f"{status}!")
                elif cell.compile_mode != "eager" and {(cell.model, cell.batch_size, cell.settings.replicate),
                                                        (cell.model, cell.batch_size, cell.settings.replicate,
                                                         cell.compile_mode)} & self.shifted:
                    # 20 blocks of 3 calls: 1 ms, then 1.6 ms from block 11 (10 blocks leave the test at p ~ 0.008, on
                    # its edge); timed in a row with its batch's modes
                    calls = [1.0] * 30 + [1.6] * 30
                    row = [c.compile_mode for c in ordered if c.batch_size == cell.batch_size and c.compile_mode != "eager"]
                    record = make_record(fields, measurement=Measurement(calls, 5.0), config=config,
                                         extra={"speedup": {"mean": 2.0, "block_runs": [3] * 20,
                                                            "eager_values": [0.002] * 60, "timed_with": row}})
                else:
                    record = make_record(fields, measurement=Measurement([1.0, 2.0, 3.0], 5.0), config=config)
                append_record(PROJECT_ROOT / parameters["results_path"], record)  # as the kernel resolves it
                poll()
            return 0, log
        finally:
            with self.lock:
                self.active[device] -= 1
