package etcdfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/livereg/livereg/catalog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Record is the value of a claim's key: who holds the name and what the
// route is, which is what another replica needs to list it.
type Record struct {
	Replica string `json:"replica"`
	// Endpoint is the replica's advertised internal endpoint
	// (Config.Advertise), where other replicas forward calls for the
	// route; empty when it advertises none.
	Endpoint string        `json:"endpoint,omitempty"`
	Owner    uint64        `json:"owner"`
	Kind     catalog.Kind  `json:"kind"`
	Tool     *ToolDesc     `json:"tool,omitempty"`
	Resource *ResourceDesc `json:"resource,omitempty"`
	Prompt   *PromptDesc   `json:"prompt,omitempty"`
	Template *TemplateDesc `json:"template,omitempty"`
	// Incarnation is set in a replica's membership record alone (Kind
	// KindReplica; holder.go): the random name of the process that wrote
	// it, the same across its sessions.
	Incarnation string `json:"incarnation,omitempty"`
	// Seq and Every are set in a replica's membership alone: the
	// sequence number of this renewal, growing with each, and how often
	// (in milliseconds) the replica renews it (liveness.go).
	Seq   uint64 `json:"seq,omitempty"`
	Every int64  `json:"every,omitempty"`
	// Sig is the Ed25519 signature of the replica it names, by its
	// enrolled key, over the rest, the key and the lease (base64url,
	// unpadded): see the package doc's "What a replica trusts". Empty in
	// the record a follower hands out, once checked.
	Sig string `json:"sig,omitempty"`
}

