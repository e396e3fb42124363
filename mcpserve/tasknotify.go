package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// Task status notifications (SEP-2663): a client of 2026-07-28 that
// negotiates the tasks extension names task IDs in the filter of its
// subscriptions/listen (params.notifications.taskIds); the server
// acknowledges the ones it agrees to (the acknowledgement's
// notifications.taskIds) and, while the stream is open, sends each a
// notifications/tasks whose params are its DetailedTask, what tasks/get
// would read then: its state as the acknowledgement found it, then each
// change, until it ends. It agrees to the tasks this server's catalog
// holds that the listen's credential can read, as tasks/get finds them:
// another credential's task and an unknown ID are left out alike. Only the
// first maxListenTaskIDs IDs of a filter are looked at.
//
// The SDK knows neither the field nor the notification: it decodes the
// filter into its own struct, which drops taskIds, and a server session
// sends no method it does not know (its sending handler refuses methods
// outside the spec's table, and its connection is unexported). The front
// could serve such a listen alone, as it answers tasks/*, but a filter may
// ask for list_changed too, and the SDK's admission, list_changed and
// ending at shutdown would have to be done again beside the SDK's. So
// the work is shared out where each part can be done without a fork of
// the SDK:
//
//   - the HTTP front reads taskIds from the listen's body, refuses them
//     without the extension (-32021, as the spec requires), picks the
//     agreed ones, and hands them to the middleware on the request's
//     record (httpRequest.tasks);
//   - the SDK serves the listen as ever: its admission (receiveListen:
//     Options.MaxListenStreams and the clients' shares), its
//     list_changed, its acknowledgement, to which a sending middleware
//     adds the agreed taskIds (sendListenAck);
//   - once the acknowledgement is out, one goroutine per such stream
//     watches the tasks (catalog.WatchTask) and writes each
//     notifications/tasks as a server-sent event on the same HTTP
//     response, through a writer the front puts under the SDK's
//     (eventWriter), which keeps both writers' events whole.
//
// The stream lasts as long as the SDK keeps it (a list_changed filter)
// or a task it watches has not ended, whichever is longer, and ends at
// once when the client cancels it or the server ends its streams. Over
// transports other than the HTTP front (stdio) no task is agreed to.

// maxListenTaskIDs bounds the task IDs one listen stream watches: only
// the first ones of a filter are looked at, and the rest are left out of
// the acknowledgement. It bounds what a stream costs: a look at the store
// per ID when it opens, and per change a select over its tasks.
const maxListenTaskIDs = 64

// methodTasksNotification is SEP-2663's task status notification.
const methodTasksNotification = "notifications/tasks"

// taskListen is the task part of one listen stream.
type taskListen struct {
	ids   []string          // the agreed task IDs, as the client names them; not nil
	local map[string]string // each agreed ID's catalog ID (fleettasks.go)
	cred  string            // the listen's credential
	// expires is when the principal cred authenticated as expires, when
	// the listen opened (zero: never); the watcher stops then.
	expires time.Time
	subID   json.RawMessage // the listen's JSON-RPC id, for each notification's _meta
	out     *eventWriter    // the stream's HTTP response

	once    sync.Once
	watcher sync.WaitGroup
}

type taskListenKey struct{}

