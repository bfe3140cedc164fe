"""deploy/grafana/scheduler.json and deploy/prometheus/alerts.yml name only metrics that
/metrics exports, with the label values they select on (the 10 s bucket of the start SLO)."""

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.authority_steps import create_schedule, start_run

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "scheduler.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
METRIC = re.compile(r"\b(scheduler_[a-z0-9_]+)")
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")

pytestmark = pytest.mark.django_db


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["panels"], "the dashboard has panels"
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    expressions += [variable["query"] for variable in dashboard["templating"]["list"] if variable["type"] == "query"]
    return expressions


def alert_expressions() -> list[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert any(rule.get("alert") == "SchedulerStartSLOFastBurn" for rule in rules)
    return [rule["expr"] for rule in rules]


def named_metrics(expressions: list[str]) -> set[str]:
    return {name for expr in expressions for name in METRIC.findall(expr)}


def exported(text: str) -> set[str]:
    names = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    names |= {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    histograms = set(re.findall(r"^# TYPE (\S+) histogram", text, re.M))
    return names | {f"{name}{suffix}" for name in histograms for suffix in HISTOGRAM_SERIES}


@pytest.fixture
def metrics_text(client, tenant):
    start_run(create_schedule(tenant))  # a first start: due-to-start and queue delay are observed
    response = client.get("/metrics")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_every_metric_named_is_exported_by_metrics(metrics_text, source):
    expressions = dashboard_expressions() if source == "dashboard" else alert_expressions()
    names = named_metrics(expressions)  # recording rules (scheduler:...) do not match the pattern
    assert len(names) >= 5, names
    assert sorted(names - exported(metrics_text)) == []


def test_the_slo_bucket_exists(metrics_text):
    assert 'le="10.0"' in " ".join(alert_expressions())
    assert re.search(r'^scheduler_due_to_start_seconds_bucket\{[^}]*le="10\.0"', metrics_text, re.M)


def test_a_misspelt_metric_would_be_caught(metrics_text):
    assert named_metrics(["rate(scheduler_expired_lease_total[5m])"]) - exported(metrics_text) == {
        "scheduler_expired_lease_total"
    }
