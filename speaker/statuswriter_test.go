package speaker

import "testing"

// The queue holds only the newest job: a writer that was busy takes the
// latest plan's reports, not each one in turn.
func TestStatusQueueKeepsNewest(t *testing.T) {
	q := newStatusQueue()
	if j := q.take(); j != nil {
		t.Fatalf("empty queue gave %+v", j)
	}
	a, b := &statusJob{def: []string{"a"}}, &statusJob{def: []string{"b"}}
	q.put(a)
	q.put(b) // does not block on the full signal
	select {
	case <-q.ready:
	default:
		t.Fatal("no signal after put")
	}
	if j := q.take(); j != b {
		t.Fatalf("took %+v, want the newest job", j)
	}
	if j := q.take(); j != nil {
		t.Fatalf("second take gave %+v", j)
	}
}
