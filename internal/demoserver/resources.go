package demoserver

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource URIs, the resource template and the prompt.
const (
	clockURI         = "demo://clock"
	readmeURI        = "demo://readme"
	logoURI          = "demo://logo.png"
	greetingTemplate = "demo://greeting/{name}"
	greetingPrefix   = "demo://greeting/"

	promptGreet = "greet"
)

const clockDescription = "The current time (RFC 3339, UTC); changes on every tick and notifies subscribers."

const readme = `# mcpd demo server

A small MCP server for trying out mcpd.

- Tools: echo, add, slow, fail, image, audio, weather, resource_link.
- Resources: demo://clock (subscribable), demo://readme, demo://logo.png.
- Resource template: demo://greeting/{name}.
- Prompt: greet (arguments: name, style).
`

// greetStyles returns the values of the greet prompt's style argument.
func greetStyles() []string { return []string{"formal", "casual", "pirate"} }

// knownNames returns the completions offered for a name argument.
func knownNames() []string {
	return []string{"Ada", "Alan", "Barbara", "Grace", "Linus", "Margaret"}
}

func (s *Server) addResources() {
	s.mcp.AddResource(&mcp.Resource{
		URI:         clockURI,
		Name:        "clock",
		Title:       "Clock",
		Description: clockDescription,
		MIMEType:    "text/plain",
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return textResource(clockURI, "text/plain", s.clockText()), nil
	})

	s.mcp.AddResource(&mcp.Resource{
		URI:         readmeURI,
		Name:        "readme",
		Title:       "README",
		Description: "What this server offers.",
		MIMEType:    "text/markdown",
		Size:        int64(len(readme)),
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return textResource(readmeURI, "text/markdown", readme), nil
	})

	s.mcp.AddResource(&mcp.Resource{
		URI:         logoURI,
		Name:        "logo",
		Title:       "Logo",
		Description: fmt.Sprintf("A %dx%d PNG image (binary resource).", logoSize, logoSize),
		MIMEType:    "image/png",
		Size:        int64(len(s.png)),
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: logoURI, MIMEType: "image/png", Blob: s.png}}}, nil
	})

	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: greetingTemplate,
		Name:        "greeting",
		Title:       "Greeting",
		Description: "A greeting for {name}.",
		MIMEType:    "text/plain",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		name, ok := greetingName(uri)
		if !ok {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return textResource(uri, "text/plain", "Hello, "+name+"!"), nil
	})
}

// greetingName returns the name a demo://greeting/{name} URI greets, and
// whether uri is one.
func greetingName(uri string) (string, bool) {
	name, err := url.PathUnescape(strings.TrimPrefix(uri, greetingPrefix))
	if !strings.HasPrefix(uri, greetingPrefix) || err != nil || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

func textResource(uri, mimeType, text string) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeType, Text: text}}}
}

// subscribe accepts subscriptions to every resource that reads: the fixed
// ones and the greetings. Only demo://clock ever changes; the SDK records the subscription and routes the updates
// (resources/subscribe before 2026-07-28, subscriptions/listen from then on).
func (s *Server) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	switch uri := req.Params.URI; uri {
	case clockURI, readmeURI, logoURI:
		s.log.Debug().Str("uri", uri).Msg("demo resource subscribed")
		return nil
	default:
		if _, ok := greetingName(uri); ok {
			s.log.Debug().Str("uri", uri).Msg("demo resource subscribed")
			return nil
		}
		return mcp.ResourceNotFoundError(uri)
	}
}

func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.log.Debug().Str("uri", req.Params.URI).Msg("demo resource unsubscribed")
	return nil
}

func (s *Server) addPrompts() {
	s.mcp.AddPrompt(&mcp.Prompt{
		Name:        promptGreet,
		Title:       "Greet",
		Description: "Asks the model to greet someone, in an optional style.",
		Arguments: []*mcp.PromptArgument{
			{Name: "name", Title: "Name", Description: "who to greet", Required: true},
			{Name: "style", Title: "Style", Description: "one of " + strings.Join(greetStyles(), ", ")},
		},
	}, greet)
}

func greet(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	name := req.Params.Arguments["name"]
	if name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `prompt "greet": missing required argument "name"`}
	}
	var text string
	switch style := req.Params.Arguments["style"]; style {
	case "":
		text = "Write a short greeting for " + name + "."
	case "formal":
		text = "Compose a formal greeting for " + name + "."
	case "casual":
		text = "Say hi to " + name + " in a relaxed, friendly way."
	case "pirate":
		text = "Greet " + name + " the way a pirate would."
	default:
		return nil, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("prompt %q: argument \"style\" must be one of %s, got %q", promptGreet, strings.Join(greetStyles(), ", "), style),
		}
	}
	return &mcp.GetPromptResult{
		Description: "Greeting for " + name,
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
	}, nil
}

// complete offers values for the greet prompt's style and name arguments and
// for the greeting template's name, filtered by case-insensitive prefix.
func (s *Server) complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref, arg := req.Params.Ref, req.Params.Argument
	var candidates []string
	switch {
	case ref.Type == "ref/prompt" && ref.Name == promptGreet:
		switch arg.Name {
		case "style":
			candidates = greetStyles()
		case "name":
			candidates = knownNames()
		}
	case ref.Type == "ref/resource" && ref.URI == greetingTemplate:
		if arg.Name == "name" {
			candidates = knownNames()
		}
	default:
		return nil, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("complete: unknown reference %s %q", ref.Type, ref.Name+ref.URI),
		}
	}
	prefix := strings.ToLower(arg.Value)
	values := slices.DeleteFunc(candidates, func(v string) bool {
		return !strings.HasPrefix(strings.ToLower(v), prefix)
	})
	if values == nil {
		values = []string{} // "values" is required on the wire
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
