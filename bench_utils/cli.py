"""``python -m bench_utils``: the command line of the study.

Sub-commands: ``env`` (print this machine's environment) and ``validate-timer``
(check the timer against torch.utils.benchmark and triton's do_bench).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence


def _cmd_env(args: argparse.Namespace) -> int:
    from .env import capture_environment, format_environment

    environment = capture_environment()
    print(json.dumps(environment, indent=2) if args.json else format_environment(environment))
    return 0


def _cmd_validate_timer(args: argparse.Namespace) -> int:
    from .timer_check import format_timer_check, validate_timer

    result = validate_timer(args.device, size=args.size, runs=args.runs, rounds=args.rounds,
                            min_run_time=args.min_run_time)
    print(json.dumps(result, indent=2) if args.json else format_timer_check(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if args.strict and not result["within_tolerance"] else 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench_utils",
                                     description="torch.compile inference speed-up study")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    env = commands.add_parser("env", help="print the environment every record carries")
    env.add_argument("--json", action="store_true", help="print JSON instead of a table")
    env.set_defaults(handler=_cmd_env)

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
    check.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    check.add_argument("--strict", action="store_true", help="exit 1 when a ratio is off by > 5 %%")
    check.set_defaults(handler=_cmd_validate_timer)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as exc:  # bad input: one clear line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
