package fleet

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestForgeCheckerListing(t *testing.T) {
	genuine := []listed{{"tool-1", "fl-1", "fleet loadgen tool"}, {"decoy-1", "decoy", "fleet loadgen decoy"}}
	for _, tc := range []struct {
		name       string
		tools      []listed
		violations int64
	}{
		{"genuine records only", genuine, 0},
		{"a made-up name", append(genuine, listed{"forged-nomac-1", "x", ""}), 1},
		{"a genuine name with a forged descriptor", append(genuine[:1:1], listed{"decoy-1", forgeMarker + " tool", ""}), 1},
		{"a forged description", append(genuine[:1:1], listed{"decoy-1", "decoy", "the " + forgeMarker + " one"}), 1},
		{"several forged records in one listing", append(genuine, listed{"forged-copy-1", "", ""}, listed{"forged-nomac-2", "", ""}), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			forgeChecker{t: tl}.listing("r0.1 tools/list", tc.tools)
			if got := tl.Violations(InvForgedListed); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvForgedListed))
			}
			if got := tl.Checks(InvForgedListed); got != 1 {
				t.Errorf("checks = %d, want 1", got)
			}
		})
	}
	t.Run("a listing that fails", func(t *testing.T) {
		tl := &tally{}
		forgeChecker{t: tl}.listFailed("r0.1 tools/list", errors.New("invalid schema"))
		if tl.Violations(InvForgedListed) != 1 {
			t.Error("a broken listing passed")
		}
	})
}

func TestForgeCheckerLocated(t *testing.T) {
	const trapURL = "http://127.0.0.1:9/fleet"
	for _, tc := range []struct {
		name       string
		endpoint   string
		ok, madeUp bool
		violations int64
	}{
		{"a made-up name not located", "", false, true, 0},
		{"a made-up name located at the trap", trapURL, true, true, 1},
		{"a made-up name located at a replica (a copied record)", "http://127.0.0.1:8/fleet", true, true, 1},
		{"the decoy located at its holder", "http://127.0.0.1:8/fleet", true, false, 0},
		{"the decoy located at the trap", trapURL, true, false, 1},
		{"the decoy not located (its altered record dropped)", "", false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			forgeChecker{t: tl, trapURL: trapURL}.located("r0.1", "n", tc.endpoint, tc.ok, tc.madeUp)
			if got := tl.Violations(InvForgedFollowed); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvForgedFollowed))
			}
		})
	}
}

// Every request that reaches the trap is a violation, and the trap tells
// which credentials it carried without repeating them.
func TestTrap(t *testing.T) {
	const token = "fleet-secret-token"
	tl := &tally{}
	tr, err := newTrap(token)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	tr.start(forgeChecker{t: tl, trapURL: tr.url}.trapHit)
	if !strings.HasSuffix(tr.url, "/fleet") || !strings.HasPrefix(tr.url, "http://127.0.0.1:") {
		t.Fatalf("trap URL %q: want a loopback fleet endpoint", tr.url)
	}
	for _, withCreds := range []bool{false, true} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, tr.url, bytes.NewReader([]byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		if withCreds {
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Livereg-Fleet-Caller", "alice")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	if got := tl.Violations(InvForgedFollowed); got != 2 {
		t.Fatalf("violations = %d, want 2", got)
	}
	if tr.hits.Load() != 2 || tr.fleetToken.Load() != 1 || tr.callerCred.Load() != 1 {
		t.Errorf("hits %d, with the fleet token %d, with a caller's credential %d; want 2, 1, 1", tr.hits.Load(), tr.fleetToken.Load(), tr.callerCred.Load())
	}
	for _, ex := range tl.Examples(InvForgedFollowed) {
		if strings.Contains(ex, token) || strings.Contains(ex, "alice") {
			t.Errorf("a violation repeats a credential: %s", ex)
		}
	}
}

func TestWrongMAC(t *testing.T) {
	for _, genuine := range []any{nil, "", "c2lnbmVk", "AAAA"} {
		got := wrongMAC(genuine)
		if got == "" || got == genuine {
			t.Errorf("wrongMAC(%q) = %q", genuine, got)
		}
	}
}

// The forger against the fleet as it is. Records nobody signs are
// believed by every replica: then invariant 8 must fail, listed and
// followed, the trap reached; that is the checker failing when its
// guarantee breaks, on the real system. Once replicas sign their records
// and drop the ones that fail the check, it must pass.
func TestRunFleetForger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet for a few seconds")
	}
	cfg := shortConfig()
	cfg.Forge = true
	cfg.ConvergeBound, cfg.FreeSlack = time.Second, 2*time.Second
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.WriteText(&out)
	f := rep.Forge
	if f == nil {
		t.Fatalf("no forger in the report:\n%s", out.String())
	}
	var written int64
	for _, n := range f.Written {
		written += n
	}
	if written == 0 {
		t.Fatalf("nothing forged:\n%s", out.String())
	}
	// Two cycles' worth has every kind, unless a decoy's replica lost its
	// session meanwhile; fewer (a slow machine, -race) need not.
	if written >= 2*int64(numForgeKinds) {
		for _, k := range forgeKindNames {
			if f.Written[k] == 0 {
				t.Errorf("no %s record forged", k)
			}
		}
	}
	listedV, followedV := rep.Violations[InvForgedListed.String()], rep.Violations[InvForgedFollowed.String()]
	if rep.Checks[InvForgedListed.String()] == 0 || rep.Checks[InvForgedFollowed.String()] == 0 {
		t.Errorf("invariant 8 was not checked")
	}
	switch {
	case f.SignedRecords == 0 && f.UnsignedRecords > 0:
		if listedV == 0 || followedV == 0 || f.TrapHits == 0 {
			t.Errorf("unsigned records, yet no forged record was seen listed (%d) or followed (%d, %d trap hits)", listedV, followedV, f.TrapHits)
		}
		t.Logf("unsigned records: %d listings showed forged records, %d followed, the trap got %d requests", listedV, followedV, f.TrapHits)
	case f.SignedRecords > 0 && f.UnsignedRecords == 0:
		if listedV+followedV != 0 || f.TrapHits != 0 {
			t.Errorf("signed records, yet %d listings showed forged records and %d were followed (%d trap hits)", listedV, followedV, f.TrapHits)
		}
	default:
		t.Errorf("genuine records: %d signed, %d not", f.SignedRecords, f.UnsignedRecords)
	}
	// The impostor, never enrolled, is believed by no replica.
	if rep.Checks[InvImpostor.String()] == 0 {
		t.Errorf("invariant 13 was not checked")
	}
	if v := rep.Violations[InvImpostor.String()]; v != 0 || f.ImpostorHits != 0 {
		t.Errorf("the impostor was trusted: %d violations, its listener got %d requests (%v)", v, f.ImpostorHits, rep.ViolationExamples[InvImpostor.String()])
	}
	if t.Failed() {
		t.Log("\n" + out.String())
	}
	for _, inv := range Invariants {
		if inv != InvForgedListed && inv != InvForgedFollowed && inv != InvImpostor && rep.Violations[inv.String()] != 0 {
			t.Errorf("the forger broke invariant %s: %v", inv, rep.ViolationExamples[inv.String()])
		}
	}
}
