from pathlib import Path

from babel.lists import format_list
import pandas as pd
import pytest

from bench_utils.report import context, geometric_means, guide_table
from bench_utils.report import tables as report_tables
from bench_utils.report.frame import frame, latest_records, results_files
from bench_utils.report.markdown import LRI, PDI, ltr
from bench_utils.report.i18n import Catalog
from sample_records import Rs

FIXTURE = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"


@pytest.fixture(scope="module")
def records():
    return latest_records([FIXTURE])


@pytest.fixture(scope="module")
def data(records):
    return frame(records)


def test_the_latest_record_of_each_cell_wins_across_studies(records, data):
    # 9 lines; 3 cells were measured in both runs, and the later run's record wins
    assert len(data) == len(records) == 6
    assert set(data["status"]) == {"ok", "oom", "error"}
    mobilenet = data[(data["model"] == "mobilenet") & (data["mode"] == "eager")]
    assert list(mobilenet["status"]) == ["error"]  # ok in the smoke run, error in the later one
    assert data["device_name"].str.startswith("CPU").all()


def test_every_model_appears_in_the_table_of_its_device_and_batch(data):
    tables = dict(guide_table.guide_tables(data, Catalog("en")))
    for (device, batch), group in data.groupby(["device_name", "batch_size"]):
        table = tables[f"{device}, batch size {batch}"]
        for label in group["label"]:
            assert f"| {label} |" in table


def test_oom_and_error_cells_say_so(data):
    tables = dict(guide_table.guide_tables(data, Catalog("en")))
    batch2 = tables[next(c for c in tables if c.endswith("batch size 2"))]
    assert "| timm:resnet18 | OOM |" in batch2
    batch1 = tables[next(c for c in tables if c.endswith("batch size 1"))]
    # its eager cell failed in a later run, but its compiled cell's pairs measured eager: that figure, flagged
    row = next(line for line in batch1.splitlines() if "| MobileNet |" in line)
    compiled = data[(data["model"] == "mobilenet") & (data["mode"] == "default")].iloc[0]
    assert f"| MobileNet | {compiled['eager_interleaved_ms']:,.2f} |" in row and "eager cell: error" in row
    arabic = dict(guide_table.guide_tables(data, Catalog("ar")))
    assert any("نفاد الذاكرة" in table for table in arabic.values())


def test_speedup_with_interval_and_flags(data):
    tables = dict(guide_table.guide_tables(data, Catalog("en")))
    batch1 = tables[next(c for c in tables if c.endswith("batch size 1"))]
    compiled = data[(data["mode"] == "default") & (data["status"] == "ok")].iloc[0]
    row = next(line for line in batch1.splitlines() if f"| {compiled['label']} |" in line)
    assert f"| {compiled['speedup']:.2f}× | {compiled['ci_low']:.2f}–{compiled['ci_high']:.2f} |" in row
    noisy = pd.Series({"status": "ok", "cv": 0.5, "outlier_fraction": 0.0})
    assert guide_table.is_noisy(noisy) and not guide_table.is_noisy(noisy.replace(0.5, 0.01))


def test_drift_between_standalone_and_interleaved_eager_is_flagged(data):
    drifted = data.copy()
    compiled = (drifted["model"] == "mobilenet") & (drifted["mode"] == "default")
    eager = (drifted["model"] == "mobilenet") & (drifted["mode"] == "eager")
    drifted.loc[eager, ["status", "mean_ms"]] = ["ok", 100.0]
    drifted.loc[compiled, "eager_interleaved_ms"] = 50.0
    batch1 = dict(guide_table.guide_tables(drifted, Catalog("en")))
    row = next(line for table in batch1.values() for line in table.splitlines() if "| MobileNet |" in line)
    assert "drift" in row
    drifted.loc[compiled, "eager_interleaved_ms"] = 95.0  # within 10 %
    batch1 = dict(guide_table.guide_tables(drifted, Catalog("en")))
    row = next(line for table in batch1.values() for line in table.splitlines() if "| MobileNet |" in line)
    assert "drift" not in row


def test_parity_failure_is_flagged(data):
    broken = data.copy()
    broken.loc[broken["mode"] == "default", "parity"] = "fail"
    tables = dict(guide_table.guide_tables(broken, Catalog("en")))
    assert any("parity failed" in table for table in tables.values())


def test_tables_are_pipe_tables_and_rtl_numbers_are_isolated(data):
    for caption, table in guide_table.guide_tables(data, Catalog("ar")):
        lines = table.splitlines()
        assert lines[0].startswith("| ") and lines[1].startswith("|---")
        assert LRI in table and PDI in table
    assert LRI not in geometric_means.geomean_table(data, Catalog("en"))


