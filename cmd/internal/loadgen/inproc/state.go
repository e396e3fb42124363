package inproc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/livereg/livereg/owner"
)

// shape is how a consumer ended.
type shape int32

const (
	shapeNone       shape = iota // alive, or its death not observed yet
	shapeStop                    // clean Stop
	shapeCancel                  // its start context was cancelled (task abort)
	shapePanic                   // its route body panicked
	shapeDrop                    // dropped without Stop, collected by the GC
	shapeUnexpected              // died while nobody was ending it
	numShapes
)

var shapeNames = [numShapes]string{"", "stop", "cancel", "panic", "drop", "unexpected"}

func (s shape) String() string { return shapeNames[s] }

// crash reports whether the shape is one that leaves a dead entry behind
// for the catalog to reclaim (everything but a clean Stop).
func (s shape) crash() bool { return s == shapeCancel || s == shapePanic || s == shapeDrop }

// record is the loadgen's bookkeeping of one consumer start. It must never
// refer to the Consumer handle: the route body holds the record, and a
// record that kept the handle reachable would make the drop shape
// impossible.
type record struct {
	id     uint64
	ns     *nameState
	tag    string // the tool's Title: how listings name the owner
	public bool   // the route's plan is public

	// death is the clock reading taken when the owner's Done was observed
	// closed, 0 until then. shape is stored before it.
	death atomic.Uint64
	shape atomic.Int32
	probe atomic.Uint64 // the last probe nonce the body saw
	// stopped is set once the consumer's Stop has returned nil: from then
	// on no body of its may start (invariant 8).
	stopped atomic.Bool
	// stopping is set before Stop is called; owner is set once the start
	// succeeded (invariant 9's start check) and dropped once the death was
	// observed, so that the ring of records does not keep dead owners'
	// routes reachable. Its liveness is read, not its Done: a death makes
	// the owner read dead a moment before it closes Done, and a registry
	// that reclaimed the entry in that moment must not be taken for one
	// that let two live owners win.
	stopping atomic.Bool
	owner    atomic.Pointer[owner.Ref]
	// begin is the clock reading taken when the start began, before the
	// entry could be seen (invariant 15).
	begin atomic.Uint64
	// running counts the bodies of this consumer between their first and
	// last line (invariant 13), and block is the drain probe's held body,
	// if any.
	running atomic.Int64
	block   atomic.Pointer[blocker]
	// tmpl is the URI template a template consumer started with (one of
	// its key's variants), and varName its one variable's name.
	tmpl, varName string
}

// alive reports whether r's owner lives: its start succeeded and it has
// not died.
func (r *record) alive() bool {
	ref := r.owner.Load()
	return ref != nil && ref.Alive()
}

func (r *record) deathShape() shape { return shape(r.shape.Load()) }

// diedBefore reports whether the owner was observed dead before the clock
// read begin.
func (r *record) diedBefore(begin uint64) bool {
	d := r.death.Load()
	return d != 0 && d < begin
}

const tagPrefix = "lg#"

func tagFor(id uint64) string { return tagPrefix + strconv.FormatUint(id, 10) }

