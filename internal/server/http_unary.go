package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The HTTP listener's unary MCPHub methods skip the transcoder: a
// connect-go handler speaks the wire (Connect, gRPC or gRPC-Web, any
// codec and compression it negotiates) and hands the request to the very
// method handler, interceptor chain and stats handler the gRPC server
// runs, with the same context a gRPC call has (incoming metadata, peer,
// method). What differs is only the transport: no second, in-process
// HTTP/2 stream per call, which is where the transcoder's path spends
// most of the time it adds to a call. Streaming methods, health and
// reflection still go through the transcoder.

// unaryHTTPHandlers returns the direct handler of every unary MCPHub
// method, by request path.
func (s *Server) unaryHTTPHandlers(desc *grpc.ServiceDesc, service protoreflect.ServiceDescriptor, maxMessageBytes int) map[string]http.Handler {
	opts := []connect.HandlerOption{
		connect.WithCodec(protoCodec{}),
		connect.WithCodec(jsonCodec{name: "json"}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8"}),
	}
	bodyLimit := int64(0)
	if maxMessageBytes > 0 {
		// The limit is the gRPC listener's, on the protobuf message
		// (encodedMessage.decode); a JSON body may take a few times that.
		bodyLimit = min(int64(maxMessageBytes)*transcodeBufferFactor, math.MaxInt32)
		opts = append(opts, connect.WithReadMaxBytes(int(bodyLimit)))
	}
	handlers := make(map[string]http.Handler, len(desc.Methods))
	for _, m := range desc.Methods {
		method := "/" + desc.ServiceName + "/" + m.MethodName
		call := s.unaryCall(method, m.Handler, maxMessageBytes)
		methodOpts := opts
		if md := service.Methods().ByName(protoreflect.Name(m.MethodName)); md != nil {
			// A method without side effects may be called with GET, as
			// the Connect protocol (and the transcoder) allow.
			if mo, ok := md.Options().(*descriptorpb.MethodOptions); ok && mo.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
				methodOpts = append(slices.Clip(opts), connect.WithIdempotency(connect.IdempotencyNoSideEffects))
			}
		}
		handlers[method] = withBodyLimit(bodyLimit, withPeer(connect.NewUnaryHandler(method, call, methodOpts...)))
	}
	return handlers
}

// withBodyLimit stops reading a request body a little past limit (0: no
// limit): connect-go refuses a body over its read limit, but would read
// the rest of it first, before the call is even authenticated.
func withBodyLimit(limit int64, h http.Handler) http.Handler {
	if limit <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, limit+bodyLimitSlack)
		h.ServeHTTP(w, r)
	})
}

// bodyLimitSlack is what a body may hold beyond a message's limit: the
// envelope of the gRPC and streaming framings.
const bodyLimitSlack = 1 << 10

// unaryCall runs one unary method as grpc.Server would: the stats
// handler (tracing) around the interceptor chain around the method.
func (s *Server) unaryCall(method string, handler grpc.MethodHandler, maxMessageBytes int) func(context.Context, *connect.Request[encodedMessage]) (*connect.Response[message], error) {
	return func(ctx context.Context, req *connect.Request[encodedMessage]) (*connect.Response[message], error) {
		req.Msg.max = maxMessageBytes
		req.Msg.codec = s.codec
		stream := &headerStream{method: method}
		md, err := incomingMetadata(req.Header())
		if err != nil {
			return nil, connectError(err)
		}
		ctx = metadata.NewIncomingContext(ctx, md)
		ctx = grpc.NewContextWithServerTransportStream(ctx, stream)
		var begin time.Time
		if s.stats != nil {
			begin = time.Now()
			ctx = s.stats.TagRPC(ctx, &stats.RPCTagInfo{FullMethodName: method})
			s.stats.HandleRPC(ctx, &stats.Begin{BeginTime: begin})
			if p, ok := peer.FromContext(ctx); ok {
				s.stats.HandleRPC(ctx, &stats.InHeader{FullMethod: method, RemoteAddr: p.Addr, LocalAddr: p.LocalAddr})
			}
		}
		res, err := handler(s.hub, ctx, req.Msg.decode, s.unary)
		if err == nil && maxMessageBytes > 0 {
			// The gRPC listener's send limit (MaxSendMsgSize).
			if m, ok := res.(proto.Message); ok {
				if size := proto.Size(m); size > maxMessageBytes {
					err = status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", size, maxMessageBytes)
				}
			}
		}
		if s.stats != nil {
			s.stats.HandleRPC(ctx, &stats.End{BeginTime: begin, EndTime: time.Now(), Error: err})
		}
		header, trailer := stream.metadata()
		if err != nil {
			ce := connectError(err)
			copyMetadata(ce.Meta(), header)
			copyMetadata(ce.Meta(), trailer)
			return nil, ce
		}
		msg, ok := res.(proto.Message)
		if !ok {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("%s answered %T, not a message", method, res))
		}
		resp := connect.NewResponse(&message{msg: msg})
		copyMetadata(resp.Header(), header)
		copyMetadata(resp.Trailer(), trailer)
		return resp, nil
	}
}

// connectError is err, a gRPC status, as connect-go's error of the same
// code, message and details: the one error mapping stays the gRPC edge's.
func connectError(err error) *connect.Error {
	st := status.Convert(err)
	ce := connect.NewError(connect.Code(st.Code()), errors.New(st.Message()))
	for _, d := range st.Proto().GetDetails() {
		if detail, err := connect.NewErrorDetail(d); err == nil {
			ce.AddDetail(detail)
		}
	}
	return ce
}

