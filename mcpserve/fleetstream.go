package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// notificationResourceUpdated is what a peer's stream carries.
const notificationResourceUpdated = "notifications/resources/updated"

// listenStream is one open subscriptions/listen stream to a peer
// (fleetsubs.go), read by a goroutine of its own until it ends.
type listenStream struct {
	uris   []string            // the set it was opened with, sorted
	agreed map[string]struct{} // what its acknowledgement names
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once its reader returned
}

// close ends the stream and waits for its reader. Idempotent.
func (s *listenStream) close(cause error) {
	s.cancel(cause)
	<-s.done
}

func (s *listenStream) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// peerRefusal: the peer refused the stream for uri, which it does not
// serve.
type peerRefusal struct{ uri string }

func (e *peerRefusal) Error() string {
	return fmt.Sprintf("mcpserve: the peer does not serve %.128q", e.uri)
}

// open opens a stream to ps's peer carrying uris and reads its
// acknowledgement, within Fleet.ForwardTimeout. The request is a fleet
// request as a forward's (signed, asserting no caller), sent
// over the forwarder's connections; unlike a forward's its body is not
// bounded as a whole, only each event (maxPeerEvent). It returns a
// *peerRefusal when the peer refuses one URI, the peer's JSON-RPC error
// for another refusal, or what failed.
func (fs *fleetSubs) open(ps *peerStream, uris []string) (*listenStream, error) {
	return fs.openAs(ps, uris, nil)
}

// openAs is open with the caller of check set: then ps is nil, the
// request presents check's credential, as a judged caller's listen
// (fleetsubjudge.go), and it is closed once acknowledged.
func (fs *fleetSubs) openAs(ps *peerStream, uris []string, check *callerCheck) (*listenStream, error) {
	ctx, cancel := context.WithCancelCause(fs.ctx)
	timer := time.AfterFunc(fs.begin, func() { cancel(errNoAnswer) })
	fail := func(err error) (*listenStream, error) {
		timer.Stop()
		if cause := context.Cause(ctx); cause == errNoAnswer {
			err = fmt.Errorf("%w (%v)", errNoAnswer, fs.begin)
		}
		cancel(err)
		return nil, err
	}
	body := fs.encode(uris)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ps.endpoint, bytes.NewReader(body))
	if err != nil {
		return fail(err)
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	h[protocolHeader] = []string{ProtocolStateless}
	h[methodHeader] = []string{methodSubscriptionsListen}
	h[hopHeader] = []string{"1"}
	now := time.Now()
	assertion := anonymous(now)
	if check != nil {
		// A check asserts its caller as a forwarded call does; the mark
		// it carries is signed with the rest (hopMessageOf).
		h[checkHeader] = []string{"1"}
		if assertion, err = fs.sign.assert(check.ctx, check.cred, now); err != nil {
			return fail(err)
		}
	}
	if err := fs.sign.sign(req, body, ps.endpoint, assertion, now); err != nil {
		return fail(err)
	}
	resp, err := fs.hc.Do(req)
	if err != nil {
		return fail(err)
	}
	eb := &eventBound{r: resp.Body, left: maxPeerEvent}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data, err := io.ReadAll(eb)
		_ = resp.Body.Close()
		if err != nil {
			return fail(err)
		}
		if msg, ok := response(data); ok {
			return fail(refusal(msg, uris))
		}
		return fail(&hopStatus{code: resp.StatusCode, body: string(data[:min(len(data), 128)])})
	}
	br := bufio.NewReaderSize(eb, 4096)
	var data bytes.Buffer
	var msg hopMessage
	for msg.Method != notificationSubscriptionsAck {
		// The peer's table may hold a URI a moment before the
		// acknowledgement goes out, and send its update first.
		eb.left = maxPeerEvent
		if err := nextEvent(br, &data, maxPeerEvent); err != nil {
			_ = resp.Body.Close()
			return fail(err)
		}
		msg = hopMessage{}
		if _, err := segjson.Parse(data.Bytes(), &msg, 0); err != nil {
			_ = resp.Body.Close()
			return fail(fmt.Errorf("%w: %v", errNotAcknowledged, err))
		}
		switch {
		case msg.Method == notificationResourceUpdated && check == nil:
			fs.relayed(ps, msg.Params)
		case isHopResponse(msg):
			_ = resp.Body.Close()
			return fail(refusal(msg, uris))
		}
	}
	var ack struct {
		Notifications struct {
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &ack); err != nil {
		_ = resp.Body.Close()
		return fail(fmt.Errorf("%w: %v", errNotAcknowledged, err))
	}
	if !timer.Stop() {
		_ = resp.Body.Close()
		return fail(errNoAnswer)
	}
	s := &listenStream{uris: uris, agreed: map[string]struct{}{}, cancel: cancel, done: make(chan struct{})}
	for _, uri := range ack.Notifications.ResourceSubscriptions {
		s.agreed[uri] = struct{}{}
	}
	if check != nil {
		// Judged and admitted: nothing is followed on this stream.
		_ = resp.Body.Close()
		cancel(errChecked)
		close(s.done)
		return s, nil
	}
	fs.wg.Add(1)
	go fs.read(ps, s, br, eb, resp.Body)
	return s, nil
}

