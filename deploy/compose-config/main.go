// compose-config: `docker compose config` without Docker. Loads a Compose file with
// compose-go (the Compose specification's reference loader, used by Docker Compose v2),
// which validates it against the Compose JSON schema and resolves it, then prints the
// canonical model as YAML. Exit status 1 and the loader's message on an invalid file.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-config COMPOSE_FILE")
		os.Exit(2)
	}
	options, err := cli.NewProjectOptions(
		[]string{os.Args[1]},
		cli.WithOsEnv,
		cli.WithDotEnv,
		cli.WithConsistency(true),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose-config:", err)
		os.Exit(1)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose-config:", err)
		os.Exit(1)
	}
	out, err := project.MarshalYAML()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose-config:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
