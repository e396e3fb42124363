package owner

// Cause is how a token died: which of the paths in the package doc ended
// it. A server counts deaths by it, and a drop is worth a warning: a
// consumer that loses its token without Stop is almost always a bug.
type Cause uint8

const (
	// Alive: the token has not died.
	Alive Cause = iota
	// Released: Release, or a function from Releaser, killed it (a stop,
	// or a registry ending a consumer whose code unwound).
	Released
	// Cancelled: the context it was minted from is done.
	Cancelled
	// Dropped: it became unreachable and the garbage collector ended it.
	Dropped
)

var causeNames = [...]string{"alive", "released", "cancelled", "dropped"}

// String is the cause's name in lower case.
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "unknown"
}

// Cause reports how the token behind r died, or Alive while it lives (a
// dying token, which still reads alive, reports Alive too). The zero Ref,
// which is dead and was never minted, reports Released. Once a Ref reads
// dead, its Cause never changes. One atomic load.
func (r Ref) Cause() Cause {
	if r.c == nil {
		return Released
	}
	if r.c.state.Load() != stateDead {
		return Alive
	}
	return Cause(r.c.cause.Load())
}
