"""The server starts without the heavy libraries (DEVELOPERS: keep pandas, numpy and torch
out of server start-up; the server installs and runs without torch).

Each check runs in a fresh interpreter, so what another test imported cannot hide an
import the server's start-up makes.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "numpy", "pandas")


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_building_the_app_imports_no_heavy_library(tmp_path) -> None:
    loaded = _modules_after(
        "from api.app import create_app\n"
        "from api.settings import Settings\n"
        f"app = create_app(Settings(database_url={str('sqlite:///' + str(tmp_path / 'x.db'))!r}))\n"
    )
    assert "fastapi" in loaded  # the probe really built the app
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_the_server_runs_when_torch_cannot_be_imported(tmp_path) -> None:
    # A torch that fails to import stands in for an install without the trainer extra.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from fastapi.testclient import TestClient\n"
        "from api.app import create_app\n"
        "from api.settings import Settings\n"
        f"app = create_app(Settings(database_url={str('sqlite:///' + str(tmp_path / 'y.db'))!r}))\n"
        "with TestClient(app) as client:\n"
        "    assert client.get('/ready').status_code == 200\n"
        "    assert client.post('/api/v1/projects', json={'slug': 'p'}).status_code == 201\n"
        "    assert client.post('/api/v1/projects/p/trials', json={'hypothesis': 'h', 'status': 'baseline', 'core_metric': 1.0}).status_code == 201\n"
        "    assert client.get('/api/v1/projects/p/knowledge').status_code == 200\n"
    )
    _modules_after(code)


def test_the_cli_and_its_help_import_no_heavy_library() -> None:
    # `lineage --help` lists every command, those of installed plugins included
    # (the lineage.commands entry points): none of them may pull torch in.
    loaded = _modules_after(
        "from click.testing import CliRunner\n"
        "from api.cli import cli\n"
        "result = CliRunner().invoke(cli, ['--help'])\n"
        "assert result.exit_code == 0 and 'serve' in result.output, result.output\n"
    )
    assert "api.cli.serve" in loaded  # the probe really loaded the CLI
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


#: What a server whose schema is at head does not load before it is used (issue 23: cold
#: start and idle memory): Alembic and Mako (only an upgrade needs them), the MCP SDK (the
#: first /mcp request), Jinja and the page modules (the first page), rapidfuzz (the first
#: ranking) and the PostgreSQL dialect (a PostgreSQL database).
LAZY = (
    "alembic",
    "mako",
    "mcp",
    "jinja2",
    "rapidfuzz",
    "sqlalchemy.dialects.postgresql",
    "api.pages.web",
    "api.pages.project",
    "api.pages.route",
    "api.pages.charts",
)


def test_a_server_at_head_starts_without_what_it_uses_later(tmp_path) -> None:
    url = "sqlite:///" + str(tmp_path / "z.db")
    subprocess.run(
        [sys.executable, "-m", "api.cli", "--db", url, "db", "upgrade"], check=True, capture_output=True, timeout=120
    )
    loaded = _modules_after(
        "from fastapi.testclient import TestClient\n"
        "from api.app import create_app\n"
        "from api.settings import Settings\n"
        f"app = create_app(Settings(database_url={url!r}))\n"
        "with TestClient(app) as client:\n"
        "    assert client.get('/health').status_code == 200\n"
    )
    assert "fastapi" in loaded and "api.mcp_lazy" in loaded
    assert not {m for m in loaded for lazy in LAZY if m == lazy or m.startswith(lazy + ".")}


def test_the_server_records_and_updates_trials_without_the_orm(tmp_path) -> None:
    # lineage.models is SQLAlchemy Core and the store runs SQL and Core statements:
    # sqlalchemy.orm cost 5.7 MiB of idle memory (issue 23). The updates (PATCH) run the
    # store's Core update() statements with typed values (JSON extra, datetimes).
    url = "sqlite:///" + str(tmp_path / "o.db")
    loaded = _modules_after(
        "from fastapi.testclient import TestClient\n"
        "from api.app import create_app\n"
        "from api.settings import Settings\n"
        f"app = create_app(Settings(database_url={url!r}))\n"
        "trials = '/api/v1/projects/p/trials'\n"
        "with TestClient(app) as client:\n"
        "    assert client.post('/api/v1/projects', json={'slug': 'p'}).status_code == 201\n"
        "    made = client.post(trials, json={'exp_id': '000', 'hypothesis': 'h', 'status': 'baseline',"
        " 'core_metric': 1.0, 'extra': {'a': [1, 2.5]}})\n"
        "    assert made.status_code == 201, made.text\n"
        "    changed = client.patch(trials + '/000', json={'notes': 'n', 'extra': {'b': -0.0}})\n"
        "    assert changed.status_code == 200, changed.text\n"
        "    assert client.patch('/api/v1/projects/p', json={'title': 'T'}).status_code == 200\n"
        "    assert client.get(trials + '/000').json()['extra'] == {'b': -0.0}\n"
    )
    assert "lineage.models" in loaded and "lineage.store.trials" in loaded  # the probe really used the store
    assert not {m for m in loaded if m == "sqlalchemy.orm" or m.startswith("sqlalchemy.orm.")}


def test_mcp_starts_on_its_first_request(tmp_path) -> None:
    _modules_after(
        "from fastapi.testclient import TestClient\n"
        "from api.app import create_app\n"
        "from api.settings import Settings\n"
        f"app = create_app(Settings(database_url={str('sqlite:///' + str(tmp_path / 'm.db'))!r}))\n"
        "with TestClient(app) as client:\n"
        "    body = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-03-26',"
        " 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}}}\n"
        "    answer = client.post('/mcp', json=body, headers={'Accept': 'application/json, text/event-stream'})\n"
        "    assert answer.status_code == 200, (answer.status_code, answer.text)\n"
        "    import sys; assert 'api.mcp_server' in sys.modules\n"
    )


def test_the_pages_load_on_the_first_page_request_and_not_for_the_api(tmp_path) -> None:
    url = "sqlite:///" + str(tmp_path / "p.db")
    _modules_after(
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from api.app import create_app\n"
        "from api.settings import Settings\n"
        f"app = create_app(Settings(database_url={url!r}))\n"
        "with TestClient(app) as client:\n"
        "    assert client.post('/api/v1/projects', json={'slug': 'p'}).status_code == 201\n"
        "    assert client.get('/api/v1/projects/p/trials').status_code == 200\n"
        "    assert client.get('/openapi.json').status_code == 200\n"
        "    assert 'api.pages.web' not in sys.modules and 'jinja2' not in sys.modules\n"
        "    page = client.get('/projects/p')\n"
        "    assert page.status_code == 200 and 'text/html' in page.headers['content-type'], page.status_code\n"
        "    assert 'api.pages.web' in sys.modules\n"
        "    assert client.get('/static/app.css').status_code == 200\n"
        "    missing = client.get('/no-such-page')\n"
        "    assert missing.status_code == 404, missing.status_code\n"
    )
