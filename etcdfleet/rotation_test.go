package etcdfleet_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/livereg/livereg/etcdfleet"
)

const (
	token1 = "rotation-token-one-0123456789"
	token2 = "rotation-token-two-0123456789"
	token3 = "rotation-token-three-01234567"
)

// joinToken joins the fleet at ep as name, signing with token and also
// accepting previous.
func joinToken(t *testing.T, ep, name, token string, previous ...string) replica {
	t.Helper()
	return newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, TTL: time.Second,
		Replica: name, Token: token, PreviousTokens: previous}))
}

// sees waits until r lists every tool in names.
func sees(t *testing.T, r replica, what string, names ...string) {
	t.Helper()
	waitView(t, r.View(), what, func() bool {
		got := remoteTools(r.Replica)
		for _, n := range names {
			if !slices.Contains(got, n) {
				return false
			}
		}
		return true
	})
}

// A fleet rotates its token without downtime, one replica at a time: every
// replica first accepts the new token beside its own (PreviousTokens), then
// signs with the new one and accepts the old, then drops the old. In the
// mixed states every replica lists every other's routes; at the end a
// record signed under a token nobody accepts is dropped.
func TestTokenRotation(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	life := lifeFor(t)

	// A replica that has the new token and the old as previous reads a
	// replica still on the old alone; the old one cannot read the new
	// one's records, which is why the rollout starts by accepting.
	a := joinToken(t, ep, "a", token1)
	b := joinToken(t, ep, "b", token2, token1)
	a.mustStart(t, life, "on-a")
	b.mustStart(t, life, "on-b")
	sees(t, b, "b lists a's route", "on-a", "on-b")
	if slices.Contains(remoteTools(a.Replica), "on-b") {
		t.Fatal("a replica that accepts only the old token lists a record signed with the new one")
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The rollout's middle: one replica still signs with the old token,
	// the other with the new; each accepts both.
	a = joinToken(t, ep, "a", token1, token2)
	a.mustStart(t, life, "on-a")
	sees(t, a, "a lists b's route", "on-a", "on-b")
	sees(t, b, "b lists a's route again", "on-a", "on-b")

	// All on the new token: the old one's records would be dropped now.
	for _, r := range []*replica{&a, &b} {
		name := r.Name()
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		*r = joinToken(t, ep, name, token2)
		r.mustStart(t, life, "on-"+name)
	}
	sees(t, a, "a lists b's route on the new token", "on-a", "on-b")
	sees(t, b, "b lists a's route on the new token", "on-a", "on-b")
	// c is enrolled by the new token's authority; records signed with
	// the keys c would have under the old token or an unknown one are
	// not its enrolled key's.
	ekey, eval := etcdfleet.Enrollment(token2, prefix, "c", "")
	put(t, cli, ekey, eval)
	before := a.Rejected()
	for name, tok := range map[string]string{"old": token1, "unknown": token3} {
		key := toolKey(name)
		put(t, cli, key, etcdfleet.Seal(tok, key, 0, toolRecord("c", "", name)))
	}
	key := toolKey("control")
	put(t, cli, key, etcdfleet.Seal(token2, key, 0, toolRecord("c", "", "control")))
	sees(t, a, "the control", "control")
	if got := remoteTools(a.Replica); slices.Contains(got, "old") || slices.Contains(got, "unknown") {
		t.Fatalf("records under tokens nobody accepts are listed: %q", got)
	}
	if got := a.Rejected() - before; got != 2 {
		t.Fatalf("Rejected grew by %d, want 2", got)
	}
}
