// Package deploy holds no code: its tests check what deploy/ ships
// against the binary it ships. The systemd units (deploy/systemd) must
// run on systemd 239 and pass systemd-analyze verify; the Helm chart
// (deploy/helm/peakline), rendered by helm, must decode into the
// Kubernetes API types with every security context as documented; the
// plain manifests (deploy/kubernetes) must be that rendering.
package deploy
