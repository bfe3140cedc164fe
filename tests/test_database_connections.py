"""How DATABASE_URL, DATABASE_POOLER and the pool settings become Django's DATABASES, per
process kind: the web entry point pools, nothing else does, and a forked child never uses
its parent's pool. The same settings run against PgBouncer in tests/e2e/test_pgbouncer.py."""

import subprocess
import sys
import textwrap

import pytest
from django.core.exceptions import ImproperlyConfigured

from kernel.connections import configure_postgresql, use_connection_pool
from kernel.database_url import parse_database_url
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import ROOT

URL = "postgresql://postgres@127.0.0.1:5432/scheduler?connect_timeout=2"


def configured(pooler: str, **options) -> dict:
    database = parse_database_url(URL, conn_max_age=60)
    database["OPTIONS"].update(options)
    configure_postgresql(database, pooler=pooler, idle_in_transaction_seconds=10)
    return database


def test_direct__postgresql_ends_sessions_idle_in_a_transaction():
    database = configured("")
    assert database["OPTIONS"]["options"] == "-c idle_in_transaction_session_timeout=10000"
    assert database["OPTIONS"]["connect_timeout"] == 2 and database["CONN_HEALTH_CHECKS"]
    assert not database["DISABLE_SERVER_SIDE_CURSORS"]


def test_pgbouncer__no_startup_options_no_prepared_statements_no_held_cursors():
    database = configured("pgbouncer", prepare_threshold=5)
    assert "options" not in database["OPTIONS"]
    assert database["OPTIONS"]["prepare_threshold"] is None
    assert database["DISABLE_SERVER_SIDE_CURSORS"]
    assert database["OPTIONS"]["connect_timeout"] == 2


def test_unknown_pooler__refused():
    with pytest.raises(ImproperlyConfigured, match="DATABASE_POOLER"):
        configured("pgpool")


def test_connection_pool__bounded_with_a_timeout_and_no_persistent_connections():
    database = configured("")
    use_connection_pool(database, max_size=3, timeout=0.5)
    assert database["CONN_MAX_AGE"] == 0
    assert {"min_size": 1, "max_size": 3, "timeout": 0.5}.items() <= database["OPTIONS"]["pool"].items()


def test_connection_pool__again_with_the_same_pool_changes_nothing_another_is_refused_once_connected():
    database = configured("")
    use_connection_pool(database, max_size=3, timeout=0.5)
    pool = database["OPTIONS"]["pool"]
    use_connection_pool(database, max_size=3, timeout=0.5)  # runserver's, then wsgi.py's
    assert database["OPTIONS"]["pool"] is pool


@pytest.mark.django_db
def test_connection_pool__refused_once_this_process_opened_a_connection():
    refused = python("""
        import django; django.setup()  # reads DATABASES: a pool may still be set up after it
        from django.db import connection
        from kernel.connections import use_web_connection_pool
        connection.ensure_connection()  # persistent, outside any pool
        try:
            use_web_connection_pool()
        except Exception as exc:
            print(exc)
    """, DATABASE_URL=database_url_of_test_db())
    assert refused == "use_connection_pool() must run before Django opens a connection"


def test_connection_pool__not_for_sqlite_nor_a_size_of_zero():
    sqlite = parse_database_url("sqlite:///var/x.sqlite3", conn_max_age=60)
    use_connection_pool(sqlite, max_size=3, timeout=1)
    assert "pool" not in sqlite.get("OPTIONS", {})
    database = configured("")
    use_connection_pool(database, max_size=0, timeout=1)
    assert "pool" not in database["OPTIONS"] and database["CONN_MAX_AGE"] == 60


def python(code: str, **env) -> str:
    child_env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
                 "SECRET_KEY": "connections-test", "DATABASE_URL": URL, **env}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=child_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_web_entry_point__pools_with_the_configured_budget_other_processes_do_not():
    web = python("""
        import scheduler_project.wsgi
        from django.db import connection
        print(connection.settings_dict["OPTIONS"]["pool"]["max_size"], connection.settings_dict["CONN_MAX_AGE"])
    """, DATABASE_POOL_MAX_SIZE="6")
    assert web == "6 0"
    loop = python("""
        import django; django.setup()
        from django.db import connection
        print("pool" in connection.settings_dict["OPTIONS"], connection.settings_dict["CONN_MAX_AGE"])
    """)
    assert loop == "False 60"


