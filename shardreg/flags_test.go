package shardreg_test

import "flag"

// long runs the model-based and linearizability checks at length:
// go test ./shardreg -long.
var long = flag.Bool("long", false, "run the model-based and linearizability checks at length")
