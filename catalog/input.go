package catalog

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/livereg/livereg/internal/quote"
)

// MaxInputKeyBytes is the longest InputRequest.Key Ask accepts.
const MaxInputKeyBytes = 128

// InputRequest is one question a body asks its caller (see Ask): exactly
// one of Elicit, Sample and ListRoots says what is asked.
type InputRequest struct {
	// Key names the question among the call's questions: the answer is
	// matched to it by key, and in MCP 2026-07-28 it is the key of
	// inputRequests and inputResponses. Asking the same key again in one
	// call, in a later round too, gets the same answer, so distinct
	// questions need distinct keys. Empty means the kind's name:
	// "elicitation", "sampling" or "roots". At most MaxInputKeyBytes, and
	// no control characters.
	Key string
	// Elicit asks the user to fill in a form (Call.Elicit's request).
	Elicit *ElicitRequest
	// Sample asks for an LLM completion (Call.Sample's request).
	Sample *SampleRequest
	// ListRoots asks for the caller's roots (MCP's roots/list): the
	// directories or files it lets the server work on.
	ListRoots bool
}

// InputResponse is the caller's answer to one InputRequest: the field of
// the request's kind holds it.
type InputResponse struct {
	Elicit ElicitResult
	Sample SampleResult
	// Roots is the answer to a ListRoots request, empty when the caller
	// offers none.
	Roots []Root
}

// Root is one of the caller's roots: a file:// URI, and a name for people
// that may be empty.
type Root struct {
	URI  string
	Name string
}

// The capabilities an InputRequest needs, as MCP's client capabilities
// name them (CapabilityError.Capability).
const (
	capElicitation = "elicitation"
	capSampling    = "sampling"
	capRoots       = "roots"
)

// capability returns the client capability r needs, which is also the
// default key.
func (r *InputRequest) capability() string {
	switch {
	case r.Elicit != nil:
		return capElicitation
	case r.Sample != nil:
		return capSampling
	default:
		return capRoots
	}
}

// check validates r, fills in its default key and normalises an empty
// form schema; it returns what is wrong, for ErrInvalidRequest.
func (r *InputRequest) check() error {
	n := 0
	for _, set := range []bool{r.Elicit != nil, r.Sample != nil, r.ListRoots} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("an input request asks %d things (Elicit, Sample, ListRoots), not one", n)
	}
	if r.Key == "" {
		r.Key = r.capability()
	}
	if len(r.Key) > MaxInputKeyBytes {
		return fmt.Errorf("key %s is longer than %d bytes", quote.Name(r.Key), MaxInputKeyBytes)
	}
	if strings.IndexFunc(r.Key, unicode.IsControl) >= 0 {
		return fmt.Errorf("key %s holds a control character", quote.Name(r.Key))
	}
	switch {
	case r.Elicit != nil:
		e := *r.Elicit
		if e.Message == "" {
			return errors.New("elicitation: empty message")
		}
		if len(e.Schema) == 0 {
			e.Schema = emptyForm
		} else if !isObject(e.Schema) {
			return errors.New("elicitation: the schema is not a JSON object")
		}
		r.Elicit = &e
	case r.Sample != nil:
		if err := r.Sample.check(); err != nil {
			return fmt.Errorf("sampling: %w", err)
		}
	}
	return nil
}

// answers reports whether a is an answer of r's kind.
func (r *InputRequest) answers(a InputResponse) bool {
	switch {
	case r.Elicit != nil:
		switch a.Elicit.Action {
		case ElicitAccept, ElicitDecline, ElicitCancel:
			return true
		}
		return false
	case r.Sample != nil:
		return a.Sample.Content.Type != ""
	default:
		return a.Roots != nil
	}
}

