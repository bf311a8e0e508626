"""``python -m api.cli``: the ``lineage`` command line without the console script."""

from api.cli import main

main()
