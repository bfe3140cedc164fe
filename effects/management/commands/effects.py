import json
import logging

from django.core.management.base import BaseCommand, CommandError

from effects.delivery import RESOLUTIONS, effect_resolve, effects_pass
from effects.models import EffectIntent
from runs.loops import Stopper, run_forever
from scheduler_project.errors import DomainError

log = logging.getLogger("scheduler.effects")


class Command(BaseCommand):
    help = (
        "Deliver committed effect intents (email, webhook); polls every second, --once does one pass. "
        "`effects list [--state uncertain]` shows intents; "
        "`effects resolve <action> --as sent|failed|retry` records an operator's decision."
    )

    def add_arguments(self, parser):
        parser.add_argument("operation", nargs="?", choices=["run", "list", "resolve"], default="run")
        parser.add_argument("action", nargs="?", help="resolve: the intent's action, e.g. send-run_...")
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--interval", type=float, default=1.0)
        parser.add_argument("--as", dest="resolution", choices=RESOLUTIONS)
        parser.add_argument("--note", default="")
        parser.add_argument("--state", help="list: only intents in this state")

    def handle(self, *args, operation, action, once, interval, resolution, note, state, **options):
        if operation == "resolve":
            return self._resolve(action, resolution, note)
        if operation == "list":
            return self._list(state)

        def step():
            stats = effects_pass()
            if stats.deliveries or stats.recovered:
                log.info("effects: %s", stats)
            return stats

        if once:
            self.stdout.write(f"effects: {step()}")
            return
        run_forever(step, interval=interval, stopper=Stopper(), name="effects")

    def _resolve(self, action, resolution, note):
        if not action or not resolution:
            raise CommandError("usage: effects resolve <action> --as sent|failed|retry [--note TEXT]")
        try:
            intent = effect_resolve(action=action, resolution=resolution, actor="manage.py effects", note=note)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(json.dumps({"action": intent.action, "state": intent.state}))

    def _list(self, state):
        intents = EffectIntent.objects.order_by("created_at")
        if state:
            intents = intents.filter(state=state)
        for intent in intents[:1000]:
            self.stdout.write(json.dumps({
                "action": intent.action, "kind": intent.kind, "state": intent.state,
                "deliveries": intent.delivery_count, "externalId": intent.external_id or None,
            }))
