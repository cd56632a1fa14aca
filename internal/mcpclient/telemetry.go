package mcpclient

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/telemetry"
)

// stateNames are the states a server's state metric lists: every State,
// found by name (they run from StateConnecting up to the first without
// one), so that a state added later gets its series too.
var stateNames = func() []string {
	var names []string
	for s := StateConnecting; s.String() != "unknown"; s++ {
		names = append(names, s.String())
	}
	return names
}()

// ServerSamples returns every server's state and call counters for the
// metrics (telemetry.Telemetry.ObserveServers).
func (m *Manager) ServerSamples() []telemetry.ServerSample {
	ups := m.snapshot()
	out := make([]telemetry.ServerSample, 0, len(ups))
	for _, u := range ups {
		u.mu.Lock()
		s := telemetry.ServerSample{
			Name:     u.cfg.Name,
			State:    u.state.String(),
			States:   stateNames,
			Restarts: uint64(u.restarts),
			Tools:    len(u.tools),
		}
		u.mu.Unlock()
		s.InFlight = int(u.calls.running.Load())
		s.Queued = int(u.calls.waiting.Load())
		s.QueueRejections = u.calls.rejected.Load()
		out = append(out, s)
	}
	return out
}

// transportName is how the server is reached now: its configured kind, or
// for TransportAuto the one detected ("http" until one is).
func (u *upstream) transportName() string {
	kind := u.cfg.Kind
	if kind == config.TransportAuto {
		u.mu.Lock()
		kind = u.detected
		u.mu.Unlock()
		if kind == 0 {
			kind = config.TransportHTTP
		}
	}
	return kind.String()
}

// toolLabel is the tool's name for the metrics if the server lists it,
// else "": a label takes no name an agent made up. (The metrics check
// again, and cap the name: see telemetry.Telemetry.ToolsListed.)
func (u *upstream) toolLabel(name string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.tools[name]; ok {
		return name
	}
	return ""
}

// callOutcome names how a tool call ended, in the words of the metrics:
// ok, tool_error, or the kind of error, tested in the order the gRPC edge
// maps them.
func callOutcome(res *mcp.CallToolResult, err error) string {
	var (
		rpcErr      *RPCError
		interrupted *CallInterruptedError
	)
	switch {
	case err == nil && res != nil && res.IsError:
		return "tool_error"
	case err == nil:
		return "ok"
	case errors.As(err, &rpcErr):
		return "server_error"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrInvalidArgument):
		return "invalid_argument"
	case errors.As(err, &interrupted):
		// UNAVAILABLE (CALL_MAY_HAVE_RUN) at every edge, whatever ended
		// it: a server disabled or waiting for a consent too.
		return "unavailable"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrPermissionDenied):
		return "permission_denied"
	case errors.Is(err, ErrResourceExhausted):
		return "resource_exhausted"
	}
	return "error"
}
