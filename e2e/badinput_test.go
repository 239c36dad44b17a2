package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBadInput feeds courier one bad or extreme input per case; each must
// give a clear Event (or be handled exactly) and touch nothing else: a
// bystander Secret in every target keeps its resourceVersion throughout.
func TestBadInput(t *testing.T) {
	s := setupReplication(t)
	a, b := s.target(t, "a", nil), s.target(t, "b", nil)
	outside := newNamespace(t, "outside", nil) // not a source namespace, not a target
	var bystanders []*corev1.Secret
	for _, ns := range []string{a, b, outside} {
		bystanders = append(bystanders, createSecret(t, ns, "bystander", withData("mine", "keep")))
	}
	sel := "test=" + s.id
	noReplica := func(name string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			for _, ns := range []string{a, b} {
				if _, err := getSecret(ctx, ns, name); !apierrors.IsNotFound(err) {
					return false, err
				}
			}
			return true, nil
		}
	}
	replicated := func(name string, data map[string][]byte) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			for _, ns := range []string{a, b} {
				if ok, err := secretIn(ns, name, data)(ctx); !ok || err != nil {
					return false, err
				}
			}
			return true, nil
		}
	}
	big := map[string][]byte{"blob": []byte(strings.Repeat("x", 1<<20-4096))} // just under etcd's request limit with metadata
	binary := map[string][]byte{"bin": {0, 0xff, 0xfe, 0x80, '\n', 0, 0xc3, 0x28}}
	thousand := map[string][]byte{}
	for i := range 1000 {
		thousand[fmt.Sprintf("key-%04d", i)] = []byte(fmt.Sprint(i))
	}

	cases := []struct {
		name  string
		make  func(t *testing.T)
		check func(t *testing.T)
	}{
		{"invalid selector", func(t *testing.T) {
			createSecret(t, s.src, "bad-sel", withAnnotation(keyReplicateTo, "env in ("), withData("k", "v"))
		}, func(t *testing.T) {
			eventually(t, converge, "InvalidSelector", eventWith(s.src, "bad-sel", "InvalidSelector", "env in ("))
			consistently(t, time.Second, "nothing replicated", noReplica("bad-sel"))
		}},
		{"selector matching nothing", func(t *testing.T) {
			createSecret(t, s.src, "lonely", withAnnotation(keyReplicateTo, "nobody=here"), withData("k", "v"))
		}, func(t *testing.T) {
			consistently(t, time.Second, "nothing replicated", noReplica("lonely"))
		}},
		{"1 MiB Secret", func(t *testing.T) {
			createSecret(t, s.src, "big", withAnnotation(keyReplicateTo, sel), func(x *corev1.Secret) { x.Data = big })
		}, func(t *testing.T) {
			eventually(t, 10*time.Second, "replicated byte for byte", replicated("big", big))
		}},
		{"binary data", func(t *testing.T) {
			createSecret(t, s.src, "binary", withAnnotation(keyReplicateTo, sel), func(x *corev1.Secret) { x.Data = binary })
		}, func(t *testing.T) {
			eventually(t, converge, "replicated byte for byte", replicated("binary", binary))
		}},
		{"1,000 keys", func(t *testing.T) {
			createSecret(t, s.src, "many", withAnnotation(keyReplicateTo, sel), func(x *corev1.Secret) { x.Data = thousand })
		}, func(t *testing.T) {
			eventually(t, 10*time.Second, "replicated with every key", replicated("many", thousand))
		}},
		{"source outside the allowed namespaces", func(t *testing.T) {
			createSecret(t, outside, "stray", withAnnotation(keyReplicateTo, "*"), withData("k", "v"))
		}, func(t *testing.T) {
			eventually(t, converge, "SourceNotAllowed", eventWith(outside, "stray", "SourceNotAllowed", "--source-namespaces"))
			consistently(t, time.Second, "nothing replicated", noReplica("stray"))
		}},
		{"source named like an unmanaged object", func(t *testing.T) {
			createSecret(t, s.src, "bystander", withAnnotation(keyReplicateTo, sel), withData("k", "v"))
		}, func(t *testing.T) {
			eventually(t, converge, "ReplicaConflict naming both namespaces", eventWith(s.src, "bystander", "ReplicaConflict", a, b))
		}},
		{"malformed courier.dev/reload on a workload", func(t *testing.T) {
			createDeployment(t, a, "maybe", map[string]string{keyReload: "maybe"}, podSpec(nil, nil, nil))
		}, func(t *testing.T) {
			eventually(t, converge, "InvalidAnnotation", eventWith(a, "maybe", "InvalidAnnotation", `"maybe"`))
		}},
		{"courier.dev/reload-on naming what does not exist", func(t *testing.T) {
			createDeployment(t, b, "ghost", map[string]string{"courier.dev/reload-on": "secret/ghost, pod/x, configmap/"},
				podSpec([]corev1.EnvVar{keyRef("secret", "ghost", "k")}, nil, nil))
		}, func(t *testing.T) {
			eventually(t, converge, "InvalidAnnotation naming the malformed entries", eventWith(b, "ghost", "InvalidAnnotation", "pod/x", "configmap/"))
			unsettled(t, b, "ghost")
			noRollout(t, b, "ghost", 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.make(t)
			c.check(t)
		})
	}

	t.Run("label flapping on a namespace", func(t *testing.T) {
		createSecret(t, s.src, "flap", withAnnotation(keyReplicateTo, sel), withData("k", "v"))
		flappy := s.target(t, "flappy", nil)
		eventually(t, converge, "replica", secretIn(flappy, "flap", map[string][]byte{"k": []byte("v")}))
		before := apiserverWrites(t, "secrets")
		const flips = 100
		start := time.Now()
		for i := range flips {
			setNamespaceLabels(t, flappy, func(l map[string]string) {
				if i%2 == 0 {
					delete(l, "test")
				} else {
					l["test"] = s.id
				}
			})
		}
		t.Logf("%d label changes in %s", flips, time.Since(start).Round(time.Millisecond))
		// Every source of this test with selector sel ends with its replica
		// in flappy; while the labels flap courier holds off, so each costs
		// at most a create after the storm (plus one if it acted on the
		// storm's first change before it looked like flapping).
		srcs, err := admin().CoreV1().Secrets(s.src).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		targeting := map[string]map[string][]byte{} // name → data
		for _, x := range srcs.Items {
			if x.Annotations[keyReplicateTo] == sel {
				targeting[x.Name] = x.Data
			}
		}
		eventually(t, converge, fmt.Sprintf("the replicas of all %d sources follow the final labels", len(targeting)),
			func(ctx context.Context) (bool, error) {
				for name, data := range targeting {
					if ok, err := secretIn(flappy, name, data)(ctx); !ok || err != nil {
						return false, err
					}
				}
				return true, nil
			})
		time.Sleep(time.Second)
		creates := apiserverWrites(t, "secrets") - before
		t.Logf("replica creates and updates during %d flips, %d sources: %g", flips, len(targeting), creates)
		if limit := 2 * len(targeting); creates > float64(limit) {
			t.Errorf("%g replica writes for %d label flips and %d sources, want at most %d: courier did not hold off while the labels flapped",
				creates, flips, len(targeting), limit)
		}
	})

	for _, by := range bystanders {
		got, err := getSecret(t.Context(), by.Namespace, by.Name)
		if err != nil || got.ResourceVersion != by.ResourceVersion {
			t.Errorf("bystander %s/%s was touched (%v)", by.Namespace, by.Name, err)
		}
	}
}
