"""``python -m bench_utils``: the command line of the study (``--help`` names its sub-commands).

Exit status: 0 done; 1 a cell errored (``run``) or a check failed (``--strict``, ``--verify``); 2 what the
user asked cannot be done (a ``UserError``, or argparse's usage error: one line); 3 ``run --time-limit``
stopped with cells left; 70 a bug in bench_utils (its traceback, then a line saying so); 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import sys
import time
import traceback
from typing import Sequence

from .errors import UserError
from .settings import Settings, setting_fields, setting_names
from .vocabulary import DTYPE_ALIASES, CompileMode, DType, check_mode


def _cmd_env(args: argparse.Namespace) -> int:
    from .environment.capture import capture_environment, format_environment

    environment = capture_environment()
    print(json.dumps(environment, indent=2) if args.json else format_environment(environment))
    return 0


def _cmd_validate_timer(args: argparse.Namespace) -> int:
    from .measurement.devices import resolve_device
    from .measurement.timer_check import format_timer_check, validate_timer
    from .study.runner.device_lock import device_lock

    device = str(resolve_device(args.device))
    # never timed under another measurement of this device (a running study, say)
    with device_lock(device, say=lambda line: print(f"[validate-timer] {line}", file=sys.stderr)):
        result = validate_timer(device, size=args.size, runs=args.runs, rounds=args.rounds,
                                min_run_time=args.min_run_time)
    print(json.dumps(result, indent=2) if args.json else format_timer_check(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if args.strict and not result["within_tolerance"] else 0


def _cmd_models(args: argparse.Namespace) -> int:
    from .zoo.loading import load
    from .zoo.registry import list_models

    rows = list_models()
    if args.verify:  # build each offline and count its parameters
        for row in rows:
            row["built_param_count"] = load(row["key"], weights="random").param_count
            row["match"] = row["built_param_count"] == row["param_count"]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'key':18} {'label':17} {'task':21} {'params':>9}  checkpoint")
        for row in rows:
            check = ""
            if args.verify:
                check = "  built: " + ("same" if row["match"] else f"{row['built_param_count']:,} MISMATCH")
            print(f"{row['key']:18} {row['label']:17} {row['task']:21} "
                  f"{row['param_count'] / 1e6:8.2f}M  {row['checkpoint']}{check}")
        print("Also: any Hugging Face checkpoint 'org/name' of these tasks, or 'timm:<name>'.")
    return 1 if args.verify and not all(row["match"] for row in rows) else 0


def _cmd_cell(args: argparse.Namespace) -> int:
    from .measurement.memory_cap import gpu_memory_cap
    from .records.build import measurement_settings
    from .records.results_file import append_record
    from .study.cell.measured_cell import run_cell
    from .study.cell.cell_record import cell_record
    from .variants import modes as compile_module
    from .variants.precision import configure_fp32_math
    from .zoo.loading import load
    from .measurement.devices import resolve_device

    check_mode(args.mode)
    resolve_device(args.device)  # a device this machine lacks: one line naming it and what the machine has
    settings = Settings.from_parameters({name: getattr(args, name) for name in setting_names() if hasattr(args, name)})
    config = {**measurement_settings(settings), **configure_fp32_math(settings.tf32),
              **gpu_memory_cap(settings.gpu_memory_gib, args.device)}
    loaded = load(args.model, weights=settings.weights, dtype=args.dtype, device=args.device,
                  seed=settings.seed, memory_format=settings.memory_format)
    # --keep-traces: beside the results file where one is given, else in ./traces
    traces = (Path(args.results).parent if args.results else Path.cwd()) / "traces"
    if settings.keep_traces:
        traces.mkdir(parents=True, exist_ok=True)
    result = run_cell(loaded, batch_size=args.batch_size, mode=args.mode, settings=settings,
                      math_settings=config,
                      trace_prefix=str(traces / f"{Path(args.model).name}-bs{args.batch_size}-{args.mode}"))
    options = compile_module.options(args.mode, settings.backend, settings.fullgraph, settings.dynamic)
    record = cell_record(result, loaded, study=args.study, compile_options=options, config=config,
                         variant=settings.variant_fields())
    from .report.cell_text import format_cell

    print(format_cell(record))
    if args.results:
        append_record(args.results, record)
        print(f"record appended to {args.results}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    started = time.monotonic()  # a --time-limit counts from the command's start
    # options that do not go together: said before the grid is read (reading it imports torch)
    ray = args.executor == "ray"
    if ray and (args.time_limit or args.device_model):  # the nodes' kernels are the cluster's to end, not a limit's
        raise UserError("--time-limit and --device-model are for the local executor: not with --executor ray")
    if ray and args.devices:
        raise UserError("--devices pins this machine's devices; on a cluster Ray places each group on a GPU")
    if ray and args.dry_run:
        raise UserError("--dry-run plans the run of this machine: run it without --executor ray")
    if not ray and args.address:
        raise UserError("--address names a Ray cluster: use it with --executor ray")
    from .study.grid.grid_file import load_grid

    grid = load_grid(args.params)  # GridError (a UserError): one line, exit 2
    if args.keep_traces:  # not part of a cell's identity nor of its record's hash: resume is unchanged
        grid = grid.with_settings(keep_traces=True)
    if ray:
        from .cluster.command import run_on_cluster

        return run_on_cluster(grid, args.params, out=args.out, force=args.force, timeout=args.timeout,
                              address=args.address)
    from .study.runner.run_command import run_locally

    return run_locally(grid, args.params, out=args.out, force=args.force, timeout=args.timeout,
                       devices=_check_devices(args.devices) if args.devices else None, dry_run=args.dry_run,
                       device_model=args.device_model, time_limit=args.time_limit, started=started)


def _cmd_report(args: argparse.Namespace) -> int:
    from .records.environment_files import write_study_environments
    from .report.frame import results_files
    from .report.render import render
    from .study.runner.coverage import grid_coverage

    locales = [part.strip() for part in args.locales.split(",") if part.strip()]
    formats = [part.strip() for part in args.formats.split(",") if part.strip()]
    # each study folder's grid cells measured, per environment
    coverage = [item for path in args.results if Path(path).is_dir() for item in grid_coverage(path)]
    written = render(args.results, args.out, locales=locales, formats=formats,
                     progress=lambda line: print(line, file=sys.stderr), coverage=coverage)
    # the exact versions the records were measured with: each study folder's environments/, or --out's alone
    written += write_study_environments(results_files(args.results), Path(args.out) if args.out else None)
    print("\n".join(str(path) for path in written))
    return 0


def _cmd_diagnose(args: argparse.Namespace) -> int:
    started = time.monotonic()
    from .study.runner.diagnose import diagnose

    return diagnose(args.study, dry_run=args.dry_run, time_limit=args.time_limit, device_model=args.device_model,
                    timeout=args.timeout, started=started, say=lambda line: print(line, file=sys.stderr))


def _cmd_coverage(args: argparse.Namespace) -> int:
    from .report.machine_coverage import coverage_lines

    print("\n".join(coverage_lines(args.studies)))
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from .reproduce.rerun import reproduce

    locales = [part.strip() for part in args.locales.split(",") if part.strip()]
    # an environment that cannot be built here is an EnvironmentBuildError (a UserError): one line, exit 2
    done = reproduce(args.study, out=args.out, environment=args.environment, force=args.force,
                     locales=locales, tolerance=args.tolerance, base_python=args.python,
                     say=lambda line: print(line, file=sys.stderr))
    from .report.comparison_page import verdict_line
    from .report.i18n import Catalog

    for _, row in done.comparison.iterrows():
        print(verdict_line(row, Catalog("en")))
    print("\n".join(str(page) for page in done.pages if page.name == "index.html"))
    return done.run_status


def _check_devices(text: str) -> list[str]:
    """``--devices``: its syntax only; the runner checks the devices against the machine."""
    import re

    devices = [part.strip() for part in text.split(",") if part.strip()]
    for device in devices:
        if not re.fullmatch(r"cpu|cuda:\d+", device):
            raise UserError(f"--devices: {device!r} is not cpu or cuda:N")
    return devices


def _path(text: str) -> Path:
    """A path argument: never empty (``Path("")`` would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name a file or folder")
    return Path(text)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its errors one line (not the usage block) and exit 2, as every bad input here."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if message.endswith("expected one argument"):  # "--time-limit -5m": a value that looks like an option
            message += " (a value that begins with '-' goes after '=': --option=-5)"
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """A flag per setting (``bench_utils.settings``), with its default and help; checked after parsing,
    as the grid and the notebooks check them (one line naming the setting)."""
    for item in setting_fields():
        if not item.metadata["flag"]:  # a grid's business (its replicates): one cell has none
            continue
        flag, accepts = "--" + item.name.replace("_", "-"), item.metadata["accepts"]
        kinds = accepts if isinstance(accepts, tuple) else (accepts,)
        if kinds == (bool,) and item.default is False:
            parser.add_argument(flag, action="store_true", help=item.metadata["help"])
        elif kinds == (bool,):  # on by default: --no-NAME turns it off
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=item.default,
                                help=item.metadata["help"])
        elif set(kinds) == {bool, type(None)}:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                                help=item.metadata["help"])
        else:
            kind = int if int in kinds and float not in kinds else float if float in kinds else str
            parser.add_argument(flag, type=kind, default=item.default, choices=item.metadata["choices"],
                                help=item.metadata["help"])


