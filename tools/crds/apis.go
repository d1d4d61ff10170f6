// Package crds only imports the API packages whose CRDs are generated, so that `go mod tidy`
// keeps their modules (and their dependencies' checksums) in go.mod/go.sum.
package crds

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)
