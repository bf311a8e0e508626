"""Every face a person or program touches, over lineage's service layer: HTTP API, pages, CLI, MCP."""
