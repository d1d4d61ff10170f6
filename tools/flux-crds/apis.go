// Package fluxcrds only imports the Flux API packages whose CRDs controller-gen generates
// (`gpucluster tools install flux-crds`), so that `go mod tidy` keeps their modules and their
// dependencies' checksums in go.mod/go.sum. The generated YAML goes to the user cache, never here.
package fluxcrds

import (
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/fluxcd/kustomize-controller/api/v1"
	_ "github.com/fluxcd/source-controller/api/v1"
)
