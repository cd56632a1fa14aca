package demoserver

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names.
const (
	toolEcho         = "echo"
	toolAdd          = "add"
	toolSlow         = "slow"
	toolFail         = "fail"
	toolImage        = "image"
	toolAudio        = "audio"
	toolWeather      = "weather"
	toolResourceLink = "resource_link"
)

// Defaults of the slow tool.
const (
	slowDefaultSteps   = 5
	slowDefaultDelayMS = 200
)

const defaultFailMessage = "the fail tool always fails"

// toolHandler is a tool's logic, called with validated arguments.
type toolHandler func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, error)

// addTool registers t with an input schema rendered from ps and a handler
// that validates arguments before calling h.
func (s *Server) addTool(t *mcp.Tool, ps params, h toolHandler) {
	t.InputSchema = ps.schema()
	name := t.Name
	s.mcp.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := ps.parse(name, req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		s.log.Debug().Str("tool", name).Msg("demo tool call")
		return h(ctx, req, a)
	})
}

// readOnly marks a tool that touches nothing outside this process.
func readOnly(title string, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: idempotent, OpenWorldHint: ptr(false)}
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func (s *Server) addTools() {
	s.addTool(&mcp.Tool{
		Name:        toolEcho,
		Title:       "Echo",
		Description: "Returns the given message unchanged as text. Cheap; used as the benchmark target.",
		Annotations: readOnly("Echo", true),
	}, params{
		{name: "message", typ: typeString, desc: "the text to echo back", required: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, error) {
		return textResult(a.str("message")), nil
	})

	s.addTool(&mcp.Tool{
		Name:        toolAdd,
		Title:       "Add",
		Description: "Adds two numbers; returns the sum as text and as structured content {sum}.",
		Annotations: readOnly("Add", true),
		OutputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"sum": map[string]any{"type": "number", "description": "a + b"},
			},
			"required":             []string{"sum"},
			"additionalProperties": false,
		},
	}, params{
		{name: "a", typ: typeNumber, desc: "the first addend", required: true},
		{name: "b", typ: typeNumber, desc: "the second addend", required: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, error) {
		sum := a.num("a") + a.num("b")
		res := textResult(strconv.FormatFloat(sum, 'g', -1, 64))
		res.StructuredContent = addOutput{Sum: sum}
		return res, nil
	})

	s.addTool(&mcp.Tool{
		Name:  toolSlow,
		Title: "Slow",
		Description: "Takes steps*delay_ms milliseconds, reporting progress after each step to the request's " +
			"progress token (and an info log message), then returns \"done after N steps\". Stops when cancelled.",
		Annotations: readOnly("Slow", true),
	}, params{
		{name: "steps", typ: typeInteger, desc: "number of steps", def: int64(slowDefaultSteps), min: ptr(1.0), max: ptr(1000.0)},
		{name: "delay_ms", typ: typeInteger, desc: "delay before each step, in milliseconds", def: int64(slowDefaultDelayMS), min: ptr(0.0), max: ptr(60000.0)},
	}, s.slow)

	s.addTool(&mcp.Tool{
		Name:        toolFail,
		Title:       "Fail",
		Description: "Always fails: returns a tool result with isError=true carrying the message (a tool failure, not a protocol error).",
		Annotations: readOnly("Fail", true),
	}, params{
		{name: "message", typ: typeString, desc: "the error text to return", def: defaultFailMessage},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, error) {
		res := textResult(a.str("message"))
		res.IsError = true
		return res, nil
	})

	s.addTool(&mcp.Tool{
		Name:        toolImage,
		Title:       "Image",
		Description: fmt.Sprintf("Returns a %dx%d PNG image as an image content block (image/png).", logoSize, logoSize),
		Annotations: readOnly("Image", true),
	}, nil, func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: s.png, MIMEType: "image/png"}}}, nil
	})

	s.addTool(&mcp.Tool{
		Name:        toolAudio,
		Title:       "Audio",
		Description: "Returns a tenth of a second of a 440 Hz tone as an audio content block (audio/wav).",
		Annotations: readOnly("Audio", true),
	}, nil, func(_ context.Context, req *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, error) {
		if before(req, versionAudio) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: toneURI, MIMEType: "audio/wav", Blob: s.wav}},
			}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: s.wav, MIMEType: "audio/wav"}}}, nil
	})

	s.addTool(&mcp.Tool{
		Name:        toolWeather,
		Title:       "Weather",
		Description: "Returns made-up but deterministic weather for a city as structured content {city, temperature_c, conditions} and as text.",
		Annotations: readOnly("Weather", true),
		OutputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"city":          map[string]any{"type": "string", "description": "the city asked for"},
				"temperature_c": map[string]any{"type": "number", "description": "temperature in degrees Celsius"},
				"conditions":    map[string]any{"type": "string", "description": "a one-word summary of the sky"},
			},
			"required":             []string{"city", "temperature_c", "conditions"},
			"additionalProperties": false,
		},
	}, params{
		{name: "city", typ: typeString, desc: "the city to report on", required: true, minLen: 1},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, error) {
		w := weatherFor(a.str("city"))
		res := textResult(fmt.Sprintf("%s: %.1f °C, %s", w.City, w.TemperatureC, w.Conditions))
		res.StructuredContent = w
		return res, nil
	})

	s.addTool(&mcp.Tool{
		Name:        toolResourceLink,
		Title:       "Resource link",
		Description: "Returns a resource_link content block pointing at " + clockURI + " and an embedded text resource (" + readmeURI + ").",
		Annotations: readOnly("Resource link", true),
	}, nil, func(_ context.Context, req *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, error) {
		var link mcp.Content = &mcp.ResourceLink{URI: clockURI, Name: "clock", Title: "Clock", Description: clockDescription, MIMEType: "text/plain"}
		if before(req, versionResourceLink) {
			link = &mcp.TextContent{Text: "Resource " + clockURI + " (Clock): " + clockDescription}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{
			link,
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: readmeURI, MIMEType: "text/markdown", Text: readme}},
		}}, nil
	})
}

