//lint:file-ignore SA1019 Sampling and roots are deprecated as of protocol 2026-07-28 (SEP-2577) but still served during their deprecation window; their answers arrive as these types.

package mcpserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// A client of MCP 2026-07-28 cannot be asked mid-call: a body's question
// (catalog.Ask) ends the call with an input_required result that carries
// the questions and a requestState (roundstate.go), and the client makes
// the call again with inputResponses and the state. Each retry is judged
// here before the catalog sees it:
//
//   - a state that fails its integrity check, that was issued for another
//     method or route, for other arguments or to another caller, or that
//     expired (Options.RequestStateTTL), is -32602 with data reason
//     invalid_request_state, one answer for all, and nothing runs;
//   - an answer to a question the last round asked must be of its kind,
//     and an accepted form must match the form's schema, or the retry is
//     -32602; answers to questions not asked, and inputResponses without
//     a state, are ignored (the body asks again for what it lacks);
//   - the state names the consumer instance that asked, and the catalog
//     runs the retry only there (catalog.Round.Instance): a consumer that
//     died or was replaced since gives route_gone, retryable, and its
//     successor never sees the answers.

// round is one 2026-07-28 request's part in its call's rounds.
type round struct {
	method, name string
	args         callArgs // the call's arguments, for argsDigest
	credential   string
	n            int                     // the round of the state presented; 0 for none
	answers      map[string]storedAnswer // every answer so far
	r            *catalog.Round
}

// beginRound judges the round of a tools/call, prompts/get or
// resources/read: nil for a request of an earlier protocol, which is asked
// mid-call if at all.
//
// args are the call's arguments (none for a read), hashed only when a
// round asks or a state is presented.
func (s *Server) beginRound(method, name string, args callArgs, credential string, meta mcp.Meta, responses mcp.InputResponseMap, state string) (*round, error) {
	if !namesCurrent(meta) {
		return nil, nil
	}
	rd := &round{method: method, name: name, args: args, credential: credential, r: &catalog.Round{
		Elicitation: declares(meta, "elicitation"), Sampling: declares(meta, "sampling"), Roots: declares(meta, "roots"),
	}}
	if state == "" {
		return rd, nil
	}
	st, key, err := s.roundKeys.open(state)
	if err != nil {
		return nil, invalidParams(method+": "+err.Error(), map[string]any{"reason": "invalid_request_state"})
	}
	if st.Method != method || st.Name != name {
		return nil, invalidParams(method+": requestState was issued for another request", map[string]any{"reason": "invalid_request_state"})
	}
	if st.Caller != callerMark(key, credential) {
		return nil, invalidParams(method+": requestState was issued to another caller", map[string]any{"reason": "invalid_request_state"})
	}
	if st.Args != argsDigest(args) {
		return nil, invalidParams(method+": requestState was issued for other arguments", map[string]any{"reason": "invalid_request_state"})
	}
	if !s.roundKeys.now().Before(time.UnixMilli(st.Expires)) {
		return nil, invalidParams(method+": requestState expired; make the call afresh", map[string]any{"reason": "invalid_request_state"})
	}
	rd.n = st.Round
	rd.r.Instance = st.Instance
	rd.answers = make(map[string]storedAnswer, len(st.Answers)+len(st.Asked))
	for k, a := range st.Answers {
		rd.answers[k] = a
	}
	for k, q := range st.Asked {
		v, ok := responses[k]
		if !ok {
			continue
		}
		raw, err := checkAnswer(q, v)
		if err != nil {
			return nil, invalidParams(fmt.Sprintf("%s: inputResponses[%s]: %v", method, quote.Name(k), err), nil)
		}
		rd.answers[k] = storedAnswer{Method: q.Method, Value: raw}
	}
	rd.r.Answers = make(map[string]catalog.InputResponse, len(rd.answers))
	for k, a := range rd.answers {
		if ans, err := answerOf(a); err == nil {
			rd.r.Answers[k] = ans
		}
	}
	return rd, nil
}

// client returns cl answering in rd's round; cl itself when rd is nil.
func (rd *round) client(cl *catalog.Client) *catalog.Client {
	if rd == nil {
		return cl
	}
	var c catalog.Client
	if cl != nil {
		c = *cl
	}
	c.Round = rd.r
	return &c
}

// retry reports whether the request is a round after the first.
func (rd *round) retry() bool { return rd != nil && rd.r.Instance != "" }

// checkAnswer checks an answer to q as the client sent it, and returns it
// encoded.
func checkAnswer(q askedInput, v mcp.InputResponse) (json.RawMessage, error) {
	switch q.Method {
	case methodElicit:
		e, ok := v.(*mcp.ElicitResult)
		if !ok {
			return nil, errors.New("not an elicitation result")
		}
		switch catalog.ElicitAction(e.Action) {
		case catalog.ElicitAccept:
			if err := checkForm(q.Schema, e.Content); err != nil {
				return nil, err
			}
		case catalog.ElicitDecline, catalog.ElicitCancel:
		default:
			return nil, fmt.Errorf("unknown action %s", quote.Name(e.Action))
		}
	case methodCreateMessage:
		m, ok := v.(*mcp.CreateMessageWithToolsResult)
		if !ok || len(m.Content) != 1 {
			return nil, errors.New("not a sampling result of one content item")
		}
		if _, err := contentFromSDK(m.Content[0]); err != nil {
			return nil, err
		}
	case methodListRoots:
		if _, ok := v.(*mcp.ListRootsResult); !ok {
			return nil, errors.New("not a roots list")
		}
	default:
		return nil, fmt.Errorf("unknown method %s", quote.Name(q.Method))
	}
	return json.Marshal(v)
}

