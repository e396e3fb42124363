package catalog_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
)

// A task counts against the share its call names, not its credential: a
// client that makes up a credential per task gets no more tasks, the
// anonymous shares together hold at most MaxAnonymousTasks, and an
// authenticated share is served beside them. A refusal holds nothing,
// and an expired task gives its share back.
func TestTaskShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCatalog(t, catalog.Config{MaxTasks: 10, MaxTasksPerCaller: 2, MaxAnonymousTasks: 3, TaskTTL: time.Minute})
		b := newBlocker()
		k, err := c.StartTool(bg, taskTool, public, b.body)
		require.NoError(t, err)
		defer k.Stop(bg)

		start := func(cred string, sh catalog.TaskShare) (*catalog.Task, error) {
			return c.StartTask(bg, "job", nil, cred, catalog.WithTaskShare(sh))
		}
		host1 := catalog.TaskShare{Key: "addr:192.0.2.1", Anonymous: true}
		host2 := catalog.TaskShare{Key: "addr:192.0.2.2", Anonymous: true}
		alice := catalog.TaskShare{Key: "subject:alice"}
		steps := []struct {
			cred  string
			share catalog.TaskShare
			ok    bool
		}{
			{"made-up-1", host1, true},
			{"made-up-2", host1, true},
			{"made-up-3", host1, false}, // host1's share is full, whatever the credential
			{"", host2, true},
			{"made-up-4", host2, false}, // the anonymous pool (3) is full
			{"alice-token", alice, true},
			{"alice-token-2", alice, true},
			{"alice-token", alice, false},
		}
		var first *catalog.Task
		for i, st := range steps {
			before := c.Stats().Tasks
			tk, err := start(st.cred, st.share)
			if !st.ok {
				require.ErrorIs(t, err, catalog.ErrTooManyTasks, "step %d", i)
				assert.Equal(t, before, c.Stats().Tasks, "step %d: a refusal holds nothing", i)
				continue
			}
			require.NoError(t, err, "step %d", i)
			if first == nil {
				first = tk
			}
		}
		assert.Equal(t, 5, c.Stats().Tasks.Held)

		// The task is still seen with its own credential alone.
		_, err = c.GetTask(first.ID(), "made-up-2")
		require.ErrorIs(t, err, catalog.ErrNotFound)
		require.NoError(t, c.CancelTask(first.ID(), "made-up-1"))
		// Ended, it still counts until it expires.
		_, err = start("made-up-5", host1)
		require.ErrorIs(t, err, catalog.ErrTooManyTasks)
		time.Sleep(time.Minute)
		_, err = start("made-up-5", host1)
		require.NoError(t, err, "an expired task gives back its share and the anonymous pool's unit")
		b.let()
	})
}

// At Config.MaxTaskLifetime a task's body is cancelled with
// ErrTaskLifetime as the cause, and the task ends failed with it, whether
// StartTask started it or a body detached into it. A task that ends
// before the bound is untouched by it.
func TestTaskLifetime(t *testing.T) {
	const life = time.Minute
	for _, how := range []string{"StartTask", "Detach"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCatalog(t, catalog.Config{MaxTaskLifetime: life})
				causes := make(chan error, 1)
				body := func(ctx context.Context) (catalog.Result, error) {
					<-ctx.Done()
					causes <- context.Cause(ctx)
					return catalog.Result{}, ctx.Err()
				}
				k, err := c.StartTool(bg, taskTool, public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
					if how == "Detach" {
						return call.Detach(ctx, body)
					}
					return body(ctx)
				})
				require.NoError(t, err)
				defer k.Stop(bg)

				var tk *catalog.Task
				if how == "Detach" {
					res, err := c.CallTool(bg, "job", nil, "alice", catalog.WithTasks())
					require.NoError(t, err)
					require.NotNil(t, res.Task)
					tk = res.Task
				} else {
					tk, err = c.StartTask(bg, "job", nil, "alice")
					require.NoError(t, err)
				}
				// Should the bound not hold, the task is ended here, so
				// that k.Stop does not wait on its body.
				defer func() { _ = c.CancelTask(tk.ID(), "alice") }()
				time.Sleep(life - time.Second)
				synctest.Wait()
				assert.Equal(t, catalog.TaskWorking, tk.Info().Status, "before the bound")

				time.Sleep(time.Second)
				synctest.Wait()
				info := tk.Info()
				assert.Equal(t, catalog.TaskFailed, info.Status)
				require.ErrorIs(t, info.Err, catalog.ErrTaskLifetime)
				select {
				case cause := <-causes:
					require.ErrorIs(t, cause, catalog.ErrTaskLifetime, "the body's context's cause")
				default:
					t.Fatal("the body's context did not end at the bound")
				}
			})
		})
	}
	t.Run("ended before", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{MaxTaskLifetime: life})
			b := newBlocker()
			k, err := c.StartTool(bg, taskTool, public, b.body)
			require.NoError(t, err)
			defer k.Stop(bg)
			tk := startTask(t, c, "alice")
			b.let()
			synctest.Wait()
			require.Equal(t, catalog.TaskCompleted, tk.Info().Status)
			time.Sleep(2 * life)
			synctest.Wait()
			assert.Equal(t, catalog.TaskCompleted, tk.Info().Status)
		})
	})
}
