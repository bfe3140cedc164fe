import os

import pytest

from tests.e2e.processes import Processes


@pytest.fixture
def processes(tmp_path, request):
    procs = Processes(tmp_path, env=dict(os.environ, LOG_LEVEL="INFO", PYTHONUNBUFFERED="1"))
    yield procs
    procs.stop_all()
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        for name in ("scan", "relay", "sweep", "worker", "worker-2", "serve"):
            text = procs.log(name)
            if text:
                print(f"----- {name} log (tail) -----\n{text[-4000:]}")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
