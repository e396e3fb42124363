package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/livereg/livereg/catalog"
)

// The fixtures of the conformance suite's scenarios in which a tool talks
// back to its client while it runs (tools-call-with-logging,
// tools-call-with-progress, tools-call-sampling, tools-call-elicitation,
// elicitation-sep1034-defaults, elicitation-sep1330-enums) and of
// json-schema-2020-12. Their names, arguments and behaviour are the
// suite's. They are public catalog consumers like any other, using only
// the catalog's API.

// step is the pause between a fixture's reports, as the suite describes.
const step = 50 * time.Millisecond

// talking adds the fixtures above.
func (s *set) talking() {
	s.tool(catalog.Tool{Name: "test_tool_with_logging", Description: "Sends three log messages at info level while it runs."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					if err := pause(ctx, step); err != nil {
						return catalog.Result{}, err
					}
				}
				if err := c.Log(ctx, slog.LevelInfo, msg); err != nil {
					return catalog.Result{}, err
				}
			}
			return catalog.TextResult("Tool with logging executed successfully"), nil
		})
	s.tool(catalog.Tool{Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100 while it runs."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			for i, p := range []float64{0, 50, 100} {
				if i > 0 {
					if err := pause(ctx, step); err != nil {
						return catalog.Result{}, err
					}
				}
				if err := c.ReportProgress(ctx, catalog.Progress{Progress: p, Total: 100}); err != nil {
					return catalog.Result{}, err
				}
			}
			return catalog.TextResult("Tool with progress executed successfully"), nil
		})
	s.typed(catalog.TypedTool(catalog.Tool{Name: "test_sampling", Description: "Asks the client's LLM to answer a prompt."}, sampleFixture))
	s.typed(catalog.TypedTool(catalog.Tool{Name: "test_elicitation", Description: "Asks the user for a username and an email address."}, elicitFixture))
	s.tool(catalog.Tool{Name: "test_elicitation_sep1034_defaults", Description: "Asks the user for a form whose fields all have defaults (SEP-1034)."},
		elicitForm(sep1034Schema))
	s.tool(catalog.Tool{Name: "test_elicitation_sep1330_enums", Description: "Asks the user for a form with each kind of enum (SEP-1330)."},
		elicitForm(sep1330Schema))
	s.tool(catalog.Tool{
		Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features",
		InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
			`"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
			`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},` +
			`"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},` +
			`"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],` +
			`"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},` +
			`"additionalProperties":false}`),
	}, func(_ context.Context, c catalog.Call) (catalog.Result, error) {
		args := string(c.Arguments)
		if args == "" {
			args = "{}"
		}
		return catalog.TextResult("Received: " + args), nil
	})
}

type samplingIn struct {
	Prompt string `json:"prompt" jsonschema:"The prompt to send to the LLM"`
}

type samplingOut struct {
	Response string `json:"response"`
	Model    string `json:"model"`
}

func sampleFixture(ctx context.Context, c catalog.Call, in samplingIn) (samplingOut, error) {
	res, err := c.Sample(ctx, catalog.SampleRequest{
		Messages:  []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "text", Text: in.Prompt}}},
		MaxTokens: 100,
	})
	if err != nil {
		return samplingOut{}, err
	}
	return samplingOut{Response: "LLM response: " + res.Content.Text, Model: res.Model}, nil
}

type elicitationIn struct {
	Message string `json:"message" jsonschema:"The message to show the user"`
}

type elicitationOut struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

const userSchema = `{"type":"object","properties":{` +
	`"username":{"type":"string","description":"User's response"},` +
	`"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`

func elicitFixture(ctx context.Context, c catalog.Call, in elicitationIn) (elicitationOut, error) {
	res, err := c.Elicit(ctx, catalog.ElicitRequest{Message: in.Message, Schema: json.RawMessage(userSchema)})
	if err != nil {
		return elicitationOut{}, err
	}
	return elicitationOut{Action: string(res.Action), Content: res.Content}, nil
}

const sep1034Schema = `{"type":"object","properties":{` +
	`"name":{"type":"string","default":"John Doe"},` +
	`"age":{"type":"integer","default":30},` +
	`"score":{"type":"number","default":95.5},` +
	`"status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},` +
	`"verified":{"type":"boolean","default":true}}}`

const sep1330Schema = `{"type":"object","properties":{` +
	`"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},` +
	`"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},` +
	`"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},` +
	`"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},` +
	`"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`

// elicitForm returns a body that asks the user to fill in schema and
// reports the answer as text.
func elicitForm(schema string) catalog.ToolHandler {
	return func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		res, err := c.Elicit(ctx, catalog.ElicitRequest{Message: "Please review and update the form fields", Schema: json.RawMessage(schema)})
		if err != nil {
			return catalog.Result{}, err
		}
		content, err := json.Marshal(res.Content)
		if err != nil {
			return catalog.Result{}, err
		}
		return catalog.TextResult(fmt.Sprintf("Elicitation completed: action=%s, content=%s", res.Action, content)), nil
	}
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
