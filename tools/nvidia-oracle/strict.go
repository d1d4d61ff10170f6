package main

// Strict parsing of a device-plugin config file.
//
// Upstream (api/config/v1 parseConfigFrom) uses sigs.k8s.io/yaml.Unmarshal: unknown fields
// are silently dropped, struct fields match case-insensitively (encoding/json), and the
// custom UnmarshalJSON of sharing.*.resources entries ignores any key it does not look up.
// Upstream has no strict mode, so this walks the document against upstream's own Go types
// (their json tags), requiring every key to be a field upstream reads, spelled exactly.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
)

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// strictProblems returns a description of every key upstream would ignore, plus duplicate keys.
func strictProblems(doc []byte) []string {
	if len(strings.TrimSpace(string(doc))) == 0 {
		return nil
	}
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return []string{err.Error()}
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return nil // not an object: upstream's parser reports it
	}
	var out []string
	walk(reflect.TypeOf(spec.Config{}), v, "", &out)
	return out
}

func walk(t reflect.Type, v any, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		if fields == nil {
			return // opaque value with its own UnmarshalJSON (e.g. the devices: all|N|[...] union)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return // type errors are upstream's to report
		}
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				hint := ""
				for name := range fields {
					if strings.EqualFold(name, k) {
						hint = fmt.Sprintf(" (did you mean %q?)", name)
					}
				}
				where := path
				if where == "" {
					where = "<top level>"
				}
				*out = append(*out, fmt.Sprintf("%s: unknown field %q%s", where, k, hint))
				continue
			}
			walk(ft, m[k], joinPath(path, k), out)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return
		}
		for i, e := range arr {
			walk(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// jsonFields maps the json names of a struct's fields to their types (embedded structs
// flattened), or returns nil for a struct upstream decodes opaquely (its own UnmarshalJSON
// and no json-tagged fields).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	tagged := false
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if hasTag {
			tagged = true
		}
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range jsonFields(ft) {
				fields[k] = v
			}
			tagged = true
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	if !tagged && (reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType)) {
		return nil
	}
	return fields
}

func joinPath(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}
