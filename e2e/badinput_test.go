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
	"k8s.io/apimachinery/pkg/watch"
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
		// Every write courier makes in flappy (create, update or delete) is
		// an event on this watch, which starts from the listed state.
		list, err := admin().CoreV1().Secrets(flappy).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := admin().CoreV1().Secrets(flappy).Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		const flips = 100
		start := time.Now()
		// longGaps counts the pauses between flips long enough for courier
		// to act in (its hold ends when the labels held still for 250 ms; the
		// test counts from 150 ms, as courier sees each change a little later
		// than the test made it): each allows one more write per source, so a
		// pause on a slow machine is not a false failure. More than a few
		// such pauses and the storm is no longer what the claim is about.
		const maxLongGaps = 5
		longGaps, last := 0, start
		for i := range flips {
			setNamespaceLabels(t, flappy, func(l map[string]string) {
				if i%2 == 0 {
					delete(l, "test")
				} else {
					l["test"] = s.id
				}
			})
			now := time.Now()
			if i > 0 && now.Sub(last) >= 150*time.Millisecond {
				longGaps++
			}
			last = now
		}
		took := time.Since(start)
		t.Logf("%d label changes in %s, %d pauses of 150 ms or more between them", flips, took.Round(time.Millisecond), longGaps)
		if longGaps > maxLongGaps {
			t.Fatalf("%d of the %d label changes came 150 ms or more after the one before (%s in all): this machine is too slow to make a label flap, so courier's hold cannot be judged",
				longGaps, flips, took.Round(time.Millisecond))
		}
		// Every source of this test with selector sel ends with its replica
		// in flappy; while the labels flap courier holds off, so each costs
		// at most a create after the storm, plus a delete if it acted on the
		// storm's first change before it looked like flapping.
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
		// A write of the test's own after courier's proves the watch
		// delivered every event up to it: a zero count then means zero.
		createSecret(t, flappy, "watch-probe", withData("k", "v"))
		writes, sawProbe := map[watch.EventType]int{}, false
		for done := time.After(quiet); done != nil; {
			select {
			case e, open := <-w.ResultChan():
				if !open || e.Type == watch.Error {
					t.Fatalf("the watch on %s ended (%v): the count would mean nothing", flappy, e.Object)
				}
				m, _ := e.Object.(*corev1.Secret)
				switch {
				case m == nil:
				case m.Name == "watch-probe":
					sawProbe = true
				default: // any write in flappy counts, not only the replicas
					writes[e.Type]++
				}
			case <-done:
				done = nil
			}
		}
		if !sawProbe {
			t.Fatalf("the watch on %s never delivered the test's own write: the count would mean nothing", flappy)
		}
		total := writes[watch.Added] + writes[watch.Modified] + writes[watch.Deleted]
		t.Logf("replica writes during %d flips, %d sources: %d (%v)", flips, len(targeting), total, writes)
		if limit := len(targeting) * (2 + longGaps); total > limit {
			t.Errorf("%d replica writes (%v) for %d label flips and %d sources, want at most %d: courier did not hold off while the labels flapped",
				total, writes, flips, len(targeting), limit)
		}
	})

	for _, by := range bystanders {
		got, err := getSecret(t.Context(), by.Namespace, by.Name)
		if err != nil || got.ResourceVersion != by.ResourceVersion {
			t.Errorf("bystander %s/%s was touched (%v)", by.Namespace, by.Name, err)
		}
	}
}
