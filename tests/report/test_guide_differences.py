"""What sets a study's figures apart from the Hugging Face guide's, said at the top of the page."""

import copy

from babel.lists import format_list
import pytest

from bench_utils.report.frame import device_name
from bench_utils.report.guide_differences import GUIDE_IMAGE, guide_differences
from bench_utils.report.i18n import Catalog
from bench_utils.report.markdown import environment_label, ltr
from bench_utils.report.tables import reference_torch_versions
from explore_data import example_records
from sample_records import Rs


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_torch_weights_image_and_device_are_set_beside_the_guides(locale):
    catalog = Catalog(locale)
    records = Rs(example_records())  # random weights, scikit-image's cat, a CPU, torch 2.14.1
    text = guide_differences(records, catalog)
    assert text.startswith(catalog.t("guide_differences", items="X").split("X")[0])
    assert catalog.t("difference_torch", ours=ltr(records[0].environment.torch_version, catalog),
                     theirs=ltr(reference_torch_versions(), catalog)) in text
    assert catalog.t("difference_weights_random") in text
    assert catalog.t("difference_image", ours=ltr("scikit-image data.chelsea (a cat photo)", catalog),
                     theirs=ltr(GUIDE_IMAGE, catalog)) in text
    assert catalog.t("difference_device", ours=environment_label(device_name(records[0]), catalog),
                     theirs=format_list([ltr(gpu, catalog) for gpu in ("A100", "T4", "V100")], locale=locale)) in text


def test_pretrained_weights_are_no_difference_and_no_records_say_nothing():
    pretrained = copy.deepcopy(example_records())
    for record in pretrained:
        record["config"]["weights"] = "pretrained"
    catalog = Catalog("en")
    assert catalog.t("difference_weights_random") not in guide_differences(Rs(pretrained), catalog)
    assert guide_differences([], catalog) is None
