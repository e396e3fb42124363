package catalog

// Kind is a kind of route: each kind is a namespace of its own, with its
// own cap, listing and change version. Its value is the kind's name as
// errors, logs and a fleet's records spell it.
type Kind string

// The kinds of route a catalog holds.
const (
	KindTool     Kind = "tool"              // tools, by name
	KindResource Kind = "resource"          // fixed resources, by URI
	KindPrompt   Kind = "prompt"            // prompts, by name
	KindTemplate Kind = "resource template" // resource templates, by URI template
)
