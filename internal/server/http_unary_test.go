package server

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestIncomingMetadata holds the direct unary path's metadata to what the
// gRPC listener hands the interceptors: the wire's own headers left out,
// names in lower case, "-bin" values decoded (padded or not, several
// joined by commas), and a "-bin" value that is not base64 refused.
func TestIncomingMetadata(t *testing.T) {
	md, err := incomingMetadata(http.Header{
		"Authorization":            {"Bearer t"},
		"X-Trace-Bin":              {"AQI=", "AwQ,BQ"},
		"Content-Type":             {"application/proto"},
		"Connect-Timeout-Ms":       {"100"},
		"Grpc-Accept-Encoding":     {"gzip"},
		"Connect-Protocol-Version": {"1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := metadata.MD{
		"authorization": {"Bearer t"},
		"x-trace-bin":   {"\x01\x02", "\x03\x04", "\x05"},
	}
	if diff := cmp.Diff(want, md); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	_, err = incomingMetadata(http.Header{"X-Trace-Bin": {"not base64!"}})
	if status.Code(err) != codes.Internal {
		t.Errorf("a malformed -bin value: got %v, want INTERNAL as grpc-go answers", err)
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost:8080": true, "127.0.0.1": true, "127.1.2.3:80": true,
		"::1": true, "[::1]:8080": true,
		"attacker.example": false, "attacker.example:8080": false, "10.0.0.1": false, "": false,
		"localhost.attacker.example": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q): got %v, want %v", host, got, want)
		}
	}
}
