#!/usr/bin/env bash
# The quality gate: lint, format and types, as configured in pyproject.toml. .ci/run runs
# it before the suite (LINEAGE_GATE=1 tests/run_all.sh); .pre-commit-config.yaml runs the
# same checks before each commit. Needs the venv tests/run_all.sh makes.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
[ -x "$bin/ruff" ] || bin=$(dirname "$(command -v ruff)")
paths=(lineage api trainer_hooks tests bench examples migrations)
printf '[gate] ruff check\n' >&2
"$bin/ruff" check "${paths[@]}"
printf '[gate] ruff format --check\n' >&2
"$bin/ruff" format --check "${paths[@]}"
printf '[gate] mypy (lineage, api, trainer_hooks)\n' >&2
"$bin/mypy"