def test_geomean_compile_memory_reference_methodology(data, records):
    catalog = Catalog("en")
    compiled = data[(data["mode"] == "default") & (data["status"] == "ok")]
    assert f"{compiled['speedup'].iloc[0]:.2f}×" in geometric_means.geomean_table(data, catalog)
    assert "| MobileNet | default | 1 |" in report_tables.compile_table(data, catalog)
    assert "| MobileNet | default | 1 |" in report_tables.memory_table(data, catalog)
    # the fixture's compiled model (MobileNet, batch 1, default) is in the guide's tables
    reference = report_tables.reference_table(data, catalog)
    assert "A100 (torch 2.0.1)" in reference and "| MobileNet | 1 | default |" in reference
    text = context.methodology_text(data, catalog)
    assert "time.perf_counter_ns" in text and "random" in text
    (device, table), = context.environment_tables(records, catalog)
    assert f"| {catalog.t('env_torch_version')} |" in table and device.startswith("CPU")


def test_missing_results_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no results at"):
        results_files([tmp_path / "nope"])


def _study(tmp_path, name, torch_version, eager_ms, compiled_ms):
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement
    from bench_utils.records.results_file import append_record

    environment = {"torch_version": torch_version, "cpu_model": "EPYC", "cpu_count_logical": 2, "gpus": [],
                   "timestamp_utc": "2026-11-22T00:00:00+00:00"}
    path = tmp_path / name / "results.jsonl"
    cell = dict(study=name, task="image-classification", model="resnet", batch_size=1, dtype="float32",
                device="cpu")
    append_record(path, make_record({**cell, "compile_mode": "eager"}, environment=environment,
                                    measurement=Measurement([eager_ms] * 3, 1.0)))
    append_record(path, make_record(
        {**cell, "compile_mode": "default"}, environment=environment, measurement=Measurement([compiled_ms] * 3, 900.0),
        extra={"speedup": {"mean": eager_ms / compiled_ms, "mean_ci95": [1.0, 3.0],
                           "eager_mean_ms": eager_ms}, "parity": {"parity": "pass"}}))
    return path.parent


def test_two_torch_versions_are_shown_apart_never_averaged(tmp_path):
    from bench_utils.report import plots

    old, new = _study(tmp_path, "old", "2.14.1", 10.0, 8.0), _study(tmp_path, "new", "2.15.0", 10.0, 4.0)
    data = frame(latest_records([old, new]))
    assert len(data) == 4
    assert sorted(set(data["environment"])) == ["CPU (EPYC) · torch 2.14.1", "CPU (EPYC) · torch 2.15.0"]
    catalog = Catalog("en")
    geomean = geometric_means.geomean_table(data, catalog)
    assert "| 1.25×" in geomean and "| 2.50×" in geomean and "1.77×" not in geomean  # not the pooled mean
    captions = [caption for caption, _ in guide_table.guide_tables(data, catalog)]
    assert captions == ["CPU (EPYC) · torch 2.14.1, batch size 1", "CPU (EPYC) · torch 2.15.0, batch size 1"]
    comparison = report_tables.comparison_table(data, catalog)
    header = comparison.splitlines()[0]
    assert "CPU (EPYC) · torch 2.14.1" in header and "CPU (EPYC) · torch 2.15.0" in header
    assert "| ResNet | 1 | default | float32 | 1.25× (1.00–3.00) | 2.50× (1.00–3.00) |" in comparison
    figure = plots.percentage(data, "CPU (EPYC) · torch 2.15.0", 1, "default", catalog)
    heights = [patch.get_height() for patch in figure.axes[0].patches]
    assert heights == [150.0]  # only that environment's bar: 2.5x is +150 %
    # one environment: no comparison table, and environments are plain device names
    single = frame(latest_records([new]))
    assert report_tables.comparison_table(single, catalog) is None
    assert set(single["environment"]) == {"CPU (EPYC)"}


def test_two_records_claiming_one_row_warn_and_the_later_is_shown(tmp_path):
    import json

    from bench_utils.report.frame import DuplicateCellWarning

    first = _study(tmp_path, "a", "2.15.0", 10.0, 8.0)
    second = _study(tmp_path, "b", "2.15.0", 10.0, 5.0)
    lines = (second / "results.jsonl").read_text().splitlines()
    changed = []
    for line in lines:  # the same cell measured with other settings, later
        record = json.loads(line)
        record["config"]["runs"] = 99
        record["environment"]["timestamp_utc"] = "2026-11-23T00:00:00+00:00"
        changed.append(json.dumps(record))
    (second / "results.jsonl").write_text("\n".join(changed) + "\n")
    with pytest.warns(DuplicateCellWarning) as caught:
        records = latest_records([first, second])
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and all("two records claim one cell" in m for m in messages)
    assert all("(resnet, batch 1, " in m and ", CPU (EPYC)): " in m for m in messages)  # the row's device
    assert any("a/results.jsonl:2 and b/results.jsonl:2" in m for m in messages)
    assert len(records) == 2 and {r.cell.study for r in records} == {"b"}


