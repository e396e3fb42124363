package inproc

import (
	"context"
	"fmt"
	"io"
	"time"
)

// progress rewrites one status line on a terminal until ctx ends: elapsed
// time, throughput, errors and violations so far.
func (w *world) progress(ctx context.Context, out io.Writer, began time.Time) {
	tk := time.NewTicker(progressInterval)
	defer tk.Stop()
	var lastCalls int64
	last := began
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tk.C:
			var calls int64
			for o := range numOutcomes {
				calls += w.outcomes[o].Load() + w.mcpOutcomes[o].Load() + w.kindOutcomes[kindPrompt][o].Load() + w.kindOutcomes[kindTemplate][o].Load() + w.kindOutcomes[kindResource][o].Load()
			}
			rate := float64(calls-lastCalls) / now.Sub(last).Seconds()
			lastCalls, last = calls, now
			fmt.Fprintf(out, "\r\033[K%6.1fs  calls %d (%.0f/s)  starts %d  deaths %d  errors %d  violations %d",
				now.Sub(began).Seconds(), calls, rate, w.starts.Load(), w.totalDeaths(), w.t.Errors(), totalViolations(w.t))
		}
	}
}

func (w *world) totalDeaths() int64 {
	var n int64
	for sh := range numShapes {
		n += w.deaths[sh].Load()
	}
	return n
}
