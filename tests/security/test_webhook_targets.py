"""Issue 29, finding 12 (webhook SSRF): an alert rule's webhook made the server POST to addresses
the old deny-list let through — carrier-grade NAT (with Alibaba's metadata service at
100.100.100.200), 192.0.0.0/24, site-local fec0::/10, 6to4 of loopback.

The policy is now an allow-list (tally/webhook_targets.py). A corpus of addresses and URL forms an
attacker would try (numeric IPv4 spellings, IPv4 inside IPv6, tunnels, userinfo and fragment
tricks, Unicode look-alikes, ports) is refused where rules are created — the policy itself, the
`tally alerts add` command, the dashboard's Alerts panel on the real server — and again at
delivery for every address a name resolves to; a handful of global destinations is accepted."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator

import httpx
import pytest
from click.testing import CliRunner

from alerts.delivery import RefusedDestination, check_destination
from dashboard.alerts_panel import RULE_FORM
from storage.alert_rules import InvalidRule, check_webhook_destination, make_rule
from tally.settings import Settings
from tests.security.conftest import Tenants, bearer, signed_in

pytestmark = pytest.mark.integration

REFUSED = [
    # loopback, in every spelling the resolver reads as 127.0.0.1
    "http://127.0.0.1/hook",
    "http://2130706433/hook",
    "http://0x7f.1/hook",
    "http://0x7f000001/hook",
    "http://0177.0.0.1/hook",
    "http://127.1/hook",
    "http://localhost/hook",
    "http://localhost./hook",
    "http://127.0.0.1:8123/?query=DROP",  # the ClickHouse endpoint's port
    "http://[::1]:22/",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[::ffff:7f00:1]/hook",
    "http://[::127.0.0.1]/hook",  # IPv4-compatible, deprecated
    # cloud metadata services
    "http://169.254.169.254/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://192.0.0.192/",
    "http://168.63.129.16/machine",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/",
    # tunnels whose far end is not global
    "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
    "http://[2002:a9fe:a9fe::]/hook",  # 6to4 of 169.254.169.254
    "http://[2002:a00:1::]/hook",  # 6to4 of 10.0.0.1
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",  # Teredo
    "http://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of 169.254.169.254
    "http://[64:ff9b::7f00:1]/hook",  # NAT64 of 127.0.0.1
    "http://[64:ff9b:1::1]/hook",  # local-use NAT64
    # special-purpose ranges
    "http://100.64.0.1/hook",
    "http://192.0.0.9/hook",
    "http://192.88.99.1/hook",
    "http://198.18.0.1/hook",
    "http://240.0.0.1/hook",
    "http://255.255.255.255/hook",
    "http://224.0.0.1/hook",
    "http://0.0.0.0/hook",
    "http://0/hook",
    "http://[::]/hook",
    "http://[fec0::1]/hook",
    "http://[fe80::1]/hook",
    "http://[fe80::1%25eth0]/hook",
    "http://[ff02::1]/hook",
    "http://[2001:db8::1]/hook",
    "http://[3fff::1]/hook",
    # private networks (without TALLY_ALERT_WEBHOOK_PRIVATE)
    "http://10.0.0.1/hook",
    "http://172.16.0.1/hook",
    "http://192.168.1.1:8080/hook",
    "http://[fd12:3456::1]/hook",
    # URL tricks
    "http://evil@127.0.0.1/hook",
    "http://hooks.example.com@127.0.0.1/hook",
    "http://127.0.0.1\\@hooks.example.com/hook",
    "http://127.0.0.1#@hooks.example.com/hook",
    "http://127.0.0.1:0/hook",
    "http://hooks.example.com:99999/hook",
    "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/hook",  # IDN look-alikes of localhost and 127.0.0.1
    "http://①②⑦.0.0.1/hook",
    "http://127。0。0。1/hook",
    "gopher://127.0.0.1:6379/_INFO",
]
ACCEPTED = [
    "https://hooks.example.com/tally",  # a name: checked again at every delivery
    "https://xn--bcher-kva.example/hook",  # an international name in its xn-- form
    "https://93.184.216.34/hook",
    "http://8.8.8.8:8443/hook",
    "https://[2606:4700:4700::1111]/hook",
    "https://[::ffff:1.1.1.1]/hook",
    "https://[2002:808:808::1]/hook",  # 6to4 of 8.8.8.8
    "https://[64:ff9b::808:808]/hook",  # NAT64 of 8.8.8.8
]
# Opened by TALLY_ALERT_WEBHOOK_PRIVATE (a receiver on the host or the LAN), and nothing else.
PRIVATE = ["http://127.0.0.1:9000/hook", "http://localhost/hook", "http://10.1.2.3/", "http://[fd12::1]/"]
NEVER_EVEN_PRIVATE = [
    "http://169.254.169.254/",
    "http://100.100.100.200/",
    "http://100.64.0.1/",
    "http://[fd00:ec2::254]/",
    "http://[2002:7f00:1::]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2001::1]/",
    "http://[fec0::1]/",
    "http://192.0.0.192/",
]


def refused_at_creation(url: str, private_webhooks: bool = False) -> str:
    """The error a rule with this webhook gets before it is stored, or "" if it would be."""
    try:
        rule = make_rule(site="example.com", kind="pageviews_above", threshold=5, webhook_url=url)
        check_webhook_destination(rule.webhook_url, private_webhooks)
    except InvalidRule as refused:
        return str(refused)
    return ""


@pytest.mark.parametrize("url", REFUSED)
def test_an_attackers_webhook_is_refused_when_the_rule_is_made(url: str) -> None:
    assert refused_at_creation(url).startswith("webhook_url: ")


@pytest.mark.parametrize("url", ACCEPTED)
def test_a_global_webhook_is_accepted(url: str) -> None:
    assert refused_at_creation(url) == ""


@pytest.mark.parametrize("url", PRIVATE)
def test_loopback_and_private_webhooks_need_the_operators_setting(url: str) -> None:
    assert "TALLY_ALERT_WEBHOOK_PRIVATE" in refused_at_creation(url)
    assert refused_at_creation(url, private_webhooks=True) == ""


@pytest.mark.parametrize("url", NEVER_EVEN_PRIVATE)
def test_metadata_tunnels_and_special_ranges_stay_refused_with_the_setting(url: str) -> None:
    assert refused_at_creation(url, private_webhooks=True).startswith("webhook_url: ")


@pytest.fixture
def resolves_to(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], None]:
    """Make `hooks.attacker.example` resolve to the given addresses (all of them at once)."""
    real = socket.getaddrinfo

    def answer(addresses: list[str]) -> None:
        def getaddrinfo(host: object, port: object, *args: object, **kwargs: object) -> list:
            if host != "hooks.attacker.example":
                return real(host, port, *args, **kwargs)  # type: ignore[arg-type]
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses
            ]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    return answer


@pytest.mark.parametrize(
    "addresses",
    [["93.184.216.34", "100.100.100.200"], ["2606:4700:4700::1111", "fec0::1"], ["8.8.8.8", "127.0.0.1"]],
)
def test_a_name_with_one_bad_address_among_good_ones_is_refused_at_creation_and_delivery(
    resolves_to: Callable[[list[str]], None], addresses: list[str]
) -> None:
    resolves_to(addresses)
    url = "https://hooks.attacker.example/hook"
    assert addresses[-1] in refused_at_creation(url)
    with pytest.raises(RefusedDestination, match=addresses[-1]):
        check_destination(url, allow_private=False)


def test_a_name_with_only_global_addresses_is_delivered_to_the_first(
    resolves_to: Callable[[list[str]], None],
) -> None:
    resolves_to(["93.184.216.34", "2606:4700:4700::1111"])
    assert check_destination("https://hooks.attacker.example/hook", allow_private=False) == "93.184.216.34"


# --- the doors that create rules, on the real store and the real server -----------------------


@pytest.fixture(scope="module")
def cli_env(dashboard_settings: Settings) -> Iterator[dict[str, str]]:
    yield {key: value for key, value in os.environ.items() if not key.startswith("TALLY_")} | (
        dashboard_settings.environment()
    )


def cli_add(env: dict[str, str], site: str, url: str) -> tuple[int, str]:
    from ops.cli import main

    result = CliRunner().invoke(
        main, ["alerts", "add", site, "pageviews_above", "--above", "5", "--webhook", url], env=env
    )
    return result.exit_code, result.output


def test_tally_alerts_add_refuses_every_attackers_webhook_in_one_line(
    tenants: Tenants, cli_env: dict[str, str]
) -> None:
    for url in REFUSED:
        code, output = cli_add(cli_env, tenants.site_b, url)
        assert code != 0 and "webhook_url: " in output and "Traceback" not in output, (url, output)
    code, output = cli_add(cli_env, tenants.site_b, "https://93.184.216.34/cli-hook")
    assert code == 0, output


def dashboard_add(browser: httpx.Client, origin: str, site: str, url: str) -> str:
    """The Alerts panel's "Add" as the operator's browser sends it: the panel's answer, as text."""
    form = {"alert-kind": "pageviews_above", "alert-minutes": 5, "alert-threshold": 5}
    state = [{"id": "site", "property": "value", "value": site}]
    state += [{"id": field, "property": "value", "value": form.get(field)} for field in RULE_FORM]
    state.append({"id": "alert-webhook", "property": "value", "value": url})
    body = {
        "output": "..alert-status.children...alert-webhook.value..",
        "outputs": [
            {"id": "alert-status", "property": "children"},
            {"id": "alert-webhook", "property": "value"},
        ],
        "inputs": [{"id": "alert-add", "property": "n_clicks", "value": 1}],
        "state": state,
        "changedPropIds": ["alert-add.n_clicks"],
    }
    cookie = browser.cookies.get("tally_session")  # Secure: httpx would not send it over http
    answer = browser.post(
        "/_dash-update-component", json=body, headers={"Origin": origin, "Cookie": f"tally_session={cookie}"}
    )
    assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
    return answer.text


def test_the_dashboards_alerts_panel_refuses_every_attackers_webhook_and_the_api_lists_none(
    tenants: Tenants,
) -> None:
    server = tenants.server
    browser = signed_in(server)
    try:
        for url in REFUSED:
            shown = dashboard_add(browser, server.url, tenants.site_a, url)
            assert "webhook_url: " in shown and "Added the rule" not in shown, (url, shown[:300])
        for url in ACCEPTED[:3]:
            assert "Added the rule" in dashboard_add(browser, server.url, tenants.site_a, url), url
    finally:
        browser.close()

    # The real server's alerts API: the site's rules are the accepted ones only.
    answer = httpx.get(
        f"{server.url}/api/v1/alerts",
        params={"site": tenants.site_a},
        headers=bearer(tenants.operator_key),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    hosts = sorted(rule["webhook_host"] for rule in answer.json()["rules"])
    assert hosts == sorted(["hooks.example.com", "xn--bcher-kva.example", "93.184.216.34"])
