package transport

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	segjson "github.com/segmentio/encoding/json"
)

// envelope is the wire form of a JSON-RPC message, as the SDK decodes it.
// Method is raw so that a present but empty "method" is told from an
// absent one.
type envelope struct {
	VersionTag string             `json:"jsonrpc"`
	ID         any                `json:"id,omitempty"`
	Method     segjson.RawMessage `json:"method"`
	Params     segjson.RawMessage `json:"params,omitempty"`
	Result     segjson.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error     `json:"error,omitempty"`
}

// decodeMessage decodes one JSON-RPC message exactly as the SDK's
// jsonrpc.DecodeMessage does (the tests hold the two side by side), with
// the SDK's own JSON library but without the streaming decoder that
// DecodeMessage builds, and its 32 KiB buffer, for every message: on the
// hot path of every call that garbage is most of mcpd's GC work. Raw
// fields are copies, so line may be reused.
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	// As the SDK does first: a value nested deeper is refused, and the
	// parser would take quadratic time over some (a deep "id").
	if err := checkDepth(line); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	var env envelope
	if _, err := segjson.Parse(line, &env, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if env.VersionTag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", env.VersionTag, "2.0")
	}
	id, err := jsonrpc.MakeID(env.ID)
	if err != nil {
		return nil, err
	}
	if len(env.Method) > 0 {
		var method string
		if _, err := segjson.Parse(env.Method, &method, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: []byte(env.Params)}, nil
	}
	if !id.IsValid() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}
	}
	resp := &jsonrpc.Response{ID: id, Result: []byte(env.Result)}
	if env.Error != nil {
		resp.Error = env.Error
	}
	return resp, nil
}

// maxDepth is how deeply the SDK lets JSON values nest in a message.
const maxDepth = 1000

var errTooDeep = fmt.Errorf("json: exceeded maximum nesting depth of %d", maxDepth)

// checkDepth refuses JSON with arrays and objects nested more than
// maxDepth deep, counting brackets outside strings in one pass.
func checkDepth(data []byte) error {
	depth := 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return errTooDeep
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
