// Command extract is the build-time step of nvidia-oracle: it copies, verbatim, the start-up
// pieces of k8s-device-plugin's two `package main`s (cmd/nvidia-device-plugin and
// cmd/gpu-feature-discovery: flag definitions and defaults, loadConfig, validateFlags) into
// generated files of the oracle's package, so the oracle applies exactly what the real binaries
// apply at start-up. Another package cannot import a `package main`; copying it at build time,
// from the module cache, is how the oracle reuses that code without committing or editing it.
//
// Run from the oracle's module folder (the toolchain does this before `go build`):
//
//	go run ./extract -out DIR
//
// It asks `go mod download -json` for the pinned upstream module (its version and checksum come
// from go.mod / go.sum), writes DIR/zz_upstream_plugin.go, DIR/zz_upstream_gfd.go and
// DIR/overlay.json; `go build -overlay DIR/overlay.json` then adds the two files to the package.
//
// What is taken from each source file:
//   - the named top-level functions, methods and types (renamed with the given mapping);
//   - from func main(): every statement before the first one that calls <app>.Run(...), except
//     the `<app>.Action = ...` assignment, wrapped as `func <mainName>() *cli.App`.
//
// Identifiers declared at file scope are renamed everywhere they are referenced; fields,
// selectors and identifiers of other packages are left untouched. Imports are kept only when the
// extracted code refers to them. Anything unexpected is a hard error, so an upstream change is
// noticed at build time instead of silently producing a wrong oracle. Only the standard library
// is used, so `go run` compiles it in seconds.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const upstreamModule = "github.com/NVIDIA/k8s-device-plugin"

// extraction is one generated file: its upstream source and how declarations are renamed so the
// two `package main`s can live in one package.
type extraction struct {
	source, file, mainName, renames string
}

var extractions = []extraction{
	{"cmd/nvidia-device-plugin/main.go", "zz_upstream_plugin.go", "upstreamPluginApp",
		"validateFlags=pluginValidateFlags,loadConfig=pluginLoadConfig,options=pluginOptions"},
	{"cmd/gpu-feature-discovery/main.go", "zz_upstream_gfd.go", "upstreamGFDApp",
		"validateFlags=gfdValidateFlags,Config=gfdConfig"},
}

func main() {
	out := flag.String("out", "", "folder for the generated files and overlay.json")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "usage: go run ./extract -out DIR   (from the nvidia-oracle module folder)")
		os.Exit(2)
	}
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
}

// generate writes the extracted files into out and an overlay placing them in this package.
func generate(out string) error {
	pkgDir, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(pkgDir, "go.mod")); err != nil {
		return fmt.Errorf("run from the nvidia-oracle module folder (no go.mod in %s)", pkgDir)
	}
	outDir, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	upstreamDir, err := moduleDir(upstreamModule)
	if err != nil {
		return err
	}
	replace := map[string]string{}
	for _, x := range extractions {
		if _, err := os.Stat(filepath.Join(pkgDir, x.file)); err == nil {
			return fmt.Errorf("%s exists in %s: generated files must not be in the source tree (delete it)", x.file, pkgDir)
		}
		target := filepath.Join(outDir, x.file)
		if err := run(filepath.Join(upstreamDir, x.source), target, "main", x.mainName, x.renames); err != nil {
			return err
		}
		replace[filepath.Join(pkgDir, x.file)] = target
	}
	overlay, err := json.MarshalIndent(map[string]any{"Replace": replace}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, "overlay.json"), append(overlay, '\n'), 0o644)
}

// moduleDir is the module-cache folder of the version go.mod selects (downloaded and verified
// against go.sum when absent).
func moduleDir(module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v", module, err)
	}
	var info struct{ Dir, Version, Error string }
	if err := json.Unmarshal(raw, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %v", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no module folder (%s)", module, info.Error)
	}
	return info.Dir, nil
}

