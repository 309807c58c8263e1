package redis

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// runner runs a backend's scripts as functions of the library (FCALL), loading it where
// the server lacks it; or by EVALSHA, for good, once the server has shown it cannot run
// the library: Redis before 7 (FCALL is an unknown command), an ACL user that may not
// FCALL or load it (NOPERM), or a load refused for another reason.
type runner struct {
	client goredis.UniversalClient
	log    *slog.Logger
	byEval atomic.Bool
}

// run runs s with keys and args, by FCALL or EVALSHA (see runner).
func (r *runner) run(ctx context.Context, s *script, keys keyList, args ...any) *goredis.Cmd {
	if r.byEval.Load() {
		return s.eval.Run(ctx, r.client, keys.strings(), args...)
	}
	cmd := r.fcall(ctx, s, keys, args)
	code, text := replyOf(cmd.Err())
	switch {
	case code == "ERR" && text == "Function not found":
		// A server that lost it (restarted without persistence, FUNCTION FLUSH), or a new
		// Cluster node or Sentinel primary that never had it: as EVALSHA meets NOSCRIPT.
		if err := r.load(ctx); err != nil {
			cmd.SetErr(err)
			return cmd
		}
		if !r.byEval.Load() {
			return r.fcall(ctx, s, keys, args)
		}
	case cannotRun(code, text, "'fcall'"):
		r.fallBack(cmd.Err())
	default:
		return cmd
	}
	return s.eval.Run(ctx, r.client, keys.strings(), args...)
}

// fcall calls s's function, as go-redis's FCall does, from the keys and function name
// boxed beforehand: FCall boxes each again, an allocation apiece at every call.
func (r *runner) fcall(ctx context.Context, s *script, keys keyList, args []any) *goredis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "fcall", s.functionArg, len(keys))
	a = append(a, keys...)
	a = append(a, args...)
	cmd := goredis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // a Cluster client routes the call by its first key
	}
	_ = r.client.Process(ctx, cmd)
	return cmd
}

// keyList is the KEYS of a script call, each name boxed once, for fcall.
type keyList []any

func newKeyList(names ...string) keyList {
	k := make(keyList, len(names))
	for i, n := range names {
		k[i] = n
	}
	return k
}

// strings returns the names, for EVALSHA (servers before Redis 7).
func (k keyList) strings() []string {
	names := make([]string, len(k))
	for i, n := range k {
		names[i], _ = n.(string)
	}
	return names
}

// load loads the library: on the server, or on every primary of a Cluster (the node that
// answered may be one the slot is moving to, not yet its primary in the client's map). It
// returns nil once the server has it or scripts go by EVALSHA instead, and otherwise the
// error of a load that did not reach the server or that it refused for now (a replica,
// loading, busy, out of memory...); on a Cluster, nil: the call tried again tells.
func (r *runner) load(ctx context.Context) error {
	cc, ok := r.client.(*goredis.ClusterClient)
	if !ok {
		return r.loadOn(ctx, r.client)
	}
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
		return r.loadOn(ctx, master)
	})
	return nil
}

// loadOn loads the library on the server of client; see load.
func (r *runner) loadOn(ctx context.Context, client goredis.Cmdable) error {
	err := client.FunctionLoad(ctx, library.code).Err()
	code, text := replyOf(err)
	switch {
	case err == nil, code == "ERR" && strings.HasSuffix(text, "already exists"):
		return nil
	case cannotRun(code, text, "'function|load'"), code == "ERR" && !strings.HasPrefix(text, "max number of clients"):
		r.fallBack(err)
		return nil
	}
	return err
}

// replyOf returns the code and text of err when it is the server's error reply.
func replyOf(err error) (code, text string) {
	var reply goredis.Error
	if !errors.As(err, &reply) {
		return "", ""
	}
	return replyCode(reply.Error())
}

// cannotRun reports whether the reply to command ("'fcall'", "'function|load'") says that
// the client may never run it: an unknown command, or one the ACL user may not run.
func cannotRun(code, text, command string) bool {
	return code == "ERR" && strings.HasPrefix(text, "unknown command") ||
		code == "NOPERM" && strings.Contains(text, command)
}

// fallBack has scripts go by EVALSHA from now on, and says so once.
func (r *runner) fallBack(err error) {
	if r.byEval.CompareAndSwap(false, true) {
		r.log.Info("simba/redis: the server does not run the scripts as functions (Redis 7 and an ACL user with FCALL and FUNCTION LOAD do); running them by EVALSHA", "err", err)
	}
}
