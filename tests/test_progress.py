"""Long commands: a rich bar with counts and rate on a terminal, plain log lines otherwise."""

import logging
import os
import pty
import select
import threading

import pytest
from django.core.management import call_command

from kernel import progress as progress_module
from kernel.progress import progress
from tests.authority_steps import REPORT, complete_success, create_schedule, stage, start_run


def test_progress__plain_log_lines_when_not_a_terminal(caplog, tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "LOG_EVERY_SECONDS", 0.0)  # a line per advance
    with caplog.at_level(logging.INFO, logger="scheduler.progress"):
        with (tmp_path / "log").open("w") as stream, progress("rows", total=3, stream=stream) as advance:
            workers = [threading.Thread(target=advance) for _ in range(3)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        assert (tmp_path / "log").read_text() == ""  # nothing drawn into a file
    lines = [record.getMessage() for record in caplog.records]
    assert lines[-1].startswith("rows: 3/3 done (") and lines[-1].endswith("/s)")
    assert len(lines) == 4


def test_progress__a_bar_with_counts_and_rate_on_a_terminal():
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            assert terminal.isatty()
            with progress("objects", total=4, stream=terminal) as advance:
                advance(4)
        drawn = b""
        # A pty hands back one write at a time: read until nothing more is waiting.
        while select.select([leader], [], [], 0.2)[0]:
            drawn += os.read(leader, 65536)
        drawn = drawn.decode(errors="replace")
    finally:
        os.close(leader)
        os.close(follower)
    assert "objects" in drawn and "4/4" in drawn and "/s" in drawn


@pytest.mark.django_db
@pytest.mark.usefixtures("file_objects")
def test_verify_integrity__logs_progress_of_the_store_check_off_a_terminal(tenant, caplog, capsys):
    running = start_run(create_schedule(tenant, name="report"))
    complete_success(running.id, running.current_attempt_id, running.fence, stage(running, REPORT))
    with caplog.at_level(logging.INFO, logger="scheduler.progress"):
        call_command("verify_integrity", "--json")
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["result objects checked in the store: 1/1 done"]
    assert capsys.readouterr().out.startswith("{")  # the report alone on stdout


@pytest.mark.django_db
@pytest.mark.usefixtures("file_objects")
def test_cleanup_once__logs_progress_of_what_it_removed_off_a_terminal(tenant, caplog, capsys):
    from tests.runs.test_retention import finished_days_ago, published
    from tests.authority_steps import report_schedule

    schedule = report_schedule(tenant)
    for index in range(2):
        finished_days_ago(published(schedule, f"r{index}".encode()), 40)
    with caplog.at_level(logging.INFO, logger="scheduler.progress"):
        call_command("cleanup", "--once")
    # Two result objects deleted, then their two runs.
    assert [r.getMessage().split(" (")[0] for r in caplog.records if r.name == "scheduler.progress"] == [
        "cleanup: objects, runs and request keys removed: 4 done"]
    assert capsys.readouterr().out.startswith("cleanup: ")  # the pass's summary alone on stdout
