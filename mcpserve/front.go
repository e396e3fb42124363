package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
)

// sessionIDHeader is the streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// Binding keys: what a session is bound to. A key never contains a
// credential, only the subject it authenticated as.
const (
	anonymousKey = "anonymous"
	subjectKey   = "subject:"
)

// serveHTTP is the front of the streamable HTTP handler. Before the SDK
// sees a request it
//
//   - refuses one that carries more than one Authorization header (400): a
//     proxy in front might judge the other one than the catalog would;
//   - with sessions bound (an authenticator, the default credential, a
//     stateful handler), refuses a request on a session that the same
//     principal did not create (403), so that nobody else can use or end
//     it, and an unknown session (404);
//   - ends the calls in flight on a session that its principal DELETEs, so
//     that the SDK's session close, which waits for them, does not hang;
//   - numbers each POST in requestHeader, so that a call's context ends
//     with the request that carried it.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values("Authorization")) > 1 {
		http.Error(w, "Bad Request: more than one Authorization header", http.StatusBadRequest)
		return
	}
	r.Header.Del(requestHeader)
	principal, err := s.bindingKey(r)
	if err != nil {
		s.logAuthPanic(err, "http")
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	if id := r.Header.Get(sessionIDHeader); id != "" && s.bind {
		sc, ok := s.calls.sessionByID(id)
		if !ok {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if sc.principal != principal {
			http.Error(w, "Forbidden: the session belongs to another principal", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodDelete {
			sc.cancel(errSessionEnded)
		}
	} else if id != "" && r.Method == http.MethodDelete {
		// Unbound sessions: anyone may end one, as the SDK allows.
		if sc, ok := s.calls.sessionByID(id); ok {
			sc.cancel(errSessionEnded)
		}
	}
	if r.Method == http.MethodPost {
		n, done := s.calls.openRequest(r.Context(), principal)
		defer done()
		r.Header.Set(requestHeader, n)
	}
	s.sdkHandler.ServeHTTP(w, r)
}

// bindingKey returns what a request's session is bound to: "" when
// sessions are not bound, otherwise the subject the request's bearer token
// authenticates as, or anonymousKey for no token or an unknown one. An
// authenticator that panics is an error.
func (s *Server) bindingKey(r *http.Request) (string, error) {
	if !s.bind {
		return "", nil
	}
	cred := bearer(r.Header)
	if cred == "" {
		return anonymousKey, nil
	}
	pr, err := bindsec.Authenticate(r.Context(), s.cat.Authenticator(), cred)
	switch {
	case errors.Is(err, bindsec.ErrAuthenticatorPanicked):
		return "", err
	case err != nil:
		return anonymousKey, nil
	}
	return subjectKey + pr.Subject(), nil
}

// sessionCreated records the principal that created ss, from the HTTP
// request that carried its initialize.
func (s *Server) sessionCreated(req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	principal := ""
	if ex := req.GetExtra(); ex != nil {
		if hr, _ := s.calls.request(ex.Header); hr != nil {
			principal = hr.principal
		}
	}
	s.calls.session(ss, principal)
}

// logAuthPanic logs an authenticator's panic. It logs the panic value only
// when it is a runtime error, whose text the runtime wrote: any other value
// may quote the credential the authenticator was given.
func (s *Server) logAuthPanic(err error, where string) {
	var p *bindsec.AuthenticatorPanic
	if !errors.As(err, &p) {
		s.log.Error("mcpserve: authentication failed", "where", where, "err", err)
		return
	}
	value := fmt.Sprintf("a %T (not shown: it may quote the credential)", p.Value)
	if re, ok := p.Value.(runtime.Error); ok {
		value = re.Error()
	}
	s.log.Error("mcpserve: the authenticator panicked; the request was refused", "where", where,
		"panic", value, "stack", string(p.Stack))
}

// closeBounded closes the sessions given, after ending their calls, and
// waits at most until ctx ends. A session whose body ignores its context
// finishes closing in the background once the body returns.
func (s *Server) closeBounded(ctx context.Context, sessions []*mcp.ServerSession) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		closed := make(chan struct{}, len(sessions))
		for _, ss := range sessions {
			go func() { _ = ss.Close(); closed <- struct{}{} }()
		}
		for range sessions {
			<-closed
		}
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		s.log.Warn("mcpserve: sessions still closing after the bound; a route body is ignoring its context",
			"sessions", len(sessions))
		return false
	}
}
