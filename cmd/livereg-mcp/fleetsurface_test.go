package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/mcpserve"
)

// Three processes: replica 1 runs the etcd, replica 2 holds every
// conformance fixture, replica 3 holds none. A client of replica 3 gets a
// prompt, reads a templated URI, completes a prompt argument, subscribes
// to a resource and calls a tool that reports progress: all served by
// replica 2 across the hop, the progress in order. When replica
// 2 crashes, replica 3 answers retryably while its lease stands, never
// "unknown", and the fixtures leave the listings once it expired.
func TestFleetSurfaceOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three processes")
	}
	dir := t.TempDir()
	r1 := startReplica(t, dir, "r1", "-etcd-embedded", dir+"/etcd", "-etcd-listen", "http://127.0.0.1:0")
	r2 := startReplica(t, dir, "r2", "-etcd", r1.etcd, "-conformance")
	r3 := startReplica(t, dir, "r3", "-etcd", r1.etcd)
	ctx := ctxGuard(t)
	var (
		mu       sync.Mutex
		progress []float64
	)
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Logger: quiet(),
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Progress)
			mu.Unlock()
		}})
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r3.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	eventually(t, 5*time.Second, "replica 3 lists replica 2's prompts", func() bool {
		res, err := cs.ListPrompts(ctx, nil)
		return err == nil && slices.ContainsFunc(res.Prompts, func(p *mcp.Prompt) bool { return p.Name == "test_simple_prompt" })
	})
	if res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}}); err != nil || len(res.Messages) == 0 {
		t.Fatalf("prompts/get through replica 3 = %+v, %v", res, err)
	}
	if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"}); err != nil || len(res.Contents) == 0 || !strings.Contains(res.Contents[0].Text, "Data for ID: 42") {
		t.Fatalf("templated read through replica 3 = %+v, %v", res, err)
	}
	if res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: ""}}); err != nil || res == nil {
		t.Fatalf("completion through replica 3 = %+v, %v", res, err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatalf("subscribe through replica 3: %v", err)
	}
	call := &mcp.CallToolParams{Name: "test_tool_with_progress", Arguments: map[string]any{}}
	call.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, call)
	if err != nil || res.IsError {
		t.Fatalf("a progress-reporting tool through replica 3 = %+v, %v", res, err)
	}
	// The server sends the progress before the result (the hop's own
	// tests read the wire); the SDK's client may hand the last of it to
	// its handler after the result.
	var got []float64
	eventually(t, 5*time.Second, "the tool's progress heard", func() bool {
		mu.Lock()
		defer mu.Unlock()
		got = slices.Clone(progress)
		return len(got) >= 3
	})
	if !slices.Equal(got, []float64{0, 50, 100}) {
		t.Errorf("progress heard: %v, want [0 50 100] in order", got)
	}

	// Replica 2 crashes.
	r2.kill(t)
	crashed := time.Now()
	retryable := 0
	for {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_simple_prompt"})
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			t.Fatalf("prompts/get after replica 2 crashed = %v, want a JSON-RPC error", err)
		}
		var data struct {
			Reason    string
			Retryable bool
		}
		_ = json.Unmarshal(we.Data, &data)
		if we.Code == mcpserve.CodePeerUnavailable && data.Retryable {
			retryable++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		listed, lerr := cs.ListPrompts(ctx, nil)
		if lerr != nil || slices.ContainsFunc(listed.Prompts, func(p *mcp.Prompt) bool { return p.Name == "test_simple_prompt" }) {
			t.Fatalf("prompts/get after replica 2 crashed = code %d %q %s while it is still listed (%v)", we.Code, we.Message, we.Data, lerr)
		}
		break // its lease expired, and replica 3's view has heard
	}
	if retryable == 0 {
		t.Error("no retryable answer while the crashed holder's lease stood")
	}
	t.Logf("replica 2's prompt left replica 3's listing %v after its crash (TTL 1s), after %d retryable answers", time.Since(crashed).Round(time.Millisecond), retryable)
	eventually(t, 5*time.Second, "replica 3's templates without replica 2's", func() bool {
		res, err := cs.ListResourceTemplates(ctx, nil)
		return err == nil && len(res.ResourceTemplates) == 0
	})
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"}); err == nil {
		t.Error("a templated read after its holder's lease expired succeeded")
	}
}
