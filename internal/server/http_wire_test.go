package server

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestHTTPMalformedConnectRequests: what the Connect protocol refuses in
// a request's form (a GET message that is not base64, a timeout that is
// not 1 to 10 digits) is the caller's error, 400 invalid_argument, not a
// 500 or a deadline that passed.
func TestHTTPMalformedConnectRequests(t *testing.T) {
	e := newHTTPEnv(t)
	name, _ := proto.Marshal(&mcpdv1.GetServerRequest{Name: "nosuch"})
	get := func(query string) *http.Request {
		req, _ := http.NewRequestWithContext(testContext(t), http.MethodGet, e.base+"GetServer?"+query, nil)
		return req
	}
	post := func(method, body string, header ...string) *http.Request {
		req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, e.base+method, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return req
	}
	stream := func(timeout string) *http.Request {
		// One Connect streaming message: flags, length, JSON.
		body := `{"afterSequence": "0"}`
		frame := append([]byte{0, 0, 0, 0, byte(len(body))}, body...)
		req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, e.base+"Subscribe", strings.NewReader(string(frame)))
		req.Header.Set("Content-Type", "application/connect+json")
		req.Header.Set("Connect-Timeout-Ms", timeout)
		return req
	}
	for _, tc := range []struct {
		name     string
		req      *http.Request
		status   int
		code     string
		inStream bool // the error is in the stream's end message
	}{
		{"GET, message not base64", get("encoding=proto&base64=1&message=" + url.QueryEscape("!!!")), 400, "invalid_argument", false},
		{"GET, message base64", get("encoding=proto&base64=1&message=" + base64.RawURLEncoding.EncodeToString(name)), 404, "not_found", false},
		{"GET, message base64, padded", get("encoding=proto&base64=1&message=" + base64.URLEncoding.EncodeToString(append(name, 0x10, 0x01))), 404, "not_found", false},
		{"negative timeout", post("GetServer", `{"name": "nosuch"}`, "Connect-Timeout-Ms", "-5"), 400, "invalid_argument", false},
		{"timeout with a sign", post("GetServer", `{"name": "nosuch"}`, "Connect-Timeout-Ms", "+5"), 400, "invalid_argument", false},
		{"timeout of 11 digits", post("GetServer", `{"name": "nosuch"}`, "Connect-Timeout-Ms", "12345678901"), 400, "invalid_argument", false},
		{"timeout", post("GetServer", `{"name": "nosuch"}`, "Connect-Timeout-Ms", "60000"), 404, "not_found", false},
		{"negative timeout, stream", stream("-5"), 200, "invalid_argument", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.client.Do(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if tc.inStream {
				// The end message is the last frame: flags 2, then JSON.
				if i := strings.LastIndex(string(body), "{\"error\""); i >= 0 {
					body = body[i:]
				}
				var end struct {
					Error struct{ Code string } `json:"error"`
				}
				if err := json.Unmarshal(body, &end); resp.StatusCode != tc.status || err != nil || end.Error.Code != tc.code {
					t.Errorf("got %d %s, want %d and an end message with %s", resp.StatusCode, body, tc.status, tc.code)
				}
				return
			}
			var out struct{ Code string }
			if err := json.Unmarshal(body, &out); resp.StatusCode != tc.status || err != nil || out.Code != tc.code {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
}
