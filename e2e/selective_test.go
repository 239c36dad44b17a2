package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

const (
	keyReplicateKeys   = "courier.dev/replicate-keys"
	keyCopyLabels      = "courier.dev/copy-labels"
	keyCopyAnnotations = "courier.dev/copy-annotations"
	keyCopiedMetadata  = "courier.dev/copied-metadata"
)

// secretWhere polls until the Secret ns/name exists and ok says it is as wanted.
func secretWhere(ns, name string, ok func(*corev1.Secret) bool) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		s, err := getSecret(ctx, ns, name)
		if err != nil {
			return false, nil
		}
		return ok(s), nil
	}
}

// SPEC: courier.dev/replicate-keys — replicas hold only the listed keys; a
// listed key the source lacks is a Warning Event, not an error for the
// others; a change to an unlisted key writes nothing; the guard keeps the
// replica to the listed keys.
func TestReplicateKeysCopiesOnlyTheListedKeys(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "keys", nil)
	createSecret(t, s.src, "tls",
		withAnnotation(keyReplicateTo, "test="+s.id),
		withAnnotation(keyReplicateKeys, "ca.crt, tls.crt, missing.key"),
		withData("ca.crt", "CA"), withData("tls.crt", "CRT"), withData("tls.key", "KEY"))
	want := map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CRT")}
	eventually(t, converge, "replica with the listed keys only", secretIn(dst, "tls", want))
	eventually(t, converge, "ReplicateKeyMissing naming the absent key",
		eventWith(s.src, "tls", "ReplicateKeyMissing", "missing.key", keyReplicateKeys))

	before, err := getSecret(t.Context(), dst, "tls")
	if err != nil {
		t.Fatal(err)
	}
	updateSecret(t, s.src, "tls", func(sec *corev1.Secret) { sec.Data["tls.key"] = []byte("KEY2") })
	consistently(t, quiet, "a change to an unlisted key writes nothing", func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, dst, "tls")
		return err == nil && r.ResourceVersion == before.ResourceVersion, err
	})

	updateSecret(t, s.src, "tls", func(sec *corev1.Secret) { sec.Data["ca.crt"] = []byte("CA2") })
	want["ca.crt"] = []byte("CA2")
	eventually(t, converge, "the listed key's change replicated", secretIn(dst, "tls", want))

	if st := statusOf(t, s, "tls"); st.Keys != "ca.crt, tls.crt, missing.key" || st.Targets != 1 || st.InSync != 1 || st.Problem != "" {
		t.Errorf("courier status: %+v; want the key list and 1 target in sync", *st)
	}

	updateSecret(t, dst, "tls", func(sec *corev1.Secret) { sec.Data["tls.key"] = []byte("planted") })
	eventually(t, converge, "a key added to the replica is reverted", secretIn(dst, "tls", want))
	eventually(t, converge, "ReplicaReverted", eventWith(dst, "tls", "ReplicaReverted", s.src+"/tls"))

	updateSecret(t, s.src, "tls", func(sec *corev1.Secret) { delete(sec.Annotations, keyReplicateKeys) })
	want["tls.key"] = []byte("KEY2")
	eventually(t, converge, "every key once the list is removed", secretIn(dst, "tls", want))
}

