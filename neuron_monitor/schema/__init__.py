"""The report schema: named constants (``names``), the typed read layer (``read``) and one spec per group (``spec``,
``groups/``). See docs/architecture.md."""
