"""The operator credential: made by its command, accepted by the forecast only."""

import json

from django.core.management import call_command

from tests.api.conftest import assert_error
from tests.factories import api_client


def test_create_operator_token__reads_the_forecast_and_nothing_of_a_tenant(db, capsys):
    call_command("create_operator_token", "ops")
    created = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert created["tokenId"].startswith("tok")
    operator = api_client(created["token"])
    assert operator.get("/api/v1/capacity/forecast").json()["scope"] == "installation"
    assert_error(operator.get("/api/v1/schedules"), 403, "forbidden")
    assert_error(operator.post("/api/v1/worker/claim", {}), 403, "forbidden")
