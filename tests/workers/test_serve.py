"""`manage.py serve` (make run): links point at the server it starts unless configured, and
its web process keeps gunicorn's control socket in the installation's var/."""

from workers.management.commands.serve import _public_address, service_commands


def test_serve__links_point_at_this_server_unless_configured(monkeypatch):
    monkeypatch.delenv("PUBLIC_BASE_URL", raising=False)
    monkeypatch.delenv("ALLOWED_HOSTS", raising=False)
    assert _public_address("127.0.0.1", 8123) == {
        "PUBLIC_BASE_URL": "http://127.0.0.1:8123", "ALLOWED_HOSTS": "127.0.0.1,localhost,[::1]",
    }
    assert _public_address("0.0.0.0", 80)["PUBLIC_BASE_URL"] == "http://127.0.0.1:80"
    assert _public_address("::1", 80)["PUBLIC_BASE_URL"] == "http://[::1]:80"
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://scheduler.example.com")
    assert _public_address("127.0.0.1", 8123) == {}


def test_service_commands__gunicorn_control_socket_in_this_installations_var(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    web = service_commands(host="127.0.0.1", port=8123, redis=False)["web"]
    assert web[web.index("--control-socket") + 1] == str(tmp_path / "var" / "gunicorn.ctl")
