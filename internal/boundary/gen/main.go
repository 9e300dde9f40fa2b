// Command gen writes the C and Python tables of package boundary (go generate).
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/streambridge/streambridge/internal/boundary"
)

func main() {
	root := filepath.Join("..", "..") // go generate runs in internal/boundary
	for path, text := range boundary.Generated() {
		if err := os.WriteFile(filepath.Join(root, path), []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
