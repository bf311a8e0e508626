#!/usr/bin/env bash
# The fast local loop: the suite on SQLite only, without PostgreSQL, Chromium, npm or torch.
# Those tests skip, each with its reason (tests/conftest.py); CI runs everything with
# tests/run_all.sh. Needs the venv tests/run_all.sh makes, or `pip install -e '.[test]'`.
# Extra arguments go to pytest (e.g. `bash tests/run_fast.sh tests/lineage -k chain`).
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
LINEAGE_TEST_FAST=1 exec "$python" -m pytest -n 2 -p no:cacheprovider -q "$@"
