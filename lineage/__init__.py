"""The ledger core: trials, projects, lineage, rendering, results-file formats. No HTTP, no torch."""
