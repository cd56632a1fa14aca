"""Generated protocol buffer code for the ``mcpd`` proto package (see mcpd/v1)."""