// withPeer gives the request's context the gRPC peer grpc.Server's HTTP
// handler gives it: the remote and local addresses, and the TLS state
// from which the caller's verified certificate is read.
func withPeer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &peer.Peer{Addr: remoteAddr(r.RemoteAddr)}
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			p.LocalAddr = local
		}
		if r.TLS != nil {
			p.AuthInfo = credentials.TLSInfo{
				State:          *r.TLS,
				CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
			}
		}
		h.ServeHTTP(w, r.WithContext(peer.NewContext(r.Context(), p)))
	})
}

// remoteAddr is an http.Request's RemoteAddr as a net.Addr.
type remoteAddr string

func (a remoteAddr) Network() string { return "tcp" }
func (a remoteAddr) String() string  { return string(a) }

// incomingMetadata is the gRPC metadata of an HTTP request's headers:
// every header but those of the wire itself, names in lower case, the
// values of "-bin" headers decoded (comma-joined values apart). A "-bin"
// value that is not base64 fails the call, as on the gRPC listener.
func incomingMetadata(h http.Header) (metadata.MD, error) {
	md := make(metadata.MD, len(h))
	for name, values := range h {
		key := strings.ToLower(name)
		if wireHeader(key) {
			continue
		}
		if strings.HasSuffix(key, "-bin") {
			decoded := make([]string, 0, len(values))
			for _, joined := range values {
				for v := range strings.SplitSeq(joined, ",") {
					b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(v), "="))
					if err != nil {
						return nil, status.Errorf(codes.Internal, "malformed binary header %s: %v", key, err)
					}
					decoded = append(decoded, string(b))
				}
			}
			values = decoded
		}
		md[key] = values
	}
	return md, nil
}

// wireHeader reports the headers that belong to the protocol or the
// connection rather than to the call.
func wireHeader(key string) bool {
	switch key {
	case "content-type", "content-length", "content-encoding", "accept-encoding",
		"te", "host", "connection", "keep-alive", "transfer-encoding", "upgrade":
		return true
	}
	return strings.HasPrefix(key, "connect-") || strings.HasPrefix(key, "grpc-")
}

// copyMetadata adds md to h.
func copyMetadata(h http.Header, md metadata.MD) {
	for k, vs := range md {
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = connect.EncodeBinaryHeader([]byte(v))
			}
			h.Add(k, v)
		}
	}
}

// headerStream is the grpc.ServerTransportStream of a direct call: it
// names the method (grpc.Method) and collects what the handlers set with
// grpc.SetHeader, SendHeader and SetTrailer.
type headerStream struct {
	method string

	mu              sync.Mutex
	header, trailer metadata.MD
}

func (s *headerStream) Method() string { return s.method }

func (s *headerStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *headerStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

func (s *headerStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

func (s *headerStream) metadata() (header, trailer metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header, s.trailer
}

// encodedMessage is a request as it came, decoded by the method handler
// into the message it expects.
type encodedMessage struct {
	data  []byte
	json  bool
	max   int           // the largest message accepted, in protobuf bytes; 0: any
	codec *requestCodec // holds a decoding error for the interceptors
}

// decode is the method handler's decoder. A request that does not parse
// is the caller's error, INVALID_ARGUMENT: it reaches the interceptors as
// an empty message, and the error with it, as on the gRPC listener (see
// requestCodec).
func (m *encodedMessage) decode(v any) error {
	msg, ok := v.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "request type %T is not a message", v)
	}
	if !m.json && m.max > 0 && len(m.data) > m.max {
		return tooLarge(len(m.data), m.max)
	}
	var err error
	if m.json {
		if len(m.data) == 0 {
			return nil // no body: the empty message, as in protobuf
		}
		err = unmarshalJSON(protojson.UnmarshalOptions{}, m.data, msg)
	} else {
		err = proto.Unmarshal(m.data, msg)
	}
	if err != nil {
		proto.Reset(msg)
		m.codec.hold(msg, err)
		return nil
	}
	if m.json && m.max > 0 {
		if size := proto.Size(msg); size > m.max {
			return tooLarge(size, m.max)
		}
	}
	return nil
}

// tooLarge is the gRPC server's own refusal of a message over the limit.
func tooLarge(size, limit int) error {
	return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, limit)
}

// message is a method handler's response.
type message struct{ msg proto.Message }

// unwrap is the message to marshal: a response's, or one connect-go
// marshals itself (a gRPC status with its details).
func unwrap(v any) (proto.Message, error) {
	switch m := v.(type) {
	case *message:
		return m.msg, nil
	case proto.Message:
		return m, nil
	}
	return nil, fmt.Errorf("cannot marshal %T", v)
}

// protoCodec and jsonCodec are connect-go's codecs for the two types
// above: a request keeps its bytes (connect-go reuses its buffer), a
// response is marshalled as its message. JSON leaves unset fields out,
// ignores unknown fields and refuses unknown enum names (unmarshalJSON),
// as the transcoder does.
type protoCodec struct{}

func (protoCodec) Name() string { return "proto" }

func (c protoCodec) Marshal(v any) ([]byte, error) { return c.MarshalAppend(nil, v) }

func (protoCodec) MarshalAppend(b []byte, v any) ([]byte, error) {
	msg, err := unwrap(v)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{}.MarshalAppend(b, msg)
}

func (protoCodec) Unmarshal(b []byte, v any) error {
	m := v.(*encodedMessage)
	m.data = append(m.data[:0], b...)
	return nil
}

// jsonCodec is registered under both names connect-go gives JSON, with and
// without the charset parameter.
type jsonCodec struct{ name string }

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) Marshal(v any) ([]byte, error) {
	msg, err := unwrap(v)
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(msg)
}

func (jsonCodec) Unmarshal(b []byte, v any) error {
	m := v.(*encodedMessage)
	m.data = append(m.data[:0], b...)
	m.json = true
	return nil
}
