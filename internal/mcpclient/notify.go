package mcpclient

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/events"
)

// The SDK runs notification handlers one at a time on the session's
// reading goroutine, so every handler here only hands off: it publishes to
// the event bus, signals the run loop, or calls a sink that must not block.

// clientOptions wires the SDK client's handlers to this upstream.
func (u *upstream) clientOptions() *mcp.ClientOptions {
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{
			// mcpd always answers roots/list, from SetRoots.
			RootsV2: &mcp.RootCapabilities{ListChanged: true},
		},
		// Keepalive checks are made by hold (keepAlive), which ends the
		// session's calls with it.
		ToolListChangedHandler:      u.onToolListChanged,
		PromptListChangedHandler:    u.onPromptListChanged,
		ResourceListChangedHandler:  u.onResourceListChanged,
		ResourceUpdatedHandler:      u.onResourceUpdated,
		LoggingMessageHandler:       u.onLog,
		ProgressNotificationHandler: u.onProgress,
		// inputMiddleware answers input-required results instead, the
		// way legacy sessions' requests are answered (requests.go).
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	if u.opts.Requests != nil {
		// Sampling and elicitation go to an attached agent; without one
		// mcpd declines as the spec says, so it can honour both.
		opts.CreateMessageHandler = u.onCreateMessage
		opts.ElicitationHandler = u.onElicit
		opts.Capabilities.Sampling = &mcp.SamplingCapabilities{}
		opts.Capabilities.Elicitation = &mcp.ElicitationCapabilities{
			Form: &mcp.FormElicitationCapabilities{},
			URL:  &mcp.URLElicitationCapabilities{},
		}
	}
	return opts
}

func (u *upstream) onToolListChanged(context.Context, *mcp.ToolListChangedRequest) {
	defer u.notificationHandled()
	// The run loop lists the tools again, then publishes the change, so
	// that a subscriber that reacts sees the new list in ListTools.
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

func (u *upstream) onPromptListChanged(context.Context, *mcp.PromptListChangedRequest) {
	defer u.notificationHandled()
	u.publish(events.Event{Kind: events.KindPromptsChanged})
}

func (u *upstream) onResourceListChanged(context.Context, *mcp.ResourceListChangedRequest) {
	defer u.notificationHandled()
	u.publish(events.Event{Kind: events.KindResourcesChanged})
}

func (u *upstream) onResourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	defer u.notificationHandled()
	u.publish(events.Event{Kind: events.KindResourceUpdated, URI: req.Params.URI})
}

// onLog handles log notifications of connections that are not routed; a
// routed connection handles them as it reads them.
func (u *upstream) onLog(_ context.Context, req *mcp.LoggingMessageRequest) {
	u.publishLog(req.Params)
	if !u.isRouted() {
		u.toSinkLog(req.Params)
	}
}

func (u *upstream) publishLog(p *mcp.LoggingMessageParams) {
	u.publish(events.Event{Kind: events.KindLog, Level: string(p.Level), Logger: p.Logger, Data: p.Data})
}

func (u *upstream) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if !u.isRouted() {
		u.toSinkProgress(req.Params)
	}
}

// isRouted says whether the current session's connection routes progress
// and logs to calls itself (see routed).
func (u *upstream) isRouted() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.liveConn != nil
}

// callSink receives what belongs to one streamed call.
type callSink struct {
	onProgress func(*mcp.ProgressNotificationParams)
	onLog      func(*mcp.LoggingMessageParams)
}

// addSink registers a streamed call under a fresh progress token; done
// removes it.
func (u *upstream) addSink(s *callSink) (token string, done func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.nextToken++
	token = fmt.Sprintf("mcpd-%d", u.nextToken)
	u.sinks[token] = s
	return token, func() {
		u.mu.Lock()
		delete(u.sinks, token)
		u.mu.Unlock()
	}
}