// parseTag returns the consumer id a listed tool's Title names.
func parseTag(title string) (uint64, bool) {
	s, ok := strings.CutPrefix(title, tagPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil
}

// Starts on one name are counted in one word, begun<<32 | in flight, so
// that a start can tell in one load whether another start overlapped it.
const (
	countBegun  = uint64(1) << 32
	countMask   = countBegun - 1
	countOneIn  = countBegun | 1 // one start begun and in flight
	countOneOut = ^uint64(0)     // one start no longer in flight
)

// nameState is the loadgen's bookkeeping of one tool name.
type nameState struct {
	name string // a tool's or prompt's name, a template's key
	kind kind
	// A template key's variants differ only in their variable's name:
	// starts pick one, so that live duplicates collide. prefix is the
	// literal text before the variable.
	variants []string
	prefix   string
	wide     bool                   // the template is its group's least specific one
	holder   atomic.Pointer[record] // the consumer whose start on the name last succeeded
	starts   atomic.Uint64          // begun<<32 | in flight

	mu      sync.Mutex
	winners []*record // consumers whose start on the name succeeded and that may still hold it
}

// newNames makes n tool names.
func newNames(n int) []*nameState { return numbered(n, "lg.tool-%0*d", kindTool) }

// ringSize bounds how many records a listing can map back to their owner.
// A listed tool whose record was overwritten (ringSize later starts) is
// counted as unchecked rather than guessed at; it keeps the loadgen's own
// memory flat, which invariant 7 measures.
const ringSize = 1 << 13

// recordRing maps consumer ids to records for the most recent starts.
type recordRing struct {
	slots [ringSize]atomic.Pointer[record]
}

func (r *recordRing) put(rec *record) { r.slots[rec.id%ringSize].Store(rec) }

func (r *recordRing) get(id uint64) *record {
	rec := r.slots[id%ringSize].Load()
	if rec == nil || rec.id != id {
		return nil
	}
	return rec
}

// credClass is the kind of credential a call presents.
type credClass uint8

const (
	credValid   credClass = iota // holds the role non-public plans need
	credNone                     // no credential at all
	credNoRole                   // authenticated, without the role
	credExpired                  // authenticated, expired
	credBogus                    // unknown to the authenticator
	numCreds
)

var credNames = [numCreds]string{"valid", "none", "norole", "expired", "bogus"}
var credTokens = [numCreds]string{tokenValid, "", tokenNoRole, tokenExpired, tokenBogus}

func (c credClass) String() string { return credNames[c] }
func (c credClass) token() string  { return credTokens[c] }

// callArgs is what every call carries to the route body, so that the body
// can check the call against its owner's death and its plan.
type callArgs struct {
	Seq   uint64 `json:"seq"`             // the clock when the call began
	Cred  string `json:"cred"`            // the credClass the caller presented
	Panic uint64 `json:"panic,omitempty"` // panic if the body's consumer has this id
	Probe uint64 `json:"probe,omitempty"` // a nonce the body records
	Ask   bool   `json:"ask,omitempty"`   // the body asks its caller first (invariant 17)
	Task  uint64 `json:"task,omitempty"`  // a task's nonce: the body notes its consumer (invariant 18)
}

// encodeArgs builds the JSON of callArgs without reflection: it is on the
// resolvers' hot path.
func encodeArgs(seq uint64, cred credClass, panicID, probe uint64) []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"cred":"`...)
	b = append(b, cred.String()...)
	b = append(b, '"')
	if panicID != 0 {
		b = append(b, `,"panic":`...)
		b = strconv.AppendUint(b, panicID, 10)
	}
	if probe != 0 {
		b = append(b, `,"probe":`...)
		b = strconv.AppendUint(b, probe, 10)
	}
	return append(b, '}')
}

// withTask adds a task's nonce to arguments encodeArgs built.
func withTask(args []byte, nonce uint64) []byte {
	return append(strconv.AppendUint(append(args[:len(args)-1], `,"task":`...), nonce, 10), '}')
}

// withAsk adds "ask":true to arguments encodeArgs built.
func withAsk(args []byte) []byte {
	return append(args[:len(args)-1], `,"ask":true}`...)
}

// decodeArgs reads what encodeArgs wrote without reflection, in the order
// it wrote it; anything else (arguments a client re-encoded) goes through
// encoding/json.
func decodeArgs(raw []byte, a *callArgs) error {
	if fastDecodeArgs(raw, a) {
		return nil
	}
	*a = callArgs{}
	return json.Unmarshal(raw, a)
}

func fastDecodeArgs(b []byte, a *callArgs) bool {
	num := func(key string) (uint64, bool) {
		if !bytes.HasPrefix(b, []byte(key)) {
			return 0, false
		}
		b = b[len(key):]
		i := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		n, err := strconv.ParseUint(string(b[:i]), 10, 64)
		b = b[i:]
		return n, err == nil
	}
	var ok bool
	if a.Seq, ok = num(`{"seq":`); !ok || !bytes.HasPrefix(b, []byte(`,"cred":"`)) {
		return false
	}
	b = b[len(`,"cred":"`):]
	end := bytes.IndexByte(b, '"')
	if end < 0 {
		return false
	}
	a.Cred, b = string(b[:end]), b[end+1:]
	if bytes.HasPrefix(b, []byte(`,"panic":`)) {
		if a.Panic, ok = num(`,"panic":`); !ok {
			return false
		}
	}
	if bytes.HasPrefix(b, []byte(`,"probe":`)) {
		if a.Probe, ok = num(`,"probe":`); !ok {
			return false
		}
	}
	return string(b) == "}"
}
