package inputs

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzOf feeds pod specs decoded from arbitrary JSON to Of, which must never
// panic and must return one sorted, named Ref per object, with sorted,
// distinct keys (nil meaning every key). Seeds: testdata/fuzz/FuzzOf and below;
// run `go test -fuzz=FuzzOf ./internal/inputs` to search further.
func FuzzOf(f *testing.F) {
	for _, seed := range []string{
		`{"containers":[{"name":"a","env":[{"name":"X","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}}]}]}`,
		`{"containers":[{"name":"a","envFrom":[{"configMapRef":{"name":"cfg"}},{"secretRef":{"name":"db","optional":true}}]}]}`,
		`{"initContainers":[{"name":"i","env":[{"name":"Y","valueFrom":{"configMapKeyRef":{"name":"cfg","key":"k","optional":true}}}]}],
		  "volumes":[{"name":"v","secret":{"secretName":"db","items":[{"key":"b","path":"b"},{"key":"a","path":"a"},{"key":"a","path":"c"}]}},
		             {"name":"p","projected":{"sources":[{"configMap":{"name":"cfg"}},{"secret":{"name":"tls","items":[{"key":"tls.crt","path":"c"}]}}]}}]}`,
		`{"containers":[{"name":"a","env":[{"name":"X","valueFrom":{"secretKeyRef":{"name":"","key":""}}}]}],"volumes":[{"name":"v","configMap":{}}]}`,
		`{"volumes":[{"name":"s","csi":{"driver":"secrets-store.csi.k8s.io","volumeAttributes":{"secretProviderClass":"vault-db"}}},{"name":"o","csi":{"driver":"other","volumeAttributes":{"secretProviderClass":"x"}}}]}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var spec corev1.PodSpec
		if json.Unmarshal(raw, &spec) != nil {
			return
		}
		refs := Of(&spec)
		if !slices.IsSortedFunc(refs, func(a, b Ref) int { return strings.Compare(a.ID(), b.ID()) }) {
			t.Fatalf("refs not sorted by ID: %+v", refs)
		}
		for i, r := range refs {
			if r.Name == "" || (r.Kind != "Secret" && r.Kind != "ConfigMap" && r.Kind != "SecretProviderClass") {
				t.Fatalf("bad ref %+v", r)
			}
			if i > 0 && refs[i-1].ID() == r.ID() {
				t.Fatalf("object %s listed twice", r.ID())
			}
			if r.Keys != nil && (!slices.IsSorted(r.Keys) || len(slices.Compact(slices.Clone(r.Keys))) != len(r.Keys)) {
				t.Fatalf("keys of %s not sorted and distinct: %q", r.ID(), r.Keys)
			}
		}
	})
}

// FuzzParseReloadOn: never panics; every ID it returns is kind/name with a
// known kind and a name without "/"; and the list is read entry by entry:
// the IDs are the union of what each comma-separated entry gives alone (one
// ID, or an error), and the whole reports an error exactly when some entry
// alone does.
func FuzzParseReloadOn(f *testing.F) {
	for _, seed := range []string{"secret/a, configmap/b", "Secret/A ,ConfigMap/b,", "secret/other-ns/db", "pod/x, secret/", ",,", "secret/a\tconfigmap/b", "configmap/ spaced "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := ParseReloadOn(s)
		for id := range ids {
			kind, name, ok := strings.Cut(id, "/")
			if !ok || (kind != "secret" && kind != "configmap" && kind != "secretproviderclass") || name == "" || strings.Contains(name, "/") {
				t.Fatalf("ParseReloadOn(%q) returned %q", s, id)
			}
		}
		union, anyBad := map[string]bool{}, false
		for _, part := range strings.Split(s, ",") {
			one, oneErr := ParseReloadOn(part)
			if oneErr != nil {
				anyBad = true
				continue
			}
			if strings.TrimSpace(part) == "" {
				if len(one) != 0 {
					t.Fatalf("empty entry %q gave %v", part, one)
				}
				continue
			}
			if len(one) != 1 {
				t.Fatalf("entry %q gave %d IDs, want 1", part, len(one))
			}
			for id := range one {
				kind, name, _ := strings.Cut(strings.TrimSpace(part), "/")
				if want := strings.ToLower(strings.TrimSpace(kind)) + "/" + strings.TrimSpace(name); id != want {
					t.Fatalf("entry %q gave %q, want %q", part, id, want)
				}
				union[id] = true
			}
		}
		if (err != nil) != anyBad {
			t.Fatalf("ParseReloadOn(%q): error %v, but an entry alone was bad: %t", s, err, anyBad)
		}
		if !maps.Equal(ids, union) {
			t.Fatalf("ParseReloadOn(%q) = %v, but its entries alone give %v", s, ids, union)
		}
	})
}
