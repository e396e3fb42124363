package catalog

import (
	"context"
	"fmt"
	"slices"
)

// A task's body asks its caller as any body does (Ask, Call.Elicit,
// Call.Sample), when the caller of StartTask said it answers in rounds:
// its Client's Round, whose Elicitation, Sampling and Roots say what it
// can answer. The task then reads TaskInputRequired, with the open
// questions, and the body waits, bounded by its context, until
// UpdateTask has answered them all; partial answers leave the task
// input_required with only the questions still open. A task whose caller
// answers nothing gets a *CapabilityError, as a call does.

// taskAsk is the asking side of one task.
type taskAsk struct {
	t    *task
	s    *taskStore
	caps Round // only its Elicitation, Sampling and Roots
}

func (a *taskAsk) offers(capability string) bool {
	switch capability {
	case capElicitation:
		return a.caps.Elicitation
	case capSampling:
		return a.caps.Sampling
	default:
		return a.caps.Roots
	}
}

// ask makes reqs the task's open questions, if they have no answers yet,
// and waits for UpdateTask to answer them.
func (a *taskAsk) ask(ctx context.Context, reqs []InputRequest) ([]InputResponse, error) {
	t := a.t
	for {
		a.s.mu.Lock()
		t.mu.Lock()
		if t.status != TaskWorking && t.status != TaskInputRequired {
			t.mu.Unlock()
			a.s.mu.Unlock()
			return nil, fmt.Errorf("catalog: task %s ended while it asked: %w", t.id, context.Canceled)
		}
		out := make([]InputResponse, len(reqs))
		missing, asked := false, false
		for i := range reqs {
			ans, ok := t.answers[reqs[i].Key]
			if !ok || !reqs[i].answers(ans) {
				missing = true
				if !slices.ContainsFunc(t.asked, func(q InputRequest) bool { return q.Key == reqs[i].Key }) {
					t.asked = append(t.asked, reqs[i])
					asked = true
				}
				continue
			}
			out[i] = ans
		}
		if !missing {
			t.mu.Unlock()
			a.s.mu.Unlock()
			return out, nil
		}
		if t.status != TaskInputRequired {
			t.status, t.updated = TaskInputRequired, a.s.now()
			asked = true
		}
		if asked {
			t.changedLocked()
		}
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		wake := t.wake
		t.mu.Unlock()
		a.s.mu.Unlock()
		select {
		case <-wake:
		case <-t.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// UpdateTask answers the open questions of the task id, as credential
// may see it: an answer whose key is an open question's and of its kind
// is kept, others are ignored. Once every open question has its answer
// the task reads working again and its body goes on; until then it reads
// input_required with the questions still open. A task that is not
// waiting for input is left as it is. Errors: ErrNotFound, as for
// GetTask.
func (c *Catalog) UpdateTask(id, credential string, answers map[string]InputResponse) error {
	t, err := c.tasks.find(id, credential)
	if err != nil {
		return err
	}
	s := c.tasks
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status != TaskInputRequired {
		return nil
	}
	open := t.asked[:0]
	for _, q := range t.asked {
		if ans, ok := answers[q.Key]; ok && q.answers(ans) {
			if t.answers == nil {
				t.answers = map[string]InputResponse{}
			}
			t.answers[q.Key] = ans
			continue
		}
		open = append(open, q)
	}
	if len(open) < len(t.asked) {
		t.changedLocked() // an answer closed a question
	}
	t.asked = open
	t.updated = s.now()
	if len(open) == 0 {
		t.status = TaskWorking
	}
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
	return nil
}

// taskClient is the Client of a task's body: the StartTask caller's
// reports, and questions asked through the task when its Round says so.
func (s *taskStore) taskClient(t *task, from *Client) *Client {
	var cl Client
	if from != nil {
		cl = *from
	}
	cl.Round = nil
	if from != nil && from.Round != nil {
		r := from.Round
		cl.task = &taskAsk{t: t, s: s, caps: Round{Elicitation: r.Elicitation, Sampling: r.Sampling, Roots: r.Roots}}
		cl.Sample, cl.Elicit, cl.ListRoots = nil, nil, nil
	}
	return &cl
}
