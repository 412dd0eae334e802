package notify

import (
	"io"
	"log/slog"
	"strings"
	"time"
)

// NewJSONLogger is the logger every runtime writes with: JSON lines (log/slog) at level, with
// durations in milliseconds (DurationsInMillis).
func NewJSONLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: DurationsInMillis}))
}

// DurationsInMillis is a slog ReplaceAttr that writes every time.Duration attribute as
// "<key>_ms", a number of milliseconds (fractional below one): slog's JSON handler would write a
// bare count of nanoseconds, which a reader — or a log query — takes for anything but that. Code
// logs durations as time.Duration ("retry_in", delay) and the handler names the unit once for all.
func DurationsInMillis(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	key := a.Key
	if !strings.HasSuffix(key, "_ms") {
		key += "_ms"
	}
	return slog.Float64(key, Millis(a.Value.Duration()))
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
