package etcdfleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/shardreg"
)

// DefaultPeerPath is the path a record's endpoint must end in when
// Config.PeerPath is empty: package mcpserve's DefaultFleetPath, where a
// replica serves the calls the others forward.
const DefaultPeerPath = "/fleet"

// kinds maps a key's directory to the kind its records must name.
var kinds = map[string]catalog.Kind{"tools": catalog.KindTool, "resources": catalog.KindResource, "prompts": catalog.KindPrompt, "templates": catalog.KindTemplate,
	"replicas": KindReplica}

// peers is the parsed Config.Peers: the hosts a record's endpoint may
// name. Immutable once built.
type peers struct {
	any   bool
	nets  []netip.Prefix
	names map[string]bool // lower case
}

// parsePeers parses Config.Peers: each a CIDR, an IP address or a host
// name. Empty means any host.
func parsePeers(list []string) (peers, error) {
	p := peers{any: len(list) == 0, names: map[string]bool{}}
	for _, s := range list {
		if pre, err := netip.ParsePrefix(s); err == nil {
			p.nets = append(p.nets, pre.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" {
			ip = ip.Unmap()
			p.nets = append(p.nets, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		if !hostName(s) {
			return peers{}, fmt.Errorf("peer %s: neither a CIDR, an IP address nor a host name", quoted(s))
		}
		p.names[strings.ToLower(strings.TrimSuffix(s, "."))] = true
	}
	return p, nil
}

// hostName accepts a DNS name: dot-separated labels of letters, digits and
// '-', none empty, at most 253 bytes (a trailing dot allowed).
func hostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// allows reports whether host (a URL's Hostname) is an allowed peer: an
// IP address in one of the CIDRs, or a name equal, ignoring case, to one
// of the names. No name is ever resolved.
func (p peers) allows(host string) bool {
	if p.any {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return false
		}
		ip = ip.Unmap()
		for _, n := range p.nets {
			if n.Contains(ip) {
				return true
			}
		}
		return false
	}
	return p.names[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// checkPeerEndpoint checks a record's endpoint: empty (the route is not
// forwarded to), or an http or https URL without user info, query or
// fragment, whose path ends in peerPath and whose host p allows.
func checkPeerEndpoint(ep, peerPath string, p peers) error {
	if ep == "" {
		return nil
	}
	if len(ep) > maxPrefixBytes || !printable(ep) {
		return fmt.Errorf("endpoint: not printable UTF-8 of at most %d bytes", maxPrefixBytes)
	}
	u, err := url.Parse(ep)
	switch {
	case err != nil:
		return errors.New("endpoint: not a URL")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return errors.New("endpoint: not an http or https URL with a host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return errors.New("endpoint: user info, a query or a fragment")
	case !strings.HasSuffix(u.Path, peerPath) || u.RawPath != "":
		return fmt.Errorf("endpoint: the path does not end in %s", peerPath)
	case !p.allows(u.Hostname()):
		return errors.New("endpoint: a host Config.Peers does not allow")
	}
	return nil
}

// normalEndpoint returns ep in a form in which two spellings of one
// endpoint are equal: scheme and host in lower case, the default port
// explicit. It is "" for an endpoint that does not parse.
func normalEndpoint(ep string) string {
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	return scheme + "://" + host + ":" + port + u.EscapedPath()
}

// validRecord checks that rec is a valid route for key under prefix: the
// key names a kind's directory and a name in canonical escaping, rec's
// kind is that directory's, its descriptor is that kind's alone and names
// the key's name, a tool name, a resource URI, a prompt and a template
// pass the rules a local start applies (shardreg.ToolName,
// shardreg.ResourceURI, catalog.CheckPrompt, catalog.TemplateKey), a
// tool's schemas are JSON objects, and its endpoint passes
// checkPeerEndpoint. Errors wrap
// errInvalidRecord and quote nothing the record holds beyond truncation.
func validRecord(prefix, key string, rec Record, peerPath string, p peers) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errInvalidRecord}, args...)...)
	}
	rest, ok := strings.CutPrefix(key, prefix+"/")
	if !ok {
		return bad("a key outside the prefix")
	}
	dir, esc, ok := strings.Cut(rest, "/")
	kind := kinds[dir]
	if !ok || kind == "" {
		return bad("a key in no kind's directory")
	}
	name, err := url.PathUnescape(esc)
	if err != nil || name == "" || url.PathEscape(name) != esc || len(name) > shardreg.MaxNameLen || !utf8.ValidString(name) {
		return bad("a key whose name is not canonically escaped")
	}
	if rec.Kind != kind {
		return bad("kind %s in a %s key", quoted(string(rec.Kind)), kind)
	}
	if rec.Replica == "" || len(rec.Replica) > maxReplicaBytes || !printable(rec.Replica) {
		return bad("a replica name that is not printable UTF-8 of at most %d bytes", maxReplicaBytes)
	}
	if (kind == KindReplica) != (rec.Incarnation != "") {
		return bad("an incarnation in a record that is not a replica's membership, or none in one")
	}
	if kind != KindReplica && (rec.Seq != 0 || rec.Every != 0) || rec.Every < 0 {
		return bad("a renewal in a record that is not a replica's membership")
	}
	switch kind {
	case KindReplica:
		switch {
		case rec.descriptors() != 0:
			return bad("a membership with a descriptor")
		case rec.Replica != name:
			return bad("a membership under another replica's name")
		case len(rec.Incarnation) > maxIncarnationBytes || !printable(rec.Incarnation):
			return bad("an incarnation that is not printable UTF-8 of at most %d bytes", maxIncarnationBytes)
		}
	case catalog.KindTool:
		t := rec.Tool
		switch {
		case t == nil || rec.descriptors() != 1:
			return bad("a tool key without a tool descriptor alone")
		case t.Name != name:
			return bad("a tool descriptor for another name than its key's")
		}
		if err := shardreg.ToolName(name); err != nil {
			return bad("tool name: %w", err)
		}
		if len(t.InputSchema) > 0 && !objectSchema(t.InputSchema) {
			return bad(`inputSchema is not a JSON object of "type": "object"`)
		}
		if len(t.OutputSchema) > 0 && !jsonObject(t.OutputSchema) {
			return bad("outputSchema is not a JSON object")
		}
	case catalog.KindResource:
		d := rec.Resource
		switch {
		case d == nil || rec.descriptors() != 1:
			return bad("a resource key without a resource descriptor alone")
		case d.URI != name:
			return bad("a resource descriptor for another URI than its key's")
		}
		if err := shardreg.ResourceURI(name); err != nil {
			return bad("resource URI: not absolute")
		}
	case catalog.KindPrompt:
		if err := validPrompt(name, rec); err != nil {
			return bad("%w", err)
		}
	case catalog.KindTemplate:
		if err := validTemplate(name, rec); err != nil {
			return bad("%w", err)
		}
	}
	if err := checkPeerEndpoint(rec.Endpoint, peerPath, p); err != nil {
		return bad("%w", err)
	}
	return nil
}

