import pytest

from bench_utils.study.runner.papermill_execution import visible_devices_for


def test_a_worker_is_pinned_through_the_runners_own_device_mask():
    # No mask: cuda:N is physical GPU N.
    assert visible_devices_for("cuda:1", None) == "1" and visible_devices_for("cuda", None) == "0"
    # CUDA_VISIBLE_DEVICES=3 make report: cuda:0 is GPU 3, not GPU 0.
    assert visible_devices_for("cuda:0", "3") == "3"
    assert visible_devices_for("cuda:1", "2, 5") == "5"
    # UUIDs and MIG instances pass through as they are.
    uuid = "GPU-8f6c2a1e-0000-1111-2222-333344445555"
    assert visible_devices_for("cuda:0", f"{uuid},GPU-other") == uuid
    assert visible_devices_for("cuda", "MIG-1234abcd-0000-1111-2222-333344445555") == \
        "MIG-1234abcd-0000-1111-2222-333344445555"


def test_a_device_outside_the_mask_is_refused():
    with pytest.raises(ValueError, match="cuda:2 is not visible here"):
        visible_devices_for("cuda:2", "0,1")
    with pytest.raises(ValueError, match="shows 0 GPU"):
        visible_devices_for("cuda:0", "")
