"""Effect targets a tenant may save: webhooks to public hosts only (unless allowlisted),
email subjects and schedule names (the default subject) that cannot add headers or make a
message unsendable. Each refusal is 400 on the offending field."""

import pytest

from tests.api.conftest import assert_error, create_schedule

SCHEDULES = "/api/v1/schedules"
URL_FIELD = "effects.webhook.url"

INTERNAL_URLS = [
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
    "http://127.0.0.1:5432/",
    "http://[::1]:22/",
    "http://:8080/",  # empty host: localhost to most clients
    "http://localhost/hook",
    "http://LOCALHOST./hook",
    "http://api.localhost/hook",
    "http://10.0.0.5/",
    "http://172.16.3.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://0.0.0.0/",
    "http://[::]/",
    "http://224.0.0.1/",  # multicast
    "http://[ff02::1]/",
    "http://[fd00::1]/",  # unique-local
    "http://[fe80::1]/",  # link-local
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped loopback
    "http://[::ffff:7f00:1]/",
    "http://[2002:7f00:1::1]/",  # 6to4 of 127.0.0.1
    "http://127.1/",  # shorthand forms resolvers accept
    "http://2130706433/",
    "http://0x7f000001/",
    "http://example.com:99999/",  # port out of range
    "http://example.com:0/",
    "http://\uff11\uff12\uff17.0.0.1/",  # fullwidth digits: the resolver reads 127.0.0.1
    "http://127\u30020.0.1/",  # ideographic full stop: a dot to IDNA
    "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",  # fullwidth localhost
    "http://" + "\u00e9" * 70 + ".example/",  # a label IDNA refuses
]


def webhook_body(url):
    return {"effects": {"webhook": {"url": url}}}


@pytest.mark.parametrize("url", INTERNAL_URLS)
def test_create__webhook_to_an_internal_host_is_refused(client, url):
    response = client.post(SCHEDULES, {**_schedule_body(), **webhook_body(url)})
    assert_error(response, 400, "invalid_request", field=URL_FIELD)


@pytest.mark.parametrize("url", ["http://169.254.169.254/", "http://[::1]:22/", "http://localhost/"])
def test_patch__webhook_to_an_internal_host_is_refused(client, schedule, url):
    body = {"expectedRevision": schedule["revision"], **webhook_body(url)}
    response = client.patch(f"{SCHEDULES}/{schedule['scheduleId']}", body)
    assert_error(response, 400, "invalid_request", field=URL_FIELD)
    assert client.get(f"{SCHEDULES}/{schedule['scheduleId']}").json()["revision"] == schedule["revision"]


@pytest.mark.parametrize("url", ["https://hooks.example.com/report?x=1", "http://93.184.216.34:8080/hook",
                                 "https://[2606:4700::1111]/hook"])
def test_create__webhook_to_a_public_host_is_accepted(client, url):
    assert create_schedule(client, **webhook_body(url))["effects"]["webhook"]["url"] == url


def test_create__allowlisted_networks_and_names_open_internal_receivers(client, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8", "receiver.internal"]
    for url in ("http://10.1.2.3:9000/hook", "http://receiver.internal/hook"):
        create_schedule(client, name=url, **webhook_body(url))
    response = client.post(SCHEDULES, {**_schedule_body(), **webhook_body("http://192.168.0.1/")})
    assert_error(response, 400, "invalid_request", field=URL_FIELD)


@pytest.mark.parametrize("subject", ["Report\r\nBcc: victim@example.com", "Report\rX", "Report\nX", "Report\x00"])
def test_create__email_subject_with_cr_lf_or_nul_is_refused(client, subject):
    body = {**_schedule_body(), "effects": {"email": {"to": ["sales@example.com"], "subject": subject}}}
    assert_error(client.post(SCHEDULES, body), 400, "invalid_request", field="effects.email.subject")


@pytest.mark.parametrize("address", ["a@[127.0.0.1]", "a@[IPv6:::1]", "a@[10.0.0.5]", "a@127.0.0.1", "a@127.0.0.1.",
                                     "a@\uff11\uff12\uff17.0.0.1", "a\x07@example.com", "a@exam\u202eple.com"])
def test_create__email_recipient_at_an_address_literal_or_with_a_control_character_is_refused(client, address):
    body = {**_schedule_body(), "effects": {"email": {"to": ["sales@example.com", address]}}}
    assert_error(client.post(SCHEDULES, body), 400, "invalid_request", field="effects.email.to.1")


@pytest.mark.parametrize("address", ["sales@example.com", "ops+daily@mail.example.co.uk", "k\u00e4the@b\u00fccher.de",
                                     "a@host1.example", "a@123.example.com"])
def test_create__email_recipient_at_a_domain_name_is_accepted(client, address):
    assert create_schedule(client, effects={"email": {"to": [address]}})["effects"]["email"]["to"] == [address]


def test_save_and_delivery_judge_a_webhook_host_alike():
    """One rule: a host refused at delivery (before any look-up leaves the literal) is
    refused at save, whatever script its digits and dots are written in."""
    from effects import egress

    for url in INTERNAL_URLS:
        assert egress.url_refusal(url), url
        with pytest.raises(egress.EgressDenied):
            egress.resolve_destination(url)


# Control, format (bidi override, zero-width), line and paragraph separator characters.
NOT_ONE_LINE = ["Report\r\nBcc: victim@example.com", "Report\rX", "Report\nX", "Report\x07", "Report\tX",
                "\u202eReport", "Re\u200bport", "Report\u2028X", "Report\u2029X", "Report\x1b[31m", "Report\x85",
                "Report\ufeff"]


@pytest.mark.parametrize("subject", NOT_ONE_LINE)
def test_create__email_subject_with_a_control_or_format_character_is_refused(client, subject):
    body = {**_schedule_body(), "effects": {"email": {"to": ["sales@example.com"], "subject": subject}}}
    assert_error(client.post(SCHEDULES, body), 400, "invalid_request", field="effects.email.subject")


@pytest.mark.parametrize("name", NOT_ONE_LINE)
def test_create_and_patch__name_with_a_control_or_format_character_is_refused(client, schedule, name):
    response = client.post(SCHEDULES, {**_schedule_body(), "name": name})
    assert_error(response, 400, "invalid_request", field="name")
    assert "U+" in response.json()["error"]["message"]
    patched = client.patch(f"{SCHEDULES}/{schedule['scheduleId']}", {"expectedRevision": 1, "name": name})
    assert_error(patched, 400, "invalid_request", field="name")
    assert [s["name"] for s in client.get(SCHEDULES).json()["results"]] == [schedule["name"]]


@pytest.mark.parametrize("name", ["Ventes – rapport", "売上レポート", "report 🚀", "a  b", "Zürich/Genève"])
def test_create__names_in_any_script_are_accepted(client, name):
    assert create_schedule(client, name=name)["name"] == name


def _schedule_body():
    from tests.api.conftest import CRON_BODY

    return dict(CRON_BODY)
