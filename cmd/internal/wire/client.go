package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Version is the protocol the client speaks: the revision before
// 2026-07-28, which every server here serves, stateful or not.
const Version = "2025-11-25"

// Client is one client goroutine's connection to a server: its session,
// if any, and a buffer for the bodies it reads. It is not safe for
// concurrent use; make one per goroutine over a shared http.Client.
type Client struct {
	HTTP    *http.Client
	URL     string
	session string
	seq     int
	buf     bytes.Buffer
	body    bytes.Buffer
}

// post sends one JSON-RPC message and returns the body of the response,
// an SSE stream or a JSON document, valid until the next post.
func (c *Client) post(body []byte) ([]byte, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", Version)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(resp.Body); err != nil {
		return nil, nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, c.buf.Bytes())
	}
	return c.buf.Bytes(), resp.Header, nil
}

// Initialize opens a session (initialize, then notifications/initialized),
// for a stateful server.
func (c *Client) Initialize() error {
	_, h, err := c.post([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + Version +
		`","capabilities":{},"clientInfo":{"name":"wirebench","version":"1"}}}`))
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if c.session = h.Get("Mcp-Session-Id"); c.session == "" {
		return errors.New("initialize: no Mcp-Session-Id")
	}
	if _, _, err := c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	return nil
}

var (
	callHead = []byte(`{"jsonrpc":"2.0","id":`)
	callTail = []byte(`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + EchoText + `"}}}`)
	echoed   = []byte(`"text":"` + EchoText + `"`)
	isError  = []byte(`"isError":true`)
)

// Call calls echo and checks that its text came back.
func (c *Client) Call() error {
	c.seq++
	c.body.Reset()
	c.body.Write(callHead)
	c.body.WriteString(strconv.Itoa(c.seq))
	c.body.Write(callTail)
	body, _, err := c.post(c.body.Bytes())
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	if !bytes.Contains(body, echoed) || bytes.Contains(body, isError) {
		return fmt.Errorf("tools/call answered %.300s", body)
	}
	return nil
}

// List walks every page of tools/list and checks that n tools came back.
func (c *Client) List(n int) error {
	cursor, got := "", 0
	for page := 0; ; page++ {
		c.seq++
		params := `{}`
		if cursor != "" {
			params = `{"cursor":` + strconv.Quote(cursor) + `}`
		}
		body, _, err := c.post([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(c.seq) + `,"method":"tools/list","params":` + params + `}`))
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if i := bytes.Index(body, []byte("data: ")); i >= 0 { // an SSE event: its data line
			body = body[i+len("data: "):]
			if j := bytes.IndexByte(body, '\n'); j >= 0 {
				body = body[:j]
			}
		}
		var resp struct {
			Result struct {
				Tools      []struct{ Name string } `json:"tools"`
				NextCursor string                  `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			return fmt.Errorf("tools/list answered %.300s: %w", body, err)
		}
		got += len(resp.Result.Tools)
		if cursor = resp.Result.NextCursor; cursor == "" || page > n {
			break
		}
	}
	if got != n {
		return fmt.Errorf("tools/list listed %d tools, want %d", got, n)
	}
	return nil
}