// checkForm checks a form's accepted content against its schema.
func checkForm(schema json.RawMessage, content map[string]any) error {
	var sch jsonschema.Schema
	if err := json.Unmarshal(schema, &sch); err != nil {
		return fmt.Errorf("the form's schema: %w", err)
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		return fmt.Errorf("the form's schema: %w", err)
	}
	if content == nil {
		content = map[string]any{}
	}
	if err := rs.Validate(content); err != nil {
		return fmt.Errorf("the content does not match the form: %s", quote.Cut(err.Error(), maxErrorText))
	}
	return nil
}

// answerOf decodes a stored answer for the catalog.
func answerOf(a storedAnswer) (catalog.InputResponse, error) {
	var out catalog.InputResponse
	switch a.Method {
	case methodElicit:
		var e mcp.ElicitResult
		if err := json.Unmarshal(a.Value, &e); err != nil {
			return out, err
		}
		out.Elicit = catalog.ElicitResult{Action: catalog.ElicitAction(e.Action)}
		if out.Elicit.Action == catalog.ElicitAccept {
			out.Elicit.Content = e.Content
			if out.Elicit.Content == nil {
				out.Elicit.Content = map[string]any{}
			}
		}
	case methodCreateMessage:
		var m mcp.CreateMessageWithToolsResult
		if err := json.Unmarshal(a.Value, &m); err != nil {
			return out, err
		}
		if len(m.Content) != 1 {
			return out, errors.New("not one content item")
		}
		c, err := contentFromSDK(m.Content[0])
		if err != nil {
			return out, err
		}
		out.Sample = catalog.SampleResult{Role: catalog.Role(m.Role), Content: c, Model: m.Model, StopReason: m.StopReason}
	case methodListRoots:
		var l mcp.ListRootsResult
		if err := json.Unmarshal(a.Value, &l); err != nil {
			return out, err
		}
		out.Roots = make([]catalog.Root, 0, len(l.Roots))
		for _, r := range l.Roots {
			if r != nil {
				out.Roots = append(out.Roots, catalog.Root{URI: r.URI, Name: r.Name})
			}
		}
	default:
		return out, fmt.Errorf("unknown method %s", quote.Name(a.Method))
	}
	return out, nil
}

// inputRequired turns a body's questions into the input requests of an
// input_required result and the state of the next round.
func (s *Server) inputRequired(rd *round, ir *catalog.InputRequiredError) (mcp.InputRequestMap, string, error) {
	reqs := make(mcp.InputRequestMap, len(ir.Requests))
	st := &roundState{
		Method: rd.method, Name: rd.name, Args: argsDigest(rd.args), Instance: ir.Instance,
		Caller: callerMark(s.roundKeys.sign, rd.credential), Round: rd.n + 1,
		Expires: s.roundKeys.now().Add(s.roundKeys.ttl).UnixMilli(),
		Asked:   make(map[string]askedInput, len(ir.Requests)), Answers: rd.answers,
	}
	for _, q := range ir.Requests {
		switch {
		case q.Elicit != nil:
			reqs[q.Key] = &mcp.ElicitParams{Mode: "form", Message: q.Elicit.Message, RequestedSchema: q.Elicit.Schema}
			st.Asked[q.Key] = askedInput{Method: methodElicit, Schema: q.Elicit.Schema}
		case q.Sample != nil:
			p, err := sampleParams(*q.Sample)
			if err != nil {
				return nil, "", err
			}
			reqs[q.Key] = p
			st.Asked[q.Key] = askedInput{Method: methodCreateMessage}
		default:
			reqs[q.Key] = &mcp.ListRootsParams{}
			st.Asked[q.Key] = askedInput{Method: methodListRoots}
		}
	}
	state, err := s.roundKeys.seal(st)
	if err != nil {
		return nil, "", err
	}
	return reqs, state, nil
}

// roundError is the error of a round's retry that the catalog refused:
// a retry whose route is unknown here and in the fleet is, like one the
// catalog found replaced, a route gone, since the state names the
// consumer that asked. Other errors are the method's own.
func (rd *round) goneError(kind string, err error) error {
	if !rd.retry() || !errors.Is(err, catalog.ErrNotFound) {
		return nil
	}
	return invalidParams(fmt.Sprintf("%s %s is gone: the consumer that asked for input stopped", kind, quote.Name(rd.name)),
		map[string]any{"reason": "route_gone", "retryable": true})
}
