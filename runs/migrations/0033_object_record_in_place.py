"""Recording an upload's version rewrites the object in its page (a HOT update), not as a new
entry in each of the registry's indexes.

The index of objects to count in their tenant's storage (`object_uncounted_idx`) took an
object only once its upload was recorded (`size IS NOT NULL`), so recording it changed a
column an index reads: six index entries, one in each of the registry's five whole indexes
and the object's entry into that one. The new index (`object_to_count_idx`) takes every
object not counted yet from its registration on; counting passes by those whose upload is
not recorded. Few are in it at any time either way.

Inserts fill a page of `runs_storedobject` to 65 percent, the rest kept for updates: a
registered object is some 250 bytes and its recorded version some 440, so each row's next
version needs room of its own. At 65 about half the recordings are HOT in a burst, for 35 %
more heap per run (BENCHMARKS.md, "Objects recorded in their pages").

Online on PostgreSQL: the new index is built CONCURRENTLY before the old one is dropped
CONCURRENTLY; the fillfactor takes a SHARE UPDATE EXCLUSIVE lock (readers and writers go on)
and rewrites nothing."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline, Fillfactor, RemoveIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0032_updates_in_place"),
    ]

    operations = [
        AddIndexOnline(
            model_name="storedobject",
            index=models.Index(
                condition=models.Q(("counted", False), ("state__in", ["staged", "referenced"])),
                fields=["id"], name="object_to_count_idx",
            ),
        ),
        RemoveIndexOnline(model_name="storedobject", name="object_uncounted_idx"),
        Fillfactor("runs_storedobject", 65),
    ]