def _add_env_command(commands: argparse._SubParsersAction) -> None:
    env = commands.add_parser("env", help="print the environment every record carries")
    env.add_argument("--json", action="store_true", help="print JSON instead of a table")
    env.set_defaults(handler=_cmd_env)


def _add_validate_timer_command(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser("validate-timer",
                                help="compare measure() with torch.utils.benchmark and do_bench")
    check.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available)")
    check.add_argument("--size", type=_positive_int, default=None, help="matrix size of the workload")
    check.add_argument("--runs", type=_positive_int, default=300, help="timed runs of measure()")
    check.add_argument("--rounds", type=_positive_int, default=10,
                       help="alternations of the two timers, so that drift hits both")
    check.add_argument("--min-run-time", type=float, default=2.0,
                       help="seconds torch.utils.benchmark spends (blocked_autorange)")
    check.add_argument("--json", action="store_true", help="print JSON instead of text")
    check.add_argument("--out", type=_path, default=None, help="also write the result as JSON here")
    check.add_argument("--strict", action="store_true", help="exit 1 when the verdict is WARNING (a ratio "
                       "off by more than the check's tolerance, timer_check.TOLERANCE)")
    check.set_defaults(handler=_cmd_validate_timer)


def _add_models_command(commands: argparse._SubParsersAction) -> None:
    models = commands.add_parser("models", help="list the model zoo with parameter counts")
    models.add_argument("--verify", action="store_true", help="build each model offline and check its parameter count")
    models.add_argument("--json", action="store_true", help="print JSON instead of a table")
    models.set_defaults(handler=_cmd_models)