def test_device_words_and_mode_names_are_in_the_pages_language(tmp_path):
    from sample_records import cpu_and_gpu_records

    records = cpu_and_gpu_records("reduce-overhead", compile={"cold_ms": 800.0})
    data = frame(records)
    assert set(data["environment"]) == {"CPU (unknown)", "GPU"}  # grouping stays locale-neutral

    def pages(catalog):
        parts = [caption + "\n" + table for caption, table in guide_table.guide_tables(data, catalog)]
        parts += [geometric_means.geomean_table(data, catalog), report_tables.comparison_table(data, catalog),
                  report_tables.compile_table(data, catalog), report_tables.memory_table(data, catalog)]
        parts += [device + "\n" + table for device, table in context.environment_tables(Rs(records), catalog)]
        return "\n".join(parts)

    english = pages(Catalog("en"))
    assert "CPU (unknown)" in english and "| GPU |" in english and "| reduce-overhead |" in english
    arabic, spanish = pages(Catalog("ar")), pages(Catalog("es"))
    for word in ("CPU", "GPU", "unknown"):
        assert word not in arabic, word
    assert "وحدة المعالجة المركزية (غير معروف)" in arabic and "وحدة معالجة الرسومات" in arabic
    assert f"تقليل الحمل الزائد ({LRI}reduce-\u2060overhead{PDI})" in arabic
    assert "unknown" not in spanish and "CPU (desconocido)" in spanish
    assert "| menos sobrecarga (reduce-overhead) |" in spanish
    assert "Compilado, menos sobrecarga (reduce-overhead) (ms)" in spanish  # the guide table's header


def test_the_startup_table_sets_cold_warm_and_aot_start_ups_beside_one_eager_call():
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    def record(mode, compile_block):
        return make_record(dict(study="s", task="image-classification", model="resnet", batch_size=1,
                                compile_mode=mode, dtype="float32", device="cpu"),
                           environment={"torch_version": "2.15.0", "cpu_model": "Test Processor"},
                           measurement=Measurement(times_ms=[20.0, 20.0], first_call_ms=900.0),
                           compile=compile_block)

    records = [record("eager", {}),
               record("default", {"cold_calls_ms": [30_000.0], "warm_calls_ms": [4_000.0]}),
               record("aot-inductor", {"cold_calls_ms": [50_000.0], "warm_calls_ms": [300.0],
                                       "aot": {"fresh_process": {"import_s": 4.0, "load_s": 0.5,
                                                                 "first_call_s": 0.02}}})]
    table = report_tables.startup_table(frame(records), Catalog("en"))
    rows = {line.split(" | ")[2]: line for line in table.splitlines()[2:]}
    assert set(rows) == {"default", "aot-inductor"}
    # one eager call: 20 ms (in ms: seconds read 0.02), the eager cell's (these cells kept no pairs)
    assert "| 20.00 (eager cell) | 30.0 | 4.00 | – |" in rows["default"]
    assert "| 20.00 (eager cell) | 50.0 | 0.30 | 4.52 |" in rows["aot-inductor"]
    arabic = report_tables.startup_table(frame(records), Catalog("ar"))
    assert "Eager" not in arabic and "CPU" not in arabic and Catalog("ar").t("col_fresh_process_s") in arabic


