"""Generated stubs of mcpd.v1 (``make generate``); use mcpd_grpc.Client instead."""
