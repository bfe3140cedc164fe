"""Register the housekeeping periodic tasks with django-celery-beat's database scheduler."""

from django.core.management.base import BaseCommand
from django_celery_beat.models import IntervalSchedule, PeriodicTask

# Backstops only: the relay and sweep processes do this every second; these keep the
# system recovering if those processes are down. Every task is idempotent, so two beat
# processes publishing each one twice changes nothing.
HOUSEKEEPING = {
    "scheduler relay backstop": ("scheduler.relay", 10),
    "scheduler lease sweep": ("scheduler.sweep", 5),
    "scheduler effect delivery": ("scheduler.effects", 10),
    "scheduler retention cleanup": ("scheduler.cleanup", 300),
}


class Command(BaseCommand):
    help = "Create or update the housekeeping PeriodicTask rows (idempotent)."

    def handle(self, *args, **options):
        for name, (task, seconds) in HOUSEKEEPING.items():
            every, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
            PeriodicTask.objects.update_or_create(
                name=name, defaults={"task": task, "interval": every, "queue": "housekeeping", "enabled": True}
            )
            self.stdout.write(f"{name}: {task} every {seconds}s")
