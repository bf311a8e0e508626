#!/usr/bin/env bash
# Installs everything and runs the whole test suite (README's second quick-start command).
#
# - a virtual environment in .venv with the package and its test, postgres and trainer
#   extras (torch pinned to the CPU build, see pyproject.toml);
# - a PostgreSQL server on 127.0.0.1:5432 when none answers there (installed with apt-get
#   if missing, with trust auth on loopback for the tests);
# - Debian's chromium for the browser tests when /usr/bin/chromium is missing;
# - the official MCP Inspector CLI, pinned, for the MCP end-to-end test
#   (tests/api/test_mcp_inspector.py), with npm into ~/.cache/lineage-tests.
# - axe-core, pinned, for the accessibility test of the pages (tests/web/test_phone_a11y.py),
#   with npm into ~/.cache/lineage-tests.
# - the MLflow client (mlflow-skinny, pinned) in a venv of its own under
#   ~/.cache/lineage-tests, for tests/api/test_mlflow_client.py.
# - with LINEAGE_GATE=1 (.ci/run sets it), the quality gate first (tests/gate.sh: ruff, mypy).
# Extra arguments go to pytest (e.g. `bash tests/run_all.sh -k tsv`).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[run_all] %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

ensure_venv() {
  if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    python3 -m venv .venv
  fi
  log "installing lineage-ledger[test,postgres,trainer,upstream] and the upstream trainers (--no-deps)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,postgres,trainer,upstream]' 2>&1 \
    | grep -v -e '^WARNING: Location' -e '^ *$' || true
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --ignore-requires-python \
    verl==0.9.1 retrain==0.3.2 areal==1.0.4 tensordict==0.10.0 pyvers==0.1.0 2>&1 \
    | grep -v -e '^WARNING: Location' -e '^ *$' -e 'requires' -e 'incompatible' -e 'dependency resolver' || true
  .venv/bin/python -c 'import lineage, api, trainer_hooks, torch, fieldkit' \
    || { log "installation is incomplete"; exit 1; }
}

postgres_answers() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || .venv/bin/python - <<'PY' 2>/dev/null
import psycopg, sys
try:
    psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", connect_timeout=2).close()
except Exception:
    sys.exit(1)
PY
}

ensure_postgres() {
  if postgres_answers; then return 0; fi
  log "no PostgreSQL answers on 127.0.0.1:5432; starting one"
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql >/dev/null
  fi
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$version" ]; then
    version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
    as_root pg_createcluster "$version" main >/dev/null
  fi
  local hba="/etc/postgresql/$version/main/pg_hba.conf"
  if ! grep -q 'lineage-ledger tests' "$hba"; then
    as_root sed -i '1i host all all 127.0.0.1/32 trust # lineage-ledger tests' "$hba"
  fi
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null \
    || as_root pg_ctlcluster "$version" main start 2>/dev/null \
    || as_root pg_ctlcluster "$version" main reload
  for _ in $(seq 60); do postgres_answers && return 0; sleep 1; done
  log "PostgreSQL did not come up"; exit 1
}

ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then return 0; fi
  log "installing Debian's chromium for the browser tests"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
}

# keep in step with INSPECTOR_VERSION in tests/api/test_mcp_inspector.py
INSPECTOR_VERSION=2.12.0
ensure_inspector() {
  local dir="${LINEAGE_INSPECTOR_DIR:-$HOME/.cache/lineage-tests/mcp-inspector-$INSPECTOR_VERSION}"
  if [ -x "$dir/node_modules/.bin/mcp-inspector" ]; then return 0; fi
  if ! command -v npm >/dev/null 2>&1; then
    log "npm is missing: the MCP Inspector test will skip"; return 0
  fi
  log "installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION into $dir"
  npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >/dev/null 2>&1 \
    || log "npm could not fetch the MCP Inspector: its test will skip"
}

# keep in step with AXE_VERSION in tests/web/test_phone_a11y.py
AXE_VERSION=4.10.3
ensure_axe() {
  local dir="${LINEAGE_AXE_DIR:-$HOME/.cache/lineage-tests/axe-core-$AXE_VERSION}"
  if [ -f "$dir/node_modules/axe-core/axe.min.js" ]; then return 0; fi
  if ! command -v npm >/dev/null 2>&1; then
    log "npm is missing: the axe accessibility test will skip"; return 0
  fi
  log "installing axe-core@$AXE_VERSION into $dir"
  npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts "axe-core@$AXE_VERSION" >/dev/null 2>&1 \
    || log "npm could not fetch axe-core: the accessibility test will skip"
}

# keep in step with tests/api/test_mlflow_client.py's module doc
MLFLOW_VERSION=3.17.2
ensure_mlflow() {
  # the real MLflow client, in a venv of its own (it would change the project venv's
  # importlib_metadata); tests/api/test_mlflow_client.py runs it through this Python
  local dir="${LINEAGE_MLFLOW_DIR:-$HOME/.cache/lineage-tests/mlflow-$MLFLOW_VERSION}"
  if [ ! -x "$dir/bin/python" ] || ! "$dir/bin/python" -c 'import mlflow' 2>/dev/null; then
    log "installing mlflow-skinny==$MLFLOW_VERSION into $dir"
    python3 -m venv "$dir" \
      && "$dir/bin/python" -m pip install -q --disable-pip-version-check "mlflow-skinny==$MLFLOW_VERSION" 2>&1 \
        | grep -v -e '^WARNING: Location' -e '^ *$' || true
  fi
  if "$dir/bin/python" -c 'import mlflow' 2>/dev/null; then
    export LINEAGE_TEST_MLFLOW_PYTHON="$dir/bin/python"
  else
    log "mlflow-skinny could not be installed: the MLflow client test will skip"
  fi
}

ensure_venv
ensure_postgres
ensure_inspector
ensure_axe
ensure_mlflow
if [ -n "${LINEAGE_NEEDS_CHROMIUM:-}" ] || ls tests/web 2>/dev/null | grep -q '^test_'; then ensure_chromium; fi

if [ -n "${LINEAGE_GATE:-}" ]; then bash tests/gate.sh; fi

log "running the test suite"
exec .venv/bin/python -m pytest -n 2 -p no:cacheprovider "$@"
