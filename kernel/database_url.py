"""DATABASE_URL to Django settings, including libpq's multi-host form used for failover:

    postgresql://user@10.0.0.1:5432,10.0.0.2:5432/scheduler?target_session_attrs=read-write

dj-database-url cannot split a netloc holding several hosts, so the first one is parsed in
their place and HOST/PORT become libpq's comma lists. Query parameters such as
``target_session_attrs`` and ``connect_timeout`` go to OPTIONS, which Django hands to
psycopg unchanged: a process connects to whichever listed server accepts writes.
"""

from __future__ import annotations

import dj_database_url

DEFAULT_PORT = "5432"


def parse_database_url(url: str, **options) -> dict:
    """dj_database_url.parse(url, **options), accepting several comma-separated hosts."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not sep or "," not in hosts:
        return dj_database_url.parse(url, **options)
    pairs = [_host_and_port(spec) for spec in hosts.split(",")]
    first_host, first_port = pairs[0]
    config = dj_database_url.parse(f"{scheme}://{userinfo}{at}{first_host}:{first_port}{slash}{tail}", **options)
    config["HOST"] = ",".join(host.strip("[]") for host, _ in pairs)
    config["PORT"] = ",".join(port for _, port in pairs)
    return config


def _host_and_port(spec: str) -> tuple[str, str]:
    """'h:5433' -> ('h', '5433'); '[::1]:5433' keeps its brackets until joined; no port -> 5432."""
    if spec.startswith("["):
        host, _, port = spec.partition("]")
        return host + "]", port.lstrip(":") or DEFAULT_PORT
    host, colon, port = spec.rpartition(":")
    return (host, port) if colon else (spec, DEFAULT_PORT)
