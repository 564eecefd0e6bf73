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

{{/* The metrics Services and the Secrets of their certificates (metrics.certificates: the controller keeps them). */}}
{{- define "herald.metricsService" -}}{{ include "herald.fullname" .ctx }}-{{ .component }}-metrics{{- end -}}
{{- define "herald.metricsSecret" -}}{{ include "herald.fullname" .ctx }}-{{ .component }}-metrics-cert{{- end -}}
{{- define "herald.metricsCertificates" -}}{{ if and .Values.metrics.secure .Values.metrics.certificates }}true{{ end }}{{- end -}}
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

{{/* A ValidatingAdmissionPolicy and its binding holding one ServiceAccount's Service writes (services and
services/status UPDATE) to what Herald writes there: the spec, labels and ownerReferences never change; of the
annotations only herald.dev/ip-allocated-from-pool; of the finalizers only the cloud provider's
service.kubernetes.io/load-balancer-cleanup, and only when .finalizer is true. Status (addresses, conditions) is
the holder's to write. Arguments (a dict): root, name, user, finalizer, annotations (extra metadata annotations,
e.g. Helm hook ones, or ""), component (who, in the messages). */}}
{{- define "herald.servicePolicy" -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ .name }}
  labels:
    {{- include "herald.labels" .root | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["*"]
      operations: [UPDATE]
      resources: [services, services/status]
  matchConditions:
  - name: written-by-the-holder
    expression: request.userInfo.username == {{ .user | quote }}
  variables:
  - name: ann
    expression: object.metadata.?annotations.orValue({})
  - name: oldAnn
    expression: oldObject.metadata.?annotations.orValue({})
  validations:
  - expression: object.spec == oldObject.spec
    message: {{ .component }} may not change a Service's spec
  - expression: >-
      object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({}) &&
      object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([])
    message: {{ .component }} may not change a Service's labels or ownerReferences
  - expression: >-
      variables.ann.all(k, k == 'herald.dev/ip-allocated-from-pool' || (k in variables.oldAnn && variables.oldAnn[k] == variables.ann[k])) &&
      variables.oldAnn.all(k, k == 'herald.dev/ip-allocated-from-pool' || k in variables.ann)
    message: {{ .component }} may change no annotation of a Service but herald.dev/ip-allocated-from-pool
  {{- if .finalizer }}
  - expression: >-
      object.metadata.?finalizers.orValue([]).filter(f, f != 'service.kubernetes.io/load-balancer-cleanup') ==
      oldObject.metadata.?finalizers.orValue([]).filter(f, f != 'service.kubernetes.io/load-balancer-cleanup')
    message: {{ .component }} may change no finalizer of a Service but service.kubernetes.io/load-balancer-cleanup
  {{- else }}
  - expression: object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([])
    message: {{ .component }} may not change a Service's finalizers
  {{- end }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ .name }}
  labels:
    {{- include "herald.labels" .root | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  policyName: {{ .name }}
  validationActions: [Deny]
{{- end -}}
