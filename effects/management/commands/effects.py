import json

from django.core.management.base import CommandError

from effects.delivery import RESOLUTIONS, effect_resolve, effects_pass
from kernel.errors import DomainError
from runs.loops import LoopCommand
from runs.models import EffectIntent


class Command(LoopCommand):
    help = (
        "Deliver committed effect intents (email, webhook); polls every second, --once does one pass. "
        "`effects list [--state uncertain]` shows intents; "
        "`effects resolve <action> --as sent|failed|retry` records an operator's decision."
    )
    name = "effects"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("operation", nargs="?", choices=["run", "list", "resolve"], default="run")
        parser.add_argument("action", nargs="?", help="resolve: the intent's action, e.g. send-run_...")
        parser.add_argument("--as", dest="resolution", choices=RESOLUTIONS)
        parser.add_argument("--note", default="")
        parser.add_argument("--state", help="list: only intents in this state")

    def handle(self, *args, operation, action, resolution, note, state, **options):
        if operation == "resolve":
            return self._resolve(action, resolution, note)
        if operation == "list":
            return self._list(state)
        return super().handle(*args, **options)

    def step(self, **options):
        return effects_pass()

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