// Ask asks the caller of the body whose ctx this is every question in
// reqs, and returns the answers in the same order. Call.Elicit and
// Call.Sample ask one question each; Ask serves every kind of body (a
// tool's, a prompt's, a reader's) and asks several at once.
//
// How the caller answers is its transport's business (see Client), and
// the body is the same for every one:
//
//   - A caller that can be asked mid-call (an MCP 2025-11-25 session, an
//     in-process Client with the functions) is asked each question in
//     turn, and Ask waits for the answers, bounded by ctx as Call.Sample
//     is.
//   - A caller served in rounds (Client.Round: MCP 2026-07-28's
//     input-required results) cannot be asked mid-call. Ask returns the
//     answers the round carries; when one is missing it records the
//     questions and returns an error that is ErrInputRequired, which the
//     body must return (wrapped or not). The call then ends with an
//     *InputRequiredError, and its caller makes it again with the
//     answers: the body runs again from its start, and this time Ask
//     returns them. So a body that asks must be ready to run more than
//     once; what it did before asking it does again, and what it must do
//     once belongs after its last question.
//
// A body keeps state across rounds by asking: every answer of every
// earlier round comes back from Ask under its key, so the body can
// recompute whatever it derived from them. Anything else it needs to
// carry belongs in its arguments or its own store.
//
// Errors: a *CapabilityError (ErrNotSupported) when the caller offers
// one of the kinds asked for, and nothing was asked; ErrInvalidRequest for
// a malformed request or two with one key, likewise; ErrInputRequired
// (above); the ctx's error; or the caller's error. It is safe for
// concurrent use by the body's goroutines.
func Ask(ctx context.Context, reqs ...InputRequest) ([]InputResponse, error) {
	return ask(ctx, "", reqs)
}

