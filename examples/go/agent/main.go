// Command agent answers the requests that MCP servers send to their client
// (sampling and elicitation) on behalf of an agent runtime, over mcpd's
// bidirectional HandleServerRequests stream.
//
// It answers with fixed replies, so that the whole round trip can be tried
// without a model or a user: every sampling request gets the same text,
// every form elicitation is accepted with each field's default (and a
// placeholder for required fields without one), and every URL elicitation
// is declined. A real agent would call its model or ask its user instead.
//
// Usage, from the repository root, with mcpd running (make run):
//
//	go run ./examples/go/agent -addr 127.0.0.1:50051
//
// -addr also takes unix:///path/to.sock. When mcpd checks an API token,
// set MCPD_API_TOKEN and the agent sends it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// fixedReply is the text every sampling request gets.
const fixedReply = "This is a fixed reply from the example agent."

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "mcpd's address: host:port or unix:///path/to.sock")
	server := flag.String("server", "", "answer only this server's requests (default: all servers)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *server); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr, server string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to mcpd: %w", err)
	}
	defer conn.Close()
	if token := os.Getenv("MCPD_API_TOKEN"); token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}

	stream, err := mcpdv1.NewMCPHubClient(conn).HandleServerRequests(ctx)
	if err != nil {
		return fmt.Errorf("open the server-request stream: %w", err)
	}
	// The first message registers what this agent answers. Roots are left
	// out: mcpd then answers roots/list itself, from SetRoots.
	reg := &mcpdv1.ServerRequestRegistration{Kinds: []mcpdv1.ServerRequestKind{
		mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING,
		mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ELICITATION,
	}}
	if server != "" {
		reg.Servers = []string{server}
	}
	if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{
		Message: &mcpdv1.HandleServerRequestsRequest_Register{Register: reg},
	}); err != nil {
		return fmt.Errorf("register: %w", err)
	}

	for {
		msg, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF) || ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("receive: %w", err)
		}
		if msg.GetRegistered() != nil {
			log.Printf("registered for %v", msg.GetRegistered().GetKinds())
			continue
		}
		if c := msg.GetCancel(); c != nil {
			// This agent answers at once; a slower one would stop the
			// request's work here.
			log.Printf("request %s withdrawn: %s", c.GetId(), c.GetReason())
			continue
		}
		if r := msg.GetReplyRefused(); r != nil {
			// The server got an error instead of this agent's answer.
			log.Printf("reply to request %s refused: %s", r.GetId(), r.GetReason())
			continue
		}
		req := msg.GetRequest()
		reply, err := answer(req)
		if err != nil {
			// Refuse what cannot be answered; the server gets a JSON-RPC
			// error with this code.
			reply = &mcpdv1.ServerRequestReply{Result: &mcpdv1.ServerRequestReply_Error{
				Error: &mcpdv1.ReplyError{Code: -32603, Message: err.Error()},
			}}
		}
		reply.Id = req.GetId() // mcpd matches the reply to the request by id
		log.Printf("server %s: request %s answered", req.GetServer(), req.GetId())
		if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{
			Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: reply},
		}); err != nil {
			return fmt.Errorf("reply: %w", err)
		}
	}
}

// answer makes the fixed reply to one request.
func answer(req *mcpdv1.ServerRequest) (*mcpdv1.ServerRequestReply, error) {
	switch {
	case req.GetSampling() != nil:
		return &mcpdv1.ServerRequestReply{Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
			Role:       mcpdv1.Role_ROLE_ASSISTANT,
			Content:    []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: fixedReply}}}},
			Model:      "example-agent",
			StopReason: "endTurn",
		}}}, nil
	case req.GetElicitation() != nil:
		e := req.GetElicitation()
		result := &mcpdv1.ElicitationResult{Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_DECLINE}
		if e.GetMode() == "form" {
			content, err := fillForm(e.GetRequestedSchema())
			if err != nil {
				return nil, err
			}
			result = &mcpdv1.ElicitationResult{Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: content}
		}
		return &mcpdv1.ServerRequestReply{Result: &mcpdv1.ServerRequestReply_Elicitation{Elicitation: result}}, nil
	}
	return nil, fmt.Errorf("the example agent does not answer this request")
}

// fillForm answers a form with each field's default, and a placeholder of
// the right type for a required field that has none.
func fillForm(schema *structpb.Struct) (*structpb.Struct, error) {
	props := schema.GetFields()["properties"].GetStructValue().GetFields()
	required := map[string]bool{}
	for _, v := range schema.GetFields()["required"].GetListValue().GetValues() {
		required[v.GetStringValue()] = true
	}
	out := map[string]any{}
	for name, p := range props {
		field := p.GetStructValue().GetFields()
		if def, ok := field["default"]; ok {
			out[name] = def.AsInterface()
			continue
		}
		if !required[name] {
			continue
		}
		if enum := field["enum"].GetListValue().GetValues(); len(enum) > 0 {
			out[name] = enum[0].AsInterface()
			continue
		}
		switch field["type"].GetStringValue() {
		case "number", "integer":
			out[name] = 1
		case "boolean":
			out[name] = true
		default:
			out[name] = "example"
		}
	}
	return structpb.NewStruct(out)
}
