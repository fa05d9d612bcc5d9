package main

import (
	"embed"
	"strings"
)

// helpFiles are the long descriptions of the commands' --help, prose kept
// beside the code that wires the commands.
//
//go:embed help/*.txt
var helpFiles embed.FS

// help is the text of help/name.txt, each {{part}} in it replaced by the
// text of help/part.txt (the parts serve's and dispatch's help share).
func help(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err) // a file the binary embeds
	}
	text := strings.TrimSuffix(string(b), "\n")
	for _, part := range []string{"destinations", "reconcile"} {
		if strings.Contains(text, "{{"+part+"}}") {
			text = strings.ReplaceAll(text, "{{"+part+"}}", help(part))
		}
	}
	return text
}
