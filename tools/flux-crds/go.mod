// Wrapper module: pins the Go API types of Flux's source, helm and kustomize controllers (the API
// modules Flux v2.9.4's go.mod requires) that controller-gen turns into the CRDs of
// HelmRepository, HelmRelease and Kustomization (`gpucluster tools install flux-crds`), so the
// integration tests validate the `render --deployer flux` bundle against Flux's own schemas. The
// Flux v2.10 API modules say go 1.27 and are not used. The generated YAML goes to the user cache,
// never here.
module gpucluster.local/tools/flux-crds

go 1.26.0

require (
	github.com/fluxcd/helm-controller/api v1.6.3
	github.com/fluxcd/kustomize-controller/api v1.9.4
	github.com/fluxcd/source-controller/api v1.9.4
)

require (
	github.com/fluxcd/pkg/apis/acl v0.10.0 // indirect
	github.com/fluxcd/pkg/apis/kustomize v1.19.1 // indirect
	github.com/fluxcd/pkg/apis/meta v1.30.1 // indirect
	github.com/fxamacker/cbor/v2 v2.9.2 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/apiextensions-apiserver v0.36.2 // indirect
	k8s.io/apimachinery v0.36.2 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260603220949-865597e52e25 // indirect
	k8s.io/utils v0.0.0-20260507154919-ff6756f316d2 // indirect
	sigs.k8s.io/controller-runtime v0.24.1 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.4.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
