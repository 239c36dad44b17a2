package reloader

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
)

// digestLen is how many hex characters of each input's digest the baseline
// keeps: 64 bits, ample to tell versions of one input apart, and small.
const digestLen = 16

// baseline maps input IDs ("secret/a") to the digest of their consumed content.
type baseline map[string]string

// String is the baseline's inputs in ID order, without the key's name.
func (b baseline) String() string { return b.encode("", "") }

// encode is courier.dev/config-inputs: the inputs in ID order and, with a
// keyed digester, the name of its key, and the installation that wrote it.
func (b baseline) encode(keyID, installation string) string {
	ids := make([]string, 0, len(b))
	for id := range b {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, 0, len(ids)+2)
	if keyID != "" {
		parts = append(parts, keyIDField+"="+keyID)
	}
	if installation != "" {
		parts = append(parts, installationField+"="+installation)
	}
	for _, id := range ids {
		parts = append(parts, id+"="+b[id])
	}
	return strings.Join(parts, ",")
}

// installationField is the baseline entry naming the installation (its
// namespace) that wrote it: the one that reloads the workload. Another
// installation leaves the workload alone while that one is there, so two
// couriers on one cluster never fight over a workload's baseline (each
// would find the other's key and start afresh) nor roll it out twice.
const installationField = "installation"

// stored is what courier.dev/config-inputs says besides its inputs.
type stored struct {
	keyID, installation string
}

// parseBaseline reads courier.dev/config-inputs: the inputs, the name of
// the key their digests were made with ("" for a baseline of unkeyed
// digests) and the installation that wrote it ("" for one written before
// baselines named it). Entries it cannot read are dropped (they count as
// inputs appearing, which never rolls out).
func parseBaseline(s string) (baseline, stored) {
	b, st := baseline{}, stored{}
	for _, part := range strings.Split(s, ",") {
		id, d, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case ok && id == keyIDField:
			st.keyID = d
		case ok && id == installationField:
			st.installation = d
		case ok && id != "" && d != "":
			b[id] = d
		}
	}
	return b, st
}

// diff compares the baseline with now: inputs whose consumed content changed,
// inputs gone, and inputs new.
func diff(before, now baseline) (changed, missing, appeared []string) {
	for id, d := range now {
		old, ok := before[id]
		switch {
		case !ok:
			appeared = append(appeared, id)
		case old != d:
			changed = append(changed, id)
		}
	}
	for id := range before {
		if _, ok := now[id]; !ok {
			missing = append(missing, id)
		}
	}
	sort.Strings(changed)
	sort.Strings(missing)
	sort.Strings(appeared)
	return changed, missing, appeared
}

// consumedEntries are the entries of obj (all: all of them) that ref
// consumes: every one, or its keys' — for an object the cache holds as a
// whole (more than content.MaxKeyDigests keys), what its key digests say of
// them, so a change to another key, or the consumed key gone, is told
// apart whatever the object's number of keys.
func consumedEntries(ref inputs.Ref, obj any, all []content.Entry) []content.Entry {
	if ref.All() || !isWhole(all) {
		return all
	}
	return content.KeyEntries(obj, ref.Keys)
}

// isWhole reports whether entries are one whole-content digest.
func isWhole(entries []content.Entry) bool { return len(entries) == 1 && entries[0].Whole }

