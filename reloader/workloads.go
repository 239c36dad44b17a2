package reloader

import (
	"encoding/json"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// key names one workload; Kind is one of workload.Kinds.
type key struct {
	Kind, Namespace, Name string
}

func (k key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// patch is the merge patch the reloader sends: courier's annotations on the
// workload and, for a rollout, courier.dev/config-hash on the pod template.
// resourceVersion makes it apply only to the workload that was looked at.
func patch(kind, resourceVersion string, annotations map[string]any, configHash string) ([]byte, error) {
	p := map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion, "annotations": annotations}}
	if configHash != "" {
		var node any = map[string]any{"metadata": map[string]any{"annotations": map[string]string{wellknown.ConfigHash: configHash}}}
		path := workload.TemplatePath(kind)
		for i := len(path) - 1; i > 0; i-- {
			node = map[string]any{path[i]: node}
		}
		p[path[0]] = node
	}
	return json.Marshal(p)
}
