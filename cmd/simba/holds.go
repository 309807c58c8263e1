package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/storeurl"
)

// kinds are the values of --kind.
var kinds = map[string]backend.Kind{"mutex": backend.Mutex, "semaphore": backend.Semaphore, "rwlock": backend.RWLock}

// kindName is the --kind value of k.
func kindName(k backend.Kind) string {
	for name, v := range kinds {
		if v == k {
			return name
		}
	}
	return k.String()
}

// watchPoll is how often watch reads the holders of a semaphore or read-write lock: the
// stores tell no change of them to a reader.
const watchPoll = time.Second

// holdRecord is a holder of a semaphore or read-write lock as the command prints it.
type holdRecord struct {
	Kind         string     `json:"kind"`
	Name         string     `json:"name"`
	Holder       string     `json:"holder"`
	Mode         string     `json:"mode"` // permit, shared or exclusive
	Token        uint64     `json:"token,omitempty"`
	AcquiredAt   *time.Time `json:"acquired_at,omitempty"`
	TTLAt        *time.Time `json:"ttl_at,omitempty"`
	TransitionAt *time.Time `json:"transition_at,omitempty"`
}

func newHoldRecord(h storeurl.Holder) holdRecord {
	mode := "exclusive"
	switch {
	case h.Kind == backend.Semaphore:
		mode = "permit"
	case h.Shared:
		mode = "shared"
	}
	return holdRecord{
		Kind: kindName(h.Kind), Name: h.Name, Holder: h.ID, Mode: mode, Token: h.Token,
		AcquiredAt: instant(h.AcquiredAt), TTLAt: instant(h.TTLAt), TransitionAt: instant(h.TransitionAt),
	}
}

// holders reads the holders of kind, of name alone unless it is "".
func (c *cli) holders(ctx context.Context, s *storeurl.Store, name string) (list []storeurl.Holder, err error) {
	what := "list the " + kindName(c.holdKind) + "s"
	if name != "" {
		what = fmt.Sprintf("look up %s %q", kindName(c.holdKind), name)
	}
	err = c.call(ctx, what, func(ctx context.Context) (err error) {
		list, err = s.Holders(ctx, c.holdKind, name)
		return err
	})
	return list, err
}

// getHolds prints the holders of name (list: of every name of the kind).
func (c *cli) getHolds(ctx context.Context, s *storeurl.Store, name string) error {
	list, err := c.holders(ctx, s, name)
	if err != nil {
		return err
	}
	if len(list) == 0 && name != "" && !c.json {
		_, err := fmt.Fprintf(c.stdout, "%s %s has no holders\n", kindName(c.holdKind), name)
		return err
	}
	return c.printHolds(list)
}

// printHolds writes list as a JSON array or a table, a row per holder.
func (c *cli) printHolds(list []storeurl.Holder) error {
	records := make([]holdRecord, 0, len(list))
	for _, h := range list {
		records = append(records, newHoldRecord(h))
	}
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(records)
	}
	now := time.Now()
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "%s\tHOLDER\tMODE\tTOKEN\tHELD\tTTL LEFT\tTRANSITION LEFT\n", strings.ToUpper(kindName(c.holdKind)))
	for _, r := range records {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Holder, r.Mode, token(r.Token),
			since(now, r.AcquiredAt), until(now, r.TTLAt), until(now, r.TransitionAt))
	}
	return w.Flush()
}

// watchHolds prints the holders of name, then every change of them (a holder or token
// that comes or goes), until ctx ends (an interrupt).
func (c *cli) watchHolds(ctx context.Context, s *storeurl.Store, name string) error {
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	var last []string
	for first := true; ; first = false {
		list, err := c.holders(ctx, s, name)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		now := make([]string, 0, len(list))
		for _, h := range list {
			now = append(now, fmt.Sprintf("%s/%d", h.ID, h.Token))
		}
		if first || !slices.Equal(now, last) {
			last = now
			if err := c.holdsChanged(name, list); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// holdsChanged prints the holders of a watch: a JSON object a line, or a line of text.
func (c *cli) holdsChanged(name string, list []storeurl.Holder) error {
	at := time.Now().Round(0).Truncate(time.Millisecond)
	if c.json {
		records := make([]holdRecord, 0, len(list))
		for _, h := range list {
			records = append(records, newHoldRecord(h))
		}
		return json.NewEncoder(c.stdout).Encode(struct {
			At      time.Time    `json:"at"`
			Kind    string       `json:"kind"`
			Name    string       `json:"name"`
			Holders []holdRecord `json:"holders"`
		}{at, kindName(c.holdKind), name, records})
	}
	held := make([]string, 0, len(list))
	for _, h := range list {
		r := newHoldRecord(h)
		held = append(held, fmt.Sprintf("%s (%s, token %s)", r.Holder, r.Mode, token(r.Token)))
	}
	if len(held) == 0 {
		held = append(held, "-")
	}
	_, err := fmt.Fprintf(c.stdout, "%s  %s %s  holders %s\n", at.Format(time.RFC3339Nano), kindName(c.holdKind), name, strings.Join(held, ", "))
	return err
}

// releaseHold releases the hold of holder id on name, once confirmed: that tenure only.
func (c *cli) releaseHold(ctx context.Context, s *storeurl.Store, name, id string) error {
	list, err := c.holders(ctx, s, name)
	if err != nil {
		return err
	}
	kind := kindName(c.holdKind)
	i := slices.IndexFunc(list, func(h storeurl.Holder) bool { return h.ID == id })
	switch {
	case len(list) == 0:
		return fmt.Errorf("%s %s has no holders: nothing to release", kind, name)
	case i < 0:
		ids := make([]string, 0, len(list))
		for _, h := range list {
			ids = append(ids, h.ID)
		}
		return fmt.Errorf("%s %s has no holder %q (its holders: %s)", kind, name, id, strings.Join(ids, ", "))
	}
	h := list[i]
	r := newHoldRecord(h)
	fmt.Fprintf(c.stderr, `%s %s is held by %s (%s)%s.
A forced release frees this hold on the store only, and no later hold of the same holder.
The holder is not told: it goes on believing it holds until its next renewal finds out, up
to a TTL from now, while a waiter may take its place at once. Only the fencing token
protects the resource then: a resource that rejects lower tokens than it has seen refuses
the old holder's writes once a later holder wrote.
`, kind, name, id, r.Mode, tokenNote(h.Token))
	if err := c.confirm("Type the holder's ID to release its hold: ", id, "release"); err != nil {
		return err
	}
	var released bool
	err = c.call(ctx, fmt.Sprintf("release %s of %s %q", id, kind, name), func(ctx context.Context) (err error) {
		released, err = s.ReleaseHolder(ctx, h)
		return err
	})
	switch {
	case err != nil:
		return err
	case !released:
		return fmt.Errorf("%s of %s %s ended since it was listed: nothing was released", id, kind, name)
	case c.json:
		return json.NewEncoder(c.stdout).Encode(struct {
			Released holdRecord `json:"released"`
		}{r})
	}
	_, err = fmt.Fprintf(c.stdout, "released %s from %s %s%s\n", id, kind, name, tokenNote(h.Token))
	return err
}

// instant is t on the wall clock to the millisecond, or nil for the zero time.
func instant(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.Round(0).Truncate(time.Millisecond)
	return &t
}
