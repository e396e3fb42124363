package conformance

import (
	"context"
	"errors"
	"log/slog"

	"github.com/livereg/livereg/catalog"
)

// The diagnostic tools of the server-stateless scenario (SEP-2575). Their
// names are the suite's.

// stateless adds them.
func (s *set) stateless() {
	// Needs sampling: asked without it declared, the client gets -32021
	// naming it, since the body returns Sample's CapabilityError.
	s.tool(catalog.Tool{Name: "test_missing_capability", Description: "Needs the client's sampling capability, and fails without it."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			res, err := c.Sample(ctx, catalog.SampleRequest{
				Messages:  []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "text", Text: "Say hello."}}},
				MaxTokens: 20,
			})
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("LLM response: " + res.Content.Text), nil
		})
	// Asks for elicitation where it can, and answers without it where the
	// request cannot carry one: no server-to-client request ever rides a
	// stateless response stream.
	s.tool(catalog.Tool{Name: "test_streaming_elicitation", Description: "Asks the user for confirmation where the request can carry it, and answers without it otherwise."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			res, err := c.Elicit(ctx, catalog.ElicitRequest{Message: "Go on?"})
			switch {
			case errors.Is(err, catalog.ErrNotSupported):
				return catalog.TextResult("answered without elicitation, which this request cannot carry"), nil
			case err != nil:
				return catalog.Result{}, err
			}
			return catalog.TextResult("elicitation: " + string(res.Action)), nil
		})
	// Logs: a request that names no log level hears none of it.
	s.tool(catalog.Tool{Name: "test_logging_tool", Description: "Sends a log message at info level, then answers."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			if err := c.Log(ctx, slog.LevelInfo, "test_logging_tool ran"); err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("logged"), nil
		})
}
