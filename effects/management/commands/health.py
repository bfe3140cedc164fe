"""The health loop: incidents (runs.health) then their alerts (effects.alerts), one pass after the
other. Here, above both, since alerts are effects."""

from django.conf import settings

from effects.alerts import alerts_pass
from runs.health.evaluation import health_pass
from runs.loops import LoopCommand


class Command(LoopCommand):
    help = ("Evaluate schedule health: open and resolve incidents on database time, then create the alert "
            "intents due (the effects loop delivers them). Any number may run; --once does one pass.")
    name = "health"
    default_interval = settings.HEALTH_INTERVAL_SECONDS

    def step(self, **options):
        stats = health_pass()
        alerts = alerts_pass()
        return f"{stats} alerts={alerts}" if stats or alerts else ""
