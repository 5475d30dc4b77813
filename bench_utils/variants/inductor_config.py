"""An Inductor configuration beyond the compile mode's, applied while a cell compiles (``Settings.inductor``).

``freezing`` folds the weights into the compiled graph as constants; ``no-layout-optimization`` keeps the model's
own layout for convolutions (on the H200, MobileNet at batch 16 compiled spent 26.3 ms in convolutions against
eager's 10.8). Inductor's FX-graph cache key includes its config, so one configuration's cold compile never hits
another's cache. An option this torch lacks is a clear error, not a silent no-op.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import UserError
from ..vocabulary import INDUCTOR_OPTIONS, InductorConfig, check_inductor_config


def options_of(name: str) -> dict[str, Any]:
    """The ``torch._inductor.config`` options a configuration sets; UserError for an unknown name, or an
    option the installed torch's Inductor does not have."""
    import torch
    from torch._inductor import config

    options = INDUCTOR_OPTIONS[check_inductor_config(name)]
    missing = [option for option in options if not hasattr(config, option)]
    if missing:
        raise UserError(f"Inductor configuration {name!r} needs torch._inductor.config.{missing[0]}, which "
                        f"torch {torch.__version__} does not have")
    return dict(options)


@contextmanager
def inductor_configuration(name: str) -> Iterator[dict[str, Any]]:
    """Inductor's config patched with ``name``'s options for the block (nothing for ``default``); yields them."""
    options = options_of(name)
    if not options or name == InductorConfig.DEFAULT:
        yield {}
        return
    from torch._inductor import config

    with config.patch(options):
        yield options
