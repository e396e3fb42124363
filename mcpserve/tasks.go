package mcpserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// The tasks extension (SEP-2663, io.modelcontextprotocol/tasks) on the
// wire, for clients of 2026-07-28 that negotiate it per request (their
// _meta's clientCapabilities.extensions): such a client's tools/call
// takes tasks (catalog.WithTasks), and a body that detaches
// (catalog.Call.Detach) ends it with a CreateTaskResult; the rest runs
// as a catalog task, which tasks/get reads, tasks/update answers and
// tasks/cancel ends. A body may ask in rounds before it detaches: input
// is gathered synchronously, then the work goes on as a task. The task belongs to its consumer and is seen with
// the caller's credential alone, as the catalog rules (catalog/task.go);
// an unknown task and another credential's get the same -32602. The SDK
// does not know the tasks/* methods, so the front answers them before
// the SDK sees them (serveTasks), once they passed the checks the SDK
// makes of every other method and their credential authenticated again
// (taskfront.go); a task counts against its caller's share of the task
// caps, the principal or else the address. A client that would rather not poll
// names its tasks in a subscriptions/listen's filter (taskIds) and hears
// each change as notifications/tasks, the same DetailedTask, its
// consumer's death included (tasknotify.go).

// extTasks is the extension's identifier.
const extTasks = "io.modelcontextprotocol/tasks"

// taskPollInterval is the pollIntervalMs a task suggests.
const taskPollInterval = 250 * time.Millisecond

// declaresTasks reports whether a 2026-07-28 request's _meta negotiates
// the tasks extension.
func declaresTasks(meta mcp.Meta) bool {
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[extTasks]
	return ok
}

// missingTasks is -32021 naming the tasks extension.
func missingTasks(what string) error {
	return &jsonrpc.Error{Code: codeMissingClientCapabilities, Message: what + " needs the client's " + extTasks + " extension, which the request did not declare",
		Data: marshalData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}})}
}

// createTaskResult is a tools/call's CreateTaskResult: flat, the task's
// fields beside resultType "task". It embeds the SDK's result for the
// _meta the SDK and annotate set, and writes itself.
type createTaskResult struct {
	mcp.CallToolResult
	info catalog.TaskInfo // its ID the wire's (wireTaskID)
	ttl  time.Duration
}

func (r *createTaskResult) MarshalJSON() ([]byte, error) {
	w := taskWire(r.info, r.ttl)
	w["resultType"] = "task"
	if len(r.Meta) > 0 {
		w["_meta"] = r.Meta
	}
	return json.Marshal(w)
}

// taskWire is a task's fields as SEP-2663 names them.
func taskWire(info catalog.TaskInfo, ttl time.Duration) map[string]any {
	return map[string]any{
		"taskId": info.ID, "status": string(info.Status),
		"createdAt": info.Created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": info.Updated.UTC().Format(time.RFC3339Nano),
		"ttlMs": ttl.Milliseconds(), "pollIntervalMs": taskPollInterval.Milliseconds(),
	}
}

// tasksMethod reports whether the front answers method itself.
func tasksMethod(method string) bool {
	return method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel"
}

