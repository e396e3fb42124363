package mcpserve

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// Tasks across a fleet. A task runs on the replica whose consumer started
// it, its holder, and lives in that process's catalog alone; yet its
// caller may poll through any replica (a load balancer picks one per
// request). So a task's ID names its holder: a fleet replica whose Peers
// implement TaskHolders gives a task the ID
//
//	<catalog ID>.<created, holder's stamp>.<MAC>
//
// where the MAC, under a key derived from the fleet token, binds the
// three parts and the mark of the caller's credential (fleetCredential),
// which every replica computes alike. Any replica checks it first: an
// ID no replica minted, or another caller's, is unknown, exactly as an
// unknown local ID, and goes nowhere. Then the stamp is located in the
// replica's view (TaskHolders.Locate):
//
//   - here: the request is served from this catalog;
//   - live elsewhere: it is forwarded to the holder, once (a forwarded
//     tasks request is never forwarded again), and the holder's answer
//     relayed; a holder that cannot be reached gives CodePeerUnavailable,
//     retryable when it surely did not get the request;
//   - lost (the holder's lease expired, or its process was replaced): the
//     holder is asked all the same, since a process that merely lost its
//     session still holds its ended tasks; if it cannot be reached, the
//     task reads failed, reason replica_lost, and cancels and updates are
//     acknowledged as for any ended task;
//   - unknown (the view is behind the stamp, or between sessions):
//     CodePeerUnavailable, retryable.
//
// No task is ever answered by a replica that does not hold it: only the
// holder's catalog has its state, and the others either relay the
// holder's answer or report the holder's loss.

// TaskHolders is what a Fleet's Peers implements, besides Peers, to serve
// tasks across the fleet; package etcdfleet's Replica does. Without it a
// replica's tasks are served by that replica alone, and a call forwarded
// to another replica runs to its end, as for a client that takes no
// tasks. Both methods are called concurrently and must not block.
type TaskHolders interface {
	// Stamp names this replica as the holder of the tasks it starts now:
	// opaque, at most maxStampBytes; ok is false when it cannot (the
	// task is then served by this replica alone).
	Stamp() (stamp string, ok bool)
	// Locate says where the holder a Stamp names is, and at which fleet
	// endpoint: the holder's own for catalog.HolderLive, the one it had,
	// if known, for catalog.HolderLost.
	Locate(stamp string) (endpoint string, where catalog.HolderState)
}

// maxStampBytes bounds a stamp, and so a task ID.
const maxStampBytes = 1024

// deriveTaskKey derives the key of fleet task IDs from a fleet credential.
func deriveTaskKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("livereg fleet task ID key v1"))
	return m.Sum(nil)
}

// taskIDs is a fleet replica's half of tasks across the fleet: its
// holders, and the keys task IDs are minted (sign) and checked (accept,
// sign first) with.
type taskIDs struct {
	holders TaskHolders
	sign    []byte
	accept  [][]byte
}

func newTaskIDs(f *Fleet) *taskIDs {
	h, ok := f.Peers.(TaskHolders)
	if !ok {
		return nil
	}
	ids := &taskIDs{holders: h, sign: deriveTaskKey(f.Token)}
	ids.accept = append(ids.accept, ids.sign)
	for _, t := range f.PreviousTokens {
		ids.accept = append(ids.accept, deriveTaskKey(t))
	}
	return ids
}

func taskIDMAC(key []byte, local, payload, credential string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(local))
	m.Write([]byte{'.'})
	m.Write([]byte(payload))
	m.Write([]byte{0})
	m.Write([]byte(credential))
	return m.Sum(nil)[:16]
}

