package informers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// What is read of an object the cache holds as metadata only is read once
// per version and kept as the transform would have held it (a source's
// values, anything else's digests), until the object changes or goes; a
// read that finds it replaced or gone is an error and keeps nothing.
func TestContentsAreReadOncePerVersionAndKeptAsTheTransformWould(t *testing.T) {
	secret := func(name, uid, version, value string, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID(uid), ResourceVersion: version, Annotations: annotations},
			Data: map[string][]byte{"k": []byte(value)}}
	}
	server := map[string]*corev1.Secret{} // what the API server holds, by name
	cached := map[string]metav1.Object{}  // what the cache holds, by name
	reads := 0
	c := NewContents(func(_ context.Context, kind, namespace, name string) (any, error) {
		reads++
		if s, ok := server[name]; ok {
			return s.DeepCopy(), nil
		}
		return nil, nil
	}, func(kind, namespace, name string) (metav1.Object, bool) {
		m, ok := cached[name]
		return m, ok
	}, role.Config{Namespace: "courier", Allowed: func(string) bool { return true }})
	hold := func(s *corev1.Secret) metav1.Object {
		server[s.Name] = s
		m := content.MetadataOnly(s.DeepCopy()).(metav1.Object)
		cached[s.Name] = m
		return m
	}
	ctx := t.Context()

	db := hold(secret("db", "u1", "5", "hunter2", nil))
	got, err := c.Of(ctx, wellknown.KindSecret, db)
	if err != nil || !content.IsDigested(got) || !content.Read(got) || !content.Has(got, "k") {
		t.Fatalf("a tenant's Secret read: %T, %v; want its digests", got, err)
	}
	if _, err := c.Of(ctx, wellknown.KindSecret, db); err != nil || reads != 1 {
		t.Fatalf("asked again at the same version: %d reads, %v; want 1", reads, err)
	}
	newer := hold(secret("db", "u1", "6", "hunter3", nil))
	c.Handler().OnUpdate(db, newer)
	if c.Len() != 0 {
		t.Fatal("what was read of version 5 outlived the update to 6")
	}
	if _, err := c.Of(ctx, wellknown.KindSecret, newer); err != nil || reads != 2 {
		t.Fatalf("version 6: %d reads, %v; want 2", reads, err)
	}
	c.Handler().OnDelete(newer)
	if c.Len() != 0 {
		t.Fatal("what was read outlived the object's deletion")
	}

	src := hold(secret("ca", "u2", "7", "cert", map[string]string{wellknown.ReplicateTo: "team-*"}))
	got, err = c.Of(ctx, wellknown.KindSecret, src)
	if s, ok := got.(*corev1.Secret); err != nil || !ok || string(s.Data["k"]) != "cert" {
		t.Fatalf("a source read: %T, %v; want it with its values", got, err)
	}

	replaced := hold(secret("api", "u3", "8", "x", nil))
	server["api"] = secret("api", "u4", "9", "y", nil)
	if _, err := c.Of(ctx, wellknown.KindSecret, replaced); err == nil {
		t.Error("a read that found the object replaced gave no error")
	}
	gone := hold(secret("old", "u5", "10", "x", nil))
	delete(server, "old")
	if _, err := c.Of(ctx, wellknown.KindSecret, gone); err == nil {
		t.Error("a read that found the object gone gave no error")
	}
	deleted := hold(secret("brief", "u6", "11", "x", nil))
	delete(cached, "brief") // its delete handler ran before the read ended
	if _, err := c.Of(ctx, wellknown.KindSecret, deleted); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 1 { // the source's values only
		t.Errorf("%d objects held, want 1 (the source): the replaced, gone and deleted ones keep nothing", c.Len())
	}

	full := content.DigestObject(secret("cm", "u7", "12", "v", nil), false).(metav1.Object)
	if got, err := c.Of(ctx, wellknown.KindSecret, full); err != nil || got != any(full) || reads != 6 {
		t.Errorf("an object whose digests the cache holds: %v, %d reads; want it as it is, no read", err, reads)
	}
}

// What Contents keeps of an object it read is trimmed as the transform
// trims: never kubectl's last-applied configuration, which repeats the
// values of an object applied with client-side apply.
func TestContentsKeepNoLastAppliedConfiguration(t *testing.T) {
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "pulled", UID: "u", ResourceVersion: "3",
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"k":"aHVudGVyMg=="}}`, "replicator.v1.mittwald.de/replicate-from": "src/ca"}},
		Data: map[string][]byte{"k": []byte("hunter2")}}
	c := NewContents(func(context.Context, string, string, string) (any, error) { return pull.DeepCopy(), nil },
		func(string, string, string) (metav1.Object, bool) { return pull, true },
		role.Config{Namespace: "courier", Compat: source.Compat{Replicator: true}, Allowed: func(string) bool { return true }})
	got, err := c.Of(t.Context(), wellknown.KindSecret, content.MetadataOnly(pull.DeepCopy()).(metav1.Object))
	if err != nil {
		t.Fatal(err)
	}
	m := got.(metav1.Object)
	if _, ok := m.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok || !content.IsDigested(got) {
		t.Errorf("kept %T with annotations %v; want its digests, without the last-applied configuration", got, m.GetAnnotations())
	}
}
