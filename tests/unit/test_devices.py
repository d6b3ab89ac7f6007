"""One rule counts GPUs for the local backend and the node agent (trainlaunch.node.devices)."""

from __future__ import annotations

import pytest

from trainlaunch.agent.devices import local_nproc
from trainlaunch.node.devices import cuda_visible_ids, gpu_count, visible_gpus


@pytest.mark.parametrize(
    ("visible", "ids"),
    [("2,3", ["2", "3"]), (" 1 , 0", ["1", "0"]), ("", []), ("-1", []), ("0,-1,2", ["0"])],
)
def test_cuda_visible_ids_stop_at_the_first_invalid_id(visible: str, ids: list[str]) -> None:
    assert cuda_visible_ids({"CUDA_VISIBLE_DEVICES": visible}) == ids


def test_cuda_visible_devices_names_the_gpus_and_a_count_caps_them() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "2,3", "TRAINLAUNCH_GPU_COUNT": "4"}
    assert visible_gpus(env) == ["2", "3"]
    assert visible_gpus(env, count=1) == ["2"]
    assert visible_gpus({"TRAINLAUNCH_GPU_COUNT": "3"}) == ["0", "1", "2"]
    assert visible_gpus({"TRAINLAUNCH_GPU_COUNT": "3"}, count=2) == ["0", "1"]


def test_the_agent_counts_what_the_local_backend_slices() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "2,3", "TRAINLAUNCH_GPU_COUNT": "4"}
    assert local_nproc("gpu", env) == gpu_count(env) == len(visible_gpus(env)) == 2
    assert local_nproc("auto", {"CUDA_VISIBLE_DEVICES": "", "TRAINLAUNCH_GPU_COUNT": "0"}) >= 1
    assert local_nproc("3", {}) == 3