// refusal is the error of a listen the peer answered with msg: a
// *peerRefusal when it names one of uris as not found, its JSON-RPC
// error otherwise.
func refusal(msg hopMessage, uris []string) error {
	if msg.Error == nil {
		return errNotAcknowledged
	}
	var data struct {
		URI string `json:"uri"`
	}
	if msg.Error.Code == jsonrpc.CodeInvalidParams && json.Unmarshal(msg.Error.Data, &data) == nil {
		for _, uri := range uris {
			if uri == data.URI {
				return &peerRefusal{uri: uri}
			}
		}
	}
	return msg.Error
}

// encode is the body of a stream's request.
func (fs *fleetSubs) encode(uris []string) []byte {
	set, _ := json.Marshal(uris) // strings always encode
	b := bytes.NewBuffer(make([]byte, 0, 160+len(fs.meta)+len(set)))
	b.WriteString(`{"jsonrpc":"2.0","id":` + hopID + `,"method":"` + methodSubscriptionsListen + `","params":{"notifications":{"resourceSubscriptions":`)
	b.Write(set)
	b.WriteString(`},"_meta":{`)
	b.WriteString(fs.meta)
	b.WriteString(`,"` + metaClientCapabilities + `":{}}}}`)
	return b.Bytes()
}

// read relays the updates of s until it ends: the peer ends it (its
// response to the listen), it breaks, or it is closed. Then it kicks
// ps's goroutine, which opens it again if its set is not empty.
func (fs *fleetSubs) read(ps *peerStream, s *listenStream, br *bufio.Reader, eb *eventBound, body io.Closer) {
	defer fs.wg.Done()
	defer close(s.done)
	var data bytes.Buffer
	for {
		eb.left = maxPeerEvent
		if err := nextEvent(br, &data, maxPeerEvent); err != nil {
			break
		}
		var msg hopMessage
		if _, err := segjson.Parse(data.Bytes(), &msg, 0); err != nil {
			break
		}
		if msg.Method == notificationResourceUpdated {
			fs.relayed(ps, msg.Params)
			continue
		}
		if isHopResponse(msg) {
			break
		}
	}
	s.cancel(errStreamReplaced)
	_ = body.Close()
	t := fs.t
	t.mu.Lock()
	if ps.cur == s {
		ps.acked = nil
	}
	t.mu.Unlock()
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// relayed relays the update whose params a peer's stream carried.
func (fs *fleetSubs) relayed(ps *peerStream, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	if segjson.Unmarshal(params, &p) == nil && p.URI != "" {
		fs.t.relay(ps, p.URI)
	}
}

// eventBound reads at most left bytes before the reader resets it for
// the next event; with a buffered reader on top, an event may take up to
// the buffer's size more.
type eventBound struct {
	r    io.Reader
	left int64
}

func (b *eventBound) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errEventTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
