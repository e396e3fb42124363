package catalog

import (
	"context"
	"sync"

	"github.com/livereg/livereg/owner"
)

// A Claimer claims route names beyond this catalog: across the replicas of
// a server that runs as many processes, say (package etcdfleet). A catalog
// configured with one asks it, while a consumer starts, after the route is
// registered locally and before it is ready, to claim the name for the
// consumer fleet-wide; the start fails if the claim does. The catalog calls
// the returned release exactly once, when the consumer stops, dies by any
// path, or fails to start after the claim.
//
// The release must be fenced: it removes the claim only while it is still
// the one Claim made, never a successor's. It runs from Stop or from the
// goroutine that reclaims a dead owner's route; it may block on the
// network, bounded by the claimer.
//
// Claim is called concurrently, from the goroutines that start consumers;
// it may block on the network, bounded by ctx (the consumer's context).
// Errors: ErrDuplicate (another owner holds the name elsewhere),
// ErrCapReached, ErrInvalidName (the name cannot be claimed there), or the
// claimer's own, each wrapped; Start returns them wrapped again with the
// route. On error the claimer must leave nothing claimed.
type Claimer interface {
	Claim(ctx context.Context, c Claim) (release func(), err error)
}

// Claim is what a catalog asks a Claimer to claim.
type Claim struct {
	// Kind is the route's kind.
	Kind Kind
	// Name is the tool name, resource URI or prompt name, or a resource
	// template's key (the template with every variable renamed, so that
	// templates that differ only in variable names claim one name).
	Name string
	// Owner is the consumer's owner.
	Owner owner.Ref
	// Kill kills the consumer, as a crash would: a claimer that loses its
	// claims without a release (a lost session) calls it so that no
	// consumer serves a name it no longer holds. It does not keep the
	// consumer alive, and calling it again, or after the death, does
	// nothing.
	Kill func()
	// Tool describes a tool route, Resource a resource route, Prompt a
	// prompt route and Template a resource template route (the one of
	// Kind; the others are zero): what another replica needs to list the
	// route.
	Tool     Tool
	Resource Resource
	Prompt   Prompt
	Template ResourceTemplate
}

// fleetHold is a route's fleet claim; the zero value holds none.
type fleetHold struct {
	once    sync.Once
	release func()
}

// claim asks c's claimer, if any, to claim rt's name. It runs before the
// route joins its owner's death, so that rt.retire sees the release.
func (c *Catalog) claim(ctx context.Context, rt *route) error {
	if c.claimer == nil {
		return nil
	}
	cl := Claim{Kind: rt.side.kind, Name: rt.name, Owner: rt.ref, Kill: rt.release}
	switch {
	case rt.prompt != nil:
		cl.Prompt = rt.prompt.prompt
	case rt.template != nil:
		cl.Template = rt.template.tpl
	case rt.side.kind == KindTool:
		cl.Tool = rt.tool
	default:
		cl.Resource = rt.resource
	}
	rel, err := c.claimer.Claim(ctx, cl)
	if err != nil {
		return err
	}
	rt.fleet.release = rel
	return nil
}

// releaseFleet gives up rt's fleet claim, if it has one, once. A second
// caller waits for the first to finish, so that Stop returns only once the
// name is free fleet-wide, whichever of Stop and the reclaim came first.
func (rt *route) releaseFleet() {
	if rt.fleet.release == nil {
		return
	}
	rt.fleet.once.Do(rt.fleet.release)
}

// HolderState says where the replica that holds a task is, as a fleet's
// view has it: the answer of package mcpserve's TaskHolders.Locate, which
// package etcdfleet's Replica implements.
type HolderState uint8

// The states of a task's holder.
const (
	// HolderUnknown: the view cannot tell yet (it is behind the holder's
	// membership, or hidden between sessions); ask again later.
	HolderUnknown HolderState = iota
	// HolderHere: this process holds the task.
	HolderHere
	// HolderLive: another replica holds it, and its lease is alive.
	HolderLive
	// HolderLost: the replica that held it is gone, its lease expired or
	// revoked, or its process replaced: the task ended with it.
	HolderLost
)
