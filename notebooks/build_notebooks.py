"""Writes the five notebooks (run from the project root): the three task notebooks, the report and explore.

The notebooks are thin on purpose; one source keeps the task notebooks' shared cells identical.
Usage: python notebooks/build_notebooks.py
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell, new_code_cell

METADATA = {"kernelspec": {"name": "bench-utils", "display_name": "Python (bench-utils)",
                           "language": "python"},
            "language_info": {"name": "python"}}

TASKS = {
    "classification": ("image-classification", "Image classification", '["resnet"]', "[1]", 300,
                       "ViT, BeiT, ConvNeXT and ResNet in the guide"),
    "segmentation": ("image-segmentation", "Image segmentation", '["segformer"]', "[1]", 100,
                     "Segformer, Mask2former, Maskformer and MobileNet (DeepLabV3) in the guide"),
    "detection": ("object-detection", "Object detection", '["detr"]', "[1]", 20,
                  "OwlViT, DETR, DETR-ResNet-101 and Conditional-DETR in the guide"),
}

for name, (task, title, models, batches, runs, guide_models) in TASKS.items():
    nb = new_notebook()
    nb.metadata = dict(METADATA)
    nb.cells = [
        new_markdown_cell(
            f"# {title}: torch.compile inference speed-up\n\n"
            f"Measures eager and compiled inference of {task} models ({guide_models}): "
            "each cell is one model, batch size, compile mode and dtype, timed after warm-up, "
            "compiled against interleaved eager, with compile cost and an accuracy gate. "
            "Every measured cell is appended as a record to `results_path`.\n\n"
            "Run All with the defaults for a small CPU-friendly exploration; the grid runner "
            "(`python -m bench_utils run params/....yaml`) executes this notebook with papermill, "
            "once per model (its batch sizes and modes in one kernel), drawing nothing. "
            "All logic lives in `bench_utils`."),
        new_code_cell(
            'study: str = "notebook"  # study name: records are grouped by it\n'
            f"models: list = {models}  # registry keys (python -m bench_utils models), 'org/name' or 'timm:<name>'; lists also take 'a,b' (papermill -p)\n"
            f"batch_sizes: list = {batches}  # batch sizes, positive integers (the guide: 1, 4, 16; or '1,4,16')\n"
            'compile_modes: list = ["eager", "default"]  # eager, default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs, aot-inductor\n'
            'dtypes: list = ["float32"]  # float32, float16 or bfloat16\n'
            'device: str = "cpu"  # cpu or cuda\n'
            f"settings: dict = {{'runs': {runs}}}  # how the cells are measured: any of bench_utils.settings.Settings' fields (runs, warmup, tf32, shapes, ...; python -m bench_utils cell --help lists them with their defaults); the rest keep their defaults{'' if runs == 300 else ' (the guide: 300 runs; fewer here so Run All is quick on a CPU)'}\n"
            f'results_path: str = "reports/notebook-{name}/results.jsonl"  # records are appended here (relative to the project root)\n'
            "only_cells: list = []  # [compile_mode, batch_size] pairs to measure (empty: every mode x batch size); set by the grid runner\n"
            "show: bool = True  # draw the table and the plot (the grid runner measures only)\n"
            'progress_file: str = ""  # set by the grid runner: the kernel names the cell it begins here\n'
            "runner_pid: int = 0  # set by the grid runner; 0 when run by hand\n"
            'run_id: str = ""  # set by the grid runner\n'
            "keep_compiles: bool = False  # set by the grid runner: cold compiles kept (in the temporary folder) for the cells' next replicates\n",
            metadata={"tags": ["parameters"]}),
        new_code_cell(
            "from bench_utils.study.cell import task\n\n"
            f'records = task.run(study=study, task="{task}", models=models, batch_sizes=batch_sizes,\n'
            "                   compile_modes=compile_modes, dtypes=dtypes, device=device, settings=settings,\n"
            "                   results_path=results_path, only_cells=only_cells,\n"
            "                   progress_file=progress_file, runner_pid=runner_pid, run_id=run_id,\n"
            "                   keep_compiles=keep_compiles)"),
        new_code_cell("if show:  # a grid run skips drawing (and importing pandas and matplotlib)\n"
                      "    from bench_utils.report.sections import show_records\n\n"
                      "    show_records(records)"),
        new_markdown_cell(
            "Latencies are means over `runs` timed calls (the guide's statistic); `speedup` is measured "
            "against eager in random-order pairs of blocks, with its paired 95 % interval; "
            "`parity` is the accuracy gate (compiled vs eager outputs). Full records, with "
            "percentiles, memory, compile cost and the environment, are in `results_path`."),
    ]
    for index, cell in enumerate(nb.cells):  # stable ids: the same source, the same file
        cell.id = f"{name}-{index}"
    nbformat.validate(nb)
    out = Path("notebooks") / f"{name}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    print("wrote", name)


# --- the report notebook: executed once per locale by `python -m bench_utils report` ---------
report = new_notebook()
report.metadata = dict(METADATA)
report.cells = [
    new_code_cell(
        "# The default is a small example checked in with the project (make report's CPU grid: 6 cells,\n"
        "# random weights), so that Run All works on a fresh clone; point it at your own study folders.\n"
        'results_paths: list = ["notebooks/examples/cpu-quick.jsonl"]  # study folders or results.jsonl files, relative to the project root (several merge runs; also "a,b")\n'
        'locale: str = "en"  # en, ar or es (bench_utils/report/locales)\n'
        'reference_csv: str = ""  # the guide\'s published figures; empty: the copy in bench_utils/report/data\n'
        "coverage: list = []  # per study folder: its grid's cells measured (python -m bench_utils report fills it)\n",
        metadata={"tags": ["parameters"]}),
    new_code_cell(
        "# The study report: every section comes from bench_utils.report (tables, context, plots).\n"
        "from bench_utils.report.sections import ReportView\n\n"
        "view = ReportView(results_paths, locale, reference_csv or None, coverage)\n"
        "view.header()"),
    new_code_cell("view.summary()"),
    new_code_cell("view.guide_tables()"),
    new_code_cell("view.plots()"),
    new_code_cell("view.compile_cost()"),
    new_code_cell("view.memory()"),
    new_code_cell("view.why()"),
    new_code_cell("view.losses()"),
    new_code_cell("view.reference()"),
    new_code_cell("view.record_notes()"),
    new_code_cell("view.methodology()"),
]
for index, cell in enumerate(report.cells):
    cell.id = f"report-{index}"
nbformat.validate(report)
out = Path("notebooks") / "report.ipynb"
nbformat.write(report, out)
print("wrote report")


# --- the exploration notebook: one or more studies, a slice at a time, two environments compared ---
explore = new_notebook()
explore.metadata = dict(METADATA)
explore.cells = [
    new_markdown_cell(
        "# Explore torch.compile study results\n\n"
        "Run all cells (Run > Run All Cells). Then pick the studies to look at in the **Studies** list above the "
        "summary: the example, every study under `reports/` (the published ones and those your `make report` "
        "wrote), several at once to merge them (Ctrl- or Shift-click), the latest record of each cell winning. "
        "The notebook shows a summary, then one slice (device, batch size, compile mode and dtype): latency, "
        "speed-up with its 95 % interval, compile cost and memory; then two environments (two GPUs, or two torch "
        "versions) side by side, with the regressions in red.\n\n"
        "The controls under each view redraw it, and offer only what was measured. Under papermill, the "
        "parameters name the studies and the slice (`papermill notebooks/explore.ipynb out.ipynb -p "
        "results_paths reports/a,reports/b -p batch_size 16`). The default is a small example checked in with "
        "the project (two models, two batch sizes, two compiled modes, two dtypes, measured on a CPU), so that "
        "every control can be tried on a fresh clone. All logic lives in `bench_utils.report.explorer`."),
    new_code_cell(
        'results_paths: list = ["notebooks/examples/explore-example.jsonl"]  # study folders or results.jsonl files, relative to the project root (several merge; also "a,b"); the Studies list picks others\n'
        'environment: str = ""  # device to show, as the summary names it (with the torch version where several); empty: the first\n'
        "batch_size: int = 0  # batch size to show; 0: the smallest measured\n"
        'compile_mode: str = ""  # compiled mode shown against eager (default, reduce-overhead, max-autotune, ...); empty: the first of those measured\n'
        'dtype: str = ""  # float32, float16 or bfloat16; empty: the first measured\n'
        'baseline: str = ""  # environment the comparison starts from; empty: the first\n'
        'candidate: str = ""  # environment compared with it; empty: the next one\n'
        "tolerance: float = 0.10  # a lower speed-up is a regression only beyond this fraction (and outside its interval)\n"
        'language: str = "en"  # the tables\' words: en, ar or es\n'
        "controls: bool = True  # the study picker and ipywidgets under each view (a live kernel); papermill draws what the parameters name (False: no inert controls saved)\n",
        metadata={"tags": ["parameters"]}),
    new_code_cell(
        "from bench_utils.report.explorer import Explorer\n\n"
        "explorer = Explorer(results_paths, language)\n"
        "explorer.summary(controls=controls)"),
    new_markdown_cell("## One slice\n\nLatencies are means of the timed runs; the speed-up is measured "
                      "against eager in random-order pairs of blocks, with its paired 95 % interval; the accuracy "
                      "gate compares the compiled outputs with eager's and a float64 reference."),
    new_code_cell("explorer.show(environment or None, batch_size or None, compile_mode or None, dtype or None,\n"
                  "              controls=controls)"),
    new_markdown_cell("## Two environments\n\nShown when the studies picked hold more than one device or torch "
                      "version."),
    new_code_cell("explorer.compare(baseline or None, candidate or None, tolerance, controls=controls)"),
]
for index, cell in enumerate(explore.cells):
    cell.id = f"explore-{index}"
nbformat.validate(explore)
nbformat.write(explore, Path("notebooks") / "explore.ipynb")
print("wrote explore")