def web_process(code: str) -> str:
    """What ``code`` prints, run in a web process (scheduler_project.wsgi) whose pool holds one
    connection to the test database; it is given ``connection`` and ``backend_pid()``."""
    from django.db import connection

    prelude = """
        import scheduler_project.wsgi
        from django.db import connection

        def backend_pid():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                return cursor.fetchone()[0]
    """
    database_url = "postgresql://{USER}@{HOST}:{PORT}/{NAME}".format(**connection.settings_dict)
    return python(textwrap.dedent(prelude) + textwrap.dedent(code), DATABASE_URL=database_url,
                  DATABASE_POOL_MAX_SIZE="1")


@pytest.mark.django_db
def test_forked_child__opens_a_pool_of_its_own_and_leaves_the_parents_alone():
    out = web_process("""
        import os
        from django.db.backends.postgresql.base import DatabaseWrapper

        parent = backend_pid()
        connection.close()  # back to the pool, which stays open across the fork
        pid = os.fork()
        if pid == 0:
            child = backend_pid() if not DatabaseWrapper._connection_pools else None
            connection.close()
            os._exit(0 if child not in (None, parent) else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), backend_pid() == parent)
    """)
    assert out == "0 True"


@pytest.mark.django_db
def test_web_pool__hands_out_an_idle_connection_without_a_round_trip_and_replaces_one_the_server_ended():
    """The web pool's check (kernel.connections.check_pooled_connection) sends nothing to a
    connection that sat idle unharmed, so PostgreSQL still shows its last statement; a
    connection whose session the server ended meanwhile is replaced, and the request that
    asks for one gets a working connection, not an error."""
    out = web_process("""
        import time
        import psycopg

        monitor = psycopg.connect("host={HOST} port={PORT} user={USER} dbname={NAME}".format(**connection.settings_dict),
                                  autocommit=True)

        def last_statement(pid):
            return monitor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]

        first = backend_pid()
        connection.close()  # back to the pool
        connection.ensure_connection()  # handed out again, checked
        again = connection.connection.info.backend_pid
        untouched = last_statement(first)
        connection.close()
        monitor.execute("SELECT pg_terminate_backend(%s)", [first])
        time.sleep(0.5)
        replaced = backend_pid()
        connection.close()
        print(again == first, untouched, replaced != first)
    """)
    assert out == "True SELECT pg_backend_pid() True"


@pytest.mark.django_db
def test_timestamptz__read_by_the_compiled_parser_exactly_as_djangos_loader_reads_it():
    """Every connection reads instants with kernel.connections' loader, which parses in C, and
    Django's cursors keep it (they re-register Django's own when the zones differ); what it
    gives is what Django's loader gives: aware, in the connection's zone, to the microsecond,
    from year 1 to 9999."""
    from django.db import connection
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    instants = ("SELECT generate_series('0001-01-01 00:00:00.000001+00'::timestamptz, '9999-12-31 23:59:59+00', "
                "interval '97 days 3 hours 17 minutes 13.123457 seconds') "
                "UNION ALL SELECT '9999-12-31 23:59:59.999999+00' UNION ALL SELECT '2026-03-29 01:30:00.5+01'")
    with connection.cursor() as cursor:
        loader = cursor.cursor.adapters.get_loader(cursor.cursor.adapters.types["timestamptz"].oid, Format.TEXT)
        assert loader.__name__ == "CompiledTimestamptzLoader" and loader.timezone is connection.timezone
        cursor.execute(instants)
        compiled = [row[0] for row in cursor.fetchall()]
    djangos = connection.connection.cursor()
    register_tzloader(connection.timezone, djangos)
    djangos.execute(instants)
    expected = [row[0] for row in djangos.fetchall()]
    assert len(compiled) == len(expected) > 37_000
    assert compiled == expected and {value.tzinfo for value in compiled} == {connection.timezone}