// ask is Ask on behalf of the named tool (for its errors; "" for none).
func ask(ctx context.Context, tool string, reqs []InputRequest) ([]InputResponse, error) {
	reqs = append([]InputRequest(nil), reqs...) // check fills in defaults
	for i := range reqs {
		if err := reqs[i].check(); err != nil {
			return nil, invalidRequest(tool, err)
		}
		for _, r := range reqs[:i] {
			if r.Key == reqs[i].Key {
				return nil, invalidRequest(tool, fmt.Errorf("two requests have the key %s", quote.Name(r.Key)))
			}
		}
	}
	cl := ClientFrom(ctx)
	for _, r := range reqs {
		if !cl.offers(r.capability()) {
			return nil, &CapabilityError{Tool: tool, Capability: r.capability()}
		}
	}
	if cl.task != nil {
		return cl.task.ask(ctx, reqs)
	}
	if cl.Round != nil {
		return cl.Round.answer(reqs)
	}
	out := make([]InputResponse, len(reqs))
	for i, r := range reqs {
		var err error
		switch {
		case r.Elicit != nil:
			out[i].Elicit, err = cl.Elicit(ctx, *r.Elicit)
		case r.Sample != nil:
			out[i].Sample, err = cl.Sample(ctx, *r.Sample)
		default:
			out[i].Roots, err = cl.ListRoots(ctx)
			if err == nil && out[i].Roots == nil {
				out[i].Roots = []Root{}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// invalidRequest is ErrInvalidRequest for what is wrong with a body's
// request to its caller.
func invalidRequest(tool string, err error) error {
	if tool == "" {
		return fmt.Errorf("catalog: %w: %w", ErrInvalidRequest, err)
	}
	return fmt.Errorf("catalog: tool %s: %w: %w", quote.Name(tool), ErrInvalidRequest, err)
}

// offers reports whether cl can be asked what capability names.
func (cl *Client) offers(capability string) bool {
	if cl == nil {
		return false
	}
	if cl.task != nil {
		return cl.task.offers(capability)
	}
	if r := cl.Round; r != nil {
		switch capability {
		case capElicitation:
			return r.Elicitation
		case capSampling:
			return r.Sampling
		default:
			return r.Roots
		}
	}
	switch capability {
	case capElicitation:
		return cl.Elicit != nil
	case capSampling:
		return cl.Sample != nil
	default:
		return cl.ListRoots != nil
	}
}

// Round is a call whose caller cannot be asked mid-call, and answers in
// rounds instead (MCP 2026-07-28's input-required results): see Ask. The
// caller sets it in its Client. A Round serves one call: it records the
// questions that call's body asked.
type Round struct {
	// Instance, if not empty, is the InputRequiredError.Instance of the
	// round before: the call runs only in that consumer instance, and
	// fails with ErrRouteGone, without running a body, when the name's
	// route is another consumer's (a successor's) or none. So a retry
	// never carries answers to a body other than the one that asked.
	Instance string
	// Answers are the caller's answers so far, by key. Read-only.
	Answers map[string]InputResponse
	// Elicitation, Sampling and Roots say which kinds of question the
	// caller can answer; asking another fails with a *CapabilityError.
	Elicitation, Sampling, Roots bool

	mu    sync.Mutex
	asked []InputRequest
}

// answer returns the round's answers to reqs, or records reqs and returns
// ErrInputRequired when one is missing.
func (r *Round) answer(reqs []InputRequest) ([]InputResponse, error) {
	out := make([]InputResponse, len(reqs))
	missing := false
	for i := range reqs {
		a, ok := r.Answers[reqs[i].Key]
		if !ok || !reqs[i].answers(a) {
			missing = true
			continue
		}
		out[i] = a
	}
	if !missing {
		return out, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range reqs {
		if !r.has(q.Key) {
			r.asked = append(r.asked, q)
		}
	}
	return nil, errInputRequired
}

// has reports whether a question of that key was recorded; r.mu is held.
func (r *Round) has(key string) bool {
	for _, q := range r.asked {
		if q.Key == key {
			return true
		}
	}
	return false
}

// Asked returns the questions the call's body asked in this round, in the
// order asked, each key once. It is safe for concurrent use.
func (r *Round) Asked() []InputRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]InputRequest(nil), r.asked...)
}

// errInputRequired is what Ask returns in a round that lacks an answer.
var errInputRequired = fmt.Errorf("%w: the caller answers in rounds", ErrInputRequired)

// InputRequiredError ends a call made in a Round whose body asked for
// input the round did not carry (see Ask): it is ErrInputRequired
// (errors.Is). The caller asks Requests, then makes the call again with a
// Round whose Instance is this Instance and whose Answers hold every
// answer so far.
type InputRequiredError struct {
	// Requests are the questions, each key once, in the order asked.
	Requests []InputRequest
	// Instance names the consumer instance whose body asked: unique to
	// the consumer, never reused by a successor of the same name, and
	// opaque.
	Instance string
}

func (e *InputRequiredError) Error() string {
	keys := make([]string, len(e.Requests))
	for i, q := range e.Requests {
		keys[i] = quote.Name(q.Key)
	}
	return "catalog: input required: " + strings.Join(keys, ", ")
}

// Unwrap makes an InputRequiredError ErrInputRequired.
func (e *InputRequiredError) Unwrap() error { return ErrInputRequired }

// withOptions puts the client among opts in ctx, and returns the round
// it answers in, if any.
func withOptions(ctx context.Context, opts []CallOption) (context.Context, *Round) {
	var r *Round
	for _, o := range opts {
		if o.client != nil {
			ctx = context.WithValue(ctx, clientKey{}, o.client)
			r = o.client.Round
		}
	}
	return ctx, r
}

// instance names rt's consumer instance (InputRequiredError.Instance):
// the catalog's nonce, random, and the owner's process-unique ID, so that
// neither a successor here nor a route of another catalog, in this
// process or another, ever bears it.
func (rt *route) instance() string {
	return rt.cat.nonce + "." + strconv.FormatUint(rt.ref.ID(), 36)
}

// checkRound refuses a round that names a consumer instance other than
// rt's: the body that asked is gone, and its answers are not for rt's.
func (rt *route) checkRound(r *Round) error {
	if r.Instance == "" || r.Instance == rt.instance() {
		return nil
	}
	return fmt.Errorf("catalog: %s %s: the consumer that asked for input is gone: %w", rt.side.kind, quote.Name(rt.name), ErrRouteGone)
}

// endRound turns the error of a body that returned ErrInputRequired after
// asking in round r into the call's *InputRequiredError.
func (rt *route) endRound(r *Round, err error) error {
	if err == nil || !errors.Is(err, ErrInputRequired) {
		return err
	}
	asked := r.Asked()
	if len(asked) == 0 {
		return err
	}
	return &InputRequiredError{Requests: asked, Instance: rt.instance()}
}

// newNonce returns 64 random bits, base 36: a catalog's name in its
// routes' instances.
func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's doc)
	return strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 36)
}

// roundGone is the error of a call whose route was not found: when the
// call is a round's retry whose Round names an instance of this catalog,
// the consumer that asked died and has no successor, which is
// ErrRouteGone, retryable, rather than a name never served. An instance
// of another catalog (a replica of a fleet) is that catalog's to judge:
// the name is not found here.
func (c *Catalog) roundGone(kind Kind, name string, err error, opts []CallOption) error {
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	for _, o := range opts {
		if o.client != nil && o.client.Round != nil && c.owns(o.client.Round.Instance) {
			return fmt.Errorf("catalog: %s %s: the consumer that asked for input is gone: %w", kind, quote.Name(name), ErrRouteGone)
		}
	}
	return err
}

// owns reports whether instance names a consumer of this catalog.
func (c *Catalog) owns(instance string) bool {
	return len(instance) > len(c.nonce) && instance[len(c.nonce)] == '.' && instance[:len(c.nonce)] == c.nonce
}
