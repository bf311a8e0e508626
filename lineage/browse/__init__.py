"""RESEARCHER: the read models of the pages and the metric explorer.

- :mod:`lineage.browse.uses` — ``Browse`` (``ledger.browse``): dashboard, trial, calibration;
- :mod:`lineage.browse.models` — the values those return;
- :mod:`lineage.browse.tree` — :func:`~lineage.browse.tree.tree_window`: a bounded window of the lineage tree;
- :mod:`lineage.browse.explore` — the metric explorer's series;
- :mod:`lineage.browse.columns` — :func:`~lineage.browse.columns.project_columns`: the columns a project's pages show (one rule);
- :mod:`lineage.browse.knobs` — :func:`~lineage.browse.knobs.knobs`: any column against the metric (the knob view).
"""
