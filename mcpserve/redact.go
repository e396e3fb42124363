package mcpserve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
)

// redactedKeys are the log attributes whose values are replaced by a
// fingerprint: the SDK logs session IDs ("session_id") at INFO, and on an
// unbound session its ID is all a client needs to use or end it.
var redactedKeys = map[string]bool{"session_id": true, "sessionID": true, "session": true}

// redactSessionIDs wraps h so that session IDs never reach it. Each is
// replaced by the first 12 hex digits of its SHA-256, enough to correlate
// the lines of one session and useless for addressing it.
func redactSessionIDs(h slog.Handler) slog.Handler {
	if r, ok := h.(redactor); ok {
		return r
	}
	return redactor{h}
}

type redactor struct{ next slog.Handler }

func (r redactor) Enabled(ctx context.Context, l slog.Level) bool { return r.next.Enabled(ctx, l) }

func (r redactor) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return r.next.Handle(ctx, out)
}

func (r redactor) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redactor{r.next.WithAttrs(red)}
}

func (r redactor) WithGroup(name string) slog.Handler { return redactor{r.next.WithGroup(name)} }

func redactAttr(a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindGroup {
		g := a.Value.Group()
		red := make([]slog.Attr, len(g))
		for i, x := range g {
			red[i] = redactAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	}
	if !redactedKeys[a.Key] {
		return a
	}
	id := a.Value.Resolve().String()
	if id == "" {
		return a
	}
	sum := sha256.Sum256([]byte(id))
	return slog.String(a.Key, "sha256:"+hex.EncodeToString(sum[:6]))
}
