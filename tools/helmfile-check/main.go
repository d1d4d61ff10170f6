// helmfile-check loads helmfile.yaml files the way helmfile does and prints the order in which
// `helmfile sync` would install their releases.
//
//	helmfile-check FILE
//
// The file goes through helmfile's own code (github.com/helmfile/helmfile, pkg/state): the
// StateCreator's ParseAndLoad for the default environment, whose Parse runs with Strict on (what
// `helmfile` uses: an unknown key or a value of the wrong type is an error), the release overrides that rewrite each `needs` entry into a release ID
// (GetReleasesWithOverrides, as app.go does before every command), then PlanReleases, which groups
// the releases by their `needs` (a need naming no release of the file is an error). The file must
// be plain YAML: helmfile renders only *.gotmpl files as templates.
//
// Success prints {"releases": N, "groups": [["namespace/name", ...], ...]} (one group per batch,
// in install order) and exits 0; a file helmfile refuses prints helmfile's error on stderr and
// exits 1; a usage error exits 2.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"go.uber.org/zap"

	"github.com/helmfile/helmfile/pkg/filesystem"
	"github.com/helmfile/helmfile/pkg/state"
)

type answer struct {
	Releases int        `json:"releases"`
	Groups   [][]string `json:"groups"`
}

func check(file string) (*answer, error) {
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	creator := state.NewCreator(zap.NewNop().Sugar(), filesystem.DefaultFileSystem(), nil, nil, "", "", nil, false, "")
	// As the desired-state loader does for the default environment: Parse (strict), bases, the
	// environment's values (the state's RenderedValues, which release conditions read).
	st, err := creator.ParseAndLoad(content, filepath.Dir(file), file, state.DefaultEnv, false, true, true, nil, nil)
	if err != nil {
		return nil, err
	}
	st.OrginReleases = st.Releases // as the desired-state loader does after loading
	if st.Releases, err = st.GetReleasesWithOverrides(); err != nil {
		return nil, err
	}
	st.Releases = st.GetReleasesWithLabels()
	groups, err := st.PlanReleases(state.PlanOptions{})
	if err != nil {
		return nil, err
	}
	out := &answer{Releases: len(st.Releases), Groups: [][]string{}}
	for _, group := range groups {
		ids := []string{}
		for i := range group {
			ids = append(ids, state.ReleaseToID(&group[i].ReleaseSpec))
		}
		sort.Strings(ids)
		out.Groups = append(out.Groups, ids)
	}
	return out, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: helmfile-check FILE")
		os.Exit(2)
	}
	out, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
