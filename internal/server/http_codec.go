package server

import (
	"bytes"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The HTTP listener reads JSON requests the same way on both of its
// paths, the direct unary one (http_unary.go) and the transcoder's
// (streams): a field the message does not have is ignored, so that a
// newer client may send fields this mcpd does not know, but an enum name
// the enum does not have is refused, as a request that does not parse.
// protojson has no option for that: DiscardUnknown drops unknown enum
// names along with unknown fields, which would turn
// `"kinds": ["EVENT_KIND_SERVER_STATES"]` (a typo) into no kinds, that
// is every kind, where the gRPC listener hands the handler the unknown
// value and the handler refuses it.

// unmarshalJSON decodes data into msg as protojson does with opts, but
// for unknown fields: those are ignored at any depth, whatever
// opts.DiscardUnknown says, while unknown enum names stay errors.
func unmarshalJSON(opts protojson.UnmarshalOptions, data []byte, msg proto.Message) error {
	opts.DiscardUnknown = false
	err := opts.Unmarshal(data, msg)
	if err == nil {
		return nil
	}
	known, dropped, perr := knownFieldsOnly(data, msg.ProtoReflect().Descriptor())
	if perr != nil {
		// Not JSON. The strict decoding may have stopped at an unknown
		// field first: protojson's account of the syntax error is better.
		opts.DiscardUnknown = true
		if lerr := opts.Unmarshal(data, msg); lerr != nil {
			return lerr
		}
		return err
	}
	if !dropped {
		return err // an error of another kind than an unknown field
	}
	return opts.Unmarshal(known, msg)
}

// knownFieldsOnly returns a copy of data in which every member of a JSON
// object that names no field of its message is blanked out with spaces
// (so that protojson's error positions still point into data), and
// whether there was any. A member is kept when its key is the field's
// JSON name or its proto name, as protojson accepts both; mcpd's
// messages (proto3) have no extensions, so an "[extension]" key is
// unknown too. It walks into message fields, lists of messages and maps
// with message values. Messages of package google.protobuf (Struct,
// Value, ListValue, Any, Timestamp, Duration, FieldMask, the wrappers,
// Empty) are left as they are: they have JSON forms of their own, and
// inside a Struct or Value any key is valid. A value of the wrong JSON
// type is left to protojson to refuse. The error is data's, when it is
// not JSON.
func knownFieldsOnly(data []byte, md protoreflect.MessageDescriptor) ([]byte, bool, error) {
	p := &fieldPruner{buf: bytes.Clone(data)}
	if err := p.message(0, len(p.buf), md); err != nil {
		return nil, false, err
	}
	return p.buf, p.dropped, nil
}

// fieldPruner blanks out unknown fields in buf. Each method works on
// the JSON value buf[start:end].
type fieldPruner struct {
	buf     []byte
	dropped bool
}

// member is an object member's extent in buf: from the opening quote of
// its key to the end of its value.
type member struct {
	from, to int
	known    bool
}

func (p *fieldPruner) message(start, end int, md protoreflect.MessageDescriptor) error {
	if md.FullName().Parent() == "google.protobuf" {
		return nil
	}
	dec, ok, err := p.open(start, end, '{')
	if !ok {
		return err
	}
	fields := md.Fields()
	var members []member
	for dec.More() {
		// Before the key are only blanks and a comma.
		from := start + int(dec.InputOffset())
		from += bytes.IndexByte(p.buf[from:end], '"')
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		vstart, vend, err := p.value(dec, start)
		if err != nil {
			return err
		}
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		members = append(members, member{from: from, to: vend, known: fd != nil})
		if fd != nil {
			if err := p.field(vstart, vend, fd); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return err
	}
	p.blankUnknown(members)
	return nil
}

// blankUnknown blanks out the unknown members of one object, and the
// commas that no longer separate two known ones.
func (p *fieldPruner) blankUnknown(members []member) {
	lastKnown, unknown := -1, false
	for i, m := range members {
		if m.known {
			lastKnown = i
		} else {
			unknown = true
		}
	}
	if !unknown {
		return
	}
	p.dropped = true
	for i, m := range members {
		if !m.known {
			blank(p.buf[m.from:m.to])
		}
		if i+1 < len(members) && !(m.known && i < lastKnown) {
			between := p.buf[m.to:members[i+1].from]
			if c := bytes.IndexByte(between, ','); c >= 0 {
				between[c] = ' '
			}
		}
	}
}

func blank(b []byte) {
	for i := range b {
		b[i] = ' '
	}
}

// field walks the value of field fd.
func (p *fieldPruner) field(start, end int, fd protoreflect.FieldDescriptor) error {
	switch {
	case fd.IsMap():
		if vd := fd.MapValue().Message(); vd != nil {
			return p.elements(start, end, '{', vd)
		}
	case fd.Message() == nil:
	case fd.IsList():
		return p.elements(start, end, '[', fd.Message())
	default:
		return p.message(start, end, fd.Message())
	}
	return nil
}

// elements walks the values of a JSON array (delim '[') or object ('{')
// as messages of type md.
func (p *fieldPruner) elements(start, end int, delim json.Delim, md protoreflect.MessageDescriptor) error {
	dec, ok, err := p.open(start, end, delim)
	if !ok {
		return err
	}
	for dec.More() {
		if delim == '{' {
			if _, err := dec.Token(); err != nil { // the map key
				return err
			}
		}
		vstart, vend, err := p.value(dec, start)
		if err != nil {
			return err
		}
		if err := p.message(vstart, vend, md); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// open starts reading buf[start:end], and says whether it opens with
// delim; if not (null, or a value protojson refuses itself), there is
// nothing to walk.
func (p *fieldPruner) open(start, end int, delim json.Delim) (*json.Decoder, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(p.buf[start:end]))
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	return dec, tok == delim, nil
}

// value reads the next value of dec, which reads buf from start, and
// returns its extent in buf.
func (p *fieldPruner) value(dec *json.Decoder, start int) (vstart, vend int, err error) {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return 0, 0, err
	}
	vend = start + int(dec.InputOffset())
	return vend - len(raw), vend, nil
}

// transcoderJSON is the transcoder's JSON codec: vanguard's, leaving out
// the fields a message leaves unset (as connect-go and grpcurl write
// JSON), and reading requests as the direct unary path does
// (unmarshalJSON). A request that does not parse is INVALID_ARGUMENT: the
// transcoder passes a connect.Error's code on, and answers any other
// error as UNKNOWN.
type transcoderJSON struct{ json *vanguard.JSONCodec }

// compactJSON makes the transcoder's JSON codec.
func compactJSON(res vanguard.TypeResolver) vanguard.Codec {
	c := vanguard.NewJSONCodec(res)
	c.MarshalOptions.EmitUnpopulated = false
	return transcoderJSON{json: c}
}

func (c transcoderJSON) Name() string { return c.json.Name() }

func (c transcoderJSON) MarshalAppend(base []byte, msg proto.Message) ([]byte, error) {
	return c.json.MarshalAppend(base, msg)
}

func (c transcoderJSON) Unmarshal(data []byte, msg proto.Message) error {
	if err := unmarshalJSON(c.json.UnmarshalOptions, data, msg); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("request does not parse: %w", err))
	}
	return nil
}
