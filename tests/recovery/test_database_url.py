"""A failover DATABASE_URL names several hosts; dj-database-url alone refuses it. The
settings turn it into libpq's host and port lists, and Django hands those and
target_session_attrs to psycopg unchanged (the failover drill connects through it)."""

import dj_database_url
import pytest
from django.db.backends.postgresql.base import DatabaseWrapper
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kernel.database_url import parse_database_url

FAILOVER_URL = ("postgresql://app:secret@10.0.0.1:5433,10.0.0.2:5434/scheduler"
                "?target_session_attrs=read-write&connect_timeout=2")


def test_single_host__exactly_what_dj_database_url_gives():
    url = "postgresql://app:secret@db.internal:5432/scheduler?sslmode=require"
    assert parse_database_url(url, conn_max_age=60) == dj_database_url.parse(url, conn_max_age=60)
    assert parse_database_url("sqlite:///var/x.sqlite3") == dj_database_url.parse("sqlite:///var/x.sqlite3")


def test_several_hosts__libpq_lists_and_options_kept():
    with pytest.raises(dj_database_url.ParseError):
        dj_database_url.parse(FAILOVER_URL)

    config = parse_database_url(FAILOVER_URL, conn_max_age=60)

    assert (config["HOST"], config["PORT"], config["NAME"]) == ("10.0.0.1,10.0.0.2", "5433,5434", "scheduler")
    assert (config["USER"], config["PASSWORD"], config["CONN_MAX_AGE"]) == ("app", "secret", 60)
    assert config["OPTIONS"] == {"target_session_attrs": "read-write", "connect_timeout": 2}


def test_several_hosts__missing_port_is_the_default_and_ipv6_loses_its_brackets():
    config = parse_database_url("postgresql://u@[::1]:5433,db2/scheduler")
    assert (config["HOST"], config["PORT"]) == ("::1,db2", "5433,5432")


def test_several_hosts__django_passes_them_to_psycopg():
    settings = {**parse_database_url(FAILOVER_URL), "TIME_ZONE": None, "CONN_HEALTH_CHECKS": False,
                "AUTOCOMMIT": True, "ATOMIC_REQUESTS": False, "TEST": {}}
    params = DatabaseWrapper(settings).get_connection_params()
    params.pop("context", None)
    params.pop("cursor_factory", None)

    conninfo = conninfo_to_dict(make_conninfo(**params))

    assert conninfo["host"] == "10.0.0.1,10.0.0.2" and conninfo["port"] == "5433,5434"
    assert conninfo["target_session_attrs"] == "read-write" and conninfo["dbname"] == "scheduler"
