package inproc

import (
	"math/rand/v2"
	"testing"
)

// TestWeighted: a value is drawn about as often as its weight says, one of
// weight 0 never, and none when every weight is 0.
func TestWeighted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	values := []string{"a", "b", "c", "d"}
	tests := []struct {
		weights []int
		want    map[string]float64 // share of draws
	}{
		{[]int{1, 0, 0, 0}, map[string]float64{"a": 1}},
		{[]int{0, 0, 0, 3}, map[string]float64{"d": 1}},
		{[]int{1, 1, 0, 2}, map[string]float64{"a": 0.25, "b": 0.25, "d": 0.5}},
		{[]int{0, 0, 0, 0}, map[string]float64{"none": 1}},
	}
	const draws = 20000
	for _, tt := range tests {
		got := map[string]int{}
		for range draws {
			got[weighted(rng, "none", tt.weights, values)]++
		}
		for v, n := range got {
			share, ok := tt.want[v]
			if !ok {
				t.Errorf("weights %v: drew %q %d times, want never", tt.weights, v, n)
				continue
			}
			if f := float64(n) / draws; f < share-0.02 || f > share+0.02 {
				t.Errorf("weights %v: drew %q in %.3f of draws, want %.2f", tt.weights, v, f, share)
			}
		}
	}
}
