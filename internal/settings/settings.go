// Package settings is how `courier status` learns how the running courier
// was started: at the start of each leadership term the leader publishes
// its effective configuration in the ConfigMap courier-settings in its own
// namespace (only when it differs from what is there, so a restart with the
// same flags writes nothing), and status reads it with the list rights on
// ConfigMaps it already needs. Nothing secret is published: of
// --notify-url only the formats.
package settings

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Name is the ConfigMap's name; Key the data key holding the JSON.
const (
	Name = "courier-settings"
	Key  = "settings.json"
)

// Settings is what a running courier does: the flags that change it, and
// its version.
type Settings struct {
	Version           string   `json:"version"`
	Namespace         string   `json:"namespace"`
	SourceNamespaces  string   `json:"sourceNamespaces"`
	ExcludeNamespaces string   `json:"excludeNamespaces,omitempty"`
	Compat            string   `json:"compat,omitempty"`
	ReloadAll         bool     `json:"reloadAll"`
	ReloadResources   string   `json:"reloadResources,omitempty"`
	ReloadDebounce    string   `json:"reloadDebounce"`
	ReloadQPS         float64  `json:"reloadQPS"`
	ReloadBurst       int      `json:"reloadBurst"`
	NotifyFormats     []string `json:"notifyFormats,omitempty"`
	ClusterName       string   `json:"clusterName,omitempty"`
	LeaderElect       bool     `json:"leaderElect"`
	LeaseDuration     string   `json:"leaseDuration"`
}

// Of is the Settings of a courier started with o.
func Of(o config.Options, version string) Settings {
	var formats []string
	for _, t := range o.NotifyURLs {
		formats = append(formats, t.Format)
	}
	return Settings{
		Version:           version,
		Namespace:         o.Namespace,
		SourceNamespaces:  o.SourceNamespaces.String(),
		ExcludeNamespaces: o.ExcludeNamespaces.String(),
		Compat:            o.Compat.String(),
		ReloadAll:         o.ReloadAll,
		ReloadResources:   o.ReloadResources.String(),
		ReloadDebounce:    o.ReloadDebounce.String(),
		ReloadQPS:         o.ReloadQPS,
		ReloadBurst:       o.ReloadBurst,
		NotifyFormats:     formats,
		ClusterName:       o.ClusterName,
		LeaderElect:       o.LeaderElect,
		LeaseDuration:     o.LeaseDuration.String(),
	}
}

// Publish writes s into courier-settings in s.Namespace unless it holds s
// already. A ConfigMap of that name courier did not create is never
// touched: Publish says so and returns an error, as it does when the write
// fails; neither stops courier (status then falls back to its flags).
func Publish(ctx context.Context, client kubernetes.Interface, s Settings, recorder record.EventRecorder, logger *zap.Logger) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	data := map[string]string{Key: string(b) + "\n"}
	cms := client.CoreV1().ConfigMaps(s.Namespace)
	opts := metav1.CreateOptions{FieldManager: wellknown.FieldManager}
	have, err := cms.Get(ctx, Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: Name, Namespace: s.Namespace, Labels: map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, wellknown.Settings: "true"},
		}, Data: data}, opts)
	case err != nil:
	case have.Labels[wellknown.ManagedBy] != wellknown.ManagedByValue || have.Labels[wellknown.Settings] != "true":
		err := fmt.Errorf("ConfigMap %s/%s exists and courier did not create it (labels %s=%s, %s=true missing), so courier leaves it alone and `courier status` cannot read this installation's settings: rename or delete it",
			s.Namespace, Name, wellknown.ManagedBy, wellknown.ManagedByValue, wellknown.Settings)
		recorder.Event(have, corev1.EventTypeWarning, wellknown.ReasonSettingsBlocked, err.Error())
		return err
	case maps.Equal(have.Data, data):
		return nil
	default:
		have = have.DeepCopy()
		have.Data = data
		_, err = cms.Update(ctx, have, metav1.UpdateOptions{FieldManager: wellknown.FieldManager})
	}
	if err != nil {
		return fmt.Errorf("publish settings in ConfigMap %s/%s for courier status (needs get, create and update on configmaps there): %w", s.Namespace, Name, err)
	}
	logger.Info("published settings for courier status", zap.String("configMap", s.Namespace+"/"+Name))
	return nil
}

// Installation is one running courier's settings, as published.
type Installation struct {
	Settings
	// Published is when the leader last wrote them.
	Published metav1.Time `json:"published"`
}

// List reads every installation's settings in the cluster, by namespace;
// with namespace set, only that one's (none if it published nothing).
func List(ctx context.Context, client kubernetes.Interface, namespace string) ([]Installation, error) {
	list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.Settings + "=true," + wellknown.ManagedBy + "=" + wellknown.ManagedByValue})
	if err != nil {
		return nil, fmt.Errorf("read courier's settings (ConfigMaps %s): %w", Name, err)
	}
	var out []Installation
	for _, cm := range list.Items {
		if cm.Name != Name {
			continue
		}
		var s Settings
		if err := json.Unmarshal([]byte(cm.Data[Key]), &s); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, Key, err)
		}
		s.Namespace = cm.Namespace
		t := cm.CreationTimestamp
		for _, f := range cm.ManagedFields {
			if f.Time != nil && f.Time.After(t.Time) {
				t = *f.Time
			}
		}
		out = append(out, Installation{Settings: s, Published: t})
	}
	slices.SortFunc(out, func(a, b Installation) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out, nil
}
