package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// outcome classifies an MCP tools/call answer.
type outcome int

const (
	outcomeOK outcome = iota
	outcomeDenied
	outcomeUnknown
	outcomeGone
	outcomePeerUnavailable
	outcomeReplicaDown // the replica called crashed during the call
	outcomeOther
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "denied", "unknown", "gone", "peer_unavailable", "replica_down", "other"}

func (o outcome) String() string { return outcomeNames[o] }

func classify(res *mcp.CallToolResult, err error) (outcome, string) {
	var werr *jsonrpc.Error
	switch {
	case err == nil && res != nil:
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		switch {
		case !res.IsError:
			return outcomeOK, text
		case strings.Contains(text, "access denied"):
			return outcomeDenied, text
		}
		return outcomeOther, "tool error: " + text
	case errors.As(err, &werr) && werr.Code == jsonrpc.CodeInvalidParams:
		if strings.Contains(string(werr.Data), "route_gone") {
			return outcomeGone, ""
		}
		return outcomeUnknown, ""
	case errors.As(err, &werr) && werr.Code == mcpserve.CodePeerUnavailable:
		return outcomePeerUnavailable, ""
	case err != nil:
		return outcomeOther, err.Error()
	}
	return outcomeOther, "no result"
}

// throughReplicas runs op on a random up replica, again and again, until
// stop is closed: the loop of resolvers and taskers. rng is op's too.
func (w *world) throughReplicas(rng *rand.Rand, stop <-chan struct{}, op func(r *replica)) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		r := w.f.pick(rng)
		if r == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		op(r)
	}
}

// resolver calls tools and lists them through random replicas' clients
// until stop is closed.
func (w *world) resolver(ctx context.Context, index int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(2000+index)))
	w.throughReplicas(rng, stop, func(r *replica) {
		switch roll := rng.IntN(100); {
		case roll < 10:
			w.list(ctx, r)
		case roll < 20:
			w.surfaceGet(ctx, r, w.pickSurf(rng, surfPrompt))
		case roll < 30:
			w.surfaceGet(ctx, r, w.pickSurf(rng, surfTemplate))
		case roll < 38:
			w.call(ctx, r, 0, w.names[rng.IntN(len(w.names))].name, w.prog.nonce.Add(1))
		default:
			ci := 0
			if rng.IntN(100) < 20 {
				ci = 1
			}
			w.call(ctx, r, ci, w.names[rng.IntN(len(w.names))].name, 0)
		}
	})
}

// unenrolled reports whether lease, the one a replica held when a call
// through it began, is gone from etcd: the replica's enrollment went with
// it, and a holder rightly refuses its hop (signed by a replica it no
// longer knows) until its next session enrolls it again, though the
// replica itself may not have noticed the loss yet. One round trip to
// etcd, on a peer_unavailable answer only.
func (w *world) unenrolled(lease clientv3.LeaseID) bool {
	return lease == clientv3.NoLease || !w.f.leaseAlive(int64(lease))
}

// holderSession is the replica at a located endpoint and its session
// when a call through another began.
type holderSession struct {
	r     *replica
	lease clientv3.LeaseID
	lost  int
}

// holderSession returns the replica at ep, if any, with its session now.
func (w *world) holderSession(ep string) holderSession {
	p := w.f.byEndpoint(ep)
	if p == nil || p.rep == nil {
		return holderSession{}
	}
	return holderSession{r: p, lease: p.rep.Lease(), lost: p.rep.SessionsLost()}
}

// kept reports whether the holder is up and kept the session it had: a
// holder that lost it refuses every hop until its next session lists the
// fleet again (its view, and with it every enrollment, is hidden), so its
// refusal is no surprise then. One round trip to etcd.
func (h holderSession) kept(w *world) bool {
	return h.r != nil && !h.r.crashed.Load() && h.r.rep.SessionsLost() == h.lost &&
		h.lease != clientv3.NoLease && w.f.leaseAlive(int64(h.lease))
}

// call calls name through r's client of credential class ci; with
// progress set, as the progress call of that nonce (progress.go).
func (w *world) call(ctx context.Context, r *replica, ci int, name string, progress uint64) {
	cs := r.clients[ci]
	if cs == nil {
		return // crashed meanwhile
	}
	// Read before locating: a loss between the two would hide the route
	// from the call and yet not count as one during it.
	lost, lease := r.rep.SessionsLost(), r.rep.Lease()
	peer, located := r.rep.Peer(catalog.KindTool, name)
	hs := w.holderSession(peer)
	var holder *record
	if located {
		holder = w.holderAt(name, peer)
	}
	before := locate(r, catalog.KindTool, name)
	a := callArgs{Seq: w.tick(), Cred: creds[ci], Via: r.id, Progress: progress}
	params := &mcp.CallToolParams{Name: name, Arguments: a}
	if progress != 0 {
		params.SetProgressToken(progressToken(progress))
	}
	t0 := time.Now()
	res, err := cs.CallTool(ctx, params)
	d := time.Since(t0)
	// A replica that loses its session hides the fleet's routes until it
	// has listed them under the next: a call through it in that time may
	// rightly be unknown.
	hidden := r.rep.SessionsLost() != lost || r.rep.Lease() == 0
	o, text := classify(res, err)
	if o == outcomePeerUnavailable && !hidden {
		hidden = w.unenrolled(lease)
	}
	if o == outcomePeerUnavailable && !hidden {
		if p := hs.r; hs.kept(w) {
			// The replica located before the call is up and serving: it
			// should have answered.
			w.t.Unexpected("tools/call %s on %s: peer unavailable, though the holder it located, %s, is up (located by %s at view revision %d; after the call, %s): %s",
				name, r.name, p.name, before, before.rev, locate(r, catalog.KindTool, name).after(), errText(err))
		}
	}
	if o == outcomeOther && (r.down.Load() || ctx.Err() != nil) {
		o = outcomeReplicaDown
	}
	w.outcomes[o].Add(1)
	if progress != 0 {
		w.prog.outcomes[o].Add(1)
		if o == outcomeOK {
			w.judgeProgress(progress, r, text)
		}
	}
	if holder != nil {
		w.forward.answered(holder, r, a.Seq, creds[ci], o, text, hidden, before.shows(holder), func() string {
			ep, ok := r.rep.Peer(catalog.KindTool, name)
			where := "nowhere"
			if p := w.f.byEndpoint(ep); ok && p != nil {
				where = p.name
			} else if ok {
				where = ep
			}
			return fmt.Sprintf("%s located it %s, by %s, at view revision %d, with %d sessions lost (%d before) and lease %x; before it, by %s, at view revision %d; the answer: %s",
				r.name, where, locate(r, catalog.KindTool, name), r.rep.View().Revision(), r.rep.SessionsLost(), lost, r.rep.Lease(), before, before.rev, errText(err))
		})
	}
	switch o {
	case outcomeOK:
		if rec := w.lookup(text); rec != nil {
			if rec.rep == r {
				w.lat.Record(opCallLocal, d)
			} else {
				w.lat.Record(opCallForward, d)
			}
		}
	case outcomeOther:
		w.t.Unexpected("tools/call %s on %s: %s", name, r.name, text)
	}
}

