"""Webhook egress at delivery: every address the host resolves to is checked, the connection
goes to a checked address (no second look-up), and a refused destination fails the effect
with reason egress_denied before any connection is attempted."""

import socket

import pytest

from effects import egress
from effects.delivery import effects_pass
from runs.models import EffectDelivery, EffectIntent
from tests.authority_steps import succeeded_run
from tests.factories import api_client

pytestmark = pytest.mark.django_db(transaction=True)

REBOUND_NAME = "hooks.example.com"  # a public-looking name whose DNS answers 127.0.0.1


@pytest.fixture
def listener():
    """A socket listening on 127.0.0.1 that nothing accepts from: a connection attempt would
    sit in its backlog, so an empty backlog proves none was made."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def connections_made(sock) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


@pytest.fixture
def rebinding_dns(monkeypatch):
    """DNS that answers 127.0.0.1 for REBOUND_NAME; every look-up is recorded."""
    real = socket.getaddrinfo
    lookups = []

    def getaddrinfo(host, port, *args, **kwargs):
        lookups.append(host)
        return real("127.0.0.1" if host == REBOUND_NAME else host, port, *args, **kwargs)

    monkeypatch.setattr(egress.socket, "getaddrinfo", getaddrinfo)
    return lookups


def hook(run) -> EffectIntent:
    return EffectIntent.objects.get(action=f"post-{run.id}")


def assert_denied_without_connection(tenant, run, listener):
    assert effects_pass().outcomes == {"failed": 1}
    assert connections_made(listener) == 0
    intent = hook(run)
    assert (intent.state, intent.reason) == ("failed", "egress_denied")
    assert "egress denied" in EffectDelivery.objects.get(intent=intent).detail
    effects = api_client(tenant).get(f"/api/v1/runs/{run.id}").json()["effects"]
    assert effects == [{"action": f"post-{run.id}", "kind": "webhook", "state": "failed", "reason": "egress_denied"}]


def test_webhook__name_resolving_to_loopback_is_refused_without_a_connection(tenant, listener, rebinding_dns,
                                                                             settings):
    url = f"http://{REBOUND_NAME}:{listener.getsockname()[1]}/hook"
    run = succeeded_run(tenant, effects={"webhook": {"url": url}})  # a public name: accepted when saved
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    assert_denied_without_connection(tenant, run, listener)
    assert rebinding_dns == [REBOUND_NAME]


def test_webhook__host_name_of_this_machine_is_refused_through_the_real_resolver(tenant, listener, settings):
    name = socket.gethostname()
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(name, None)}
    except OSError:
        pytest.skip(f"{name} does not resolve here")
    if not all(egress._literal_address(a).is_loopback for a in resolved):
        pytest.skip(f"{name} resolves to {resolved}, not only to loopback")
    run = succeeded_run(tenant, effects={"webhook": {"url": f"http://{name}:{listener.getsockname()[1]}/hook"}})
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    assert_denied_without_connection(tenant, run, listener)


def test_webhook__stored_internal_url_is_refused_at_delivery(tenant, listener, settings):
    """A URL saved while the operator allowed it (or before the rule existed) is judged again."""
    run = succeeded_run(tenant, effects={"webhook": {"url": f"http://127.0.0.1:{listener.getsockname()[1]}/"}})
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    assert_denied_without_connection(tenant, run, listener)


def test_webhook__allowlisted_receiver_gets_the_request_on_the_checked_address(tenant, receiver, rebinding_dns):
    port = receiver.server.server_address[1]
    run = succeeded_run(tenant, effects={"webhook": {"url": f"http://{REBOUND_NAME}:{port}/hooks/report"}})

    assert effects_pass().outcomes == {"sent": 1}

    [request] = receiver.requests
    assert request["headers"]["Host"] == f"{REBOUND_NAME}:{port}"  # the name, though the socket went to the address
    # The name is looked up once; the socket then connects to the literal address that was checked.
    assert rebinding_dns == [REBOUND_NAME, "127.0.0.1"]
    assert hook(run).state == "sent" and hook(run).reason == ""


def test_webhook__allowlisted_name_may_resolve_to_an_internal_address(tenant, receiver, rebinding_dns, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = [REBOUND_NAME]
    port = receiver.server.server_address[1]
    run = succeeded_run(tenant, effects={"webhook": {"url": f"http://{REBOUND_NAME}:{port}/hooks/report"}})
    assert effects_pass().outcomes == {"sent": 1}
    assert hook(run).state == "sent" and len(receiver.requests) == 1


def test_webhook__redirect_is_an_answer_not_followed(tenant, receiver):
    receiver.script = [(302, 0.0)]
    run = succeeded_run(tenant, effects={"webhook": {"url": receiver.url}})
    assert effects_pass().outcomes == {"failed": 1}
    assert len(receiver.requests) == 1
    intent = hook(run)
    assert intent.state == "failed" and intent.reason == ""  # the receiver refused it; egress did not


def test_webhook__unresolvable_name_stays_pending(tenant, settings):
    run = succeeded_run(tenant, effects={"webhook": {"url": "http://no-such-host.invalid/hook"}})
    assert effects_pass().outcomes == {"not_delivered": 1}
    intent = hook(run)
    assert intent.state == "pending" and "resolve" in EffectDelivery.objects.get(intent=intent).detail
