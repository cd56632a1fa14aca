package server

import (
	"context"
	"path"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
)

// requestCodec is the gRPC server's codec (grpc.ForceServerCodecV2):
// grpc-go's protobuf codec, but a request that does not decode (bytes
// that are no protobuf, a string field that is not UTF-8, a message
// nested deeper than protobuf decodes) is the caller's error,
// INVALID_ARGUMENT, as on the HTTP listener. grpc-go answers any error of
// a codec's Unmarshal as INTERNAL ("grpc: failed to unmarshal the
// received message"), which says that mcpd has a bug, whatever status
// the error carries; and it answers before any interceptor runs, so the
// call is neither logged nor audited. So Unmarshal leaves such a message
// empty, holds its error and reports success, and refuse, the interceptor
// every call passes next (see New), takes the error back and fails the
// call with it. The HTTP listener's direct calls hold their decoding
// errors the same way (encodedMessage.decode).
//
// Its methods are safe for concurrent use.
type requestCodec struct {
	proto encoding.CodecV2
	audit *access.Auditor

	held atomic.Int64 // len(failed), read without the lock
	mu   sync.Mutex
	// failed holds the error of each request message that did not
	// decode, by the message (a pointer), until refuse takes it: right
	// after, as the message goes on to the interceptors.
	failed map[any]error
}

func newRequestCodec(audit *access.Auditor) *requestCodec {
	return &requestCodec{proto: encoding.GetCodecV2(protocodec.Name), audit: audit, failed: make(map[any]error)}
}

func (c *requestCodec) Name() string { return protocodec.Name }

func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.proto.Unmarshal(data, v)
	msg, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(msg)
	c.hold(v, err)
	return nil
}

// hold keeps err, msg's decoding error, for refuse.
func (c *requestCodec) hold(msg any, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.failed[msg]; !ok {
		c.held.Add(1)
	}
	c.failed[msg] = status.Errorf(codes.InvalidArgument, "request does not parse: %v", err)
}

// take returns and forgets the error msg did not decode with, nil if it
// decoded.
func (c *requestCodec) take(msg any) error {
	if c.held.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err, ok := c.failed[msg]
	if ok {
		delete(c.failed, msg)
		c.held.Add(-1)
	}
	return err
}

// refuseUnary fails a call whose request did not decode. It must run
// for every call, before any interceptor that may end the call first: a
// held error not taken would stay.
func (c *requestCodec) refuseUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.take(req); err != nil {
		c.audited(info.FullMethod, req, err)
		return nil, err
	}
	return handler(ctx, req)
}

// refuseStream is refuseUnary for the messages of a stream.
func (c *requestCodec) refuseStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &decodedStream{ServerStream: ss, codec: c, method: info.FullMethod})
}

// decodedStream fails RecvMsg of a message that did not decode.
type decodedStream struct {
	grpc.ServerStream
	codec  *requestCodec
	method string
	// started is set once the first message came.
	started atomic.Bool
}

func (s *decodedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	first := !s.started.Swap(true)
	if err := s.codec.take(m); err != nil {
		if first {
			// A stream's first message is its request; one of a later
			// message ends a stream whose request was audited already.
			s.codec.audited(s.method, m, err)
		}
		return err
	}
	return nil
}

// audited writes the audit line of a request to MCPHub that did not
// decode, if the request is one that gets a line: it has no caller yet
// (it is refused before authentication, as a request whose credentials
// name no caller is) and names nothing.
func (c *requestCodec) audited(fullMethod string, msg any, err error) {
	if path.Dir(fullMethod) != "/"+mcpdv1.MCPHub_ServiceDesc.ServiceName {
		return
	}
	method := path.Base(fullMethod)
	if r := describe(method, msg, false); r.audited {
		c.audit.Log(access.Record{Method: method, Code: status.Code(err).String()})
	}
}
