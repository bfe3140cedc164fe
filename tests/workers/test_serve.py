"""`manage.py serve` (make run): links point at the server it starts unless configured."""

from workers.management.commands.serve import _public_address


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
