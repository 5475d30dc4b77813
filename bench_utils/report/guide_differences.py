"""What sets this study's figures apart from the Hugging Face guide's besides the code compared, said at the top
of the page, before any figure (docs/report.md lists them): a reader sets our speed-ups beside the guide's, and a
gap between them may come from its torch, weights, image or devices as much as from torch.compile.
"""

from __future__ import annotations

import os
from typing import Iterable

from babel.lists import format_list
import pandas as pd

from ..records.schema import Record
from .frame import device_name
from .i18n import Catalog
from .markdown import environment_label, ltr
from .tables import REFERENCE_CSV, reference_torch_versions

GUIDE_IMAGE = "COCO val2017 000000039769.jpg"  # the photo the guide times (zoo.inputs resizes ours to its size)


def guide_differences(records: Iterable[Record], catalog: Catalog,
                      reference_csv: str | os.PathLike = REFERENCE_CSV) -> str | None:
    """One paragraph: how the records' torch, weights, image and devices differ from the guide's; None without
    records."""
    records = list(records)
    if not records:
        return None

    def shown(values: Iterable[str]) -> str:  # a list in the locale's words ("A100, T4 and V100"; Arabic's و)
        names = [ltr(value, catalog) for value in sorted(set(values))]
        return format_list(names, locale=catalog.locale) if names else catalog.t("not_available")

    guide_gpus = pd.read_csv(reference_csv)["gpu"].dropna().unique()
    items = [catalog.t("difference_torch", ours=shown(r.environment.torch_version for r in records
                                                      if r.environment.torch_version),
                       theirs=ltr(reference_torch_versions(reference_csv), catalog))]
    if any(record.config.weights == "random" for record in records):
        items.append(catalog.t("difference_weights_random"))
    images = [record.model.extra("image") for record in records if record.model and record.model.extra("image")]
    items.append(catalog.t("difference_image", ours=shown(images), theirs=ltr(GUIDE_IMAGE, catalog)))
    devices = sorted({device_name(record) for record in records})  # in the page's words: "CPU" is a word too
    items.append(catalog.t("difference_device", theirs=shown(guide_gpus),
                           ours=format_list([environment_label(device, catalog) for device in devices],
                                            locale=catalog.locale)))
    return catalog.t("guide_differences", items=catalog.t("difference_separator").join(items))