// The protocol revisions that introduced content kinds: a client of an
// older one cannot parse them, so the tools answer it with what it knows.
const (
	versionAudio        = "2025-03-26"
	versionResourceLink = "2025-06-18"
)

// toneURI names the audio tool's tone where it is an embedded resource.
const toneURI = "demo://tone.wav"

// before reports whether req comes from a client of a protocol revision
// older than version. Revisions are dates, so they compare as strings; an
// unknown one counts as the newest.
func before(req *mcp.CallToolRequest, version string) bool {
	v := req.ProtocolVersion()
	return v != "" && v < version
}

type addOutput struct {
	Sum float64 `json:"sum"`
}

// slow sleeps steps times, reporting progress after each step, and returns
// as soon as ctx is cancelled.
func (s *Server) slow(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, error) {
	steps := a.int("steps")
	delay := time.Duration(a.int("delay_ms")) * time.Millisecond
	token := req.Params.GetProgressToken()

	timer := time.NewTimer(delay)
	defer timer.Stop()
	for i := int64(1); i <= steps; i++ {
		select {
		case <-ctx.Done():
			s.log.Debug().Str("tool", toolSlow).Int64("step", i).Err(ctx.Err()).Msg("demo tool cancelled")
			return nil, fmt.Errorf("slow: step %d of %d: %w", i, steps, ctx.Err())
		case <-timer.C:
		}
		msg := fmt.Sprintf("step %d of %d", i, steps)
		if token != nil {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(i),
				Total:         float64(steps),
				Message:       msg,
			}); err != nil {
				s.log.Debug().Err(err).Str("tool", toolSlow).Msg("demo tool: send progress")
			}
		}
		// Sent only if the client asked for info or lower (logging/setLevel, or
		// the per-request log level in 2026-07-28).
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: serverName, Data: "slow: " + msg}); err != nil {
			s.log.Debug().Err(err).Str("tool", toolSlow).Msg("demo tool: send log message")
		}
		timer.Reset(delay)
	}
	return textResult(fmt.Sprintf("done after %d steps", steps)), nil
}

// weatherOutput is the weather tool's structured content.
type weatherOutput struct {
	City         string  `json:"city"`
	TemperatureC float64 `json:"temperature_c"`
	Conditions   string  `json:"conditions"`
}

// weatherFor derives the weather from a hash of the city name, so results are
// stable across runs and need no network.
func weatherFor(city string) weatherOutput {
	conditions := []string{"sunny", "cloudy", "rainy", "windy", "foggy", "snowy"}
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(city)))
	sum := h.Sum32()
	return weatherOutput{
		City:         city,
		TemperatureC: float64(sum%450)/10 - 10, // -10.0 .. 34.9
		Conditions:   conditions[(sum/450)%uint32(len(conditions))],
	}
}