// listenTasks reads the task IDs a 2026-07-28 subscriptions/listen whose
// body is data asks for, and returns the listen's task part: nil when it
// asks for none, or when the body is not one the SDK would serve (the SDK
// answers it). On false it has answered: -32021 for a listen that asks
// for tasks without the extension. It costs a parse of the body and a
// look at the task store per ID, at most maxListenTaskIDs.
func (s *Server) listenTasks(w http.ResponseWriter, r *http.Request, data []byte) (*taskListen, bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
			Meta mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if _, err := segjson.Parse(data, &msg, segjson.DontMatchCaseInsensitiveStructFields); err != nil ||
		msg.Method != methodSubscriptionsListen || len(msg.ID) == 0 || len(msg.Params.Notifications.TaskIDs) == 0 {
		return nil, true
	}
	if !declaresTasks(msg.Params.Meta) {
		writeRPC(w, msg.ID, nil, missingTasks(methodSubscriptionsListen+" with taskIds"))
		return nil, false
	}
	ids := msg.Params.Notifications.TaskIDs
	ids = ids[:min(len(ids), maxListenTaskIDs)]
	ctx, cred := s.fleetCredential(r.Context(), bearer(r.Header))
	lt := &taskListen{ids: make([]string, 0, len(ids)), local: map[string]string{}, cred: cred, subID: msg.ID}
	var err error
	if lt.expires, err = s.stillValid(ctx, lt.cred); err != nil {
		// A credential that no longer authenticates reads none of its
		// tasks here, as on tasks/get (taskfront.go).
		if errors.Is(err, bindsec.ErrAuthenticatorPanicked) {
			s.logAuthPanic(err, "subscriptions/listen taskIds")
		}
		return lt, true
	}
	for _, id := range ids {
		if slices.Contains(lt.ids, id) {
			continue
		}
		// Only a task this replica holds: another replica's, in a
		// fleet, is left out of the acknowledgement, and polled.
		local, ok := s.localTaskID(id, lt.cred)
		if !ok {
			continue
		}
		if _, err := s.cat.GetTask(local, lt.cred); err == nil {
			lt.ids = append(lt.ids, id)
			lt.local[id] = local
		}
	}
	return lt, true
}

// listenRequestHTTP reports whether r is a 2026-07-28 subscriptions/listen.
func listenRequestHTTP(r *http.Request) bool {
	return r.Header.Get(protocolHeader) == ProtocolStateless && r.Header.Get(methodHeader) == methodSubscriptionsListen
}

// requestTasks returns the task part of the listen req, if it has one.
func (s *Server) requestTasks(req mcp.Request) *taskListen {
	if ex := req.GetExtra(); ex != nil {
		if hr, _ := s.calls.request(ex.Header); hr != nil {
			return hr.tasks
		}
	}
	return nil
}

// serveTaskListen serves an admitted listen that has a task part: the
// SDK's handler, next, sends the acknowledgement (which starts the
// watcher, sendListenAck) and parks while the SDK has something to send;
// then the stream waits for the watcher, which ends with ctx or once its
// tasks have all ended.
func (s *Server) serveTaskListen(ctx context.Context, lt *taskListen, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	res, err := next(context.WithValue(ctx, taskListenKey{}, lt), method, req)
	if err != nil {
		stop() // no stream to keep: the SDK refused it
	}
	lt.watcher.Wait()
	return res, err
}

// taskAckParams is the acknowledgement of a listen with a task part: the
// SDK's, and the agreed taskIds beside its own fields.
type taskAckParams struct {
	mcp.ParamsBase
	Notifications struct {
		mcp.NotificationSubscriptions
		TaskIDs []string `json:"taskIds"`
	} `json:"notifications"`
}

// notificationSubscriptionsAck is the first message of a listen stream.
const notificationSubscriptionsAck = "notifications/subscriptions/acknowledged"

// sendListenAck is the sending middleware that adds the agreed task IDs
// to the acknowledgement of a listen with a task part, and once it is out
// starts the watcher. Every other message passes untouched, for a string
// comparison.
func (s *Server) sendListenAck(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != notificationSubscriptionsAck {
			return next(ctx, method, req)
		}
		lt, _ := ctx.Value(taskListenKey{}).(*taskListen)
		ack, _ := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if lt == nil || ack == nil || ss == nil {
			return next(ctx, method, req)
		}
		p := &taskAckParams{ParamsBase: mcp.ParamsBase{Meta: ack.Meta}}
		p.Notifications.NotificationSubscriptions = ack.Notifications
		p.Notifications.TaskIDs = lt.ids
		res, err := next(ctx, method, &mcp.ServerRequest[*taskAckParams]{Session: ss, Params: p, Extra: req.GetExtra()})
		if err == nil && len(lt.ids) > 0 {
			lt.once.Do(func() {
				lt.watcher.Add(1)
				go func() {
					defer lt.watcher.Done()
					s.watchTasks(ctx, lt)
				}()
			})
		}
		return res, err
	}
}

