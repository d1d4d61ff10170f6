// Package argocdcrds only imports the Argo CD API package whose CRDs controller-gen generates
// (`gpucluster tools install argocd-crds`), so that `go mod tidy` keeps its module and its
// dependencies' checksums in go.mod/go.sum. The generated YAML goes to the user cache, never here.
package argocdcrds

import _ "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
