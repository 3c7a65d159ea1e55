package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// docsCommand writes the CLI reference (one Markdown page per command) from
// the commands themselves: `make docs` runs it into docs/cli, and a test
// fails when the checked-in pages differ from what the binary says.
func docsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "docs DIR",
		Short:  "Write the CLI reference, one Markdown page per command, into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeCLIDocs(cmd.Root(), args[0])
		},
	}
}

func writeCLIDocs(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("docs: %w", err)
	}
	root.DisableAutoGenTag = true
	root.InitDefaultCompletionCmd() // as Execute adds it, so both paths write the same pages
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("docs: %w", err)
	}
	return nil
}
