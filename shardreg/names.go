package shardreg

import (
	"errors"
	"fmt"
	"net/url"
	"unicode/utf8"
)

// MaxNameLen is the longest name, in bytes, any registry accepts.
const MaxNameLen = 4096

// MaxToolNameLen is the longest tool name [ToolName] accepts, in characters.
const MaxToolNameLen = 128

// checkName applies the built-in checks and the validator.
func (r *Registry[V]) checkName(name string) error {
	var reason error
	switch {
	case name == "":
		reason = errors.New("empty")
	case len(name) > MaxNameLen:
		reason = fmt.Errorf("%d bytes, longer than %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		reason = errors.New("not valid UTF-8")
	case r.validate != nil:
		reason = r.validate(name)
	}
	if reason != nil {
		return fmt.Errorf("%w: %w", ErrInvalidName, reason)
	}
	return nil
}

// ToolName checks the MCP tool-name rule: 1 to 128 characters, each an
// ASCII letter, digit, '_', '-' or '.'. Use it with WithValidator for a
// registry of tools.
func ToolName(name string) error {
	if name == "" || len(name) > MaxToolNameLen {
		return fmt.Errorf("tool names have 1 to %d characters, this one has %d", MaxToolNameLen, utf8.RuneCountInString(name))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !toolNameByte(c) {
			return fmt.Errorf("tool names use only A-Z a-z 0-9 _ - . (byte %d is %q)", i, c)
		}
	}
	return nil
}

func toolNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}

// ResourceURI checks that a name is an absolute URI with a scheme, as
// net/url parses it. Use it with WithValidator for a registry of resources.
func ResourceURI(name string) error {
	u, err := url.Parse(name)
	if err != nil {
		return err
	}
	if u.Scheme == "" {
		return errors.New("resource URIs are absolute: a scheme is missing")
	}
	return nil
}

// Validate reports whether name could be registered: nil, or an error
// wrapping ErrInvalidName with the reason. It is what Register checks first.
func (r *Registry[V]) Validate(name string) error {
	if err := r.checkName(name); err != nil {
		return &Error{Op: "validate", Name: name, Err: err}
	}
	return nil
}