// descriptors counts the descriptors rec carries: a route's record has
// exactly one, its kind's; a membership none.
func (rec *Record) descriptors() int {
	n := 0
	for _, set := range []bool{rec.Tool != nil, rec.Resource != nil, rec.Prompt != nil, rec.Template != nil} {
		if set {
			n++
		}
	}
	return n
}

// validPrompt checks a prompt key's record: its descriptor alone, for the
// key's name, which StartPrompt would accept (catalog.CheckPrompt: the
// name, and arguments each named, no two alike).
func validPrompt(name string, rec Record) error {
	p := rec.Prompt
	switch {
	case p == nil || rec.descriptors() != 1:
		return errors.New("a prompt key without a prompt descriptor alone")
	case p.Name != name:
		return errors.New("a prompt descriptor for another name than its key's")
	}
	args := make([]catalog.PromptArgument, len(p.Arguments))
	for i, a := range p.Arguments {
		args[i] = catalog.PromptArgument{Name: a.Name}
	}
	if err := catalog.CheckPrompt(catalog.Prompt{Name: p.Name, Arguments: args}); err != nil {
		return fmt.Errorf("prompt: %w", err)
	}
	return nil
}

// validTemplate checks a template key's record: its descriptor alone,
// whose URI template StartResourceTemplate would accept and whose key
// (catalog.TemplateKey) is the key's name, so that one template has one
// key fleet-wide.
func validTemplate(name string, rec Record) error {
	d := rec.Template
	switch {
	case d == nil || rec.descriptors() != 1:
		return errors.New("a template key without a template descriptor alone")
	case len(d.URITemplate) > shardreg.MaxNameLen:
		return errors.New("a URI template that is too long")
	}
	key, err := catalog.TemplateKey(d.URITemplate)
	switch {
	case err != nil:
		return errors.New("a URI template a local start would refuse")
	case key != name:
		return errors.New("a template descriptor for another key than its key's")
	}
	return nil
}

func jsonObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// objectSchema reports whether raw is a JSON object whose "type" is
// "object", as MCP requires of a tool's input schema (a client such as
// the TypeScript SDK refuses a whole listing that holds another).
func objectSchema(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return false
	}
	var typ string
	return json.Unmarshal(obj["type"], &typ) == nil && typ == "object"
}

// checkTrust checks the fields that decide what a replica believes, and
// fills in PeerPath's default. Its errors never quote a token.
func (cfg *Config) checkTrust() error {
	if len(cfg.Token) < MinTokenBytes {
		return fmt.Errorf("%w: a fleet Token of %d bytes; at least %d", ErrInvalidConfig, len(cfg.Token), MinTokenBytes)
	}
	for i, t := range cfg.PreviousTokens {
		if len(t) < MinTokenBytes {
			return fmt.Errorf("%w: PreviousTokens[%d] has %d bytes; at least %d", ErrInvalidConfig, i, len(t), MinTokenBytes)
		}
	}
	if cfg.PeerPath == "" {
		cfg.PeerPath = DefaultPeerPath
	}
	pp := cfg.PeerPath
	if pp[0] != '/' || len(pp) > maxPrefixBytes || !printable(pp) || strings.ContainsAny(pp, "?#%") {
		return fmt.Errorf("%w: PeerPath %s: want an absolute URL path", ErrInvalidConfig, quoted(pp))
	}
	p, err := parsePeers(cfg.Peers)
	if err != nil {
		return fmt.Errorf("%w: Peers: %w", ErrInvalidConfig, err)
	}
	// A replica whose own records the others would drop is a mistake
	// better refused at Join than found as routes nobody lists.
	if err := checkPeerEndpoint(cfg.Advertise, pp, p); err != nil {
		return fmt.Errorf("%w: advertised %s", ErrInvalidConfig, err)
	}
	return nil
}

// quoted quotes s for an error or a log line, cut to 64 bytes: keys, kinds
// and names come from etcd, where any holder of write access may put them.
// The same rule as the core's, restated: a module may not import another
// module's internal packages.
func quoted(s string) string {
	const most = 64
	if len(s) > most {
		return fmt.Sprintf("%q...(%d bytes)", s[:most], len(s))
	}
	return fmt.Sprintf("%q", s)
}