def _add_cell_command(commands: argparse._SubParsersAction) -> None:
    cell = commands.add_parser("cell", help="measure one model, batch size and mode (vs eager)")
    cell.add_argument("model", help="a registry key (see `models`), 'org/name' or 'timm:<name>'")
    cell.add_argument("--batch-size", type=_positive_int, default=1)
    # checked after parsing, as a model is: a wrong name is one line naming the closest valid one
    cell.add_argument("--mode", default=CompileMode.DEFAULT.value,
                      help=f"{', '.join(CompileMode)} (aot-inductor: torch.export + AOTInductor)")
    cell.add_argument("--dtype", default=DType.FLOAT32.value,
                      help=f"{', '.join(DType)} (or {', '.join(DTYPE_ALIASES)})")
    cell.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    _add_setting_flags(cell)
    cell.add_argument("--study", default="adhoc")
    cell.add_argument("--results", type=_path, default=None, help="append the record to this JSONL file")
    cell.set_defaults(handler=_cmd_cell)


def _add_run_command(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run a study grid (YAML) through the task notebooks")
    run.add_argument("params", type=_path, help="the grid file, such as params/cpu-quick.yaml")
    run.add_argument("--out", type=_path, default=None, help="study folder for results.jsonl and executed "
                     "notebooks (default: reports/<study>/)")
    run.add_argument("--force", action="store_true", help="measure every cell again")
    run.add_argument("--keep-traces", action="store_true", help="keep one profiled call's full trace per side of "
                     "each compiled cell in the study folder's traces/ (Perfetto, TensorBoard); as keep_traces: true")
    run.add_argument("--devices", default=None, help="comma-separated devices, one worker each (e.g. cuda:0,cuda:1)")
    _add_limit_flags(run)
    run.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="local: this machine's devices; ray: one task per kernel group on a Ray "
                          "cluster (docs/cluster.md)")
    run.add_argument("--address", default=None,
                     help="with --executor ray: auto or HOST:PORT of the cluster this machine is a node of, or "
                          "ray://HOST:10001 (Ray Client, from outside it) (default: $RAY_ADDRESS, else a Ray "
                          "cluster of this machine alone)")
    run.set_defaults(handler=_cmd_run)


def _add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """What a run of cells takes, for run and diagnose: a cell's timeout, a dry run, a GPU to price, a limit."""
    parser.add_argument("--timeout", type=_positive_int, default=None,
                        help="seconds a cell may run before it is stopped (default: 30 min plus 20 s per timed call)")
    parser.add_argument("--dry-run", action="store_true", help="list the kernels and cells the run would measure, "
                        "with an estimate from earlier records of this environment; run nothing")
    parser.add_argument("--device-model", default=None, help="price the cells no record covers a priori for "
                        "this GPU (H100, A100, L4...): with --dry-run or --time-limit")
    parser.add_argument("--time-limit", default=None, help="9m, 540s, 1h or 540: start no cell that would not "
                        "finish in time, stop at the limit as on SIGTERM (exit status 3: run it again)")


