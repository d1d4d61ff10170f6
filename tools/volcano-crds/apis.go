// Package volcanocrds only imports the Volcano API packages whose CRDs controller-gen generates
// (`gpucluster tools install volcano-crds`), so that `go mod tidy` keeps volcano.sh/apis and its
// dependencies' checksums in go.mod/go.sum. The generated YAML goes to the user cache, never here.
package volcanocrds

import (
	_ "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	_ "volcano.sh/apis/pkg/apis/bus/v1alpha1"
	_ "volcano.sh/apis/pkg/apis/nodeinfo/v1alpha1"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	_ "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)
