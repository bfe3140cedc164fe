"""runs_run keeps a tenth of each page free (fillfactor 90) on PostgreSQL.

A table of finished runs has a little free space left on most of its pages (rows of varied
size never fill a page exactly; retention and updates leave more). Without a reserve an
insert takes any page with room for its row, so a wave's new runs went one to a page across
the history's cold pages: on a 2 M history, 1,000 new runs read 1,000 pages from outside
shared_buffers and dirtied 1,070 (162 on an empty table), each a full-page image in the WAL
after a checkpoint. With the reserve a page takes a new row only with the row and 819 bytes
free, so new runs fill fresh pages together (160-180 dirtied per 1,000), and the reserve is
room for the HOT updates of the live runs on each page. The setting takes a SHARE UPDATE
EXCLUSIVE lock (readers and writers go on) and rewrites nothing: pages written from now on
keep the reserve. SQLite has no fillfactor."""

from django.db import migrations

from kernel.migration_ops import Fillfactor


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0029_effect_records"),
    ]

    operations = [
        Fillfactor("runs_run", 90),
    ]
