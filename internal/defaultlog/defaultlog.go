// Package defaultlog is the logger simba's packages use when they are given none: records
// of level Warn and above go to the process's default logger (slog.Default, as it is when
// the record is made), the rest nowhere. Failures, refusals and lost ownership thus show
// in the application's own log without any set-up, while acquisitions, renewals and
// lifecycle changes do not.
package defaultlog

import (
	"context"
	"log/slog"
)

// New returns the default logger.
func New() *slog.Logger { return slog.New(processWarnings{}) }

// processWarnings hands records of level Warn and above to slog.Default's handler.
type processWarnings struct {
	with []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (h processWarnings) handler() slog.Handler {
	out := slog.Default().Handler()
	for _, w := range h.with {
		out = w(out)
	}
	return out
}

func (h processWarnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (h processWarnings) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h processWarnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.and(func(o slog.Handler) slog.Handler { return o.WithAttrs(attrs) })
}

func (h processWarnings) WithGroup(name string) slog.Handler {
	return h.and(func(o slog.Handler) slog.Handler { return o.WithGroup(name) })
}

func (h processWarnings) and(w func(slog.Handler) slog.Handler) processWarnings {
	return processWarnings{with: append(h.with[:len(h.with):len(h.with)], w)}
}
