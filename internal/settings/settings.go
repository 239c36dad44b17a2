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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/leader"
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
	WatchNamespaces   string   `json:"watchNamespaces,omitempty"`
	ResourceLabels    string   `json:"resourceLabelSelector,omitempty"`
	Compat            string   `json:"compat,omitempty"`
	ReloadAll         bool     `json:"reloadAll"`
	ReloadMode        string   `json:"reloadMode,omitempty"`
	ReloadResources   string   `json:"reloadResources,omitempty"`
	ReloadCSI         bool     `json:"reloadCSI,omitempty"`
	ReloadDebounce    string   `json:"reloadDebounce"`
	ReloadStorm       string   `json:"reloadStorm"`
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
		WatchNamespaces:   strings.Join(o.WatchNamespaces, ","),
		ResourceLabels:    o.ResourceLabelSelector,
		Compat:            o.Compat.String(),
		ReloadAll:         o.ReloadAll,
		ReloadMode:        o.ReloadMode,
		ReloadResources:   o.ReloadResources.String(),
		ReloadCSI:         o.ReloadCSI,
		ReloadDebounce:    o.ReloadDebounce.String(),
		ReloadStorm:       fmt.Sprintf("more than %d changes in %s", o.ReloadStormChanges, o.ReloadStormWindow),
		ReloadQPS:         o.ReloadQPS,
		ReloadBurst:       o.ReloadBurst,
		NotifyFormats:     formats,
		ClusterName:       o.ClusterName,
		LeaderElect:       o.LeaderElect,
		LeaseDuration:     o.LeaseDuration.String(),
	}
}

// errBlocked: the name is taken by a ConfigMap courier did not create.
var errBlocked = errors.New("settings not published")

// Publisher publishes the settings once per leadership term: Run is one of
// the controllers main runs while it leads.
type Publisher struct {
	Client   kubernetes.Interface
	Settings Settings
	Recorder record.EventRecorder
	Logger   *zap.Logger
}

// Run publishes, retrying a failure with backoff (1 s doubling to 5 min)
// until it succeeds, the name turns out taken, or the term ends. It never
// fails the term: without the settings, courier status falls back to flags.
func (p Publisher) Run(ctx context.Context) error {
	for wait := time.Second; ; wait = min(2*wait, 5*time.Minute) {
		err := Publish(ctx, p.Client, p.Settings, p.Recorder, p.Logger)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		p.Logger.Warn("courier status will not know this installation's flags until this succeeds", zap.Error(err))
		if errors.Is(err, errBlocked) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
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
		err := fmt.Errorf("%w: ConfigMap %s/%s exists and courier did not create it (labels %s=%s, %s=true missing), so courier leaves it alone and `courier status` cannot read this installation's settings: rename or delete it",
			errBlocked, s.Namespace, Name, wellknown.ManagedBy, wellknown.ManagedByValue, wellknown.Settings)
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

// Installation is one courier installation's settings, as published.
type Installation struct {
	Settings
	// Published is when courier last wrote them.
	Published metav1.Time `json:"published"`
	// NotRunning says why no courier seems to run there ("" when one
	// does, or when status may not tell): the settings may be stale.
	NotRunning string `json:"notRunning,omitempty"`
}

// List reads every installation's settings in the cluster, by namespace;
// with namespace set, only that one's (none if it published nothing). A
// ConfigMap it cannot read is left out and named in skipped.
func List(ctx context.Context, client kubernetes.Interface, namespace string) (found []Installation, skipped []string, err error) {
	list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.Settings + "=true," + wellknown.ManagedBy + "=" + wellknown.ManagedByValue})
	if err != nil {
		return nil, nil, fmt.Errorf("read courier's settings (ConfigMaps %s): %w", Name, err)
	}
	for _, cm := range list.Items {
		if cm.Name != Name {
			continue
		}
		var s Settings
		if err := json.Unmarshal([]byte(cm.Data[Key]), &s); err != nil {
			skipped = append(skipped, fmt.Sprintf("ConfigMap %s/%s: %s: %v", cm.Namespace, cm.Name, Key, err))
			continue
		}
		s.Namespace = cm.Namespace
		t := cm.CreationTimestamp
		for _, f := range cm.ManagedFields {
			if f.Manager == wellknown.FieldManager && f.Time != nil && f.Time.After(t.Time) {
				t = *f.Time
			}
		}
		found = append(found, Installation{Settings: s, Published: t})
	}
	slices.SortFunc(found, func(a, b Installation) int { return strings.Compare(a.Namespace, b.Namespace) })
	return found, skipped, nil
}

// CheckRunning sets i.NotRunning when no courier seems to run in i's
// namespace: with leader election, its Lease is gone or has not been renewed
// for longer than its duration. A Lease status may not read, or an
// installation without leader election, is taken as running.
func CheckRunning(ctx context.Context, client kubernetes.Interface, i *Installation, now time.Time) {
	if !i.LeaderElect {
		return
	}
	l, err := client.CoordinationV1().Leases(i.Namespace).Get(ctx, leader.LeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		i.NotRunning = "its Lease " + leader.LeaseName + " is gone"
	case err != nil:
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		i.NotRunning = "no process holds its Lease"
	case l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil &&
		now.Sub(l.Spec.RenewTime.Time) > 2*time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second:
		i.NotRunning = "its Lease was last renewed " + now.Sub(l.Spec.RenewTime.Time).Round(time.Second).String() + " ago"
	}
}
