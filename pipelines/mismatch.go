package pipelines

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// knownKeysHint lists the keys allowed where an unknown key was found.
func knownKeysHint(k toml.Key) string {
	t := reflect.TypeOf(rawPipeline{})
	for _, part := range k[:len(k)-1] {
		f, ok := fieldByTag(t, part)
		if !ok {
			return ""
		}
		t = f.Type
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		names = append(names, t.Field(i).Tag.Get("toml"))
	}
	return " (allowed here: " + strings.Join(names, ", ") + ")"
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("toml") == tag {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// mismatch walks the raw structure and the generic decoding together and
// returns the path and message of the first value of the wrong type.
func mismatch(t reflect.Type, v any, path string) (string, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tomlType := func(v any) string {
		switch v.(type) {
		case string:
			return "a string"
		case int64:
			return "an integer"
		case float64:
			return "a float"
		case bool:
			return "a boolean"
		case []map[string]any:
			return "an array of tables"
		case []any:
			return "an array"
		case map[string]any:
			return "a table"
		}
		return fmt.Sprintf("%T", v)
	}
	want := func(s string) (string, string) {
		return path, fmt.Sprintf("%s: want %s, found %s", path, s, tomlType(v))
	}
	switch t.Kind() {
	case reflect.Interface:
		return "", ""
	case reflect.String:
		if _, ok := v.(string); !ok {
			return want("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return want("a boolean (true or false)")
		}
	case reflect.Int:
		if _, ok := v.(int64); !ok {
			return want("an integer")
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return want("a table")
		}
		for k, e := range m {
			if p, msg := mismatch(t.Elem(), e, join(path, k)); p != "" {
				return p, msg
			}
		}
	case reflect.Slice:
		var elems []any
		switch s := v.(type) {
		case []any:
			elems = s
		case []map[string]any:
			for _, e := range s {
				elems = append(elems, e)
			}
		default:
			if t.Elem().Kind() == reflect.Struct {
				return want("an array of tables ([[" + path + "]])")
			}
			return want("an array")
		}
		for i, e := range elems {
			if p, msg := mismatch(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p, msg
			}
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return want("a table")
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("toml")
			if e, ok := m[tag]; ok {
				if p, msg := mismatch(f.Type, e, join(path, tag)); p != "" {
					return p, msg
				}
			}
		}
	}
	return "", ""
}
