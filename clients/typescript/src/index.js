/**
 * mcpd-client: the TypeScript client of mcpd, the sidecar daemon that owns
 * the connections to Model Context Protocol servers and exposes them over
 * one API (gRPC, and the Connect protocol over HTTP/1.1 and HTTP/2).
 */
export * from "./client.js";
export * from "./errors.js";
export { MAX_NAME_LENGTH, aiSchema, anthropicTool, isProviderSafe, openaiTool, providerNames, toolParameters, } from "./names.js";
export { DEFAULT_TARGET, DEFAULT_WIRE, WIRES } from "./transport.js";
export { ServerConfig, contentText, } from "./types.js";
/** The generated messages and the MCPHub service descriptor. */
export * as pb from "./gen/mcpd/v1/mcpd_pb.js";
//# sourceMappingURL=index.js.map