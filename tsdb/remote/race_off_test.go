//go:build !race

package remote

const raceShrink = 1
