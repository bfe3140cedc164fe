"""The authority's statement catalogue: every SQL statement the authority runs, one named
function each, entity + verb + guard (``runs_lock_candidates``, ``objects_record_if_staged``,
``attempts_extend_leases_if_owned``), each docstring naming the locks its caller must hold.
The lock order is runs/authority/locks.py's: tenant, schedule, run, object.

One module per table or concern: ``rows`` (any table: the guarded transition, the write
back of loaded rows), ``schedules``, ``claim`` (tenants, concurrency keys, candidates and
attempts of a claim), ``wave`` (a materialization wave's reads and writes), ``objects``
(uploads registered and recorded), ``attempts`` (leases), ``runs`` (progress, ownership
reads), ``completions`` (the group commit's lock and publication), ``outbox``. The
ownership rule's SQL fragment sits beside its Python check in runs/authority/owner.py.

What PostgreSQL and the embedded SQLite spell differently is in ``dialect``, the only
module here (or anywhere in runs/authority/) that asks which database it talks to.
tests/runs/test_statements.py runs every statement on both.
"""
