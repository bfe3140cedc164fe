"""The hot path binds its arrays as PostgreSQL array literals it writes itself
(runs.authority.statements.dialect.pg_array): every value must come back from the server as it went in."""

from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection

from runs.authority.statements.dialect import among, pg_array
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

AWKWARD = ["", "plain", 'a "quoted" word', "back\\slash\\", "it's", "comma,{brace}", " spaced ", "NULL", "null",
           "é ✓", "line\nbreak\ttab", "\\\"", "{}", None]


def select(sql: str, params) -> list:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def test_pg_array__strings_and_nulls_come_back_as_they_went_in():
    assert select("SELECT %s::varchar[]", [pg_array(AWKWARD)]) == AWKWARD
    assert select("SELECT %s::text[]", [pg_array([])]) == []


def test_pg_array__numbers_and_instants_come_back_as_they_went_in():
    numbers = [0, -1, 2**62, None]
    instants = [datetime(2026, 12, 4, 6, 0, 0, 123456, tzinfo=timezone.utc),
                datetime(2026, 3, 29, 1, 30, tzinfo=timezone(timedelta(hours=5, minutes=45)))]
    flags = [True, False, None]

    assert select("SELECT %s::bigint[]", [pg_array(numbers)]) == numbers
    assert select("SELECT %s::timestamptz[]", [pg_array(instants)]) == instants
    assert select("SELECT %s::boolean[]", [pg_array(flags)]) == flags


def test_pg_array__an_untyped_literal_takes_its_columns_type_in_any():
    tenant = make_tenant(name='the "odd" tenant\'s')
    condition, params = among("id", [tenant.id, 'not "it"'])

    assert select(f"SELECT array_agg(name) FROM schedules_tenant WHERE {condition}", params) == [tenant.name]


def test_pg_array__refuses_what_it_cannot_write_exactly():
    with pytest.raises(TypeError):
        pg_array([{"a": 1}])
    with pytest.raises(TypeError):
        pg_array([[1, 2]])