def test_the_first_compile_of_a_model_and_mode_in_its_kernel_is_marked_and_its_warm_break_even_shown():
    # Segformer on the H200: 16.7 s cold at batch 1, the kernel's first compile (warm: 1.6 s), 10.2 s at batch 4
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    def compiled(batch, cold_ms, warm_ms, **ahead):
        return make_record(dict(study="s", task="image-segmentation", model="segformer", batch_size=batch,
                                compile_mode="default", dtype="float32", device="cuda"),
                           environment={"torch_version": "2.11.0", "gpus": [{"index": 0, "name": "NVIDIA H200"}]},
                           measurement=Measurement(times_ms=[4.13, 4.13], first_call_ms=cold_ms),
                           compile={"cold_ms": cold_ms, "warm_ms": warm_ms, "break_even_calls": 10_429, **ahead},
                           extra={"speedup": {"mean": 1.39, "mean_ci95": [1.3, 1.5], "eager_mean_ms": 5.73}})

    # batch 16 compiled ahead: a compile process's cold compile, then the kernel's warm one (not the kernel's first)
    ahead = {"cold_measured_in": "a compile process beside the measuring kernel (6 cores; 2 compile process(es), "
                                 "4 cores measuring)", "compiled_ahead": {"cores": 6, "compile_processes": 2}}
    data = frame([compiled(1, 16_662.0, 1_559.0), compiled(4, 10_150.0, None), compiled(16, 9_800.0, 1_500.0, **ahead)])
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        table = report_tables.compile_table(data, catalog)
        assert catalog.t("col_break_even_warm") in table and report_tables.AHEAD_MARK in catalog.t("compile_text")
        first, later, compiled_ahead = [line for line in table.splitlines() if "segformer" in line.lower()]
        assert report_tables.FIRST_IN_KERNEL_MARK in first and report_tables.FIRST_IN_KERNEL_MARK not in later
        assert report_tables.AHEAD_MARK in compiled_ahead and report_tables.FIRST_IN_KERNEL_MARK not in compiled_ahead
        assert report_tables.AHEAD_MARK not in first + later
        warm = ltr(catalog.number(975, 0), catalog)  # 1559 ms over the 1.60 ms a call saves, rounded up
        assert first.rstrip(" |").endswith(warm) and later.rstrip(" |").endswith("–")


def _energy_record(model, *, eager_window_s, compiled_window_s, reasons=()):
    """A compiled cell (eager 7.08 ms, compiled 5.22 ms timed) whose energy windows took ``*_window_s`` for 100
    calls, the GPU reporting ``reasons`` at the end of the timed runs and of the compiled window."""
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    def side(window_s, end):
        return {"joules_per_inference": 1.5, "region_s": window_s, "calls": 100, "throttle_reasons_start": [],
                "throttle_reasons_end": list(end)}

    energy = {"timed_runs": {"throttle_reasons_start": [], "throttle_reasons_end": list(reasons)},
              "eager": side(eager_window_s, ["GpuIdle"]), "compiled": side(compiled_window_s, reasons)}
    return make_record(dict(study="s", task="image-segmentation", model=model, batch_size=4, compile_mode="default",
                            dtype="float32", device="cuda"),
                       environment={"torch_version": "2.11.0", "gpus": [{"index": 0, "name": "NVIDIA H200"}]},
                       measurement=Measurement(times_ms=[5.22, 5.22], first_call_ms=9000.0),
                       extra={"speedup": {"mean": 1.36, "mean_ci95": [1.3, 1.4], "eager_mean_ms": 7.08},
                              "energy": energy})


def test_an_energy_window_of_another_pace_gives_both_and_a_throttled_figure_names_its_reason():
    # Segformer at batch 4 on the H200: eager's window ran 14.75 ms a call against 7.08 ms timed;
    # DETR at batch 16: SwPowerCap at 688 W
    data = frame([_energy_record("segformer", eager_window_s=1.475, compiled_window_s=0.53),
                  _energy_record("detr", eager_window_s=0.72, compiled_window_s=0.53, reasons=["SwPowerCap"])])
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        table = report_tables.hardware_table(data, catalog)
        rows = {model: line for line in table.splitlines() for model in ("segformer", "detr")
                if model in line.lower()}
        paced = catalog.t("energy_pace_differs", window=ltr(catalog.number(14.75, 2), catalog),
                          timed=ltr(catalog.number(7.08, 2), catalog))
        assert paced in rows["segformer"] and rows["segformer"].count(paced.split("{")[0][:4]) == 1
        throttled = catalog.t("flag_throttled", reasons=ltr("SwPowerCap", catalog))
        assert f"({throttled})" in rows["detr"] and throttled not in rows["segformer"]
        assert rows["detr"].count(throttled) == 1  # the compiled window's; eager's ended idle
        guide = "\n".join(table for _, table in guide_table.guide_tables(data, catalog))
        flagged = [line for line in guide.splitlines() if throttled in line]
        assert len(flagged) == 1 and "detr" in flagged[0].lower()


def test_joules_are_per_batch_in_every_language():
    # one call is the whole batch: "per inference" read as per image
    for locale, word in (("en", "inference"), ("es", "inferencia"), ("ar", "استدلال")):
        catalog = Catalog(locale)
        for key in ("col_joules_eager", "col_joules_compiled", "hardware_text", "col_work_calls", "axis_work_ms",
                    "col_compiled_graphs", "why_sentence", "why_graph_breaks", "why_text", "compile_text"):
            assert word not in catalog.messages[key], (locale, key)


