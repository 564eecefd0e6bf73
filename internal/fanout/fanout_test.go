package fanout

import "testing"

func TestHub(t *testing.T) {
	h := New[int](2)
	a, cancelA := h.Subscribe()
	b, cancelB := h.Subscribe()
	for i := 1; i <= 3; i++ {
		if missed := h.Publish(i); missed != map[int]int{1: 0, 2: 0, 3: 2}[i] {
			t.Errorf("Publish(%d) missed %d", i, missed)
		}
	}
	for _, c := range []<-chan int{a, b} {
		if x, y := <-c, <-c; x != 1 || y != 2 {
			t.Errorf("got %d, %d; want 1, 2 (3 missed: the buffer was full)", x, y)
		}
	}
	cancelA()
	if _, ok := <-a; ok {
		t.Error("a cancelled subscription's channel is not closed")
	}
	cancelA() // twice is harmless
	if missed := h.Publish(4); missed != 0 {
		t.Errorf("a cancelled subscriber still counts: missed %d", missed)
	}
	h.Close()
	if v, ok := <-b; !ok || v != 4 {
		t.Errorf("b: %d %v, want the value sent before Close", v, ok)
	}
	if _, ok := <-b; ok {
		t.Error("Close left a channel open")
	}
	cancelB()
	c, _ := h.Subscribe()
	if _, ok := <-c; ok {
		t.Error("a subscription after Close is open")
	}
	if missed := h.Publish(5); missed != 0 {
		t.Errorf("Publish after Close: missed %d", missed)
	}
}
