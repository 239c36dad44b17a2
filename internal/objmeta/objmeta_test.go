package objmeta

import (
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-k8s/courier/internal/wellknown"
)

func TestFromKeepsWhatCourierReads(t *testing.T) {
	deleted := metav1.NewTime(time.Unix(200, 0))
	in := metav1.ObjectMeta{
		Name: "db", Namespace: "team-a", UID: "6f1c2b9e-0d3a-4c55-9f8e-1a2b3c4d5e6f", ResourceVersion: "42",
		CreationTimestamp: metav1.NewTime(time.Unix(100, 0)), DeletionTimestamp: &deleted,
		Labels: map[string]string{"courier.dev/protect": "true"}, Annotations: map[string]string{"courier.dev/replicate-to": "*"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ExternalSecret", Name: "db"}},
		Finalizers:      []string{"f"}, GenerateName: "d", Generation: 3,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
	m := From(&in, true)
	got := m.ObjectMeta()
	want := metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace, UID: in.UID, ResourceVersion: in.ResourceVersion,
		CreationTimestamp: in.CreationTimestamp, DeletionTimestamp: in.DeletionTimestamp, Labels: in.Labels, Annotations: in.Annotations,
		OwnerReferences: in.OwnerReferences, Finalizers: in.Finalizers}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("From(…, true) (-want +got):\n%s", d)
	}
	if without := From(&in, false); without.GetLabels() != nil || without.GetAnnotations() != nil || without.GetName() != "db" {
		t.Errorf("From(…, false) kept labels %v and annotations %v", without.GetLabels(), without.GetAnnotations())
	}
}

func TestAZeroMetaReadsAsEmpty(t *testing.T) {
	var m Meta
	if m.GetNamespace() != "" || m.GetName() != "" || m.GetUID() != "" || m.GetCreationTimestamp() != (metav1.Time{}) || m.GetDeletionTimestamp() != nil {
		t.Errorf("a zero Meta reads as %+v", m.ObjectMeta())
	}
}

func TestUIDsThatAreNoUUIDAreKeptAsTheyAre(t *testing.T) {
	for _, uid := range []types.UID{"", "r-uid", "6F1C2B9E-0D3A-4C55-9F8E-1A2B3C4D5E6F", "6f1c2b9e00d3a-4c55-9f8e-1a2b3c4d5e6f", "6f1c2b9e-0d3a-4c55-9f8e-1a2b3c4d5e6g", "00000000-0000-0000-0000-000000000000"} {
		m := From(&metav1.ObjectMeta{UID: uid}, false)
		if got := m.GetUID(); got != uid {
			t.Errorf("UID %q read back as %q", uid, got)
		}
	}
}

func TestRepeatedStringsAreShared(t *testing.T) {
	a := From(&metav1.ObjectMeta{Namespace: "ns-" + string([]byte("x")), Labels: map[string]string{"courier.dev/" + string([]byte("k")): "v" + string([]byte("1"))}}, true)
	b := From(&metav1.ObjectMeta{Namespace: "ns-" + string([]byte("x")), Labels: map[string]string{"courier.dev/" + string([]byte("k")): "v" + string([]byte("1"))}}, true)
	if unsafe.StringData(a.GetNamespace()) != unsafe.StringData(b.GetNamespace()) {
		t.Error("two objects of one namespace hold its name twice")
	}
	if unsafe.StringData(a.GetLabels()["courier.dev/k"]) != unsafe.StringData(b.GetLabels()["courier.dev/k"]) {
		t.Error("two objects' equal label values are held twice")
	}
	long := string(make([]byte, maxInterned+1))
	if unsafe.StringData(Intern(long)) != unsafe.StringData(long) {
		t.Error("a value longer than maxInterned was copied")
	}
}

