package kubeconfig

import (
	"bytes"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/client-go/tools/clientcmd"
)

// edit replaces the bytes [start, end) of the original with text.
type edit struct {
	start, end int
	text       string
}

// inPlace rewrites only the bytes that must change in a block-style YAML
// kubeconfig: each cluster's server value, and a tls-server-name line added
// under it (with the server key's indentation) when the cluster has none.
// Everything else — comments, key order, quoting, indentation — stays byte
// for byte. newServer and tlsName are the values Patch computed, by cluster
// name. It reports false when the document is not in a shape it edits
// safely (flow style, JSON, multi-line scalars, anchors...); the caller
// then writes the clientcmd serialization instead.
func inPlace(orig []byte, newServer, tlsName map[string]string) ([]byte, bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(orig, &doc); err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, false
	}
	lines := lineStarts(orig)
	clusters := mapValue(doc.Content[0], "clusters")
	if clusters == nil || clusters.Kind != yaml.SequenceNode || clusters.Style&yaml.FlowStyle != 0 {
		return nil, false
	}
	var edits []edit
	for _, item := range clusters.Content {
		if item.Kind != yaml.MappingNode || item.Style&yaml.FlowStyle != 0 {
			return nil, false
		}
		nameNode, c := mapValue(item, "name"), mapValue(item, "cluster")
		if nameNode == nil || c == nil || c.Kind != yaml.MappingNode || c.Style&yaml.FlowStyle != 0 {
			return nil, false
		}
		name := nameNode.Value
		server, ok := newServer[name]
		if !ok {
			return nil, false
		}
		key, val := mapEntry(c, "server")
		if key == nil || val.Kind != yaml.ScalarNode || val.Line != key.Line {
			return nil, false
		}
		start, end, ok := scalarSpan(orig, lines, val)
		if !ok {
			return nil, false
		}
		edits = append(edits, edit{start, end, requote(val.Style, server)})
		if tn, ok := tlsName[name]; ok && mapValue(c, "tls-server-name") == nil {
			// A new line after the server's line, indented like its key.
			eol := bytes.IndexByte(orig[end:], '\n')
			if eol < 0 {
				return nil, false
			}
			at := end + eol + 1
			edits = append(edits, edit{at, at, strings.Repeat(" ", key.Column-1) + "tls-server-name: " + strconv.Quote(tn) + "\n"})
		}
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), orig...)
	for _, e := range edits {
		out = append(out[:e.start], append([]byte(e.text), out[e.end:]...)...)
	}
	return out, true
}

// sameConfig reports whether two kubeconfigs load to the same content.
func sameConfig(a, b []byte) bool {
	ca, err1 := clientcmd.Load(a)
	cb, err2 := clientcmd.Load(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(ca, cb)
}

func lineStarts(b []byte) []int {
	starts := []int{0}
	for i, c := range b {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// scalarSpan is the byte range of a single-line plain or quoted scalar.
func scalarSpan(b []byte, lines []int, n *yaml.Node) (int, int, bool) {
	if n.Line < 1 || n.Line > len(lines) || n.Anchor != "" || n.Tag != "!!str" {
		return 0, 0, false
	}
	lineStart := lines[n.Line-1]
	lineEnd := len(b)
	if n.Line < len(lines) {
		lineEnd = lines[n.Line] - 1
	}
	line := string(b[lineStart:lineEnd])
	// Column counts characters; find its byte offset.
	col, chars := -1, 0
	for i := range line {
		if chars == n.Column-1 {
			col = i
			break
		}
		chars++
	}
	if col < 0 {
		return 0, 0, false
	}
	rest := line[col:]
	if rest == "" {
		return 0, 0, false
	}
	var length int
	switch n.Style {
	case 0: // plain: up to a comment or the end of the line
		if i := strings.Index(rest, " #"); i >= 0 {
			rest = rest[:i]
		}
		length = len(strings.TrimRight(rest, " \t\r"))
		if rest[:length] != n.Value {
			return 0, 0, false
		}
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		q := rest[0]
		i := strings.IndexByte(rest[1:], q)
		if i < 0 || strings.ContainsAny(rest[1:1+i], `\'`) {
			return 0, 0, false // escapes: not worth it
		}
		length = i + 2
		if rest[1:1+i] != n.Value {
			return 0, 0, false
		}
	default:
		return 0, 0, false
	}
	return lineStart + col, lineStart + col + length, true
}

// requote writes s in the quoting style of the value it replaces.
func requote(style yaml.Style, s string) string {
	switch style {
	case yaml.DoubleQuotedStyle:
		return strconv.Quote(s)
	case yaml.SingleQuotedStyle:
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return s
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	_, v := mapEntry(m, key)
	return v
}

func mapEntry(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}
