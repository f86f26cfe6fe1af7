"""The explorer's routes: the page and its assets (nothing from elsewhere), and the reports of --reports DIR
behind the bearer key. The page itself is driven in a real browser by tests/test_explorer_e2e.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from eor.core.errors import ConfigError
from eor.evaluation.bench import build_report
from eor.evaluation.writing.writer import write_report
from eor.server import ServerSettings
from tests.test_bench import write_records
from tests.test_server import StandIn, stand_in_client

KEY = "explorer-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    """Two reports, one nested; a hidden copy that must not be listed; a folder that is not a report."""
    root = tmp_path_factory.mktemp("reports")
    write_report(
        "bench", build_report(write_records(root / "runs" / "r"), metrics=("em", "f1"), resamples=50), root / "small"
    )
    shutil.copytree(root / "small", root / "pools" / "seven")
    shutil.copytree(root / "small", root / ".hidden" / "copy")
    (root / "notes").mkdir()
    (root / "notes" / "report.json").write_text("{}")
    return root


def test_the_page_and_its_assets_come_from_eor_alone(tmp_path):
    with stand_in_client(tmp_path, StandIn) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
        sources = re.findall(r"""(?:src|href)="([^"]+)\"""", page.text)
        assert sorted(sources) == [
            "#ask",
            "#reports",
            "#results",
            "/explorer/explorer.css",
            "/explorer/explorer.js",
            "data:,",
        ]
        for name, kind in (("explorer.js", "text/javascript"), ("explorer.css", "text/css")):
            asset = client.get(f"/explorer/{name}")
            assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
            assert not re.search(r"https?://|//cdn|@import|url\(", asset.text)  # fetches nothing from elsewhere
        assert client.get("/explorer/../app.py").status_code == 404
        assert client.get("/explorer/index.py").json()["error"]["type"] == "not_found"
        assert "/" not in client.get("/openapi.json").json()["paths"]  # the page is not part of the API


def test_reports_are_listed_with_their_figures_and_shown_as_pages(tmp_path, reports):
    with stand_in_client(tmp_path, StandIn, reports=reports) as client:
        listed = client.get("/v1/reports").json()["reports"]
        assert [entry["name"] for entry in listed] == ["pools/seven", "small"]  # not .hidden, not notes
        assert listed[1] == {
            "name": "small",
            "questions": 8,
            "members": 4,
            "metric": "em",
            "eor": 0.75,
            "top_r": 0.625,
            "oracle": 0.875,
        }
        page = client.get("/v1/reports/pools/seven")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.text.count("data:image/png;base64,") == 5 and page.text.count("<table>") >= 4  # cost.png too
        for name in ("nowhere", "..%2Fsmall", "pools%2F..%2Fsmall", "pools/%2E%2E/small", ".hidden/copy", "notes"):
            missing = client.get(f"/v1/reports/{name}")
            assert missing.status_code == 404, name
            assert missing.json()["error"]["type"] in ("report_not_found", "not_found"), name


def test_reports_need_the_key_when_the_server_has_one(tmp_path, reports):
    with stand_in_client(tmp_path, StandIn, reports=reports, api_key=KEY) as client:
        assert client.get("/").status_code == 200  # the page itself is public: it asks for the key
        for path in ("/v1/reports", "/v1/reports/small"):
            refused = client.get(path)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert client.get(path, headers=AUTH).status_code == 200


def test_without_a_reports_folder_the_listing_says_how_to_get_one(tmp_path):
    with stand_in_client(tmp_path, StandIn) as client:
        response = client.get("/v1/reports")
        assert response.status_code == 404
        assert response.json()["error"] == {
            "type": "reports_disabled",
            "message": "this server lists no reports: start it with --reports DIR",
        }
    with pytest.raises(ConfigError, match="is not a folder"):
        ServerSettings(reports=tmp_path / "missing")