// wireTaskID is the ID the client gets for the task info, started with
// credential: the catalog's own, or, serving tasks across a fleet, one
// that names this replica as its holder.
func (s *Server) wireTaskID(info catalog.TaskInfo, credential string) string {
	var ids *taskIDs
	if s.fleet != nil {
		ids = s.fleet.tasks
	}
	if ids == nil {
		return info.ID
	}
	st, ok := ids.holders.Stamp()
	if !ok || len(st) > maxStampBytes {
		return info.ID
	}
	payload := make([]byte, 8+len(st))
	binary.BigEndian.PutUint64(payload, uint64(info.Created.UnixMilli()))
	copy(payload[8:], st)
	enc := base64.RawURLEncoding.EncodeToString(payload)
	return info.ID + "." + enc + "." + base64.RawURLEncoding.EncodeToString(taskIDMAC(ids.sign, info.ID, enc, credential))
}

// fleetTask is a task ID that names its holder, once checked.
type fleetTask struct {
	local   string    // the holder's catalog ID
	created time.Time // when it started
	stamp   string    // its holder
}

// openTaskID checks a task ID that names its holder against credential;
// ok is false for one that no replica of this fleet minted for it.
func (s *Server) openTaskID(id, credential string) (fleetTask, bool) {
	if s.fleet == nil || s.fleet.tasks == nil || len(id) > 2*maxStampBytes {
		return fleetTask{}, false
	}
	local, rest, _ := strings.Cut(id, ".")
	enc, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return fleetTask{}, false
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return fleetTask{}, false
	}
	for _, key := range s.fleet.tasks.accept {
		if !hmac.Equal(mac, taskIDMAC(key, local, enc, credential)) {
			continue
		}
		payload, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || len(payload) < 8 {
			return fleetTask{}, false
		}
		return fleetTask{local: local, created: time.UnixMilli(int64(binary.BigEndian.Uint64(payload))), stamp: string(payload[8:])}, true
	}
	return fleetTask{}, false
}

// tasksElsewhere answers a tasks request for ft when its holder is not
// this replica, and reports whether it did; false means the holder is
// here, and the request is this replica's to serve.
func (s *Server) tasksElsewhere(w http.ResponseWriter, r *http.Request, data []byte, method string, rpcID json.RawMessage, wireID, cred string, ft fleetTask, forwarded bool) bool {
	ep, where := s.fleet.tasks.holders.Locate(ft.stamp)
	unavailable := func(retryable bool) {
		writeRPC(w, rpcID, nil, &jsonrpc.Error{Code: CodePeerUnavailable,
			Message: fmt.Sprintf("%s: the replica that holds task %s cannot be reached", method, quote.Name(wireID)),
			Data:    marshalData(map[string]any{"reason": "peer_unavailable", "retryable": retryable})})
	}
	switch {
	case where == catalog.HolderHere:
		return false
	case where == catalog.HolderLive && !forwarded:
		if err := s.relayTasks(w, r, data, cred, ep); err != nil {
			s.log.Warn("mcpserve: forwarding a tasks request to the task's holder failed", "method", method, "err", err)
			unavailable(refused(err))
		}
	case where == catalog.HolderLost && ep != "" && !forwarded:
		var hs *hopStatus
		switch err := s.relayTasks(w, r, data, cred, ep); {
		case err == nil:
		case errors.As(err, &hs) && hs.hopRefused():
			// The process answered: it lives, and refused only the hop
			// (between sessions, say, its view hides the fleet's
			// enrollments); it may still hold the task.
			unavailable(true)
		default:
			s.lostTask(w, method, rpcID, wireID, ft)
		}
	case where == catalog.HolderLost:
		s.lostTask(w, method, rpcID, wireID, ft)
	default:
		// Unknown; or live elsewhere for a request forwarded here,
		// which never crosses a second hop.
		unavailable(true)
	}
	return true
}

