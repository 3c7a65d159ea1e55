package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/bench"
)

// Exit codes every command shares: 0 done, 1 failed (regressions: found
// some), 2 a usage error. A command passes its own code out with an
// exitError (collect passes its command's).
const exitUsage = 2

// codedError is an error that ends the process with its own exit code;
// main prints it like any other.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// usageError is a usage, flag, config or environment error: it names
// the flag, key or variable and what would be right, and exits 2.
func usageError(format string, args ...any) error {
	return codedError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// asUsage makes err a usage error (exit 2) unless it carries an exit code
// of its own already; nil stays nil.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	var ce codedError
	var ee exitError
	if errors.As(err, &ce) || errors.As(err, &ee) {
		return err
	}
	return codedError{code: exitUsage, err: err}
}

// exitCode is the code the process ends with for err, a command's error
// (not nil): its own (codedError), a usage error of a bench command
// (bench.ErrUsage) 2, any other 1.
func exitCode(err error) int {
	var ce codedError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, bench.ErrUsage):
		return exitUsage
	}
	return 1
}

// usageExits makes the usage errors cobra finds exit 2 in every command
// under root: a flag it cannot parse (unknown, or a bad value), a
// positional argument the command does not take, and an unknown
// subcommand (which cobra would answer with the help and exit 0, or with
// an error and exit 1). Errors a command finds in the values it was given
// are returned as usageError by the command itself; the settings from
// --config and PEAKLINE_* are checked in the root's PersistentPreRunE.
func usageExits(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return asUsage(err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error { return asUsage(args(cmd, a)) }
		}
		if c.HasSubCommands() && !c.Runnable() {
			// A group (peakline, peakline bench) runs nothing itself.
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, a []string) error {
				if len(a) > 0 {
					return usageError("unknown command %q for %q; see %s --help", a[0], cmd.CommandPath(), cmd.CommandPath())
				}
				return cmd.Help()
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
