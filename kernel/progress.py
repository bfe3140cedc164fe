"""Progress of long commands: a bar with counts and rate (rich) when the stream is a
terminal, plain log lines otherwise (every LOG_EVERY_SECONDS and at the end), so a cron
job's or container's log gets lines, not control characters."""

import logging
import sys
import threading
import time
from contextlib import contextmanager

logger = logging.getLogger("scheduler.progress")
LOG_EVERY_SECONDS = 5.0


@contextmanager
def progress(description: str, *, total: int | None = None, stream=None):
    """Yields ``advance(n=1)``; safe to call from several threads."""
    stream = stream if stream is not None else sys.stderr
    if _is_terminal(stream):
        with _bar(description, total, stream) as advance:
            yield advance
    else:
        with _log_lines(description, total) as advance:
            yield advance


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def _bar(description: str, total: int | None, stream):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task):
            return Text(f"{task.speed or 0:,.0f}/s")

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=stream)) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)


class _Counter:
    def __init__(self, description: str, total: int | None):
        self.description, self.total = description, total
        self.done, self.started = 0, time.monotonic()
        self.logged = self.started
        self.lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        with self.lock:
            self.done += n
            now = time.monotonic()
            if now - self.logged >= LOG_EVERY_SECONDS:
                self.logged = now
                self.log()

    def log(self, final: bool = False) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        logger.info("%s: %d%s%s (%.0f/s)", self.description, self.done, of, " done" if final else "",
                    self.done / elapsed)


@contextmanager
def _log_lines(description: str, total: int | None):
    counter = _Counter(description, total)
    yield counter.advance
    counter.log(final=True)