// relayTasks forwards a tasks request, whose body is data, to the holder
// at endpoint for the caller whose credential (a mark) is cred, asserting
// its principal as r's context resolves it, and writes the holder's
// JSON-RPC answer. An error means nothing was written: the holder could
// not be reached, or answered something else than JSON-RPC (a replica of
// another fleet, say).
func (s *Server) relayTasks(w http.ResponseWriter, r *http.Request, data []byte, cred, endpoint string) error {
	f := s.fleet.fwd
	pc, err := f.peer(endpoint)
	if err != nil {
		return err
	}
	assertion, err := s.fleet.sign.assert(r.Context(), cred, time.Now())
	if err != nil {
		return err
	}
	ctx := context.WithValue(r.Context(), hopKey{}, &hop{assert: assertion})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.endpoint, bytes.NewReader(data))
	if err != nil {
		return err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	for _, k := range []string{protocolHeader, methodHeader, nameHeader} {
		h[k] = []string{r.Header.Get(k)}
	}
	resp, err := pc.hc.Do(req)
	if err != nil {
		f.forget(endpoint, pc)
		return err
	}
	defer resp.Body.Close()
	body, err := readAll(resp.Body) // read whole by fleetTransport: JSON
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), hopRealm) {
		// The holder judged the asserted caller again and refused it
		// (taskfront.go): the caller gets what it would get here. A
		// refusal of the hop itself (hopRealm) is the fleet's failure,
		// not the caller's: peer_unavailable, below.
		refuseUnauthenticated(w)
		return nil
	}
	if _, ok := response(body); !ok && !rpcAnswer(body) {
		return &hopStatus{code: resp.StatusCode, body: string(body[:min(len(body), 128)])}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return nil
}

// rpcAnswer reports whether body is a JSON-RPC response, with a result or
// an error.
func rpcAnswer(body []byte) bool {
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.JSONRPC == "2.0" && (msg.Result != nil || msg.Error != nil)
}

// lostTask answers a tasks request for a task whose holder is lost: it
// ended with its holder, failed.
func (s *Server) lostTask(w http.ResponseWriter, method string, rpcID json.RawMessage, wireID string, ft fleetTask) {
	if method != "tasks/get" {
		writeRPC(w, rpcID, map[string]any{"resultType": "complete"}, nil)
		return
	}
	now := time.Now()
	out := taskWire(catalog.TaskInfo{ID: wireID, Status: catalog.TaskFailed, Created: ft.created, Updated: now}, s.cat.TaskTTL())
	out["resultType"] = "complete"
	out["error"] = map[string]any{"code": jsonrpc.CodeInvalidParams,
		"message": fmt.Sprintf("task %s: the replica that ran it was lost", quote.Name(wireID)),
		"data":    map[string]any{"reason": "replica_lost", "retryable": false}}
	writeRPC(w, rpcID, out, nil)
}

// stampsTasks reports whether a call forwarded here may start a task: the
// replica can name itself in the task's ID, so that the caller reaches it
// through the replica it called.
func (s *Server) stampsTasks() bool {
	if s.fleet == nil || s.fleet.tasks == nil {
		return false
	}
	_, ok := s.fleet.tasks.holders.Stamp()
	return ok
}

// relayedTask is the CreateTaskResult of a call forwarded to the task's
// holder, relayed as the holder wrote it but for its _meta: this server's
// own (the SDK's and annotate's), never the hop's.
type relayedTask struct {
	mcp.CallToolResult
	raw json.RawMessage
}

func (r *relayedTask) MarshalJSON() ([]byte, error) {
	var w map[string]json.RawMessage
	if err := json.Unmarshal(r.raw, &w); err != nil {
		return nil, err
	}
	delete(w, "_meta")
	if len(r.Meta) > 0 {
		meta, err := json.Marshal(r.Meta)
		if err != nil {
			return nil, err
		}
		w["_meta"] = meta
	}
	return json.Marshal(w)
}

// localTaskID returns the catalog ID of the task the client names id, for
// the caller that presented credential, when this replica holds it: a
// plain catalog ID, or one that names this replica as its holder. ok is
// false for a task another replica holds, or one no replica minted for
// this caller.
func (s *Server) localTaskID(id, credential string) (string, bool) {
	if !strings.Contains(id, ".") {
		return id, true
	}
	ft, ok := s.openTaskID(id, credential)
	if !ok {
		return "", false
	}
	if _, where := s.fleet.tasks.holders.Locate(ft.stamp); where != catalog.HolderHere {
		return "", false
	}
	return ft.local, true
}
