// Package crdschema judges objects against Herald's generated CRDs the way
// the API server does, in-process: the CRD's own validation (its CEL rules
// compile and fit the cost budgets), then for an object the decoding of
// numbers, pruning, defaulting, the OpenAPI schema, the list-type
// invariants and the x-kubernetes-validations rules. It also walks a
// schema's fields and generates objects from it, for the tests that prove
// that every value the API admits is one Herald can read.
//
// It is test support: it imports the API server's validation packages,
// which no Herald binary links.
package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Kind is the served version of one CRD.
type Kind struct {
	// Kind, Group, Version and Plural name the resource.
	Kind, Group, Version, Plural string
	// CRD is the definition as generated.
	CRD *apiextv1.CustomResourceDefinition
	// Schema is the version's openAPIV3Schema.
	Schema *apiextv1.JSONSchemaProps

	internal   *apiextensions.CustomResourceDefinition
	structural *schema.Structural
	validator  validation.SchemaValidator
	cel        *cel.Validator
}

// Load reads every CRD manifest in dir, sorted by kind.
func Load(dir string) ([]*Kind, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRD manifests in %s (%v)", dir, err)
	}
	var out []*Kind
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		k, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out, nil
}

// Parse reads one CRD manifest with one served version.
func Parse(manifest []byte) (*Kind, error) {
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(manifest, &crd); err != nil {
		return nil, err
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		return nil, fmt.Errorf("CRD %s: want exactly one version with a schema", crd.Name)
	}
	v := crd.Spec.Versions[0]
	k := &Kind{Kind: crd.Spec.Names.Kind, Group: crd.Spec.Group, Version: v.Name, Plural: crd.Spec.Names.Plural,
		CRD: &crd, Schema: v.Schema.OpenAPIV3Schema}
	k.internal = &apiextensions.CustomResourceDefinition{}
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, k.internal, nil); err != nil {
		return nil, err
	}
	var internalSchema *apiextensions.JSONSchemaProps
	for _, iv := range k.internal.Spec.Versions {
		if iv.Schema != nil {
			internalSchema = iv.Schema.OpenAPIV3Schema
		}
	}
	if internalSchema == nil && k.internal.Spec.Validation != nil {
		internalSchema = k.internal.Spec.Validation.OpenAPIV3Schema
	}
	if internalSchema == nil {
		return nil, fmt.Errorf("CRD %s: no schema after conversion", crd.Name)
	}
	var err error
	if k.structural, err = schema.NewStructural(internalSchema); err != nil {
		return nil, fmt.Errorf("CRD %s: not structural: %w", crd.Name, err)
	}
	if k.validator, _, err = validation.NewSchemaValidator(internalSchema); err != nil {
		return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	k.cel = cel.NewValidator(k.structural, true, celconfig.PerCallLimit)
	return k, nil
}

// CheckDefinition validates the CRD as the API server does when it is
// created: structural schema, CEL rules that compile, estimated costs within
// the per-rule and per-CRD budgets.
func (k *Kind) CheckDefinition() field.ErrorList {
	c := k.internal.DeepCopy()
	c.Status.StoredVersions = []string{k.Version}
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), c)
}

// Admit judges obj (apiVersion, kind, metadata, spec, ... as Go values) as a
// create: it is encoded to JSON and decoded the way the API server decodes a
// request body, pruned, defaulted and validated. It returns the errors the
// API server would return (none: admitted) and the object as it would be
// stored.
func (k *Kind) Admit(obj map[string]any) (field.ErrorList, map[string]any) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(nil, nil, err.Error())}, nil
	}
	return k.AdmitJSON(raw)
}

// AdmitJSON is Admit of a request body.
func (k *Kind) AdmitJSON(raw []byte) (field.ErrorList, map[string]any) {
	var u map[string]any
	if err := utiljson.Unmarshal(raw, &u); err != nil {
		return field.ErrorList{field.Invalid(nil, nil, "decoding: "+err.Error())}, nil
	}
	pruning.Prune(u, k.structural, true)
	defaulting.Default(u, k.structural)
	var errs field.ErrorList
	errs = append(errs, validation.ValidateCustomResource(nil, u, k.validator)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, k.structural, u)...)
	if k.cel != nil {
		blocked := false
		for _, e := range errs {
			switch e.Type {
			case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
				blocked = true
			}
		}
		if !blocked {
			celErrs, _ := k.cel.Validate(context.Background(), nil, k.structural, u, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	return errs, u
}

// Find returns the kind named kind, or nil.
func Find(kinds []*Kind, kind string) *Kind {
	for _, k := range kinds {
		if k.Kind == kind {
			return k
		}
	}
	return nil
}

func jsonUnmarshal(b []byte, v any) error { return utiljson.Unmarshal(b, v) }
