{{/* Where courier runs: namespace.name, or the release namespace. */}}
{{- define "courier.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{/*
Labels on every object: the two manifests/ put on everything (its
kustomization's labels), then Helm's own, which e2e/helm_test.go ignores when it
compares the chart with manifests/.
*/}}
{{- define "courier.labels" -}}
app.kubernetes.io/name: courier
app.kubernetes.io/part-of: courier
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* commonAnnotations as a metadata block (nothing when there are none). */}}
{{- define "courier.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The pods' labels and the selector of the Deployment, Service and PDB. */}}
{{- define "courier.selectorLabels" -}}
app.kubernetes.io/name: courier
app.kubernetes.io/component: controller
{{- end -}}

{{- define "courier.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* courier's command-line flags from config: only those set. */}}
{{- define "courier.args" -}}
{{- $c := .Values.config -}}
{{- with $c.sourceNamespaces }}
- --source-namespaces={{ join "," . }}
{{- end }}
{{- with $c.excludeNamespaces }}
- --exclude-namespaces={{ join "," . }}
{{- end }}
{{- if $c.reloadAll }}
- --reload-all
{{- end }}
{{- with $c.reloadMode }}
- --reload-mode={{ . }}
{{- end }}
{{- with $c.compat }}
- --compat={{ join "," . }}
{{- end }}
{{- range $c.notifyURLs }}
- --notify-url={{ . }}
{{- end }}
{{- with $c.clusterName }}
- --cluster-name={{ . }}
{{- end }}
{{- with $c.reloadDebounce }}
- --reload-debounce={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $c.reloadStormChanges) }}
- --reload-storm-changes={{ $c.reloadStormChanges | int64 }}
{{- end }}
{{- with $c.reloadStormWindow }}
- --reload-storm-window={{ . }}
{{- end }}
{{- with $c.reloadWaveTimeout }}
- --reload-wave-timeout={{ . }}
{{- end }}
{{- with $c.reloadMaxInFlight }}
- --reload-max-in-flight={{ . | int64 }}
{{- end }}
{{- if not (kindIs "invalid" $c.reloadQPS) }}
- --reload-qps={{ $c.reloadQPS }}
{{- end }}
{{- if not (kindIs "invalid" $c.reloadBurst) }}
- --reload-burst={{ $c.reloadBurst | int64 }}
{{- end }}
{{- if not $c.leaderElect }}
- --leader-elect=false
{{- end }}
{{- with $c.leaseDuration }}
- --lease-duration={{ . }}
{{- end }}
{{- with $c.renewDeadline }}
- --renew-deadline={{ . }}
{{- end }}
{{- with $c.retryPeriod }}
- --retry-period={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $c.kubeAPIQPS) }}
- --kube-api-qps={{ $c.kubeAPIQPS }}
{{- end }}
{{- if not (kindIs "invalid" $c.kubeAPIBurst) }}
- --kube-api-burst={{ $c.kubeAPIBurst | int64 }}
{{- end }}
{{- if not (kindIs "invalid" $c.replicatorWorkers) }}
- --replicator-workers={{ $c.replicatorWorkers | int64 }}
{{- end }}
{{- with $c.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- if $c.profiling }}
- --profiling
{{- end }}
{{- end -}}

{{- /* courier's rules on namespaced objects: the ClusterRole courier's, or each watched namespace's Role with scope.namespaces (manifests/rbac.yaml and manifests/namespace-scoped/access say why each is there). */ -}}
{{- define "courier.namespacedRules" -}}
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["create", "update", "patch", "delete"]
{{- if .Values.guardPolicy.enabled }}{{/* the policy's verb: unused without it (and no built-in role holds it) */}}
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["override"]
{{- end }}
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["list", "watch", "patch", "get", "create", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{- /* The objects of each kind of config.reloadResources: list and watch for the informer, patch for the rollout. */ -}}
{{- define "courier.customKindRules" -}}
{{- range .Values.config.reloadResources }}
{{- $parts := splitn "." 2 (regexReplaceAll ":.*$" . "") }}
- apiGroups: [{{ $parts._1 | quote }}]
  resources: [{{ $parts._0 | quote }}]
  verbs: ["list", "watch", "patch"]
{{- end }}
{{- end -}}