// watchTasks sends notifications/tasks for lt's tasks until each has
// ended or ctx ends: first each one's state now, then each change.
// Changes that come faster than the stream takes them are sent as one,
// the latest: a notification is the task as it reads when it is sent. A
// task that expired unseen is dropped, and so are all of them once the
// stream cannot be written. It stops too when the listen's credential
// expires (taskListen.expires): the credential is judged when the listen
// opens and at its expiry, not at each change (a revocation without an
// expiry is seen by the next listen or tasks/get).
//
// It waits on ctx and the tasks' change channels in one select
// (reflect.Select: a stream watches up to maxListenTaskIDs tasks, and a
// goroutine per task would cost more than a select per change).
func (s *Server) watchTasks(ctx context.Context, lt *taskListen) {
	cases := make([]reflect.SelectCase, 1, len(lt.ids)+2)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	if !lt.expires.IsZero() {
		expired, stop := listenExpiry(time.Until(lt.expires))
		defer stop()
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(expired)})
	}
	fixed := len(cases)                             // ctx, and the expiry if any
	ids := make([]string, fixed, len(lt.ids)+fixed) // ids[i] is cases[i]'s task
	for _, id := range lt.ids {
		ch, ok := s.sendTask(lt, id)
		if !ok {
			return
		}
		if ch != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			ids = append(ids, id)
		}
	}
	for len(cases) > fixed {
		i, _, _ := reflect.Select(cases)
		if i < fixed {
			return
		}
		ch, ok := s.sendTask(lt, ids[i])
		switch {
		case !ok:
			return
		case ch == nil:
			cases, ids = slices.Delete(cases, i, i+1), slices.Delete(ids, i, i+1)
		default:
			cases[i].Chan = reflect.ValueOf(ch)
		}
	}
}

// sendTask sends the task id as it reads now and returns the channel of
// its next change: nil once it has ended, or expired. ok is false when
// the stream can no longer be written.
func (s *Server) sendTask(lt *taskListen, id string) (next <-chan struct{}, ok bool) {
	info, ch, err := s.cat.WatchTask(lt.local[id], lt.cred)
	if err != nil {
		return nil, true // expired before it was seen to end
	}
	data, err := s.taskNotification(info, id, lt.subID)
	if err != nil {
		s.log.Warn(fmt.Sprintf("mcpserve: %s for a task: %v", methodTasksNotification, err))
		return ch, true
	}
	return ch, lt.out.event(data)
}

// taskNotification is the notifications/tasks of info, whose ID on the
// wire is wireID, on the listen stream whose request id is subID.
func (s *Server) taskNotification(info catalog.TaskInfo, wireID string, subID json.RawMessage) ([]byte, error) {
	params := s.detailedTask(info, wireID)
	params["_meta"] = map[string]any{mcp.MetaKeySubscriptionID: subID}
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "method": methodTasksNotification, "params": params})
}

// eventWriter is the response writer of a listen stream with a task
// part: the SDK writes through it, and so does the stream's task watcher.
// Each writes whole server-sent events in one Write (the SDK's
// writeEvent does), which the mutex keeps whole; once the response is
// over (end), the watcher's writes are dropped.
type eventWriter struct {
	http.ResponseWriter
	mu   sync.Mutex
	over bool
}

func (e *eventWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ResponseWriter.Write(p)
}

// Flush flushes under the mutex: a flush never splits an event.
func (e *eventWriter) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = http.NewResponseController(e.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (e *eventWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// event writes one JSON-RPC message as a server-sent event and flushes
// it; false when it could not.
func (e *eventWriter) event(data []byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.over {
		return false
	}
	buf := make([]byte, 0, len(data)+len("event: message\ndata: \n\n"))
	buf = append(append(append(buf, "event: message\ndata: "...), data...), "\n\n"...)
	if _, err := e.ResponseWriter.Write(buf); err != nil {
		return false
	}
	return http.NewResponseController(e.ResponseWriter).Flush() == nil
}

// end marks the response over: the handler that owns it returned.
func (e *eventWriter) end() {
	e.mu.Lock()
	e.over = true
	e.mu.Unlock()
}