def _add_report_command(commands: argparse._SubParsersAction) -> None:
    rep = commands.add_parser("report", help="render the localized HTML and Markdown report")
    rep.add_argument("results", nargs="+", type=_path,
                     help="study folders or results.jsonl files (several merge GPUs or torch versions)")
    rep.add_argument("--out", type=_path, default=None, help="output folder (default: the first study folder)")
    rep.add_argument("--locales", default="en,ar,es", help="comma-separated locales")
    rep.add_argument("--formats", default="html,md", help="html, md or both")
    rep.set_defaults(handler=_cmd_report)


def _add_diagnose_command(commands: argparse._SubParsersAction) -> None:
    diagnose = commands.add_parser("diagnose", help="measure the remedies of every compiled cell compile made slower "
                                   "(docs/diagnosis.md)")
    diagnose.add_argument("study", type=_path, help="the study folder, such as reports/hf-guide-h200")
    _add_limit_flags(diagnose)
    diagnose.set_defaults(handler=_cmd_diagnose)


def _add_coverage_command(commands: argparse._SubParsersAction) -> None:
    coverage = commands.add_parser("coverage", help="check on real records that a cell's interval covers another "
                                   "machine's figure, each machine held out in turn (docs/measurement.md)")
    coverage.add_argument("studies", nargs="+", type=_path, help="study folders or results.jsonl files (several: "
                          "their records together, such as reports/hf-guide-h200 reports/anchors-h200)")
    coverage.set_defaults(handler=_cmd_coverage)


def _add_reproduce_command(commands: argparse._SubParsersAction) -> None:
    again = commands.add_parser("reproduce", help="re-run a published study in the versions it was measured "
                                "with, and compare the two (docs/reproducing.md)")
    again.add_argument("study", type=_path, help="the study folder, such as reports/cpu-quick")
    again.add_argument("--out", type=_path, default=None, help="study folder of the re-run (default: "
                       "<study>-reproduced beside it)")
    again.add_argument("--environment", default=None, help="which of the study's environments "
                       "(environments/<name>.txt) where its records hold several")
    again.add_argument("--force", action="store_true", help="measure again cells the re-run folder already holds")
    again.add_argument("--python", default=None, help="the interpreter that builds the environment (default: "
                       "this one's base); its major.minor should be the study's")
    again.add_argument("--tolerance", type=float, default=0.10, help="the between-run noise a verdict allows "
                       "beyond the intervals (default 0.10)")
    again.add_argument("--locales", default="en,ar,es", help="comma-separated locales of the comparison page")
    again.set_defaults(handler=_cmd_reproduce)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench_utils", description="torch.compile inference speed-up study")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in (_add_env_command, _add_validate_timer_command, _add_models_command, _add_cell_command,
                        _add_run_command, _add_report_command, _add_diagnose_command, _add_coverage_command,
                        _add_reproduce_command):
        add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .kernel import kernel_folder
    from .records.results_file import skipped_lines_said
    from .study.runner.clean_stop import Interrupt

    args = build_parser().parse_args(argv)
    # a line of a results file any command skips is said on stderr, once: a cell is never "not measured"
    # unexplained; the kernels' connection files and sockets go with the command, Ctrl-C or not
    with kernel_folder(), skipped_lines_said(), Interrupt() as interrupt:  # ``run`` installs its own, finer stop
        try:
            return args.handler(args)
        except UserError as exc:  # what the user asked cannot be done: one clear line, no traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except BaseException as exc:  # Ctrl-C, or what a kernel ended by it raised on the way out: one line
            if interrupt.requested:
                print(f"interrupted: {args.command} stopped; what it had written whole stays, nothing "
                      "half-written is published: run it again to finish", file=sys.stderr)
                return 130
            if not isinstance(exc, Exception):  # SystemExit, a KeyboardInterrupt no handler took: as raised
                raise
            traceback.print_exc()  # any other error is a bug, not bad input: a ValueError from numpy included
            print(f"bug: {args.command} stopped on an unexpected {type(exc).__name__}: not a mistake in what you "
                  "asked but a bug in bench_utils; please report it with the traceback above", file=sys.stderr)
            return os.EX_SOFTWARE  # 70 (sysexits.h's internal software error): apart from 1, a cell that errored
