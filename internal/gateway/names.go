package gateway

import (
	"strings"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// resourceScheme starts every resource URI and URI template the gateway
// shows: mcpd://<server>/<the server's own URI>. Server names are plain
// (A-Z a-z 0-9 _ -), so the first "/" after the scheme ends the name and
// the rest is the server's URI, byte for byte.
const resourceScheme = "mcpd://"

// ResourceURI is the URI (or URI template) hosts see for a server's
// resource URI (or template).
func ResourceURI(server, uri string) string {
	return resourceScheme + server + "/" + uri
}

// SplitResourceURI maps a URI from ResourceURI back to the server and the
// server's own URI.
func SplitResourceURI(uri string) (server, original string, ok bool) {
	rest, found := strings.CutPrefix(uri, resourceScheme)
	if !found {
		return "", "", false
	}
	server, original, found = strings.Cut(rest, "/")
	if !found || server == "" || original == "" {
		return "", "", false
	}
	return server, original, true
}

// QualifiedName is the name hosts see for a server's prompt: the form of
// qualified tool names, mcp__<server>__<name>.
func QualifiedName(server, name string) string {
	return mcpclient.QualifiedToolName(server, name)
}

// SplitQualifiedName maps a name from QualifiedName back.
func SplitQualifiedName(name string) (server, original string, ok bool) {
	return mcpclient.SplitQualifiedToolName(name)
}

// validTemplate reports whether the SDK accepts a URI template (it panics
// on one it does not).
func validTemplate(t string) bool {
	_, err := uritemplate.New(t)
	return err == nil
}
