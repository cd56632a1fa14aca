package mcpclient

import (
	"strconv"
	"unicode/utf8"

	"github.com/mcpd-project/mcpd/internal/config"
)

// MaxToolNameLen bounds the name of a server's tool that mcpd lists, in
// bytes. MCP allows 128 since revision 2025-11-25 (SEP-986); mcpd takes
// longer names from servers that break the rule (the metrics label them
// "other"), up to this, far beyond any name in use. A tool whose name is
// longer is left out: no request could name it (CheckToolNameLength).
const MaxToolNameLen = config.MaxToolNameLen

// MaxQualifiedToolNameLen bounds a qualified tool name,
// mcp__<server>__<tool>, in bytes.
const MaxQualifiedToolNameLen = config.MaxQualifiedToolNameLen

// CheckServerNameLength refuses, as ErrInvalidArgument, a server name
// (the request field field) longer than any server's can be: it names no
// server, and answering NOT_FOUND would quote all of it, in the answer
// and in the log. The error quotes only its start.
func CheckServerNameLength(field, name string) error {
	if len(name) <= config.MaxNameLen {
		return nil
	}
	return errorf(ErrInvalidArgument, "%s %s is %d bytes long; a server name is at most %d",
		field, quoteStart(name), len(name), config.MaxNameLen)
}

// CheckToolNameLength is CheckServerNameLength for a tool name, qualified
// or a server's own: at most MaxQualifiedToolNameLen bytes.
func CheckToolNameLength(field, name string) error {
	if len(name) <= MaxQualifiedToolNameLen {
		return nil
	}
	return errorf(ErrInvalidArgument, "%s %s is %d bytes long; a qualified tool name is at most %d",
		field, quoteStart(name), len(name), MaxQualifiedToolNameLen)
}

// MaxURILen bounds a resource URI (or URI template) a request names, in
// bytes. MCP sets no bound, but web servers refuse request lines longer
// than 8 to 16 KiB, and a longer one would be copied whole into the
// answer, the log and the audit line of every request that names it.
const MaxURILen = config.MaxURILen

// MaxPromptNameLen bounds a prompt name a request names, qualified or a
// server's own, in bytes: as a qualified tool name.
const MaxPromptNameLen = MaxQualifiedToolNameLen

// CheckURILength is CheckServerNameLength for a resource URI or URI
// template: at most MaxURILen bytes.
func CheckURILength(field, uri string) error {
	if len(uri) <= MaxURILen {
		return nil
	}
	return errorf(ErrInvalidArgument, "%s %s is %d bytes long; a resource URI is at most %d",
		field, quoteStart(uri), len(uri), MaxURILen)
}

// CheckPromptNameLength is CheckServerNameLength for a prompt name: at
// most MaxPromptNameLen bytes.
func CheckPromptNameLength(field, name string) error {
	if len(name) <= MaxPromptNameLen {
		return nil
	}
	return errorf(ErrInvalidArgument, "%s %s is %d bytes long; a prompt name is at most %d",
		field, quoteStart(name), len(name), MaxPromptNameLen)
}

// quotedStart is how many bytes of a name too long an error quotes.
const quotedStart = 32

// quoteStart is name quoted, and, when it is longer than quotedStart,
// only its first bytes, cut where a character starts, and "..." for the
// rest.
func quoteStart(name string) string {
	if len(name) <= quotedStart {
		return strconv.Quote(name)
	}
	cut := quotedStart
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.Quote(name[:cut]) + "..."
}
