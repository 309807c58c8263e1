package simba

import (
	"context"
	"log/slog"
)

// processWarnings is the handler of the default logger: it hands records of level Warn and
// above to the process's default logger (slog.Default, as it is when the record is made)
// and drops the rest. Failures and losses thus show without any set-up, in the
// application's own log, while acquisitions, renewals and lifecycle changes do not.
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
