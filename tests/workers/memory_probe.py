"""A worker process that claims one long run, executes it and prints, as its last line of
stdout, its resident memory before the claim and its peak from then on (KiB, from the
kernel: the peak is reset at rest through /proc/self/clear_refs, so start-up does not count).
Started by tests/workers/test_streamed_output_memory.py with the test's database and store."""

import json
import os


def status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """From now on VmHWM is the peak since this call (Linux 4.0+)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    import django

    django.setup()
    from objectstore import get_object_store
    from workers.runtime import claim_and_execute

    get_object_store()  # the store's client belongs to a worker at rest
    # Not ru_maxrss: it keeps the peak of the forking parent (pytest) across exec.
    reset_peak()
    at_rest = status_kib("VmRSS")
    held_mb = int(os.environ.get("PROBE_HOLD_MB", "0"))
    if held_mb:  # the probe's own check: memory a job holds shows in the peak
        held = b"x" * (held_mb * 1024 * 1024)
        outcomes = []
        del held
    else:
        outcomes = claim_and_execute(resource_classes=["long"], worker_label="memory-probe")
    print(json.dumps({"atRestKiB": at_rest, "peakKiB": status_kib("VmHWM"),
                      "outcomes": [[o.run_id, o.outcome, o.error] for o in outcomes]}))


if __name__ == "__main__":
    main()
