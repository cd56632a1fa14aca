// Package transport owns how bytes reach an MCP server. For stdio servers it
// spawns and supervises the child process (own process group, merged env,
// captured stderr, ordered stop) and implements the go-sdk mcp.Transport and
// mcp.Connection interfaces as newline-delimited JSON-RPC over the child's
// pipes.
package transport
