"""Live indexes a claim cannot mistake: the schedule's unfinished runs and the tenant's history
by state are keyed on finished_at instead of state, and running runs have one index instead
of two, without the lease, so that heartbeats are HOT updates (models.Run says why). Each new index is built CONCURRENTLY before the one it replaces
is dropped CONCURRENTLY on PostgreSQL: writers never wait, and no query of this release is
without its index. Processes of the previous release still running after it find a
schedule's unfinished runs by its history until they are restarted: restart them right after
the migration (a build that fails leaves an INVALID index: drop it and migrate again)."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0017_run_strict'),
    ]

    operations = [
        AddIndexOnline(
            model_name='run',
            index=models.Index(condition=models.Q(('finished_at__isnull', True)), fields=['schedule', 'scheduled_at', 'id'],
                               name='run_unfinished_idx'),
        ),
        AddIndexOnline(
            model_name='run',
            index=models.Index(condition=models.Q(('finished_at__isnull', False)),
                               fields=['tenant', 'state', '-scheduled_at', '-id'], name='run_finished_state_idx'),
        ),
        AddIndexOnline(
            model_name='run',
            index=models.Index(condition=models.Q(('state', 'running')), fields=['tenant'], name='run_running_idx'),
        ),
        RemoveIndexOnline(model_name='run', name='run_active_idx'),
        RemoveIndexOnline(model_name='run', name='run_tenant_state_idx'),
        RemoveIndexOnline(model_name='run', name='run_lease_idx'),
        RemoveIndexOnline(model_name='run', name='run_tenant_running_idx'),
    ]