// located is the record by which a replica's view locates a name: the
// replica and owner it names (none: ""), and the view's revision.
type located struct {
	replica string
	owner   uint64
	rev     int64
}

// locate reads the record by which r's view locates the route of kind
// and name. Its owner tells a consumer's record from a predecessor's on
// the same replica: a view that lags may locate a name by the record of
// a consumer that has since stopped, while its successor, on the same
// replica, already serves it (etcdfleet's TestForwardThroughAViewBetweenClaims).
func locate(r *replica, kind catalog.Kind, name string) located {
	v := r.rep.View()
	l := located{rev: v.Revision()}
	key, err := r.rep.Key(kind, name)
	if err != nil {
		return l
	}
	if rec, ok := v.Holder(key); ok {
		l.replica, l.owner = rec.Replica, rec.Owner
	}
	return l
}

// shows reports whether l is holder's own record.
func (l located) shows(holder *record) bool {
	return holder != nil && l.owner != 0 && l.owner == holder.owner && l.replica == holder.rep.name
}

// after describes l as read after a call, for a report.
func (l located) after() string { return fmt.Sprintf("by %s at view revision %d", l, l.rev) }

func (l located) String() string {
	if l.replica == "" {
		return "no record"
	}
	return fmt.Sprintf("the record of owner %d on %s", l.owner, l.replica)
}

// holderAt returns the one consumer of name that lives, has not begun to
// stop, and whose claim is known, on the replica whose fleet endpoint is
// peer; nil if there is not exactly one.
func (w *world) holderAt(name, peer string) *record {
	ns := w.byName[name]
	if ns == nil {
		return nil
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	var h *record
	for _, rec := range ns.winners {
		if rec.rep.fleetURL != peer || !rec.alive() || rec.stopping.Load() || rec.lease.Load() == 0 {
			continue
		}
		if h != nil {
			return nil
		}
		h = rec
	}
	return h
}

// liveDuring returns the consumers of name on replica r whose starts
// succeeded and that were not seen dead before clock reading since: the
// ones that may have answered a call that began then, though a death
// (a lost session's kill, say) may have ended them since.
func (w *world) liveDuring(name string, r *replica, since uint64) []*record {
	ns := w.byName[name]
	if ns == nil {
		return nil
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	var out []*record
	for _, rec := range ns.winners {
		if rec.rep == r && rec.won.Load() && !rec.diedBefore(since) {
			out = append(out, rec)
		}
	}
	return out
}

// list walks every page of tools/list on r.
func (w *world) list(ctx context.Context, r *replica) {
	cs := r.clients[0]
	if cs == nil {
		return
	}
	t0 := time.Now()
	cursor := ""
	var tools []listed
	for {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			if !r.down.Load() && ctx.Err() == nil {
				w.t.Unexpected("tools/list on %s: %v", r.name, err)
			}
			return
		}
		for _, t := range res.Tools {
			tools = append(tools, listed{t.Name, t.Title, t.Description})
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	w.lat.Record(opList, time.Since(t0))
	if w.fg != nil {
		w.fg.check.listing(r.name+" tools/list", tools)
	}
}

// listings returns every up replica's tool listing as sorted name=title
// strings, for the convergence check.
func (w *world) listings() [][]string {
	var out [][]string
	for _, r := range w.f.up() {
		tools := r.cat.Tools().List()
		l := make([]string, len(tools))
		for i, t := range tools {
			l[i] = t.Name + "=" + t.Title
		}
		// Prompts and templates converge by the same bound (invariant 4).
		l = append(l, surfaceListings(r)...)
		sortStrings(l)
		out = append(out, l)
	}
	return out
}

// errText is err for a report, with a JSON-RPC error's data (whether the
// failure was retryable, say), which its message leaves out.
func errText(err error) string {
	var we *jsonrpc.Error
	switch {
	case err == nil:
		return "no error"
	case errors.As(err, &we) && len(we.Data) > 0:
		return fmt.Sprintf("%v (data %s)", err, we.Data)
	}
	return err.Error()
}
