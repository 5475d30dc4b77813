import json

from bench_utils.report import context
from bench_utils.report.i18n import Catalog
from bench_utils.report.markdown import ltr
from sample_records import R, ok_record


def test_cudnns_version_reads_as_its_release():
    # the H200's records hold 91900: cuDNN 9.19.0 (cuDNN 8 counted minors by 100 of a thousand)
    assert context.cudnn_version_text(91900) == "9.19.0"
    assert context.cudnn_version_text(90100) == "9.1.0"
    assert context.cudnn_version_text(8902) == "8.9.2"
    assert context.cudnn_version_text("9.19.0") == "9.19.0"  # a record that wrote it so keeps it


def test_the_environment_table_names_its_keys_and_shows_cudnns_tf32_in_every_language():
    environment = {"torch_version": "2.11.0+cu130", "cudnn_version": 91900, "tf32_matmul": False,
                   "tf32_cudnn": True, "ram_total_bytes": 135148564480, "gpus": [{"index": 0, "name": "NVIDIA H200"}],
                   "timestamp_utc": "2026-11-26T08:33:39+00:00"}
    record = R(ok_record(device="cuda", environment=environment))
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        ((_, table),) = context.environment_tables([record], catalog)
        rows = dict(line.strip("|").split(" | ", 1) for line in table.splitlines()[2:])
        rows = {key.strip(): value.strip() for key, value in rows.items()}
        assert rows[catalog.t("env_cudnn_version")] == ltr("9.19.0", catalog)
        assert rows[catalog.t("env_tf32_cudnn")] == catalog.t("setting_on")
        assert rows[catalog.t("env_tf32_matmul")] == catalog.t("setting_off")
        assert rows[catalog.t("env_ram_total_bytes")] == ltr(f"{catalog.number(125.9, 1)} GiB", catalog)
        assert not any(key in table for key in context.ENVIRONMENT_KEYS)  # no raw keys


def test_records_from_two_machines_of_one_name_are_named_each_with_its_count():
    from bench_utils.report.context import environment_tables
    from bench_utils.report.i18n import Catalog
    from sample_records import R, ok_record

    def on(uuid, commit):
        return R(ok_record(device="cuda", environment={
            "torch_version": "2.11.0", "git_commit": commit,
            "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": f"GPU-{uuid}-0ab2-4c1e-9f00-000000000000"}]}))

    (caption, table), = environment_tables([on("bdc136f9", "f9ea3be1"), on("566418d4", "fea7b02a"),
                                            on("566418d4", "fea7b02a")], Catalog("en"))
    assert "| GPUs measured on (records) | bdc136f9 (1), 566418d4 (2) |" in table
    assert "| Project commits measured at (records) | f9ea3be (1), fea7b02 (2) |" in table
    (_, alone), = environment_tables([on("bdc136f9", "f9ea3be1")], Catalog("es"))
    assert "(registros)" not in alone  # one machine: nothing to tell apart
    assert "where they differ" not in table  # measured alike on both


def test_a_protocol_that_differs_between_machines_is_named_with_the_gpus_it_ran_on():
    def on(uuid, threads, runs, beside=None):
        record = ok_record(device="cuda", environment={
            "torch_version": "2.11.0", "torch_num_threads": threads,
            "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": f"GPU-{uuid}-0ab2-4c1e-9f00-000000000000"}]})
        record["config"] = {**record["config"], "runs": runs, "beside_compiles": beside}
        return R(record)

    records = [on("bdc136f9", 16, 300), on("566418d4", 16, 300), on("05941d95", 4, 100, "paused")]
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        (_, table), = context.environment_tables(records, catalog)
        rows = {key.strip(): value.strip() for key, value in
                (line.strip("|").split(" | ", 1) for line in table.splitlines()[2:])}
        assert rows[catalog.t("env_torch_num_threads_all")] == ltr("16 (bdc136f9, 566418d4), 4 (05941d95)", catalog)
        assert rows[catalog.t("env_runs_all")] == ltr("300 (bdc136f9, 566418d4), 100 (05941d95)", catalog)
        assert rows[catalog.t("env_beside_compiles_all")] == ltr("- (bdc136f9, 566418d4), paused (05941d95)", catalog)
        assert catalog.t("env_blocks_all") not in rows  # the same blocks everywhere: not listed


def test_the_methodology_counts_the_cells_timed_beside_compile_processes_and_those_timed_with_them_paused():
    import pandas as pd

    base = {"status": "ok", "timer": "cuda_event", "warmup": 10, "runs": 300, "weights": "random", "ci_low": None,
            "replicates": 1}
    data = pd.DataFrame([{**base, "beside_compiles": "paused"}, {**base, "beside_compiles": "paused"},
                         {**base, "beside_compiles": "compiling"}, {**base, "beside_compiles": None}])
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        text = context.methodology_text(data, catalog)
        assert catalog.t("methodology_beside_paused", cells=ltr("2", catalog)) in text
        assert catalog.t("methodology_beside_compiling", cells=ltr("1", catalog)) in text
    alone = context.methodology_text(data.assign(beside_compiles=None), Catalog("en"))
    assert "compile processes" not in alone
