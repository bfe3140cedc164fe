"""README's "Try it" section, run verbatim against `make run`: the real Makefile recipe
(migrate, collectstatic, object store, demo tenant, `manage.py serve`) in a fresh var/ of
this test's, then every command of the section's code block in a shell, checked against
what the README says it shows. The only rewrite is the port: the test serves on a free one
(`make run PORT=...`, as README says), not on 8000."""

import json
import re
import subprocess

import pytest

from tests.child_env import fresh_shell_env
from tests.deploy.compose import README
from tests.e2e.processes import PYTHON, Processes
from tests.servers import free_port, wait_for_port

pytestmark = pytest.mark.slow
README_PORT = "127.0.0.1:8000"


def try_it_section() -> str:
    """README from "Try it" to the next heading."""
    return README.read_text().split("\nTry it", 1)[1].split("\n## ", 1)[0]


def try_it_commands() -> list[str]:
    """The shell commands of the section's code block, continuation lines joined."""
    block = re.search(r"```sh\n(.*?)```", try_it_section(), flags=re.DOTALL).group(1)
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def installed_venv(tmp_path):
    """A VENV for make under tmp_path, marked installed: make's PY (this interpreter) runs it."""
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed-run").touch()
    return venv


@pytest.fixture
def make_run(tmp_path):
    """`make run PORT=<free port>` from the repository, its var/ under tmp_path. The venv is
    this interpreter's (`PY`), marked installed so make does not reinstall it."""
    venv = installed_venv(tmp_path)
    port = free_port()
    processes = Processes(tmp_path, fresh_shell_env(tmp_path / "var"))
    make = processes.start("make-run", ["make", "--no-print-directory", "run", f"PORT={port}", f"VENV={venv}",
                                        f"PY={PYTHON}"])
    try:
        wait_for_port(port, make, timeout=240)
        yield port, processes
    finally:
        processes.stop_all()


def test_readme_try_it__every_command_works_as_written(make_run, tmp_path):
    port, processes = make_run
    commands = try_it_commands()
    assert commands[0] == "TOKEN=$(cat var/demo-token)" and len(commands) == 3
    token = (tmp_path / "var" / "demo-token").read_text().strip()
    assert f'"token": "{token}"' in processes.log("make-run")  # "token from make run's output"

    assignments, outputs = [], []
    for command in commands:
        script = "\n".join(["set -e -o pipefail", *assignments, command.replace(README_PORT, f"127.0.0.1:{port}")])
        result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=processes.env, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0 and result.stderr == "", (command, result.stdout, result.stderr)
        outputs.append(result.stdout)
        if re.match(r"^\w+=", command):
            assignments.append(command)

    listing = json.loads(outputs[1])
    assert [(s["name"], s["jobType"], s["recurrence"]["cron"]) for s in listing["results"]] == [
        ("sales-report", "report.sales", "0 9 * * 1-5")  # the weekday 09:00 sales report make run creates
    ]
    instants = [(i["at"], i["local"]) for i in json.loads(outputs[2])["instants"]]
    assert instants[:3] == [
        ("2027-03-13T07:30:00Z", "2027-03-13T02:30:00-05:00"),
        ("2027-03-14T07:30:00Z", "2027-03-14T03:30:00-04:00"),  # 02:30 does not exist that night
        ("2027-03-15T06:30:00Z", "2027-03-15T02:30:00-04:00"),
    ]
    said = try_it_section()  # what the README says the preview shows
    assert all(f"`{at}` (`{local[11:]}`" in said for at, local in instants[:3]), instants