func run(in, out, pkg, mainName, renameSpec string) error {
	fset := token.NewFileSet()
	// Object resolution (on by default) is what tells file-scope identifiers apart.
	file, err := parser.ParseFile(fset, in, nil, 0)
	if err != nil {
		return err
	}
	rename := map[string]string{}
	for _, kv := range strings.Split(renameSpec, ",") {
		if kv == "" {
			continue
		}
		old, nw, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("bad -rename entry %q", kv)
		}
		rename[old] = nw
	}
	if mainName != "" {
		rename["main"] = mainName
	}

	// Collect the declarations to copy.
	var decls []ast.Decl
	found := map[string]bool{}
	for _, d := range file.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil {
				// A method is copied when its receiver type is copied.
				if rt := recvTypeName(d.Recv); rt != "" && rename[rt] != "" && rt != "main" {
					decls = append(decls, d)
					found[rt+"."+name] = true
				}
				continue
			}
			if name == "main" && mainName != "" {
				fd, err := wrapMain(d)
				if err != nil {
					return err
				}
				decls = append(decls, fd)
				found["main"] = true
				continue
			}
			if _, ok := rename[name]; ok {
				decls = append(decls, d)
				found[name] = true
			}
		case *ast.GenDecl:
			if d.Tok != token.TYPE {
				continue
			}
			for _, s := range d.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := rename[ts.Name.Name]; ok {
					decls = append(decls, &ast.GenDecl{Tok: token.TYPE, Specs: []ast.Spec{ts}})
					found[ts.Name.Name] = true
				}
			}
		}
	}
	for old := range rename {
		if !found[old] {
			return fmt.Errorf("%s: declaration %q not found (upstream changed?)", in, old)
		}
	}

	// Rename references to file-scope declarations (ident.Obj is set by the parser's
	// object resolution only for identifiers that resolve within this file).
	for _, d := range decls {
		ast.Inspect(d, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			nw, want := rename[id.Name]
			if !want {
				return true
			}
			if id.Obj != nil && isFileScope(file, id.Obj) {
				id.Name = nw
			}
			return true
		})
		if fd, ok := d.(*ast.FuncDecl); ok {
			if nw, ok := rename[fd.Name.Name]; ok && fd.Recv == nil {
				fd.Name.Name = nw
			}
		}
		if gd, ok := d.(*ast.GenDecl); ok {
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if nw, ok := rename[ts.Name.Name]; ok {
					ts.Name.Name = nw
				}
			}
		}
	}

	// Print the declarations, then keep only the imports they use.
	var body bytes.Buffer
	for _, d := range decls {
		if err := printer.Fprint(&body, fset, stripComments(d)); err != nil {
			return err
		}
		body.WriteString("\n\n")
	}
	used := map[string]bool{}
	for _, d := range decls {
		ast.Inspect(d, func(n ast.Node) bool {
			if se, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := se.X.(*ast.Ident); ok && x.Obj == nil {
					used[x.Name] = true
				}
			}
			return true
		})
	}
	var imports []string
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := importName(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if used[name] {
			if imp.Name != nil {
				imports = append(imports, fmt.Sprintf("%s %q", imp.Name.Name, p))
			} else {
				imports = append(imports, strconv.Quote(p))
			}
		}
	}
	sort.Strings(imports)

	var src bytes.Buffer
	fmt.Fprintf(&src, "// Code generated by extract from upstream %s; DO NOT EDIT.\n", path.Base(path.Dir(in))+"/"+path.Base(in))
	fmt.Fprintf(&src, "// A verbatim copy (identifiers renamed) of upstream start-up code, made at build time; never commit it.\n\n")
	fmt.Fprintf(&src, "package %s\n\nimport (\n", pkg)
	for _, i := range imports {
		fmt.Fprintf(&src, "\t%s\n", i)
	}
	src.WriteString(")\n\n")
	src.Write(body.Bytes())
	formatted, err := format.Source(src.Bytes())
	if err != nil {
		return fmt.Errorf("formatting generated code: %v\n%s", err, src.String())
	}
	return os.WriteFile(out, formatted, 0o644)
}

// wrapMain turns func main() into `func <name>() *cli.App`: the statements that build the
// cli.App (name, flags, ...) up to, not including, the one that runs it; the Action
// assignment (which starts the real daemon) is dropped.
func wrapMain(fd *ast.FuncDecl) (*ast.FuncDecl, error) {
	var app string
	var kept []ast.Stmt
	for _, s := range fd.Body.List {
		if app == "" {
			if as, ok := s.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
				if call, ok := as.Rhs[0].(*ast.CallExpr); ok && exprString(call.Fun) == "cli.NewApp" {
					app = exprString(as.Lhs[0])
				}
			}
		}
		if app != "" && callsMethod(s, app, "Run") {
			break
		}
		if as, ok := s.(*ast.AssignStmt); ok && app != "" && len(as.Lhs) == 1 && exprString(as.Lhs[0]) == app+".Action" {
			continue
		}
		kept = append(kept, s)
	}
	if app == "" {
		return nil, fmt.Errorf("func main: no `x := cli.NewApp()` found (upstream changed?)")
	}
	kept = append(kept, &ast.ReturnStmt{Results: []ast.Expr{ast.NewIdent(app)}})
	return &ast.FuncDecl{
		Name: ast.NewIdent("main"),
		Type: &ast.FuncType{
			Params:  &ast.FieldList{},
			Results: &ast.FieldList{List: []*ast.Field{{Type: &ast.StarExpr{X: &ast.SelectorExpr{X: ast.NewIdent("cli"), Sel: ast.NewIdent("App")}}}}},
		},
		Body: &ast.BlockStmt{List: kept},
	}, nil
}

func callsMethod(s ast.Stmt, recv, method string) bool {
	found := false
	ast.Inspect(s, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if exprString(call.Fun) == recv+"."+method {
				found = true
			}
		}
		return !found
	})
	return found
}

func exprString(e ast.Expr) string {
	var b bytes.Buffer
	_ = printer.Fprint(&b, token.NewFileSet(), e)
	return b.String()
}

func recvTypeName(fl *ast.FieldList) string {
	if fl == nil || len(fl.List) != 1 {
		return ""
	}
	t := fl.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func isFileScope(file *ast.File, obj *ast.Object) bool {
	return file.Scope.Lookup(obj.Name) == obj
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// importName guesses the package name of an import path without loading it
// (the last element, skipping a /vN major-version suffix).
func importName(p string) string {
	parts := strings.Split(p, "/")
	last := parts[len(parts)-1]
	if majorVersion.MatchString(last) && len(parts) > 1 {
		last = parts[len(parts)-2]
	}
	return last
}

// stripComments drops doc comments so the printer does not misplace them.
func stripComments(d ast.Decl) ast.Decl {
	switch d := d.(type) {
	case *ast.FuncDecl:
		d.Doc = nil
	case *ast.GenDecl:
		d.Doc = nil
		for _, s := range d.Specs {
			if ts, ok := s.(*ast.TypeSpec); ok {
				ts.Doc = nil
				ts.Comment = nil
			}
		}
	}
	return d
}
