//go:build race

package remote

// raceShrink divides the sizes of TestMemoryBudget under the race
// detector, which decodes about ten times slower.
const raceShrink = 8
