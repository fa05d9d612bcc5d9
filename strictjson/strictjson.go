// Package strictjson decodes a JSON object from outside (a request body, a
// provider's answer) by its keys exactly as written. encoding/json matches
// a key to a field case-insensitively and lets a repeated key overwrite the
// first, so {"job_id":"x","JOB_ID":"y"} decodes as y: which of two values
// counts would then differ between the sender's parser and ours.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// Decode decodes data, one JSON object and nothing after it, into the
// struct v points to. Each top-level key must be a field's JSON name
// exactly, at most once; with unknown, keys that are no field's name in any
// casing are skipped. It fails on anything else: other JSON, trailing data,
// a key given twice, a key that differs from a field's name only in case,
// or (without unknown) any other key; its error names the key, never a
// value.
func Decode(data []byte, v any, unknown bool) error {
	names := fieldNames(reflect.TypeOf(v))
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errNotObject
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errNotObject
		}
		key := tok.(string)
		known := slices.Contains(names, key)
		switch {
		case seen[key]:
			return fmt.Errorf("key %q given twice", key)
		case !known && slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, key) }):
			return fmt.Errorf("key %q: keys are case-sensitive, want one of %s", key, strings.Join(names, ", "))
		case !known && !unknown:
			return fmt.Errorf("unknown key %q: want one of %s", key, strings.Join(names, ", "))
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return errNotObject
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	// Every key is now a field's exact name, once, or none's in any casing:
	// encoding/json can only match them as written.
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("key %q: a JSON %s where a %s goes", te.Field, te.Value, te.Type)
		}
		return errors.New("not a JSON object of the expected form")
	}
	return nil
}

var errNotObject = errors.New("not a JSON object")

// fieldNames returns the JSON names of the fields of the struct t points
// to, as encoding/json names them: the tag's name, else the field's.
func fieldNames(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
