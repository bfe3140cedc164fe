"""Hints are Celery's own task messages: the relay's fast path builds exactly what
send_task builds (but for the per-message ids), against a real Redis."""

import json
import os

import pytest
import redis

from runs.relay import Hint
from scheduler_project.celery import app
from workers.dispatch import EXECUTE_TASK, publish_hints

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def broker():
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    with app.connection_for_write(REDIS_URL) as connection:
        yield client, app.amqp.Producer(connection.default_channel)
    client.flushdb()


def without_ids(raw: bytes) -> dict:
    message = json.loads(raw)
    for name in ("id", "root_id"):
        assert message["headers"].pop(name)
    for name in ("correlation_id", "delivery_tag"):
        assert message["properties"].pop(name)
    message["headers"].pop("origin")  # host and pid of the sender
    return message


def test_publish_hints__same_message_as_send_task_but_for_its_ids(broker):
    client, producer = broker
    app.send_task(EXECUTE_TASK, args=["run_a", "short"], queue="short", retry=False, producer=producer,
                  ignore_result=True)
    publish_hints([Hint(1, "run_a", "short")], producer)

    sent_by_celery, sent_by_relay = (without_ids(raw) for raw in reversed(client.lrange("short", 0, -1)))
    assert sent_by_relay == sent_by_celery
    assert sent_by_relay["headers"]["task"] == EXECUTE_TASK and sent_by_relay["headers"]["argsrepr"] == "['run_a', 'short']"


def test_publish_hints__one_message_per_hint_on_its_class_queue(broker):
    client, producer = broker
    publish_hints([Hint(i, f"run_{i}", "long" if i % 3 == 0 else "short") for i in range(30)], producer)
    assert (client.llen("short"), client.llen("long")) == (20, 10)
    ids = {json.loads(raw)["headers"]["id"] for raw in client.lrange("short", 0, -1) + client.lrange("long", 0, -1)}
    assert len(ids) == 30
