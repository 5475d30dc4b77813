"""The process's first compile, paid at kernel start: a tiny model compiled and called, dynamo left clean."""

import torch

from bench_utils.variants import compiler_warmup


def test_the_warm_up_compiles_a_tiny_model_and_leaves_no_graph_behind():
    graphs = []

    def counting_backend(graph_module, example_inputs):  # what inductor would be handed
        graphs.append(graph_module)
        return graph_module.forward

    seconds = compiler_warmup.warm_up_compiler(torch.device("cpu"), backend=counting_backend)
    assert seconds > 0 and len(graphs) == 1  # compiled once, called twice
    ops = {node.target for node in graphs[0].graph.nodes if node.op == "call_function"}
    assert torch.relu in ops and torch.softmax in ops  # the layers the study's models are made of
    # dynamo reset after: the next cell's cold compile starts from no graph of it
    assert not torch._dynamo.eval_frame._debug_get_cache_entry_list(compiler_warmup._Tiny.forward.__code__)


def test_a_kernel_with_a_compiled_cell_warms_the_compiler_up_once_before_it(tmp_path, monkeypatch):
    from bench_utils.study.cell import kernel_start, task

    calls = []
    monkeypatch.setattr(kernel_start, "warm_up_compiler",
                        lambda device, backend, fresh: calls.append((str(device), backend, fresh)))
    monkeypatch.setattr(task.compile_workers, "start", lambda backend: None)  # no real pool in this process
    task.run(study="t", task="image-classification", models=["timm:test_resnet"], batch_sizes=[1],
             compile_modes=["eager"], runs=2, warmup=1, blocks=1, results_path=tmp_path / "a.jsonl")
    assert calls == []  # eager compiles nothing
    monkeypatch.setattr(task.compile_workers, "ready", lambda backend: None)
    monkeypatch.setattr(task._ModelCells, "record", lambda self, mode, batch: {"cell": {}, "status": "skipped"})
    monkeypatch.setattr(task, "append_record", lambda *args, **kwargs: None)
    task.run(study="t", task="image-classification", models=["timm:test_resnet"], batch_sizes=[1, 2],
             compile_modes=["default"], runs=2, warmup=1, blocks=1, results_path=tmp_path / "b.jsonl")
    assert calls == [("cpu", "inductor", True)]  # once, in fresh caches: the cells compile cold
