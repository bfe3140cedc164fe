"""Named crash points for fault-injection tests; all off unless SCHEDULER_FAILPOINTS names them."""

import os
import signal

from django.conf import settings


def failpoint(name: str) -> None:
    """Kill this process on the spot (no cleanup, like a power cut) if ``name`` is enabled."""
    if name in settings.FAILPOINTS:
        os.kill(os.getpid(), signal.SIGKILL)


def failpoint_enabled(name: str) -> bool:
    return name in settings.FAILPOINTS
