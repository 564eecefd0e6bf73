{{/* The base of every object name: the release name when it already says "herald", else "<release>-herald". */}}
{{- define "herald.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "herald" .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "herald.labels" -}}
app.kubernetes.io/name: herald
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "controller"). */}}
{{- define "herald.selector" -}}
app.kubernetes.io/name: herald
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "herald.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "herald.svclbNamespace" -}}
{{- default (printf "%s-svclb" .Release.Namespace) .Values.serviceLB.namespace -}}
{{- end -}}

{{/* The chart creates the ServiceLB namespace (createNamespace, and not the release namespace). */}}
{{- define "herald.svclbNamespaceCreated" -}}
{{- if and .Values.serviceLB.createNamespace (ne (include "herald.svclbNamespace" .) .Release.Namespace) }}true{{ end -}}
{{- end -}}

{{/* The svclb forwarders' image. */}}
{{- define "herald.svclbImage" -}}{{ default (include "herald.image" .) .Values.serviceLB.image }}{{- end -}}

{{- define "herald.controllerSA" -}}{{ include "herald.fullname" . }}-controller{{- end -}}
{{- define "herald.speakerSA" -}}{{ include "herald.fullname" . }}-speaker{{- end -}}
{{- define "herald.webhookService" -}}{{ include "herald.fullname" . }}-webhook{{- end -}}
{{- define "herald.webhookConfiguration" -}}{{ include "herald.fullname" . }}-webhook{{- end -}}
{{- define "herald.webhookSecret" -}}{{ default (printf "%s-webhook-cert" (include "herald.fullname" .)) .Values.webhook.secretName }}{{- end -}}

{{- define "herald.ccmSA" -}}{{ include "herald.fullname" . }}-ccm{{- end -}}

{{/* "true" when herald ccm runs Herald's controller (load balancing on): the controller Deployment is then not
rendered and the controller's rights go to the ccm's ServiceAccount. */}}
{{- define "herald.ccmCarriesController" -}}
{{- if and .Values.ccm.enabled .Values.ccm.enableLoadBalancer -}}true{{- end -}}
{{- end -}}

{{/* The ServiceAccount that runs Herald's controller: the controller's, or the ccm's. */}}
{{- define "herald.controllerSubjectSA" -}}
{{- if include "herald.ccmCarriesController" . -}}{{ include "herald.ccmSA" . }}{{- else -}}{{ include "herald.controllerSA" . }}{{- end -}}
{{- end -}}

{{/* The Secret the controller copies the BGP peers' passwords into for the speakers. */}}
{{- define "herald.bgpPasswordsSecret" -}}{{ printf "%s-bgp-passwords" (include "herald.fullname" .) }}{{- end -}}

{{/* The rules a component serving its metrics over HTTPS needs (metrics.secure): who is this token (TokenReview),
may it get /metrics (SubjectAccessReview). */}}
{{- define "herald.metricsAuthRules" -}}
{{- if .Values.metrics.secure }}
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}
{{- end -}}