// serveTasks answers a 2026-07-28 tasks/get, tasks/update or tasks/cancel
// whose body is data, for the caller that presented cred; forwarded says
// another replica sent it here (fleettasks.go).
func (s *Server) serveTasks(w http.ResponseWriter, r *http.Request, data []byte, cred string, forwarded bool) {
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			TaskID         *string                    `json:"taskId"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
			Meta           mcp.Meta                   `json:"_meta"`
		} `json:"params"`
	}
	if _, err := segjson.Parse(data, &msg, segjson.DontMatchCaseInsensitiveStructFields); err != nil || msg.JSONRPC != "2.0" || len(msg.ID) == 0 || badID(msg.ID, true) != "" {
		writeRPC(w, json.RawMessage("null"), nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"})
		return
	}
	fail := func(err error) { writeRPC(w, msg.ID, nil, err) }
	p := msg.Params
	switch {
	case r.Header.Get(methodHeader) != msg.Method:
		fail(&jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "header mismatch: Mcp-Method does not match the request's method"})
		return
	case !declaresTasks(p.Meta):
		fail(missingTasks(msg.Method))
		return
	case p.TaskID == nil || *p.TaskID == "":
		fail(invalidParams(msg.Method+": missing taskId", nil))
		return
	case r.Header.Get(nameHeader) != *p.TaskID:
		fail(&jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "header mismatch: Mcp-Name does not match the request's taskId"})
		return
	}
	id := *p.TaskID
	unknown := invalidParams(fmt.Sprintf("%s: unknown task %s", msg.Method, quote.Name(id)), nil)
	local := id
	if strings.Contains(id, ".") {
		// An ID that names its holder (fleettasks.go).
		ft, ok := s.openTaskID(id, cred)
		if !ok {
			fail(unknown)
			return
		}
		if s.tasksElsewhere(w, r, data, msg.Method, msg.ID, id, cred, ft, forwarded) {
			return
		}
		local = ft.local
	}
	ack := map[string]any{"resultType": "complete"}
	switch msg.Method {
	case "tasks/get":
		info, err := s.cat.GetTask(local, cred)
		if err != nil {
			fail(unknown)
			return
		}
		res := s.detailedTask(info, id)
		res["resultType"] = "complete"
		writeRPC(w, msg.ID, res, nil)
	case "tasks/cancel":
		if err := s.cat.CancelTask(local, cred); err != nil {
			fail(unknown)
			return
		}
		writeRPC(w, msg.ID, ack, nil)
	case "tasks/update":
		info, err := s.cat.GetTask(local, cred)
		if err != nil {
			fail(unknown)
			return
		}
		answers, err := taskAnswers(info, p.InputResponses)
		if err != nil {
			fail(invalidParams("tasks/update: "+err.Error(), nil))
			return
		}
		if err := s.cat.UpdateTask(local, cred, answers); err != nil {
			fail(unknown)
			return
		}
		writeRPC(w, msg.ID, ack, nil)
	}
}

// detailedTask is a task as tasks/get's result (less its resultType) and
// notifications/tasks carry it: the task, whose ID on the wire is wireID,
// and its result, its error or its open questions.
func (s *Server) detailedTask(info catalog.TaskInfo, wireID string) map[string]any {
	info.ID = wireID
	out := taskWire(info, s.cat.TaskTTL())
	switch info.Status {
	case catalog.TaskCompleted:
		if info.Err != nil {
			// The body's own error: a tool execution error, as a call
			// reports it.
			out["result"] = errorResult(info.Err.Error())
		} else if res, err := toolResult(info.Result); err == nil {
			out["result"] = res
		} else {
			out["result"] = errorResult(fmt.Sprintf("the result cannot be sent: %v", err))
		}
	case catalog.TaskFailed:
		code := int64(jsonrpc.CodeInternalError)
		if errors.Is(info.Err, catalog.ErrRouteGone) {
			code = jsonrpc.CodeInvalidParams
		}
		e := map[string]any{"code": code, "message": info.Err.Error()}
		if errors.Is(info.Err, catalog.ErrTaskLifetime) {
			// Its body ran for catalog.Config.MaxTaskLifetime: the same
			// call would be cut short again.
			e["data"] = map[string]any{"reason": "task_lifetime", "retryable": false}
		}
		out["error"] = e
	case catalog.TaskInputRequired:
		reqs := map[string]any{}
		for _, q := range info.Requests {
			switch {
			case q.Elicit != nil:
				reqs[q.Key] = map[string]any{"method": methodElicit, "params": &mcp.ElicitParams{Mode: "form", Message: q.Elicit.Message, RequestedSchema: q.Elicit.Schema}}
			case q.Sample != nil:
				if sp, err := sampleParams(*q.Sample); err == nil {
					reqs[q.Key] = map[string]any{"method": methodCreateMessage, "params": sp}
				}
			default:
				reqs[q.Key] = map[string]any{"method": methodListRoots, "params": map[string]any{}}
			}
		}
		out["inputRequests"] = reqs
	}
	return out
}

// taskAnswers reads a tasks/update's answers to the task's open
// questions; answers to other keys are ignored.
func taskAnswers(info catalog.TaskInfo, raw map[string]json.RawMessage) (map[string]catalog.InputResponse, error) {
	out := map[string]catalog.InputResponse{}
	for _, q := range info.Requests {
		v, ok := raw[q.Key]
		if !ok {
			continue
		}
		a := askedInput{Method: methodListRoots}
		switch {
		case q.Elicit != nil:
			a = askedInput{Method: methodElicit, Schema: q.Elicit.Schema}
		case q.Sample != nil:
			a.Method = methodCreateMessage
		}
		var m mcp.InputResponseMap
		if err := json.Unmarshal([]byte(`{"k":`+string(v)+`}`), &m); err != nil {
			return nil, fmt.Errorf("inputResponses[%s]: %v", quote.Name(q.Key), err)
		}
		enc, err := checkAnswer(a, m["k"])
		if err != nil {
			return nil, fmt.Errorf("inputResponses[%s]: %v", quote.Name(q.Key), err)
		}
		ans, err := answerOf(storedAnswer{Method: a.Method, Value: enc})
		if err != nil {
			return nil, err
		}
		out[q.Key] = ans
	}
	return out, nil
}

// writeRPC writes one JSON-RPC response: result, or err with the HTTP
// status a 2026-07-28 request's error gets.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, err error) {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	status := http.StatusOK
	if err != nil {
		we := wireError(err)
		msg["error"] = we
		switch we.Code {
		case jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest, mcp.CodeHeaderMismatch, codeMissingClientCapabilities:
			status = http.StatusBadRequest
		}
	} else {
		msg["result"] = result
	}
	body, merr := json.Marshal(msg)
	if merr != nil {
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// tasksRequest reports whether r is a 2026-07-28 request for a tasks
// method the front answers.
func tasksRequest(r *http.Request) bool {
	return r.Header.Get(protocolHeader) == ProtocolStateless && strings.HasPrefix(r.Header.Get(methodHeader), "tasks/") &&
		tasksMethod(r.Header.Get(methodHeader))
}
