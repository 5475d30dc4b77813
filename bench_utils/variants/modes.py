"""Compile variants: applying a mode, and what compiling cost (graphs, graph breaks with their reasons,
recompiles: the graphs compiled after the first call), as the PyTorch benchmark harness reports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..errors import UserError
from ..vocabulary import AOT_MODES, CUDA_GRAPH_MODES, CompileMode, check_mode

# The names live in ``vocabulary`` (no torch); AOT modes are built by ``variants.aot_inductor``, and
# CUDA-graph modes' outputs must be cloned before they are kept (the next replay overwrites them).
MODES = tuple(CompileMode)
BACKENDS_WITH_MODES = ("inductor",)
__all__ = ["AOT_MODES", "BACKENDS_WITH_MODES", "CUDA_GRAPH_MODES", "MODES", "check_backend", "check_mode",
           "compile_model", "options", "reset"]


def check_backend(backend: str) -> str:
    valid = sorted(torch.compiler.list_backends(exclude_tags=()))  # every one, the built-in ones included
    if backend not in valid:
        raise UserError(f"unknown compile backend {backend!r}: use one of {', '.join(valid)}")
    return backend


def reset() -> None:
    """Forget every compiled graph and counter (between models, so none leaks)."""
    from torch._dynamo.utils import counters  # no public way to clear them

    torch.compiler.reset()
    counters.clear()


def compile_model(model: torch.nn.Module, mode: str = "default", *, backend: str = "inductor",
                  fullgraph: bool = False, dynamic: bool | None = None):
    """``model`` itself for ``eager``, else ``torch.compile(model, ...)`` (lazy: compiles on call)."""
    check_mode(mode)
    if mode == CompileMode.EAGER:
        return model
    if mode in AOT_MODES:
        raise ValueError(f"{mode!r} is built ahead of time by bench_utils.variants.aot_inductor, not torch.compile")
    check_backend(backend)
    kwargs: dict[str, Any] = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic}
    if backend in BACKENDS_WITH_MODES:
        kwargs["mode"] = mode
    elif mode != "default":
        raise UserError(f"compile mode {mode!r} needs the inductor backend, not {backend!r}")
    return torch.compile(model, **kwargs)


def options(mode: str, backend: str = "inductor", fullgraph: bool = False,
            dynamic: bool | None = None) -> dict[str, Any]:
    """The compile settings a record carries. ``cuda_graphs`` is what happened: a torch.compile cell's
    compilation says (``compile_cost``), None until it has; ``cuda_graphs_requested`` is what the mode asks."""
    if mode in AOT_MODES:  # one whole graph, exported at fixed shapes, by inductor
        return {"mode": mode, "backend": "inductor", "fullgraph": True, "dynamic": False, "cuda_graphs": False,
                "cuda_graphs_requested": False}
    return {"mode": mode, "backend": None if mode == CompileMode.EAGER else backend,
            "fullgraph": fullgraph if mode != CompileMode.EAGER else None,
            "dynamic": dynamic if mode != CompileMode.EAGER else None,
            "cuda_graphs": False if mode == CompileMode.EAGER else None,
            "cuda_graphs_requested": mode in CUDA_GRAPH_MODES}


# --- dynamo statistics ---------------------------------------------------------------

def dynamo_snapshot() -> dict[str, Any]:
    """Graph and graph-break counts so far (torch._dynamo's counters)."""
    from torch._dynamo.utils import counters

    # Explicit breaks land in "graph_break"; unsupported constructs (data-dependent
    # branches, ...) that also split the graph land in "unimplemented".
    reasons: dict[str, int] = {}
    for group in ("graph_break", "unimplemented"):
        for reason, count in counters[group].items():
            summary = summarize_reason(str(reason))
            reasons[summary] = reasons.get(summary, 0) + count
    return {"graphs": int(counters["stats"]["unique_graphs"]),
            "graph_breaks": int(sum(reasons.values())),
            "break_reasons": reasons,
            "frames": int(counters["frames"]["total"]),
            # inductor's on-disk graph cache survives across processes: a hit makes the
            # compile time that of a warm cache, not of a first compilation
            "fx_graph_cache_hits": int(counters["inductor"]["fxgraph_cache_hit"])}


def summarize_reason(reason: str, limit: int = 240) -> str:
    """Dynamo's title of a graph break and its one-line explanation, without the hints."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    if not lines:
        return "unknown"
    summary = lines[0]
    explanation = next((line for line in lines[1:] if line.startswith("Explanation:")), None)
    if explanation:
        summary += ": " + explanation[len("Explanation:"):].strip()
    return summary if len(summary) <= limit else summary[: limit - 3] + "..."


def compile_report(at_start: dict[str, Any], after_first_call: dict[str, Any],
                   at_end: dict[str, Any]) -> dict[str, Any]:
    """Graphs and breaks of the first call; recompiles (new graphs) after it."""
    reasons = {reason: count - at_start["break_reasons"].get(reason, 0)
               for reason, count in after_first_call["break_reasons"].items()
               if count > at_start["break_reasons"].get(reason, 0)}
    return {"graphs": after_first_call["graphs"] - at_start["graphs"],
            "graph_breaks": after_first_call["graph_breaks"] - at_start["graph_breaks"],
            "break_reasons": reasons,
            "recompiles": at_end["graphs"] - after_first_call["graphs"],
            "fx_graph_cache_hits": after_first_call["fx_graph_cache_hits"] - at_start["fx_graph_cache_hits"]}


# --- outputs -------------------------------------------------------------------------

def clone_outputs(outputs: Any, device: str | torch.device | None = None) -> Any:
    """A deep copy of every tensor in ``outputs`` (dicts, ModelOutputs, lists, tuples), on
    ``device`` if given (kept references move to the host, off the measured device's memory)."""
    if isinstance(outputs, torch.Tensor):
        return outputs.detach().to(device, copy=True) if device is not None else outputs.detach().clone()
    if isinstance(outputs, Mapping):
        return {key: clone_outputs(value, device) for key, value in outputs.items()}
    if isinstance(outputs, tuple) and hasattr(outputs, "_fields"):  # a namedtuple
        return type(outputs)(*(clone_outputs(value, device) for value in outputs))
    if isinstance(outputs, (list, tuple)):
        return type(outputs)(clone_outputs(value, device) for value in outputs)
    return outputs