func TestDeepCopySharesNothingItCouldChange(t *testing.T) {
	deleted := metav1.NewTime(time.Unix(200, 0))
	m := From(&metav1.ObjectMeta{Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}, DeletionTimestamp: &deleted,
		OwnerReferences: []metav1.OwnerReference{{Name: "o"}}}, true)
	c := m.DeepCopy()
	c.SetLabels(map[string]string{"a": "x"})
	c.SetAnnotations(map[string]string{"b": "y"})
	c.GetOwnerReferences()[0].Name = "z"
	c.GetDeletionTimestamp().Time = time.Unix(1, 0)
	if m.GetLabels()["a"] != "1" || m.GetAnnotations()["b"] != "2" || m.GetOwnerReferences()[0].Name != "o" || !m.GetDeletionTimestamp().Equal(&deleted) ||
		c.GetLabels()["a"] != "x" || c.GetAnnotations()["b"] != "y" {
		t.Error("a change to a DeepCopy changed the original")
	}
	// An object courier manages shares its labels and annotations with
	// equal ones: a change to a copy changes neither the original nor them.
	managed := map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, "a": "1"}
	r1, r2 := From(&metav1.ObjectMeta{Labels: managed}, true), From(&metav1.ObjectMeta{Labels: managed}, true)
	rc := r1.DeepCopy()
	rc.SetLabels(map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, "a": "x"})
	if r1.GetLabels()["a"] != "1" || r2.GetLabels()["a"] != "1" || rc.GetLabels()["a"] != "x" {
		t.Error("a change to a DeepCopy of a managed object changed the original or another sharing its labels")
	}
}

func TestPairsReadAsTheirMap(t *testing.T) {
	for _, m := range []map[string]string{nil, {}, {"a": "1"}, {"z": "", "b": "2", "courier.dev/source": "ns/s", "a": "x"}} {
		p := PairsOf(m)
		want := m
		if len(m) == 0 {
			want = nil
		}
		if d := cmp.Diff(want, p.Map()); d != "" || p.Len() != len(m) {
			t.Errorf("PairsOf(%v).Map() (-want +got):\n%s", m, d)
		}
		for k, v := range m {
			if got, ok := p.Get(k); !ok || got != v {
				t.Errorf("PairsOf(%v).Get(%q) = %q, %v", m, k, got, ok)
			}
		}
		for _, k := range []string{"", "0", "c", "zz", "courier.dev/sourc"} {
			if _, in := m[k]; in {
				continue
			}
			if got, ok := p.Get(k); ok {
				t.Errorf("PairsOf(%v).Get(%q) = %q, true", m, k, got)
			}
		}
	}
	meta := From(&metav1.ObjectMeta{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "2"}}, true)
	if v, ok := Annotation(&meta, "a"); !ok || v != "2" {
		t.Errorf("Annotation(a) = %q, %v", v, ok)
	}
	if v, ok := Label(&meta, "l"); !ok || v != "1" {
		t.Errorf("Label(l) = %q, %v", v, ok)
	}
	full := &metav1.ObjectMeta{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "2"}}
	if v, ok := Annotation(full, "a"); !ok || v != "2" {
		t.Errorf("Annotation(ObjectMeta, a) = %q, %v", v, ok)
	}
	if _, ok := Label(full, "x"); ok {
		t.Error("Label(ObjectMeta, x) found a label it does not have")
	}
}

func TestResourceVersionsReadBackAsTheyWere(t *testing.T) {
	for _, rv := range []string{"", "0", "1", "42", "007", "18446744073709551615", "18446744073709551616", "+5", "-1", "abc", "1a"} {
		m := From(&metav1.ObjectMeta{ResourceVersion: rv}, false)
		if got := m.GetResourceVersion(); got != rv {
			t.Errorf("resourceVersion %q read back as %q", rv, got)
		}
		c := m.DeepCopy()
		if got := c.GetResourceVersion(); got != rv {
			t.Errorf("a copy's resourceVersion %q read back as %q", rv, got)
		}
		m.SetResourceVersion("7")
		if got := m.GetResourceVersion(); got != "7" || c.GetResourceVersion() != rv {
			t.Errorf("set to 7, it reads %q (the copy %q, want %q)", got, c.GetResourceVersion(), rv)
		}
	}
}
