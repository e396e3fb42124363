package wire

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every server answers the client's call and, but for one that serves
// calls only, its walk of a listing of more tools than one page holds,
// and the client refuses a wrong answer.
func TestServersAnswerTheClient(t *testing.T) {
	const tools = 120
	for _, s := range Servers {
		t.Run(s.Name, func(t *testing.T) {
			h, stop, err := s.New(tools)
			if err != nil {
				t.Fatal(err)
			}
			if stop != nil {
				defer stop()
			}
			ts := httptest.NewServer(h)
			defer ts.Close()
			c := &Client{HTTP: ts.Client(), URL: ts.URL}
			if s.Stateful {
				if err := c.Initialize(); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				if err := c.Call(); err != nil {
					t.Fatal(err)
				}
			}
			if s.CallsOnly {
				return
			}
			if err := c.List(tools); err != nil {
				t.Fatal(err)
			}
			if err := c.List(tools + 1); err == nil || !strings.Contains(err.Error(), "listed") {
				t.Errorf("List(%d) of %d tools = %v, want a count mismatch", tools+1, tools, err)
			}
		})
	}
}

// The client refuses an answer without echo's text, and an HTTP error.
func TestClientChecksAnswers(t *testing.T) {
	tests := []struct{ name, body string }{
		{"wrong text", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"no"}]}}`},
		{"a tool error", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"isError":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tt.body)) }))
			defer ts.Close()
			if err := (&Client{HTTP: ts.Client(), URL: ts.URL}).Call(); err == nil {
				t.Errorf("Call accepted %s", tt.body)
			}
		})
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusTeapot) }))
	defer ts.Close()
	if err := (&Client{HTTP: ts.Client(), URL: ts.URL}).Call(); err == nil || !strings.Contains(err.Error(), "418") {
		t.Errorf("Call of a failing server = %v", err)
	}
}

func TestLookup(t *testing.T) {
	if s, err := Lookup("mcp-go-stateless"); err != nil || s.Stateful {
		t.Errorf("Lookup(mcp-go-stateless) = %+v, %v", s, err)
	}
	if _, err := Lookup("nosuch"); err == nil {
		t.Error("Lookup(nosuch) found a server")
	}
}
