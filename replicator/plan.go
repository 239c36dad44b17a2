package replicator

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/source"
)

// Replica states, in courier_replicator_replicas and in `courier status`.
const (
	StateInSync    = "in_sync"
	StateConflict  = "conflict"
	StateError     = "error"
	StateContested = "contested"
)

// decision is what a pair needs, whatever the target holds.
type decision int

const (
	leave  decision = iota // touch nothing (invalid selector, namespace going away)
	ensure                 // a replica must exist and equal the source
	remove                 // this source's replica must not be here
)

// pairFacts is everything a pair's plan depends on, read from the cache.
type pairFacts struct {
	installation  string   // this courier's (see Classify)
	ref           string   // the source, "namespace/name"
	want          decision // what the pair needs
	namespaceGone bool
	// claimant is the oldest source of this name that wants a replica in
	// the target ("" for none).
	claimant string
	// What the replica holds, the source's type and immutability, and
	// which keys it copies (want == ensure).
	replica.Want
	typ       corev1.SecretType
	immutable bool
	spec      source.Spec
	// object names the target object in messages: "Secret prod/db".
	object string
	// existing is what holds the name in the target (nil: nothing).
	existing *replicaFacts
	// sourceHidden: the source is not in courier's cache but may exist
	// outside its view (package view); it names what hides it. Only
	// gathered for a replica of this source that a missing source would
	// delete.
	sourceHidden string
	// sourceLagging: the source exists inside the view, and the cache has
	// yet to show it: nothing is done until it does.
	sourceLagging bool
}

// replicaFacts is the object holding the name in the target namespace.
type replicaFacts struct {
	meta      metav1.Object
	hash      string // the content hash of what it holds (want == ensure)
	typ       corev1.SecretType
	immutable bool
	// ownerIsSource: the source it names as its own is a live source.
	ownerIsSource bool
	// ownerHidden: that source is not in courier's cache but may exist
	// outside its view; it names what hides it.
	ownerHidden string
	// ownerLagging: that source exists inside the view, and the cache has
	// yet to show it.
	ownerLagging bool
}

// action is the write a pair's plan makes.
type action int

const (
	none     action = iota
	create          // the replica
	update          // the replica, in place
	recreate        // delete and create: type and immutable data cannot be updated
	del             // the replica
	conflict        // the name is taken: report it, write nothing
	handOver        // leave this replica to the claimant's pair, which takes it over
)

// pairState is what the pair's entry in courier_replicator_replicas becomes.
type pairState int

const (
	keepState     pairState = iota // unchanged
	forgetState                    // the pair needs no replica: no entry
	inSyncState                    // in sync with no write
	conflictState                  // blocked by a conflict
	writtenState                   // in sync once the write succeeds, else error
)

// plan is what syncing a pair does.
type plan struct {
	action action
	state  pairState
	// reason says why a conflict blocks the pair.
	reason string
	// reverted: the write undoes someone else's change to the replica.
	reverted bool
	// outOfView: nothing is written because the source is outside
	// courier's view; it names what hides it (said once on the replica).
	outOfView string
}

// planPair decides what a pair's sync does from the facts alone: at most
// one write (two for recreate). It reads nothing and writes nothing.
func planPair(f pairFacts) plan {
	e := f.existing
	var found replica.Found
	if e != nil {
		found = replica.Classify(f.installation, f.ref, f.Want, e.meta, e.hash)
	}
	switch {
	case found == replica.Foreign && f.want == ensure:
		reason := f.object + " exists and was not created by courier; it is left untouched"
		if tool := source.CopiedBy(e.meta.GetAnnotations()); tool != "" {
			reason += " (it is a copy " + tool + " made: once " + tool + " no longer runs, delete it and courier creates its replica)"
		}
		return plan{action: conflict, state: conflictState, reason: reason}
	case found == replica.Foreign, found == replica.OtherSources && f.want != ensure:
		return plan{state: forgetState} // not ours to touch
	}

	switch f.want {
	case leave:
		if f.namespaceGone {
			return plan{state: forgetState} // the namespace and its replica are gone
		}
		return plan{}
	case remove:
		switch {
		case e == nil:
			return plan{state: forgetState}
		case f.sourceHidden != "":
			// Courier cannot tell "gone" from "outside its view": what it
			// wrote stays as it is.
			return plan{state: forgetState, outOfView: f.sourceHidden}
		case f.sourceLagging:
			return plan{} // its event is on its way
		case f.claimant != "" && f.claimant != f.ref:
			// A live source that wants this name here takes the replica over
			// (its pair reverts the metadata) rather than see it deleted and
			// created again.
			return plan{action: handOver, state: forgetState}
		}
		return plan{action: del, state: forgetState}
	}

	// ensure: the oldest source claiming this name here wins.
	if found == replica.OtherSources && e.ownerLagging {
		return plan{} // its event is on its way: the older source may be it
	}
	if found == replica.OtherSources && e.ownerHidden != "" {
		owner, _ := replica.OwnerOf(e.meta, f.installation)
		return plan{action: conflict, state: conflictState, reason: f.object + " is the replica of another source, " + owner +
			", which courier cannot see (" + e.ownerHidden + "); it is left untouched: the older source wins"}
	}
	if f.claimant != "" && f.claimant != f.ref {
		return plan{action: conflict, state: conflictState, reason: "the older source " + f.claimant + " wins"}
	}
	switch {
	case e == nil:
		return plan{action: create, state: writtenState}
	case e.typ != f.typ || e.immutable != f.immutable || (e.immutable && e.hash != f.Hash):
		// A source can become immutable but never mutable again, so a
		// replica that is immutable while its source is not was made so by
		// someone else (a mutating policy, say): undoing that is a revert,
		// counted against the budget like any other.
		reverted := (e.immutable && !f.immutable) || changedBySomeoneElse(f, e)
		return plan{action: recreate, state: writtenState, reverted: reverted}
	case found == replica.InSync:
		return plan{state: inSyncState}
	}
	return plan{action: update, state: writtenState, reverted: changedBySomeoneElse(f, e)}
}

// changedBySomeoneElse reports whether the replica was changed since courier
// wrote it, unless it is another source's replica that this older source
// takes over.
func changedBySomeoneElse(f pairFacts, e *replicaFacts) bool {
	owner, _ := replica.OwnerOf(e.meta, f.installation)
	return replica.Tampered(e.meta, e.hash, f.ref) && (owner == f.ref || !e.ownerIsSource)
}