def _variant_record(mode, batch=1, speedup=None, compile_block=None, **variant):
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    extra = {"speedup": {"mean": speedup, "mean_ci95": [speedup - 0.1, speedup + 0.1], "eager_mean_ms": 20.0}} \
        if speedup else None
    return make_record(dict(study="s", task="image-classification", model="resnet", batch_size=batch,
                            compile_mode=mode, dtype="float32", device="cpu", **variant),
                       environment={"torch_version": "2.15.0", "cpu_model": "Test Processor"},
                       measurement=Measurement(times_ms=[20.0, 20.0], first_call_ms=900.0),
                       compile=compile_block, extra=extra)


def test_a_portable_cache_fills_the_fresh_process_column_and_a_miss_is_flagged():
    def portable(hits):
        return {"cold_calls_ms": [30_000.0], "warm_calls_ms": [4_000.0],
                "portable_cache": {"import_s": 3.0, "model_load_s": 0.5, "load_artifacts_s": 0.1,
                                   "first_calls_s": [1.4], "first_answer_s": 1.5, "fx_graph_cache_hits": hits,
                                   "fx_graph_cache_misses": 1 - hits}}

    hit = [_variant_record("eager"), _variant_record("default", compile_block=portable(1))]
    table = report_tables.startup_table(frame(hit), Catalog("en"))
    assert "| 30.0 | 4.00 | 5.00 |" in table  # imports 3 + model build 0.5 + cache load and first call 1.5
    missed = report_tables.startup_table(frame([hit[0], _variant_record("default", compile_block=portable(0))]),
                                         Catalog("es"))
    assert f"5,00 ({Catalog('es').t('flag_cache_missed')})" in missed


def test_variants_are_rows_and_columns_of_their_own_in_every_locale():
    records = [_variant_record("eager"), _variant_record("default", speedup=1.5),
               _variant_record("eager", memory_format="channels_last"),
               _variant_record("default", speedup=1.8, memory_format="channels_last"),
               _variant_record("default", batch=1, speedup=1.4, shapes="dynamic",
                               compile_block={"batch_shapes": {"shapes": "dynamic", "compiled_at_batch_size": 1,
                                                               "recompiles_at_this_batch_size": 0}}),
               _variant_record("default", batch=4, speedup=1.9),
               _variant_record("eager", batch=4),
               _variant_record("default", batch=4, speedup=1.7, shapes="dynamic",
                               compile_block={"batch_shapes": {"shapes": "dynamic", "compiled_at_batch_size": 1,
                                                               "recompiles_at_this_batch_size": 1}})]
    data = frame(records)
    assert len(data) == len(records)  # no variant replaces another (each its own cell)
    assert set(data["label"]) == {"ResNet", "ResNet (channels_last)"}
    assert set(data["mode"]) == {"eager", "default", "default+dynamic-batch"}
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        (_, guide), *_ = guide_table.guide_tables(data, catalog)
        from bench_utils.report.markdown import mode_label

        one_compile = mode_label("default+dynamic-batch", catalog)
        assert "dynamic-batch" not in one_compile and one_compile in guide  # a column of its own
        assert "ResNet (channels_last)" in guide and "1.8" in guide.replace(",", ".")
        dynamic = report_tables.dynamic_batch_table(data, catalog)
        lines = dynamic.splitlines()[2:]
        assert len(lines) == 2 and catalog.t("col_batch_recompiles") in dynamic
        # batch 4: a compilation per batch size 1.90x, the one compilation 1.70x, 1 graph compiled there
        assert lines[1].replace(",", ".").count("1.90") == 1 and "1.70" in lines[1].replace(",", ".")
        assert [cell.strip(" \u2066\u2069") for cell in lines[1].split("|")[-3:-1]] == ["1", "1"]


def test_a_cuda_graph_mode_cell_that_ran_without_cuda_graphs_is_flagged():
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    def cell(model, pool_bytes, cuda_graphs, mode="reduce-overhead"):
        return make_record(dict(study="s", task="image-classification", model=model, batch_size=1, compile_mode=mode,
                                dtype="float32", device="cuda"), environment={},
                           measurement=Measurement(times_ms=[5.0, 5.0], first_call_ms=900.0),
                           memory={"cuda_peak_allocated_increase_bytes": 0, "cuda_graph_pool_bytes": pool_bytes},
                           compile={"cold_ms": 880.0, "cuda_graphs": cuda_graphs,
                                    "cuda_graphs_requested": mode == "reduce-overhead"},
                           extra={"speedup": {"mean": 2.0, "mean_ci95": [1.9, 2.1]}})

    data = frame([cell("resnet", 500 * 2**20, True), cell("vit", 0, True), cell("detr", None, False),
                  cell("convnext", 500 * 2**20, "partial"), cell("mobilenet", None, False, mode="default")])
    table = "\n".join(table for _, table in guide_table.guide_tables(data, Catalog("en")))
    rows = {label: line for line in table.splitlines() for label in data["label"] if f"| {label} |" in line}
    flagged = {label for label, line in rows.items() if "no CUDA graphs" in line}
    assert flagged == set(data[data["model"].isin(["vit", "detr", "convnext"])]["label"])


