package replicator

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
)

const testInstallation = "courier-system"

// TestPlanPair has a row for each line of docs/SPEC.md that a pair's plan
// decides; the facts are what syncPair reads from the cache.
func TestPlanPair(t *testing.T) {
	const ref, hash = "platform/db", "h2"
	ours := func(stamped string) metav1.Object {
		m := replicaMeta(&metav1.ObjectMeta{Namespace: "platform", Name: "db"}, "prod", testInstallation, "", "", replica.Want{Hash: stamped}, nil)
		return &m
	}
	theirs := func(owner string) metav1.Object {
		m := replicaMeta(&metav1.ObjectMeta{Namespace: "other", Name: "db"}, "prod", testInstallation, "", "", replica.Want{Hash: hash}, nil)
		m.Annotations[wellknown.Source] = owner
		return &m
	}
	foreign := &metav1.ObjectMeta{Namespace: "prod", Name: "db"}
	edited := func(f func(*metav1.ObjectMeta)) metav1.Object {
		m := ours(hash).(*metav1.ObjectMeta)
		f(m)
		return m
	}
	held := func(m metav1.Object, held string) *replicaFacts {
		return &replicaFacts{meta: m, hash: held, typ: corev1.SecretTypeOpaque}
	}
	ensuring := func(existing *replicaFacts) pairFacts {
		return pairFacts{installation: testInstallation, ref: ref, want: ensure, claimant: ref, Want: replica.Want{Hash: hash}, typ: corev1.SecretTypeOpaque, object: "Secret prod/db", existing: existing}
	}
	with := func(f pairFacts, change func(*pairFacts)) pairFacts { change(&f); return f }

	tests := []struct {
		spec  string
		facts pairFacts
		want  plan
	}{
		{"new matching namespace → replica created", ensuring(nil),
			plan{action: create, state: writtenState}},
		{"replica deleted → recreated", ensuring(nil),
			plan{action: create, state: writtenState}},
		{"restart or leader change writes nothing when in sync", ensuring(held(ours(hash), hash)),
			plan{state: inSyncState}},
		{"source content changed → every replica updated", ensuring(held(ours("h1"), "h1")),
			plan{action: update, state: writtenState}},
		{"a replica's content changed by someone else is reverted", ensuring(held(ours(hash), "edited")),
			plan{action: update, state: writtenState, reverted: true}},
		{"courier's annotation edited is reverted", ensuring(held(edited(func(m *metav1.ObjectMeta) { m.Annotations[wellknown.ContentHash] = "x" }), hash)),
			plan{action: update, state: writtenState, reverted: true}},
		{"courier's label removed is reverted", ensuring(held(edited(func(m *metav1.ObjectMeta) { delete(m.Labels, wellknown.ManagedBy) }), hash)),
			plan{action: update, state: writtenState, reverted: true}},
		{"a label of someone else's added to a replica is left alone", ensuring(held(edited(func(m *metav1.ObjectMeta) { m.Labels["team"] = "a" }), hash)),
			plan{state: inSyncState}},
		{"source immutable changed → replica deleted and created again",
			with(ensuring(held(ours(hash), hash)), func(f *pairFacts) { f.immutable = true }),
			plan{action: recreate, state: writtenState}},
		{"a replica made immutable by someone else is recreated as a revert",
			ensuring(&replicaFacts{meta: ours(hash), hash: hash, typ: corev1.SecretTypeOpaque, immutable: true}),
			plan{action: recreate, state: writtenState, reverted: true}},
		{"source type changed → replica deleted and created again",
			with(ensuring(held(ours(hash), hash)), func(f *pairFacts) { f.typ = corev1.SecretTypeTLS }),
			plan{action: recreate, state: writtenState}},
		{"an object courier did not create is never modified: ReplicaConflict", ensuring(held(foreign, "x")),
			plan{action: conflict, state: conflictState, reason: "Secret prod/db exists and was not created by courier; it is left untouched"}},
		{"another installation's replica is never modified: ReplicaConflict",
			ensuring(held(func() metav1.Object {
				m := ours(hash).(*metav1.ObjectMeta)
				m.Annotations[wellknown.Installation] = "ops"
				return m
			}(), hash)),
			plan{action: conflict, state: conflictState, reason: "Secret prod/db exists and was not created by courier; it is left untouched"}},
		{"another installation's replica is never deleted",
			pairFacts{installation: testInstallation, ref: ref, want: remove, existing: held(func() metav1.Object {
				m := ours(hash).(*metav1.ObjectMeta)
				m.Annotations[wellknown.Installation] = "ops"
				return m
			}(), "")},
			plan{state: forgetState}},
		{"an object courier did not create is never deleted",
			pairFacts{installation: testInstallation, ref: ref, want: remove, existing: held(foreign, "")},
			plan{state: forgetState}},
		{"two sources claim one name: the older wins, the younger gets the event",
			with(ensuring(held(theirs("other/db"), hash)), func(f *pairFacts) { f.claimant = "other/db" }),
			plan{action: conflict, state: conflictState, reason: "the older source other/db wins"}},
		{"the older source takes over the younger's replica (no revert)",
			ensuring(&replicaFacts{meta: theirs("other/db"), hash: hash, typ: corev1.SecretTypeOpaque, ownerIsSource: true}),
			plan{action: update, state: writtenState}},
		{"a replica naming a source that does not exist is taken over as a revert",
			ensuring(held(theirs("gone/db"), hash)),
			plan{action: update, state: writtenState, reverted: true}},
		{"selector narrowed or annotation removed → replica deleted",
			pairFacts{installation: testInstallation, ref: ref, want: remove, existing: held(ours(hash), "")},
			plan{action: del, state: forgetState}},
		{"source deleted → replica deleted",
			pairFacts{installation: testInstallation, ref: ref, want: remove, existing: held(ours(hash), "")},
			plan{action: del, state: forgetState}},
		{"source missing from the cache but outside the view (it left the selector; its namespace is not watched): replica left as it is, said once",
			pairFacts{installation: testInstallation, ref: ref, want: remove, sourceHidden: "--resource-label-selector=courier-scope=yes", existing: held(ours(hash), "")},
			plan{state: forgetState, outOfView: "--resource-label-selector=courier-scope=yes"}},
		{"source missing and outside the view while another source wants the name: neither handed over nor deleted",
			pairFacts{installation: testInstallation, ref: ref, want: remove, claimant: "other/db", sourceHidden: "--watch-namespaces (not watched)", existing: held(ours(hash), "")},
			plan{state: forgetState, outOfView: "--watch-namespaces (not watched)"}},
		{"source missing from the cache but found by name inside the view (the cache lags): nothing yet",
			pairFacts{installation: testInstallation, ref: ref, want: remove, sourceLagging: true, existing: held(ours(hash), "")},
			plan{}},
		{"a replica whose source the cache has yet to show: nothing yet",
			ensuring(&replicaFacts{meta: theirs("lagging/db"), hash: hash, typ: corev1.SecretTypeOpaque, ownerLagging: true}),
			plan{}},
		{"a replica whose source courier cannot see is never taken over: ReplicaConflict",
			ensuring(&replicaFacts{meta: theirs("hidden/db"), hash: hash, typ: corev1.SecretTypeOpaque, ownerHidden: "--resource-label-selector=courier-scope=yes"}),
			plan{action: conflict, state: conflictState, reason: "Secret prod/db is the replica of another source, hidden/db, which courier cannot see (--resource-label-selector=courier-scope=yes); it is left untouched: the older source wins"}},
		{"no longer targeted, another source wants the name here: handed over, not deleted",
			pairFacts{installation: testInstallation, ref: ref, want: remove, claimant: "other/db", existing: held(ours(hash), "")},
			plan{action: handOver, state: forgetState}},
		{"another source's replica is not ours to remove",
			pairFacts{installation: testInstallation, ref: ref, want: remove, existing: held(theirs("other/db"), "")},
			plan{state: forgetState}},
		{"not targeted and nothing there: nothing",
			pairFacts{installation: testInstallation, ref: ref, want: remove},
			plan{state: forgetState}},
		{"an invalid selector changes nothing (existing replicas stay)",
			pairFacts{installation: testInstallation, ref: ref, want: leave, existing: held(ours(hash), "")},
			plan{}},
		{"a namespace being deleted gets nothing",
			pairFacts{installation: testInstallation, ref: ref, want: leave},
			plan{}},
		{"a namespace gone: its pair is forgotten",
			pairFacts{installation: testInstallation, ref: ref, want: leave, namespaceGone: true},
			plan{state: forgetState}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got := planPair(tt.facts)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	const ref, hash = "platform/db", "h"
	m := replicaMeta(&metav1.ObjectMeta{Namespace: "platform", Name: "db"}, "prod", testInstallation, "", "", replica.Want{Hash: hash}, nil)
	other := replicaMeta(&metav1.ObjectMeta{Namespace: "other", Name: "db"}, "prod", testInstallation, "", "", replica.Want{Hash: hash}, nil)
	tests := []struct {
		name    string
		obj     metav1.Object
		objHash string
		want    replica.Found
	}{
		{"nothing", nil, "", replica.Missing},
		{"a stranger's object", &metav1.ObjectMeta{Name: "db"}, hash, replica.Foreign},
		{"another source's replica", &other, hash, replica.OtherSources},
		{"ours, content differs", &m, "old", replica.Stale},
		{"ours, equal", &m, hash, replica.InSync},
		{"made before replicas named their installation", func() metav1.Object {
			legacy := *m.DeepCopy()
			delete(legacy.Annotations, wellknown.Installation)
			return &legacy
		}(), hash, replica.InSync},
		{"another installation's replica", func() metav1.Object {
			theirs := *m.DeepCopy()
			theirs.Annotations[wellknown.Installation] = "ops"
			return &theirs
		}(), hash, replica.Foreign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replica.Classify(testInstallation, ref, replica.Want{Hash: hash}, tt.obj, tt.objHash); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPlanPull has a row for each cause of a pull's refusal, in the order
// they are checked, and for each outcome of an honoured pull; the facts are
// what syncPull reads from the cache.
func TestPlanPull(t *testing.T) {
	const via = "replicator.v1.mittwald.de/replicate-from"
	honoured := func() pullFacts {
		return pullFacts{kind: "Secret", namespace: "app", name: "db", ref: "platform/db", via: via, role: role.PullTarget,
			srcNS: "platform", srcName: "db", allowed: true, eligible: true, sourceNamespaces: "platform", excludeNamespaces: "kube-*",
			hash: "h2", held: "h2", stamped: "h2", pulledFrom: "platform/db", stampedVia: via}
	}
	refused := func(why string) pullPlan { return pullPlan{action: pullRefuse, why: why} }
	for _, tc := range []struct {
		name   string
		change func(*pullFacts)
		want   pullPlan
	}{
		{"no longer a pull", func(f *pullFacts) { *f = pullFacts{gone: true} }, pullPlan{action: pullNothing}},
		{"not namespace/name", func(f *pullFacts) { f.ref, f.srcNS, f.srcName = "db", "", "db" },
			refused("the value must be <namespace>/<name>")},
		{"itself", func(f *pullFacts) { f.srcNS = "app" }, refused("it names this object itself")},
		{"a source itself", func(f *pullFacts) { f.role = role.Source },
			refused("this object is a source itself (it replicates, allows pulls or is protected): courier keeps it a source and never fills it from another; remove " + via + ", or make another object pull")},
		{"a replica itself", func(f *pullFacts) { f.role = role.Replica }, refused("this object is a courier replica itself")},
		{"another installation's", func(f *pullFacts) { f.allowed, f.elsewhere = false, true }, pullPlan{action: pullElsewhere}},
		{"a namespace not allowed", func(f *pullFacts) { f.allowed = false },
			refused("namespace platform is not an allowed source namespace (--source-namespaces=platform); move the source or add its namespace")},
		{"a namespace not eligible", func(f *pullFacts) { f.eligible = false },
			refused("courier replicates into namespace app from platform in no way (the source's own namespace, a system namespace, one in --exclude-namespaces=kube-*, one labelled courier.dev/replication=disabled, or one being deleted)")},
		{"immutable", func(f *pullFacts) { f.immutable = true }, refused("this object is immutable; delete it and create it again without immutable")},
		{"no source", func(f *pullFacts) { f.srcMissing, f.unseen = true, " (or courier does not see it)" },
			refused("the source Secret platform/db does not exist (or courier does not see it); what this object holds stays as it is")},
		{"a token", func(f *pullFacts) { f.token = true }, refused("kubernetes.io/service-account-token Secrets are never copied")},
		{"the source refuses", func(f *pullFacts) { f.pullRefused = "the source lacks x: \"true\"" }, refused("the source lacks x: \"true\"")},
		{"values not held yet", func(f *pullFacts) { f.digested = true }, refused("courier does not hold the source's values yet")},
		{"an invalid source", func(f *pullFacts) { f.specErr = errors.New("courier.dev/replicate-keys: bad") },
			refused("the source's courier.dev/replicate-keys: bad")},
		{"in sync", func(*pullFacts) {}, pullPlan{action: pullNothing}},
		{"the source changed", func(f *pullFacts) { f.hash = "h3" }, pullPlan{action: pullFill}},
		{"first fill", func(f *pullFacts) { f.held, f.stamped, f.pulledFrom, f.stampedVia = "h0", "", "", "" }, pullPlan{action: pullFill}},
		{"edited by someone else", func(f *pullFacts) { f.held = "h9" }, pullPlan{action: pullFill, reverted: true}},
		{"the source's content written by another tool", func(f *pullFacts) { f.stamped = "h1" }, pullPlan{action: pullFill}},
		{"another via", func(f *pullFacts) { f.stampedVia = "reflector" }, pullPlan{action: pullFill}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := honoured()
			tc.change(&f)
			if diff := cmp.Diff(tc.want, planPull(f), cmp.AllowUnexported(pullPlan{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnUpdatedReplicaKeepsWhatOthersPutInItsMetadata: an update writes the
// whole object; another's finalizer and owner on the replica stay, as its
// labels and annotations do.
func TestAnUpdatedReplicaKeepsWhatOthersPutInItsMetadata(t *testing.T) {
	owners := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: "p-uid"}}
	existing := objmeta.From(&metav1.ObjectMeta{Name: "db", Namespace: "prod", UID: "6f1c2b9e-0d3a-4c55-9f8e-1a2b3c4d5e6f", ResourceVersion: "7",
		Finalizers: []string{"backup.example.com/keep"}, OwnerReferences: owners, Labels: map[string]string{"team": "a"}}, true)
	m := replicaMeta(&metav1.ObjectMeta{Namespace: "platform", Name: "db"}, "prod", testInstallation, "", "", replica.Want{Hash: "h"}, &existing)
	if diff := cmp.Diff([]string{"backup.example.com/keep"}, m.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(owners, m.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	if m.Labels["team"] != "a" || m.ResourceVersion != "7" {
		t.Errorf("labels %v, resourceVersion %q: want team=a kept and 7", m.Labels, m.ResourceVersion)
	}
}
