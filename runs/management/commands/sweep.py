from runs.loops import LoopCommand, sweep_pass


class Command(LoopCommand):
    help = "Expire passed leases and re-queue their runs (polls every second; --once does one pass)."
    name = "sweep"

    def step(self, **options):
        return sweep_pass()