def test_a_gate_judged_without_float64_and_a_batch_size_that_recompiled_are_flagged():
    from bench_utils.variants.parity import compare_outputs, unjudged

    def judged(reference):
        import torch

        eager = torch.ones(2, 3)
        if reference == "none":
            return unjudged("float32", True, "accuracy gate not measured: OutOfMemoryError")
        return compare_outputs(eager, eager.clone(), "float32", tf32=True,
                               fp64=eager.double() if reference == "float64" else None, fp64_missing="OOM")

    def compiled(model, reference, recompiles=0):
        record = _variant_record("default", speedup=1.5, shapes="dynamic",
                                 compile_block={"batch_shapes": {"shapes": "dynamic", "compiled_at_batch_size": 1,
                                                                 "recompiles_at_this_batch_size": recompiles}})
        record["cell"]["model"] = model
        record["parity"] = judged(reference)
        return record

    data = frame([compiled("resnet", "float64"), compiled("vit", "same-dtype"), compiled("detr", "none"),
                  compiled("convnext", "float64", recompiles=1)])
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        table = "\n".join(table for _, table in guide_table.guide_tables(data, catalog))
        rows = {model: line for line in table.splitlines() for model, label in zip(data["model"], data["label"])
                if f" {label} " in line or f"{LRI}{label}{PDI}" in line}
        eager_only = catalog.t("flag_parity_same_dtype", tolerance=ltr("float32+tf32", catalog))
        assert [model for model, line in rows.items() if eager_only in line] == ["vit"]
        assert [model for model, line in rows.items() if catalog.t("flag_parity_none") in line] == ["detr"]
        assert [model for model, line in rows.items() if catalog.t("flag_batch_recompiled") in line] == ["convnext"]


def test_a_gate_that_could_not_fail_is_flagged_not_informative_in_every_language():
    # MobileNet's random-weight logits (about 1e-25) passed a gate of tolerance 1e-3 whatever compile made of them
    import torch

    from bench_utils.variants.parity import compare_outputs

    def compiled(model, scale):
        record = _variant_record("default", speedup=1.5)
        record["cell"]["model"] = model
        outputs = torch.full((2, 3), scale)
        record["parity"] = compare_outputs(outputs, outputs.clone(), "float32", tf32=True, fp64=outputs.double())
        return record

    data = frame([compiled("mobilenet", 1e-25), compiled("resnet", 3.0)])
    assert list(data.sort_values("model")["parity_blind"]) == [True, False]
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        table = "\n".join(table for _, table in guide_table.guide_tables(data, catalog))
        rows = {model: line for line in table.splitlines() for model, label in zip(data["model"], data["label"])
                if f" {label} " in line or f"{LRI}{label}{PDI}" in line}
        assert [model for model, line in rows.items() if catalog.t("flag_gate_blind") in line] == ["mobilenet"]


def test_a_memory_figure_no_method_could_see_reads_not_measurable_in_every_language():
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    record = make_record(dict(study="s", task="image-classification", model="resnet", batch_size=1,
                              compile_mode="default", dtype="float32", device="cpu"), environment={},
                         measurement=Measurement(times_ms=[5.0, 5.0], first_call_ms=900.0),
                         memory={"rss_peak_increase_bytes": 0, "eager": {"rss_peak_increase_bytes": 0,
                                                                         "cpu_activation_peak_bytes": 12 * 2**20}},
                         compile={"cold_ms": 880.0}, extra={"speedup": {"mean": 2.0, "mean_ci95": [1.9, 2.1]}})
    data = frame([record])
    for locale, words in (("en", "not measurable here"), ("ar", "غير قابل للقياس هنا"), ("es", "no medible aquí")):
        row = next(line for line in report_tables.memory_table(data, Catalog(locale)).splitlines() if "ResNet" in line)
        assert row.split("|")[6].strip() == words  # the compiled side's peak increase: no figure, never 0.0
    english = report_tables.memory_table(data, Catalog("en"))
    assert "| 12.0 | not measurable here |" in english  # eager's profiler figure, compiled's none


