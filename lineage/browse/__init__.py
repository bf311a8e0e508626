"""RESEARCHER: the read models of the pages and the metric explorer.

- :mod:`lineage.browse.uses` — ``BrowseUses`` (mixed into ``Ledger``): dashboard, trial, calibration;
- :mod:`lineage.browse.models` — the values those return;
- :mod:`lineage.browse.tree` — ``TreeUses``: a bounded window of the lineage tree;
- :mod:`lineage.browse.explore` — the metric explorer's series;
- :mod:`lineage.browse.columns` — ``ColumnUses``: the columns a project's pages show (one rule);
- :mod:`lineage.browse.knobs` — ``KnobUses``: any column against the metric (the knob view).
"""
