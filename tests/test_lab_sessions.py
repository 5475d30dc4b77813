"""make lab's server extension: the explore and task notebooks' kernels started before the server serves (``lab_sessions``)."""

import asyncio
import logging

import pytest

from bench_utils import lab_sessions


class FakeSessions:
    def __init__(self, fail=False):
        self.created, self.fail = [], fail

    async def create_session(self, **session):
        if self.fail:
            raise RuntimeError("no such kernel")
        self.created.append(session)


@pytest.fixture(autouse=True)
def server_loop():
    """The server's event loop, not running yet when extensions load."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    asyncio.set_event_loop(None)
    loop.close()


class FakeServer:
    def __init__(self, sessions):
        self.session_manager = sessions
        self.log = logging.getLogger("fake-server")


def test_the_explore_and_task_notebooks_sessions_exist_once_the_extension_is_loaded(caplog):
    server = FakeServer(FakeSessions())
    lab_sessions._load_jupyter_server_extension(server)
    created = server.session_manager.created
    assert created[0] == {"path": "notebooks/explore.ipynb", "name": "explore.ipynb", "type": "notebook",
                          "kernel_name": "bench-utils"}
    assert [session["path"] for session in created[1:]] == [f"notebooks/{task}.ipynb" for task in
                                                           ("classification", "segmentation", "detection")]
    assert lab_sessions._jupyter_server_extension_points() == [{"module": "bench_utils.lab_sessions"}]


def test_a_kernel_that_cannot_start_ahead_is_a_warning_and_the_server_starts_anyway(caplog):
    server = FakeServer(FakeSessions(fail=True))
    with caplog.at_level(logging.WARNING):
        lab_sessions._load_jupyter_server_extension(server)  # no exception: the notebook starts its own
    assert "could not start the kernel of notebooks/explore.ipynb ahead: no such kernel" in caplog.text