def test_each_modes_speedup_stands_beside_the_eager_it_was_measured_against():
    # the H200's ResNet-50 at batch 1: eager read 3.69 ms beside default and 5.06 ms beside reduce-overhead;
    # one eager column made reduce-overhead's 5.58x read as 3.69 / 0.91 = 4.05x
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from test_frame import _paired_record

    data = frame([_paired_record("default", 3.69, 2.34), _paired_record("reduce-overhead", 5.06, 0.91)])
    (caption, table), = guide_table.guide_tables(data, Catalog("en"))
    header, _, row = table.splitlines()
    assert ("| Eager beside default (ms) | Compiled, default (ms) | Speed-up, default | 95 % CI | "
            "Eager beside reduce-overhead (ms) | Compiled, reduce-overhead (ms) |") in header
    assert "| p50, default (ms) | p99, default (ms) |" in header
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2:4] == ["3.69", "2.34"] and cells[6:9] == ["5.06", "0.91", "5.56×"]
    assert "drift" in cells[-1]
    assert "eager timed per mode (earlier design)" in cells[-1]  # records of the earlier design say so
    # timed in one row: one eager column, the series both modes were timed against, and no such flag
    row = ("default", "reduce-overhead")
    (caption, table), = guide_table.guide_tables(frame([_paired_record("default", 3.69, 2.34, timed_with=row),
                                                        _paired_record("reduce-overhead", 3.69, 0.91, timed_with=row)]),
                                                 Catalog("en"))
    header, _, row_text = table.splitlines()
    assert header.startswith("| Task | Model | Eager (ms) | Compiled, default (ms) | Speed-up, default | 95 % CI | "
                             "Compiled, reduce-overhead (ms) |")
    cells = [cell.strip() for cell in row_text.strip("|").split("|")]
    assert cells[2:4] == ["3.69", "2.34"] and cells[6] == "0.91" and "earlier design" not in cells[-1]
    # one compiled mode: one eager column, as the guide's table has it, and no drift
    (caption, table), = guide_table.guide_tables(frame([_paired_record("default", 3.69, 2.34)]), Catalog("en"))
    assert table.splitlines()[0].startswith("| Task | Model | Eager (ms) | Compiled, default (ms) |")
    assert "drift" not in table


def test_the_clocks_table_shows_each_cells_ranges_and_eagers_trend_where_records_read_them(data):
    catalog = Catalog("en")
    assert report_tables.clocks_table(data, catalog) is None  # the fixture's CPU records read no clock
    clocked = data.copy()
    compiled = (clocked["mode"] != "eager") & (clocked["status"] == "ok")
    first = clocked.index[compiled][0]
    clocked.loc[first, ["sm_clock_min_mhz", "sm_clock_max_mhz", "temperature_min_c", "temperature_max_c",
                        "eager_trend"]] = [1755, 1980, 41, 41, 0.218]
    table = report_tables.clocks_table(clocked, catalog)
    [row] = [line for line in table.splitlines()[2:]]
    assert row.endswith("| 1,755–1,980 | 41 | +21.8% |")
    clocked.loc[first, "eager_trend"] = -0.396
    assert report_tables.clocks_table(clocked, catalog).endswith("| -39.6% |")
    arabic = report_tables.clocks_table(clocked, Catalog("ar"))
    assert LRI in arabic  # numbers isolated in a right-to-left page


def _measured(model, batch, speedup, mode="default"):
    """A compiled cell of ``model`` with a speed-up (its own eager cell left out: the geometric means need none)."""
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    return make_record(dict(study="s", task="image-classification", model=model, batch_size=batch, compile_mode=mode,
                            dtype="float32", device="cpu"),
                       environment={"torch_version": "2.15.0", "cpu_model": "Test Processor"},
                       measurement=Measurement(times_ms=[10.0, 10.0], first_call_ms=900.0),
                       extra={"speedup": {"mean": speedup, "mean_ci95": [speedup * 0.9, speedup * 1.1]}})


