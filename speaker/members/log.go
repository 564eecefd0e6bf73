package members

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
)

// logWriter turns memberlist's log lines ("[WARN] memberlist: ...") into
// slog records at the matching level.
type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := string(line)
		level := slog.LevelInfo
		if strings.HasPrefix(s, "[") {
			if i := strings.IndexByte(s, ']'); i > 0 {
				switch s[1:i] {
				case "DEBUG", "TRACE":
					level = slog.LevelDebug
				case "WARN":
					level = slog.LevelWarn
				case "ERR", "ERROR":
					level = slog.LevelError
				}
				s = strings.TrimSpace(s[i+1:])
			}
		}
		s = strings.TrimPrefix(s, "memberlist: ")
		w.l.Log(context.Background(), level, s)
	}
	return len(p), nil
}
