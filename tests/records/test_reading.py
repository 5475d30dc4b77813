"""Reading a record's blocks (``records.reading``): each block as itself, or empty where absent or null."""

import json
from pathlib import Path

import pytest

from bench_utils.records.schema import BLOCK_TYPES
from bench_utils.records.reading import block, eager_memory, energy_side, last_error_line, part
from sample_records import CELL, ENV, ok_record

FIXTURE = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"


def test_a_block_reads_as_itself_and_as_empty_where_absent_or_null():
    record = ok_record(memory={"rss_peak_increase_bytes": 5, "eager": {"rss_peak_increase_bytes": 3}})
    assert block(record, "latency") is record["latency"] and block(record, "memory")["rss_peak_increase_bytes"] == 5
    assert block(record, "speedup") == {}  # an eager-like record has none
    failed = ok_record(status="oom", error="out of memory", measurement=None)
    assert failed["latency"] is None and block(failed, "latency") == {} and block(failed, "throughput") == {}
    assert eager_memory(record) == {"rss_peak_increase_bytes": 3} and eager_memory(failed) == {}


def test_a_misspelt_block_name_is_an_error_not_an_empty_block():
    with pytest.raises(KeyError, match="no record block 'latecy'"):
        block(ok_record(), "latecy")


def test_parts_and_sides_read_as_empty_where_absent_or_null():
    record = ok_record(compile={"portable_cache": None, "batch_shapes": {"compiled_at_batch_size": 1}},
                       extra={"energy": {"eager": {"joules_per_inference": 0.5}, "compiled": None}})
    compiled = block(record, "compile")
    assert part(compiled, "portable_cache") == {} and part(compiled, "batch_shapes")["compiled_at_batch_size"] == 1
    assert energy_side(record, "eager")["joules_per_inference"] == 0.5 and energy_side(record, "compiled") == {}


def test_records_written_before_the_typed_blocks_read_block_by_block():
    for line in FIXTURE.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for name in BLOCK_TYPES:
            assert isinstance(block(record, name), dict), name
        assert block(record, "environment")["torch_version"] == "2.14.1+cu130"
        assert bool(block(record, "latency")) == (record["status"] == "ok")


def test_the_last_line_of_the_error_is_its_exception():
    from bench_utils import make_record

    record = make_record(CELL, status="error", error="Traceback:\n  x\nRuntimeError: boom\n", environment=ENV)
    assert last_error_line(record) == "RuntimeError: boom" and last_error_line(ok_record()) is None