def _flags_of(data, catalog, label):
    """The Flags cell of ``label``'s row in the guide's tables."""
    for _, table in guide_table.guide_tables(data, catalog):
        for line in table.splitlines():
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if cells[1] == ltr(label, catalog):
                return cells[-1]
    raise AssertionError(f"no row of {label}")


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_the_noisy_flag_says_which_series_tripped_it(data, locale):
    catalog = Catalog(locale)
    eager, compiled = catalog.t("noisy_series_eager"), catalog.t("noisy_series_compiled")
    noisy = data.copy()
    compiled_row = (noisy["model"] == "mobilenet") & (noisy["mode"] == "default")
    noisy.loc[compiled_row, ["cv", "eager_interleaved_cv", "outlier_shift", "eager_interleaved_shift"]] = 0.01, 0.01, 0, 0
    assert catalog.t("flag_noisy", series=compiled) not in _flags_of(noisy, catalog, "MobileNet")
    noisy.loc[compiled_row, "cv"] = 0.5  # the compiled runs only
    assert catalog.t("flag_noisy", series=compiled) in _flags_of(noisy, catalog, "MobileNet")
    noisy.loc[compiled_row, ["cv", "eager_interleaved_cv"]] = [0.01, 0.5]  # the eager runs of its pairs only
    assert catalog.t("flag_noisy", series=eager) in _flags_of(noisy, catalog, "MobileNet")
    noisy.loc[compiled_row, "cv"] = 0.5  # both
    both = format_list([eager, compiled], locale=locale)
    assert catalog.t("flag_noisy", series=both) in _flags_of(noisy, catalog, "MobileNet")


def test_with_several_modes_the_noisy_flag_names_the_compiled_mode():
    from test_frame import _paired_record

    row = ("default", "reduce-overhead")  # timed in one row: no flag of the earlier design beside the noisy one
    data = frame([_paired_record("default", 4.0, 2.0, timed_with=row),
                  _paired_record("reduce-overhead", 4.0, 1.0, timed_with=row)])
    data[["cv", "eager_interleaved_cv", "outlier_shift", "eager_interleaved_shift"]] = 0.01, 0.01, 0.0, 0.0
    data.loc[data["mode"] == "reduce-overhead", "cv"] = 0.5
    catalog = Catalog("en")
    assert _flags_of(data, catalog, "ResNet") == "noisy (compiled reduce-overhead)"


def test_the_start_up_tables_eager_call_is_each_rows_own_pairs_eager():
    from test_frame import _paired_record

    data = frame([_paired_record("default", 4.0, 2.0), _paired_record("reduce-overhead", 5.0, 1.0)])
    catalog = Catalog("en")
    table = report_tables.startup_table(data, catalog)
    for mode in ("default", "reduce-overhead"):
        paired = data[data["mode"] == mode].iloc[0]["eager_interleaved_ms"]
        [row] = [line for line in table.splitlines() if f"| {mode} |" in line]
        assert f"| {paired:.2f} |" in row  # not the eager cell's, which default's pairs made
    # no eager figure in the pairs: the eager cell's own, said to be so
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    eager = make_record(dict(study="s", task="image-classification", model="resnet", batch_size=1, compile_mode="eager",
                             dtype="float32", device="cpu"),
                        environment={"torch_version": "2.15.0", "cpu_model": "Test Processor"},
                        measurement=Measurement(times_ms=[10.0, 10.0], first_call_ms=11.0))
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        table = report_tables.startup_table(frame([eager, _measured("resnet", 1, 2.0)]), catalog)
        assert catalog.t("eager_cell_figure", value=ltr(catalog.number(10.0, 2), catalog)) in table


def test_each_table_has_one_eager_column_where_its_rows_were_timed_so_and_a_shared_graph_pool_says_so():
    from test_frame import _paired_record
    from bench_utils.records.schema import Record

    row = ("default", "reduce-overhead")
    data = frame([_paired_record("default", 3.0, 2.0, timed_with=row),
                  _paired_record("reduce-overhead", 3.0, 1.0, timed_with=row),
                  _paired_record("default", 6.0, 4.0, batch_size=4),  # the earlier design, at batch 4 only
                  _paired_record("reduce-overhead", 5.0, 2.0, batch_size=4)])
    tables = guide_table.guide_tables(data, Catalog("en"))
    (_, batch1), (_, batch4) = tables
    assert batch1.splitlines()[0].count("Eager") == 1 and "earlier design" not in batch1
    assert batch4.splitlines()[0].count("Eager beside") == 2 and "eager timed per mode (earlier design)" in batch4
    # two CUDA-graph modes of a row keep their graphs in one pool: the memory table says whose
    shared = _paired_record("reduce-overhead", 3.0, 1.0, timed_with=("reduce-overhead", "max-autotune"))
    shared["memory"]["cuda_graph_pool_bytes"] = 2**20
    shared["memory"]["cuda_graph_pool_shared_with"] = ["max-autotune"]
    Record.from_json(shared)
    table = report_tables.memory_table(frame([shared]), Catalog("en"))
    assert "1.0 (shared with max-autotune)" in table
