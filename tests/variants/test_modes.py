import collections

import pytest
import torch

from bench_utils.variants import modes as compile_module


class Branchy(torch.nn.Module):
    """Two graph breaks: a data-dependent branch and a print."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:
            y = y * 2
        print("", end="")
        return y.relu()


def test_modes_and_errors():
    assert compile_module.MODES == ("eager", "default", "reduce-overhead", "max-autotune",
                                    "max-autotune-no-cudagraphs", "aot-inductor")
    with pytest.raises(ValueError, match="built ahead of time"):  # not a torch.compile mode
        compile_module.compile_model(torch.nn.Linear(2, 2), "aot-inductor")
    assert compile_module.options("aot-inductor")["fullgraph"] is True
    with pytest.raises(ValueError, match="Did you mean .reduce-overhead.*Valid: eager"):
        compile_module.check_mode("reduce_overhead")
    with pytest.raises(ValueError, match="unknown compile backend"):
        compile_module.compile_model(torch.nn.Linear(2, 2), "default", backend="tensorrtt")
    with pytest.raises(ValueError, match="needs the inductor backend"):
        compile_module.compile_model(torch.nn.Linear(2, 2), "max-autotune", backend="aot_eager")
    model = torch.nn.Linear(2, 2)
    assert compile_module.compile_model(model, "eager") is model


def test_options_say_what_was_compiled():
    assert compile_module.options("eager")["backend"] is None
    reduce = compile_module.options("reduce-overhead", fullgraph=True)
    assert reduce["cuda_graphs_requested"] and reduce["fullgraph"] and reduce["backend"] == "inductor"
    # asked for, not yet seen: the compilation says whether inductor used CUDA graphs (compile_cost)
    assert reduce["cuda_graphs"] is None
    assert compile_module.options("eager")["cuda_graphs"] is False


def test_graph_breaks_and_recompiles_are_counted():
    compile_module.reset()
    compiled = compile_module.compile_model(Branchy(), "default", backend="aot_eager")
    start = compile_module.dynamo_snapshot()
    compiled(torch.randn(2, 8))
    after_first = compile_module.dynamo_snapshot()
    compiled(torch.randn(2, 8))           # same shape: no new graph
    compiled(torch.randn(5, 8))           # new batch size: recompiles
    report = compile_module.compile_report(start, after_first, compile_module.dynamo_snapshot())
    assert report["graphs"] >= 2 and report["graph_breaks"] >= 2
    assert any("branch" in reason.lower() for reason in report["break_reasons"])
    assert any("print" in reason for reason in report["break_reasons"])
    assert report["recompiles"] >= 1


def test_break_reasons_keep_the_title_and_explanation():
    reason = ("Failed to trace builtin operator\n  Explanation: Dynamo does not know how to trace "
              "builtin operator `print`\n  Hint: Avoid calling builtin `print`\n")
    assert compile_module.summarize_reason(reason) == (
        "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print`")
    assert compile_module.summarize_reason("x" * 500).endswith("...")
    assert compile_module.summarize_reason("  ") == "unknown"


def test_reset_forgets_counters():
    compile_module.reset()
    compile_module.compile_model(Branchy(), "default", backend="aot_eager")(torch.randn(2, 8))
    assert compile_module.dynamo_snapshot()["graphs"] > 0
    compile_module.reset()
    assert compile_module.dynamo_snapshot() == {"graphs": 0, "graph_breaks": 0, "break_reasons": {},
                                                "frames": 0, "fx_graph_cache_hits": 0}


def test_inductor_compiles_a_tiny_model_and_fills_the_counters(tiny_vit):
    model, inputs = tiny_vit
    compile_module.reset()
    compiled = compile_module.compile_model(model, "default")
    start = compile_module.dynamo_snapshot()
    with torch.no_grad():
        out = compiled(**inputs)
        expected = model(**inputs)
    report = compile_module.compile_report(start, compile_module.dynamo_snapshot(),
                                           compile_module.dynamo_snapshot())
    assert {k: report[k] for k in ("graphs", "graph_breaks", "break_reasons", "recompiles")} == \
        {"graphs": 1, "graph_breaks": 0, "break_reasons": {}, "recompiles": 0}
    assert torch.allclose(out.logits, expected.logits, rtol=1e-4, atol=1e-5)
    # The same graph compiled again after a reset comes from inductor's on-disk cache: said so.
    compile_module.reset()
    again = compile_module.compile_model(model, "default")
    start = compile_module.dynamo_snapshot()
    with torch.no_grad():
        again(**inputs)
    cached = compile_module.compile_report(start, compile_module.dynamo_snapshot(),
                                           compile_module.dynamo_snapshot())
    assert cached["fx_graph_cache_hits"] >= 1


def test_clone_outputs_copies_every_tensor():
    Pair = collections.namedtuple("Pair", "a b")
    original = {"x": torch.ones(2), "nested": [torch.zeros(1), Pair(torch.ones(1), 3)]}
    copy = compile_module.clone_outputs(original)
    original["x"].add_(1)
    original["nested"][1].a.add_(1)
    assert copy["x"].tolist() == [1.0, 1.0] and copy["nested"][1].a.tolist() == [1.0]
    assert isinstance(copy["nested"][1], Pair) and copy["nested"][1].b == 3


@pytest.mark.cuda
def test_reduce_overhead_outputs_must_be_cloned():
    model = torch.nn.Linear(64, 64).cuda().eval()
    compile_module.reset()
    compiled = compile_module.compile_model(model, "reduce-overhead")
    with torch.no_grad():
        for _ in range(3):  # warm up CUDA-graph recording
            torch.compiler.cudagraph_mark_step_begin()
            compiled(torch.randn(4, 64, device="cuda"))
        torch.compiler.cudagraph_mark_step_begin()
        x = torch.randn(4, 64, device="cuda")
        kept = compile_module.clone_outputs(compiled(x))
        torch.compiler.cudagraph_mark_step_begin()
        compiled(torch.randn(4, 64, device="cuda"))
    assert torch.allclose(kept, model(x), rtol=1e-4, atol=1e-4)
