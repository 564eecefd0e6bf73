package logbuf

import (
	"fmt"
	"sync"
	"testing"
)

func TestCount(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(&b, "level=WARN msg=%q n=%d\n", "upstream unhealthy", i%2)
		}()
	}
	wg.Wait()
	for _, c := range []struct {
		sub  []string
		want int
	}{
		{[]string{"upstream unhealthy"}, 10},
		{[]string{"WARN", "n=1"}, 5},
		{[]string{"ERROR"}, 0},
	} {
		if got := b.Count(c.sub...); got != c.want {
			t.Errorf("Count(%q) = %d, want %d", c.sub, got, c.want)
		}
	}
}