// missingKeys are the keys ref consumes that entries lack (none when the
// object is held as one whole-content digest: consumed whole).
func missingKeys(ref inputs.Ref, entries []content.Entry) []string {
	if ref.All() || isWhole(entries) {
		return nil
	}
	have := make(map[string]bool, len(entries))
	for _, e := range entries {
		have[e.Key] = true
	}
	var out []string
	for _, k := range ref.Keys {
		if !have[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// action is what one sync of a workload writes.
type action int

const (
	writeNothing  action = iota
	writeBaseline        // the baseline moved (first sight, inputs gone for good or new): no rollout
	dropBaseline         // nothing is opted in any more: the baseline is removed
	rollOut              // consumed content changed: a rollout, and the new baseline
)

// decision is the reloader's verdict on one workload.
type decision struct {
	action     action
	baseline   baseline // what to write (writeBaseline, rollOut)
	changed    []string // opted-in inputs whose consumed content changed (rollOut)
	missing    []string // consumed inputs or keys that are gone, non-optional: InputMissing
	appeared   bool     // inputs seen for the first time (never a rollout)
	firstSight bool     // no baseline yet: this sync writes the first one
	before     baseline // what the pods were given, as far as courier knows (rollOut)
	unchanged  bool     // the pod template already holds this content's hash: no rollout needed
}

// observed is a workload's opted-in inputs as the cache holds them now.
type observed struct {
	now      baseline        // the consumed digest of every opted-in input that exists
	optional map[string]bool // every opted-in input → whether its reference is optional
	// missingKeys: opted-in inputs that exist but lack keys a non-optional
	// reference consumes, with those keys.
	missingKeys map[string][]string
	// legacy: for inputs held as a whole (more than content.MaxKeyDigests
	// keys) of which some keys are consumed, the digest a baseline written
	// before courier kept their key digests holds for the same content.
	legacy       baseline
	templateHash string   // courier.dev/config-hash on the pod template now
	notifyOnly   bool     // courier.dev/reload: notify: say what would roll out, roll nothing
	digester     digester // what the digests in now were made with
	// previous: inputs that changed since the workload was created, by the
	// digest of what they held before (see hint), for those not in its
	// baseline: opting in with a change rolls that change out.
	previous baseline
	// selective: --resource-label-selector is set, so an input courier has
	// never seen may exist outside it: it holds nothing back (one seen
	// before and gone still does).
	selective bool
	// hidden: inputs in the baseline that the cache lacks but that exist
	// outside courier's view (relabelled out of the selector, or the
	// selector turned on since): not missing, they hold nothing back and
	// keep their recorded digest.
	hidden map[string]bool
	// err: a read by name failed, so what is missing is not known: the
	// sync is tried again rather than decided on a guess.
	err error
	// warnings: what is wrong with the workload's annotations (ignored),
	// each an InvalidAnnotation Event.
	warnings []string
	// versions: of the inputs in now that the cache holds the metadata of
	// only, the version their digest was made of (courier.dev/config-versions).
	versions versions
}

// decide compares what a workload consumes now with its stored baseline
// (stored, when hasBaseline). It reads nothing and writes nothing.
//
// The baseline records what the running pods were given. An input that is
// gone (deleted, or missing a consumed key) keeps its recorded digest, so
// when it is back with other content the workload rolls out, and with the
// same content nothing happens; while a non-optional one is gone nothing is
// written at all, for pods rolled out then could not start.
func decide(stored string, hasBaseline bool, o observed) decision {
	if len(o.optional) == 0 {
		if hasBaseline {
			return decision{action: dropBaseline} // opted out: the next opt-in starts afresh
		}
		return decision{} // nothing opted in: courier never writes to this workload
	}
	if !hasBaseline && len(o.previous) == 0 {
		return decision{action: writeBaseline, baseline: o.now, firstSight: true}
	}
	before := baseline{}
	if hasBaseline {
		before, _ = parseBaseline(stored)
	}
	for id, d := range o.previous {
		if _, ok := before[id]; !ok {
			before[id] = d
		}
	}
	upgraded := false
	for id, d := range o.legacy {
		if old, ok := before[id]; ok && old == d && o.now[id] != d {
			before[id], upgraded = o.now[id], true // the same content, recorded the old way
		}
	}
	next := baseline{}
	for id, d := range o.now {
		next[id] = d
	}
	var missing []string
	for id, optional := range o.optional {
		if _, ok := o.now[id]; ok || o.missingKeys[id] != nil {
			continue
		}
		old, seen := before[id]
		if seen {
			next[id] = old
		}
		if !optional && (seen || !o.selective) && !o.hidden[id] {
			missing = append(missing, id)
		}
	}
	for id, keys := range o.missingKeys {
		if old, seen := before[id]; seen {
			next[id] = old
		} else {
			delete(next, id)
		}
		missing = append(missing, fmt.Sprintf("%s (key %s)", id, strings.Join(keys, ", ")))
	}
	sort.Strings(missing)
	changed, _, appeared := diff(before, next)
	d := decision{baseline: next, missing: missing, appeared: len(appeared) > 0, firstSight: !hasBaseline}
	switch {
	case len(missing) > 0:
		// Hold everything until what the pods need is back.
	case len(changed) > 0 && o.digester.configHash(next) == o.templateHash:
		d.action, d.unchanged = writeBaseline, true // e.g. after a rollout undo and the content set back
	case len(changed) > 0:
		d.action, d.changed = rollOut, changed
		if !hasBaseline {
			d.before = before // the hint: what a held rollout keeps as the baseline
		}
	case !hasBaseline || next.String() != before.String() || upgraded:
		d.action = writeBaseline
	}
	return d
}
