//lint:file-ignore SA1019 Sampling and roots are deprecated as of protocol 2026-07-28 (SEP-2577) but still served during their deprecation window; a holder's questions arrive as these types.

package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// The hop speaks 2026-07-28, so a body on the holder asks a forwarded
// call's caller in rounds: its input_required result comes back to the
// forwarding replica. A caller of 2026-07-28 gets it as it is (and its
// retry, with the state, is forwarded again). A session of 2025-11-25
// cannot answer in rounds, and is asked mid-call instead: the forwarding
// replica declares on the hop what the session offers, asks the session
// each question of the holder's result, and forwards the call again with
// the answers and the state, until the holder completes it. The body on
// the holder is the same either way, and the state binds every retry to
// the consumer that asked, as for a local one.

// maxForwardRounds bounds the rounds a forwarding replica asks a session
// on behalf of one call: a body that keeps asking new questions is
// refused after that many.
const maxForwardRounds = 16

// sessionCaps is the client capabilities a 2025-11-25 session's client
// offers, as a hop request declares them; nil for none.
func sessionCaps(cl *catalog.Client) json.RawMessage {
	if cl == nil {
		return nil
	}
	caps := map[string]any{}
	if cl.Sample != nil {
		caps["sampling"] = map[string]any{}
	}
	if cl.Elicit != nil {
		caps["elicitation"] = map[string]any{}
	}
	if cl.ListRoots != nil {
		caps["roots"] = map[string]any{}
	}
	if len(caps) == 0 {
		return nil
	}
	b, _ := json.Marshal(caps) // maps of empty maps encode
	return b
}

// askOnBehalf asks cl, a session's client, the questions of a holder's
// input_required result, one after another in the order of their keys,
// and returns the answers as the holder reads them.
func askOnBehalf(ctx context.Context, cl *catalog.Client, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(mcp.InputResponseMap, len(reqs))
	for _, k := range keys {
		var err error
		if out[k], err = askOne(ctx, cl, k, reqs[k]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func askOne(ctx context.Context, cl *catalog.Client, key string, r mcp.InputRequest) (mcp.InputResponse, error) {
	if cl == nil {
		cl = &catalog.Client{}
	}
	switch p := r.(type) {
	case *mcp.ElicitParams:
		if cl.Elicit == nil {
			return nil, &catalog.CapabilityError{Capability: "elicitation"}
		}
		schema, err := json.Marshal(p.RequestedSchema)
		if err != nil || p.RequestedSchema == nil {
			schema = nil
		}
		res, err := cl.Elicit(ctx, catalog.ElicitRequest{Key: key, Message: p.Message, Schema: schema})
		if err != nil {
			return nil, err
		}
		return &mcp.ElicitResult{Action: string(res.Action), Content: res.Content}, nil
	case *mcp.CreateMessageWithToolsParams:
		if cl.Sample == nil {
			return nil, &catalog.CapabilityError{Capability: "sampling"}
		}
		req := catalog.SampleRequest{Key: key, MaxTokens: p.MaxTokens, SystemPrompt: p.SystemPrompt,
			Temperature: p.Temperature, StopSequences: p.StopSequences}
		for i, m := range p.Messages {
			if m == nil || len(m.Content) != 1 {
				return nil, fmt.Errorf("mcpserve: %s: message %d is not one content item", methodCreateMessage, i)
			}
			c, err := contentFromSDK(m.Content[0])
			if err != nil {
				return nil, fmt.Errorf("mcpserve: %s: message %d: %w", methodCreateMessage, i, err)
			}
			req.Messages = append(req.Messages, catalog.SampleMessage{Role: catalog.Role(m.Role), Content: c})
		}
		if mp := p.ModelPreferences; mp != nil {
			req.Model = catalog.ModelPreferences{CostPriority: mp.CostPriority, SpeedPriority: mp.SpeedPriority, IntelligencePriority: mp.IntelligencePriority}
			for _, h := range mp.Hints {
				if h != nil {
					req.Model.Hints = append(req.Model.Hints, h.Name)
				}
			}
		}
		res, err := cl.Sample(ctx, req)
		if err != nil {
			return nil, err
		}
		c, err := contentToSDK(res.Content)
		if err != nil {
			return nil, err
		}
		return &mcp.CreateMessageWithToolsResult{Role: mcp.Role(res.Role), Content: []mcp.Content{c}, Model: res.Model, StopReason: res.StopReason}, nil
	case *mcp.ListRootsParams:
		if cl.ListRoots == nil {
			return nil, &catalog.CapabilityError{Capability: "roots"}
		}
		roots, err := cl.ListRoots(ctx)
		if err != nil {
			return nil, err
		}
		out := &mcp.ListRootsResult{Roots: make([]*mcp.Root, len(roots))}
		for i, r := range roots {
			out.Roots[i] = &mcp.Root{URI: r.URI, Name: r.Name}
		}
		return out, nil
	}
	return nil, fmt.Errorf("mcpserve: a question of unknown kind %T", r)
}

// tooManyRounds is the tool error of a forwarded call whose body asked a
// session more than maxForwardRounds times.
func tooManyRounds(name string) *mcp.CallToolResult {
	return errorResult(fmt.Sprintf("tool %s asked for input more than %d times; given up", quote.Name(name), maxForwardRounds))
}
