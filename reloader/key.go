package reloader

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/writer"
)

// The digests courier writes on workloads (courier.dev/config-inputs and
// courier.dev/config-hash) are readable by anyone who may read the workload
// (the view role); unkeyed, a weak secret value could be guessed offline
// from them. So they are HMACs keyed with a random key kept in the Secret
// KeySecret in courier's own namespace, which only courier (and whoever may
// read Secrets there) can read; every courier process, and every restart,
// uses the same key.

// KeySecret is the name of the Secret holding the digest key, in courier's
// namespace, labelled wellknown.DigestKey=true (and Options.KeyLabels); its
// key "key" holds 32 random bytes.
const KeySecret = wellknown.DigestKeySecret

// digester computes a workload's digests with one key, or, with none, as
// baselines written before digests were keyed did.
type digester struct {
	key []byte
	id  string // names the key in a baseline ("" for no key)
}

// keyIDField is the baseline entry naming the key its digests were made with.
const keyIDField = "key"

func newDigester(key []byte) digester {
	return digester{key: key, id: hex.EncodeToString(hmacSum(key, "courier digest key id"))[:8]}
}

func hmacSum(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// consumed is the digest of the consumed content whose content hash is h.
func (d digester) consumed(h string) string {
	if d.key == nil {
		return h[:digestLen]
	}
	return hex.EncodeToString(hmacSum(d.key, h))[:digestLen]
}

// configHash is the pod-template hash of a baseline.
func (d digester) configHash(b baseline) string {
	s := b.encode(d.id, "") // the same hash whichever installation writes it
	if d.key == nil {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	return hex.EncodeToString(hmacSum(d.key, s))
}

// consumedDigest is the digest of the keys ref consumes from entries: all of
// them, or only the listed ones that exist. An object the cache holds as one
// whole-content digest (more than content.MaxKeyDigests keys) is consumed
// as a whole.
func (d digester) consumedDigest(ref inputs.Ref, entries []content.Entry) string {
	if !ref.All() && !isWhole(entries) {
		want := map[string]bool{}
		for _, k := range ref.Keys {
			want[k] = true
		}
		kept := entries[:0:0]
		for _, e := range entries {
			if want[e.Key] {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	return d.consumed(content.Hash(entries))
}

// digester returns the digester of the cluster's key, if the cache holds it.
func (c *Controller) digester() (digester, bool) {
	obj, ok, err := c.secrets.GetByKey(c.opts.Namespace + "/" + KeySecret)
	if err != nil || !ok {
		return digester{}, false
	}
	s, ok := obj.(*corev1.Secret)
	if !ok || s.Labels[wellknown.DigestKey] != "true" || content.IsDigested(s) || len(s.Data["key"]) < 32 {
		return digester{}, false
	}
	return newDigester(s.Data["key"]), true
}

// relabelKey labels the digest key courier's again if it lost courier's
// managed-by label (someone relabelled it): the cache then holds its
// metadata only, and the label back brings it whole. A Secret of that name
// that is not the key is left be.
func (c *Controller) relabelKey(ctx context.Context) (bool, error) {
	obj, ok, _ := c.secrets.GetByKey(c.opts.Namespace + "/" + KeySecret)
	m, isMeta := obj.(metav1.Object)
	if !ok || !isMeta || content.Read(obj) || m.GetLabels()[wellknown.DigestKey] != "true" {
		return false, nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, wellknown.ManagedBy, wellknown.ManagedByValue)
	if _, err := c.client.CoreV1().Secrets(c.opts.Namespace).Patch(ctx, KeySecret, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: wellknown.FieldManager}); err != nil {
		return false, fmt.Errorf("label the digest key %s/%s %s=%s again: %w", c.opts.Namespace, KeySecret, wellknown.ManagedBy, wellknown.ManagedByValue, err)
	}
	return true, nil
}

// ensureKey makes the digest key exist and waits until the cache holds it.
func (c *Controller) ensureKey(ctx context.Context) error {
	if _, ok := c.digester(); ok {
		return nil
	}
	relabelled, err := c.relabelKey(ctx)
	if err != nil {
		return err
	}
	if !relabelled {
		if err := c.createKey(ctx); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, ok := c.digester()
		return ok, nil
	})
}

// createKey makes a new digest key.
func (c *Controller) createKey(ctx context.Context) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	labels := maps.Clone(c.opts.KeyLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[wellknown.DigestKey], labels[wellknown.ManagedBy] = "true", wellknown.ManagedByValue
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: KeySecret, Namespace: c.opts.Namespace, Labels: labels},
		Data:       map[string][]byte{"key": key},
	}
	// With --resource-label-selector the writer adopts a key made before
	// the selector was set (its labels then get the selector's).
	err := writer.New(c.client, slices.Collect(maps.Keys(c.opts.KeyLabels))).Create(ctx, s)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the digest key %s/%s: %w", c.opts.Namespace, KeySecret, err)
	}
	return nil
}
