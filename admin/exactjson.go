package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// encodeExact writes v as one line of JSON, as json.Encoder does, and
// keeps it exact where encoding/json would not: a string field of v (a
// struct, or a struct embedded in one) that is not valid UTF-8, such as an
// event name a verified delivery carried in a header, is written as
// encoding/json writes it (each invalid byte as U+FFFD) and, beside it,
// as "<field>_base64": its exact bytes in standard base64. A script that
// needs the bytes reads the _base64 field when it is there. It fails only
// when v cannot be encoded.
func encodeExact(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(v); err != nil {
		return err
	}
	line := buf.Bytes()
	extra := invalidStrings(reflect.ValueOf(v), nil)
	if len(extra) == 0 || !bytes.HasSuffix(line, []byte("}\n")) {
		_, err := w.Write(line)
		return err
	}
	line = line[:len(line)-2]
	for _, f := range extra {
		name, err := json.Marshal(f.name + "_base64")
		if err != nil {
			return err
		}
		if !bytes.HasSuffix(line, []byte("{")) {
			line = append(line, ',')
		}
		line = append(line, name...)
		line = append(line, ':', '"')
		line = append(line, base64.StdEncoding.EncodeToString([]byte(f.value))...)
		line = append(line, '"')
	}
	line = append(line, '}', '\n')
	_, err := w.Write(line)
	return err
}

type namedString struct{ name, value string }

// invalidStrings appends to out the string fields of the struct v (through
// pointers, interfaces and embedded structs) that are not valid UTF-8, by
// their JSON names.
func invalidStrings(v reflect.Value, out []namedString) []namedString {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return out
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return out
	}
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" || (!sf.IsExported() && !sf.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if sf.Anonymous && name == "" {
			out = invalidStrings(fv, out)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		for fv.Kind() == reflect.Pointer && !fv.IsNil() {
			fv = fv.Elem()
		}
		if fv.Kind() == reflect.String && !utf8.ValidString(fv.String()) {
			out = append(out, namedString{name, fv.String()})
		}
	}
	return out
}