// SPEC: courier.dev/copy-labels and courier.dev/copy-annotations — the listed
// source labels and annotations (exact keys or prefix/*) are copied onto
// replicas, kept in sync, removed when the source drops them, and guarded.
func TestCopyLabelsAndAnnotationsAreCopiedAndKeptInSync(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "meta", nil)
	createSecret(t, s.src, "repo",
		withAnnotation(keyReplicateTo, "test="+s.id),
		withAnnotation(keyCopyLabels, "argocd.argoproj.io/secret-type, team.example.com/*"),
		withAnnotation(keyCopyAnnotations, "note"),
		withAnnotation("note", "hello"), withAnnotation("not-copied", "x"),
		withLabel("argocd.argoproj.io/secret-type", "repository"), withLabel("team.example.com/owner", "alice"),
		withLabel("app.kubernetes.io/instance", "gitops-app"),
		withData("url", "https://git.example.com/repo.git"))
	labelsAre := func(want map[string]string, note string) func(*corev1.Secret) bool {
		return func(r *corev1.Secret) bool {
			return cmp.Equal(want, r.Labels) && r.Annotations["note"] == note && r.Annotations["not-copied"] == ""
		}
	}
	base := map[string]string{keyManagedBy: "courier", keyReplica: "true"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	eventually(t, converge, "the listed labels and annotation copied, nothing else", secretWhere(dst, "repo", labelsAre(
		with(map[string]string{"argocd.argoproj.io/secret-type": "repository", "team.example.com/owner": "alice"}), "hello")))
	if st := statusOf(t, s, "repo"); st.CopyLabels != "argocd.argoproj.io/secret-type, team.example.com/*" || st.CopyAnnotations != "note" || st.InSync != 1 {
		t.Errorf("courier status: %+v; want the copy lists and 1 target in sync", *st)
	}
	r, err := getSecret(t.Context(), dst, "repo")
	if err != nil {
		t.Fatal(err)
	}
	if r.Annotations[keyCopiedMetadata] == "" {
		t.Errorf("the replica does not record what was copied (%s): %v", keyCopiedMetadata, r.Annotations)
	}

	updateSecret(t, s.src, "repo", func(sec *corev1.Secret) {
		sec.Labels["team.example.com/owner"] = "bob"
		sec.Annotations["note"] = "changed"
	})
	eventually(t, converge, "a copied label's and annotation's change follow", secretWhere(dst, "repo", labelsAre(
		with(map[string]string{"argocd.argoproj.io/secret-type": "repository", "team.example.com/owner": "bob"}), "changed")))

	updateSecret(t, dst, "repo", func(sec *corev1.Secret) {
		sec.Labels["argocd.argoproj.io/secret-type"] = "tampered"
		sec.Labels["added-by-someone"] = "kept"
	})
	eventually(t, converge, "a copied label edited on the replica is reverted; other labels are left", secretWhere(dst, "repo", labelsAre(
		with(map[string]string{"argocd.argoproj.io/secret-type": "repository", "team.example.com/owner": "bob", "added-by-someone": "kept"}), "changed")))
	eventually(t, converge, "ReplicaReverted", eventWith(dst, "repo", "ReplicaReverted", s.src+"/repo"))

	updateSecret(t, s.src, "repo", func(sec *corev1.Secret) { delete(sec.Labels, "team.example.com/owner") })
	eventually(t, converge, "a label the source dropped is removed", secretWhere(dst, "repo", labelsAre(
		with(map[string]string{"argocd.argoproj.io/secret-type": "repository", "added-by-someone": "kept"}), "changed")))

	updateSecret(t, s.src, "repo", func(sec *corev1.Secret) {
		delete(sec.Annotations, keyCopyLabels)
		delete(sec.Annotations, keyCopyAnnotations)
	})
	eventually(t, converge, "nothing copied once the lists are removed", secretWhere(dst, "repo", func(r *corev1.Secret) bool {
		return labelsAre(with(map[string]string{"added-by-someone": "kept"}), "")(r) && r.Annotations[keyCopiedMetadata] == ""
	}))
}

// SPEC: a bad replicate-keys, copy-labels or copy-annotations value is a
// Warning Event InvalidAnnotation saying what is wrong, and nothing else
// changes until it is fixed.
func TestInvalidSelectiveAnnotationsChangeNothing(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "bad", nil)
	createSecret(t, s.src, "cfg", withAnnotation(keyReplicateTo, "test="+s.id), withData("a", "1"))
	eventually(t, converge, "replica", secretIn(dst, "cfg", map[string][]byte{"a": []byte("1")}))

	for i, bad := range []struct{ annotation, value, says string }{
		{keyCopyLabels, "courier.dev/protect", "never copied"},
		{keyCopyAnnotations, "courier.dev/*", "courier's own keys"},
		{keyReplicateKeys, "a, not a key", "not a valid Secret or ConfigMap key"},
	} {
		t.Run(bad.annotation, func(t *testing.T) {
			before, err := getSecret(t.Context(), dst, "cfg")
			if err != nil {
				t.Fatal(err)
			}
			updateSecret(t, s.src, "cfg", func(sec *corev1.Secret) {
				sec.Annotations[bad.annotation] = bad.value
				sec.Data["a"] = []byte("2")
			})
			eventually(t, converge, "InvalidAnnotation", eventWith(s.src, "cfg", "InvalidAnnotation", bad.annotation, bad.says))
			consistently(t, quiet, "the replica is left as it was", func(ctx context.Context) (bool, error) {
				r, err := getSecret(ctx, dst, "cfg")
				return err == nil && r.ResourceVersion == before.ResourceVersion, err
			})
			fixed := []byte(fmt.Sprint("fixed-", i))
			updateSecret(t, s.src, "cfg", func(sec *corev1.Secret) {
				delete(sec.Annotations, bad.annotation)
				sec.Data["a"] = fixed
			})
			eventually(t, converge, "fixed: in sync again", secretIn(dst, "cfg", map[string][]byte{"a": fixed}))
		})
	}
}
