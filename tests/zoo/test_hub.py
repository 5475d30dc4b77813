"""What ``auto`` weights come to, known before a load: resume counts a random record for an auto cell offline."""

import pytest

from bench_utils.zoo import hub


@pytest.fixture
def hub_state(monkeypatch):
    def set_reachable(reachable):
        monkeypatch.setattr(hub, "hub_unreachable_reason", lambda: None if reachable else "HF_HUB_OFFLINE is set")
    return set_reachable


@pytest.mark.parametrize("model", ["resnet", "microsoft/resnet-50", "timm:resnet18", "someone/other-model"])
def test_auto_comes_to_random_where_the_hub_is_out_of_reach_and_pretrained_where_it_is_not(hub_state, model):
    hub_state(False)
    assert hub.expected_weights("auto", model) == "random"
    hub_state(True)
    assert hub.expected_weights("auto", model) == "pretrained"


def test_a_request_that_is_not_auto_is_what_is_measured(hub_state):
    hub_state(False)
    assert hub.expected_weights("random", "resnet") == "random"
    assert hub.expected_weights("pretrained", "resnet") == "pretrained"  # or the load fails, saying so


def test_a_checkpoint_in_a_local_folder_is_pretrained_offline(hub_state, tmp_path):
    hub_state(False)
    assert hub.expected_weights("auto", str(tmp_path)) == "pretrained"


def test_offline_is_what_the_loader_decides_too():
    # the tests run with HF_HUB_OFFLINE=1 (conftest): the prediction and the loader's own reason agree
    hub.hub_unreachable_reason.cache_clear()
    assert hub.hub_unreachable_reason() == "HF_HUB_OFFLINE is set"
    assert hub.expected_weights("auto", "vit") == "random"
