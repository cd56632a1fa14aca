/**
 * mcpd-client: the TypeScript client of mcpd, the sidecar daemon that owns
 * the connections to Model Context Protocol servers and exposes them over
 * one API (gRPC, and the Connect protocol over HTTP/1.1 and HTTP/2).
 */

export * from "./client.js";
export * from "./errors.js";
export {
  MAX_NAME_LENGTH,
  aiSchema,
  anthropicTool,
  isProviderSafe,
  openaiTool,
  providerNames,
  toolParameters,
  type AISDKSchema,
  type AnthropicTool,
  type OpenAIApi,
  type OpenAIChatTool,
  type OpenAIResponsesTool,
} from "./names.js";
export { DEFAULT_TARGET, DEFAULT_WIRE, WIRES, type PemSource, type TlsOptions, type Wire } from "./transport.js";
export {
  ServerConfig,
  contentText,
  type ApprovalRequest,
  type ApprovalResult,
  type AuthorizationRequest,
  type Completion,
  type ConfigScope,
  type Content,
  type ElicitationRequest,
  type ElicitationResult,
  type Event,
  type EventKind,
  type JsonObject,
  type JsonValue,
  type LogLevel,
  type LogMessage,
  type McpJsonEntry,
  type McpJsonOptions,
  type Poll,
  type PollResult,
  type Progress,
  type Prompt,
  type PromptMessage,
  type PromptResult,
  type Resource,
  type ResourceContents,
  type ResourceResult,
  type ResourceTemplate,
  type RootLike,
  type RootsRequest,
  type SamplingRequest,
  type SamplingResult,
  type Server,
  type RemoteOptions,
  type ServerConfigInit,
  type ServerOptions,
  type ServerRequest,
  type ServerRequestKind,
  type ServerState,
  type StreamItem,
  type TlsConfigInit,
  type Tool,
  type ToolMatch,
  type ToolResult,
  type Transport,
} from "./types.js";
/** The generated messages and the MCPHub service descriptor. */
export * as pb from "./gen/mcpd/v1/mcpd_pb.js";
