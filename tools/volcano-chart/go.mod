// No binary: pins volcano.sh/volcano v1.15.1, the release whose Helm chart (installer/helm/chart/volcano)
// real clusters install, so tests/upstream/test_volcano_chart_upstream.py renders that very chart (the
// module cannot be built here: see tools/volcano/go.mod). go.sum holds the two checksums `go mod
// download` verifies; do not run `go mod tidy` (it drops a requirement no package imports).
module gpucluster.local/tools/volcano-chart

go 1.26.0

require volcano.sh/volcano v1.15.1