// ToolDesc is a tool route as a claim records it.
type ToolDesc struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// ResourceDesc is a resource route as a claim records it.
type ResourceDesc struct {
	URI         string `json:"uri"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
}

// PromptDesc is a prompt route as a claim records it.
type PromptDesc struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Arguments   []PromptArgDesc `json:"arguments,omitempty"`
}

// PromptArgDesc is one argument of a prompt as a claim records it.
type PromptArgDesc struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// TemplateDesc is a resource template route as a claim records it. Its
// key's name is the template's catalog.TemplateKey.
type TemplateDesc struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
}

// Key returns the key that claims name for kind: <prefix>/tools/<name>,
// <prefix>/resources/<uri>, <prefix>/prompts/<name> or
// <prefix>/templates/<key> (the template with its variables renamed, so
// that templates differing only in variable names collide), the name
// path-escaped so that a URI's slashes stay inside one segment and distinct
// names make distinct keys. A key over MaxKeyBytes, or an unknown kind,
// gives catalog.ErrInvalidName.
func (r *Replica) Key(kind catalog.Kind, name string) (string, error) {
	dir, err := r.dir(kind)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("%w: empty name", errInvalidName)
	}
	key := dir + url.PathEscape(name)
	if len(key) > MaxKeyBytes {
		return "", fmt.Errorf("%w: key of %d bytes after escaping, over %d", errInvalidName, len(key), MaxKeyBytes)
	}
	return key, nil
}

// dir returns the directory of kind's keys, "/" included.
func (r *Replica) dir(kind catalog.Kind) (string, error) {
	switch kind {
	case catalog.KindTool:
		return r.cfg.Prefix + "/tools/", nil
	case catalog.KindResource:
		return r.cfg.Prefix + "/resources/", nil
	case catalog.KindPrompt:
		return r.cfg.Prefix + "/prompts/", nil
	case catalog.KindTemplate:
		return r.cfg.Prefix + "/templates/", nil
	}
	return "", fmt.Errorf("%w: unknown kind %q", errInvalidName, kind)
}

// claim is one name held by this replica for one local owner.
type claim struct {
	r    *Replica
	key  string
	rev  int64                // the key's create revision: the fence
	val  string               // the value the claim put: what repair puts back
	sess *concurrency.Session // the session whose lease the key hangs on
	kill func()
}

// Claim claims cl.Name fleet-wide for cl.Owner: one Txn that creates the
// key, attached to the replica's lease, only if it does not exist. It is
// catalog.Claimer's method; a catalog calls it while a consumer starts.
//
// With Config.Cap set, the claim also counts the kind's keys, fleet-wide,
// at the revision it decides at (the package doc's "The fleet cap"). A
// full cap refuses it with catalog.ErrCapReached.
//
// Errors, wrapped with the key: catalog.ErrDuplicate (the key exists: a
// live owner on some replica, this one included, holds the name, or a
// crashed replica's lease has not expired yet), catalog.ErrCapReached,
// catalog.ErrInvalidName, catalog.ErrInvalidRoute (a descriptor the other
// replicas would drop: an input schema whose "type" is not "object", say),
// ErrSessionLost (the session ended meanwhile;
// retry), ErrUnavailable (no answer within ctx or Config.OpTimeout),
// ErrClosed. On error nothing stays claimed: a Txn whose outcome is unknown
// is undone, fenced, in the background.
//
// Cost: one Txn round trip (with a cap, two, and one more each time
// another claim of the kind commits in between), waiting first for a
// session while the replica is between sessions. The returned release
// deletes the key in one Txn fenced by its create revision.
func (r *Replica) Claim(ctx context.Context, cl catalog.Claim) (func(), error) {
	if r == nil {
		return nil, ErrClosed
	}
	key, err := r.Key(cl.Kind, cl.Name)
	if err != nil {
		return nil, fmt.Errorf("etcdfleet: claim: %w", err)
	}
	wrap := func(err error) error { return fmt.Errorf("etcdfleet: claim %s: %w", key, err) }
	rec := r.record(cl)
	if err := validRecord(r.cfg.Prefix, key, rec, r.trust.peerPath, r.trust.peers); err != nil {
		// The other replicas would drop it: refuse what they would not list.
		return nil, wrap(fmt.Errorf("%w: %w", errInvalidRoute, err))
	}
	s, err := r.session(ctx)
	if err != nil {
		return nil, wrap(err)
	}
	val, err := seal(r.key, key, int64(s.Lease()), rec)
	if err != nil {
		return nil, wrap(fmt.Errorf("%w: %w", errInvalidName, err))
	}
	tctx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
	defer cancel()
	rev, refused, err := r.put(tctx, catalog.Kind(cl.Kind), key, val, s.Lease())
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, wrap(fmt.Errorf("%w: %w", ErrSessionLost, err))
		}
		// The put may have been applied: undo it, fenced by what only
		// this attempt could have written.
		r.undo(key, val, s.Lease())
		return nil, wrap(unavailable(err))
	}
	if refused != nil {
		return nil, wrap(refused)
	}
	if r.claimPut != nil {
		r.claimPut(key)
	}
	c := &claim{r: r, key: key, rev: rev, val: val, sess: s, kill: cl.Kill}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		// Close revokes the lease, and with it the key.
		return nil, wrap(ErrClosed)
	case r.sess != s:
		// lose revokes the lease or it expires.
		return nil, wrap(ErrSessionLost)
	}
	r.claims[c] = struct{}{}
	r.track(c)
	r.settle(c, cl.Owner.ID())
	return c.release, nil
}

func (r *Replica) record(cl catalog.Claim) Record {
	rec := Record{Replica: r.cfg.Replica, Endpoint: r.cfg.Advertise, Owner: cl.Owner.ID(), Kind: catalog.Kind(cl.Kind)}
	switch rec.Kind {
	case catalog.KindTool:
		t := cl.Tool
		rec.Tool = &ToolDesc{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
	case catalog.KindResource:
		d := cl.Resource
		rec.Resource = &ResourceDesc{URI: d.URI, Name: d.Name, Description: d.Description, MIMEType: d.MIMEType}
	case catalog.KindPrompt:
		p := cl.Prompt
		rec.Prompt = &PromptDesc{Name: p.Name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			rec.Prompt.Arguments = append(rec.Prompt.Arguments, PromptArgDesc{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
	case catalog.KindTemplate:
		t := cl.Template
		rec.Template = &TemplateDesc{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType}
	}
	return rec
}

// undo deletes key if it holds val on lease, in the background: the value
// names this replica and the owner, so no other claim can match it.
func (r *Replica) undo(key, val string, lease clientv3.LeaseID) {
	r.undos.Add(1)
	go func() {
		defer r.undos.Done()
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
		defer cancel()
		_, _ = r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(key), "=", val), clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
			Then(clientv3.OpDelete(key)).
			Commit()
	}()
}

// release gives the claim up: the catalog calls it once, when the
// consumer stops or dies. A claim whose session is gone has nothing to
// delete (the lease took the key, or will); otherwise the key is deleted in
// a Txn fenced by its create revision, so a late release never deletes a
// successor's key. A delete that fails is retried by the supervisor for as
// long as the session lasts.
func (c *claim) release() {
	r := c.r
	r.mu.Lock()
	_, held := r.claims[c]
	delete(r.claims, c)
	r.untrack(c)
	r.mu.Unlock()
	if !held {
		return
	}
	if err := c.delete(); err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sess == c.sess {
		r.pending[c] = struct{}{}
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// delete deletes the key if it is still the one the claim created. A key
// that is gone, or is a successor's, is left as it is: that is success.
func (c *claim) delete() error {
	ctx, cancel := context.WithTimeout(c.r.ctx, c.r.cfg.OpTimeout)
	defer cancel()
	_, err := c.r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).
		Then(clientv3.OpDelete(c.key)).
		Commit()
	return err
}

// DecodeRecord decodes a claim key's value. It checks neither the signature nor
// the route: what a follower believes goes through both (the package
// doc's "What a replica trusts").
func DecodeRecord(b []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("etcdfleet: decode record: %w", err)
	}
	return rec, nil
}
