package catalog

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/yosida95/uritemplate/v3"

	"github.com/livereg/livereg/internal/quote"
)

// rawTemplate returns the template that matches the percent-escaped form
// of a URI (every '%' written "%25") and so yields its variables as they
// were sent, not decoded: t itself when its literal text holds no '%',
// otherwise t with each literal '%' escaped the same way.
func rawTemplate(raw string, t *uritemplate.Template) (*uritemplate.Template, error) {
	var b strings.Builder
	escaped := false
	for rest := raw; rest != ""; {
		lit, expr, found := strings.Cut(rest, "{")
		if strings.Contains(lit, "%") {
			escaped = true
			lit = strings.ReplaceAll(lit, "%", "%25")
		}
		b.WriteString(lit)
		if !found {
			break
		}
		expr, rest, _ = strings.Cut(expr, "}")
		b.WriteString("{" + expr + "}")
	}
	if !escaped {
		return t, nil
	}
	return uritemplate.New(b.String())
}

// values flattens uritemplate's values: a list-valued variable joined with
// commas.
func values(vals uritemplate.Values) map[string]string {
	out := make(map[string]string, len(vals))
	for name, v := range vals {
		if v.T == uritemplate.ValueTypeString {
			out[name] = v.String()
		} else {
			out[name] = strings.Join(v.V, ",")
		}
	}
	return out
}

// rawVars returns the variables of uri, which t matched with the decoded
// values dec, as they were sent. A URI without '%' is its own raw form,
// and costs nothing more; one with '%' is matched a second time, escaped.
func (t *templateRoute) rawVars(uri string, dec map[string]string) map[string]string {
	if !strings.Contains(uri, "%") {
		return dec
	}
	vals := t.rawTmpl.Match(strings.ReplaceAll(uri, "%", "%25"))
	if vals == nil {
		// Not expected: the escaped URI matches whenever the URI does.
		return nil
	}
	return values(vals)
}

// checkVars refuses, unless the template allows raw bytes, a decoded
// variable holding a NUL byte or invalid UTF-8: a body that passes it on
// to a file system, a C library or a log could be fooled by either.
func (t *templateRoute) checkVars(dec map[string]string) error {
	if t.tpl.AllowRawBytes {
		return nil
	}
	for name, v := range dec {
		var what string
		switch {
		case strings.IndexByte(v, 0) >= 0:
			what = "a NUL byte"
		case !utf8.ValidString(v):
			what = "invalid UTF-8"
		default:
			continue
		}
		return fmt.Errorf("catalog: resource template %s: %w: variable %s decodes to %s (the template does not allow raw bytes)",
			quote.Name(t.tpl.URITemplate), ErrInvalidArguments, quote.Name(name), what)
	}
	return nil
}
