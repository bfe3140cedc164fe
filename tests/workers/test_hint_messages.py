"""Hints are Celery's own task messages: the relay's fast path builds exactly what
send_task builds (but for the per-message ids), against a real Redis."""

import base64
import json

import pytest
import redis

from runs.relay import Hint
from scheduler_project.celery import app
from workers.hint_publisher import EXECUTE_TASK, publish_hints
from tests.servers import shared_redis_url

REDIS_URL = shared_redis_url()


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
    app.send_task(EXECUTE_TASK, args=["run_a", "short", 1], queue="short", retry=False, producer=producer,
                  ignore_result=True)
    publish_hints([Hint(1, "run_a", "short")], producer)

    sent_by_celery, sent_by_relay = (without_ids(raw) for raw in reversed(client.lrange("short", 0, -1)))
    assert sent_by_relay == sent_by_celery
    assert sent_by_relay["headers"]["task"] == EXECUTE_TASK and sent_by_relay["headers"]["argsrepr"] == "['run_a', 'short', 1]"


def test_publish_hints__one_message_per_class_batch_of_hints_on_its_class_queue(broker, settings):
    """20 short hints in messages worth up to 8 claims (8 + 8 + 4); long hints one each."""
    settings.CLAIM_BATCH = {"short": 8}
    client, producer = broker
    publish_hints([Hint(i, f"run_{i}", "long" if i % 3 == 0 else "short") for i in range(30)], producer)
    assert (client.llen("short"), client.llen("long")) == (3, 10)
    messages = [json.loads(raw) for raw in client.lrange("short", 0, -1) + client.lrange("long", 0, -1)]
    assert len({m["headers"]["id"] for m in messages}) == 13
    worth = {"short": 0, "long": 0}
    for message in messages:
        run_id, queue, claims = json.loads(base64.b64decode(message["body"]))[0]
        worth[queue] += claims
    assert worth == {"short": 20, "long": 10}
